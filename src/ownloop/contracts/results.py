"""The result of a run: everything done, how it ended and why, in one JSON-ready record."""

from __future__ import annotations

from pydantic import Field

from ownloop.contracts._base import Identifier, Record
from ownloop.contracts.events import TraceEvent
from ownloop.contracts.limits import Limits, Usage
from ownloop.contracts.messages import Message
from ownloop.contracts.policy import ApprovalRequest, PendingOperation
from ownloop.contracts.status import RunStatus, StopReason, Versions
from ownloop.contracts.tools import Evidence, Receipt

__all__ = ["RunResult"]


class RunResult(Record):
    """The outcome of a run. A budget stop still carries all the work done before it.

    Attributes:
        run_id: The run.
        status: How it ended.
        stop_reason: The exact cause.
        detail: A readable explanation of the end, naming the limit or error involved.
        output: The final answer (possibly truncated), or ``None``.
        usage: The counters.
        limits: The budgets the run had.
        messages: The whole conversation.
        trace: Every event, in order.
        evidence: What tools returned that an answer may cite.
        receipts: The receipt of every tool execution.
        pending: Writes whose effect is unknown.
        approval_requests: Requests waiting for a decision, when paused.
        versions: The versions that produced the run.
    """

    run_id: Identifier
    status: RunStatus
    stop_reason: StopReason
    detail: str = Field(default="", max_length=4096)
    output: str | None = None
    usage: Usage = Usage()
    limits: Limits = Field(default_factory=Limits)
    messages: tuple[Message, ...] = ()
    trace: tuple[TraceEvent, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    receipts: tuple[Receipt, ...] = ()
    pending: tuple[PendingOperation, ...] = ()
    approval_requests: tuple[ApprovalRequest, ...] = ()
    versions: Versions
