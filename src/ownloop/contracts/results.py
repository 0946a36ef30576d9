"""The result of a run: everything done, how it ended and why, in one JSON-ready record."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Literal

from pydantic import Field

from ownloop.contracts._base import Identifier, Record
from ownloop.contracts.events import TraceEvent
from ownloop.contracts.limits import Limits, Usage
from ownloop.contracts.messages import Message
from ownloop.contracts.policy import Actor, Approval, ApprovalRequest, PendingOperation
from ownloop.contracts.status import RunStatus, StopReason, Versions
from ownloop.contracts.tools import CallIdentity, Evidence, Receipt, ToolCall

__all__ = ["Conversation", "OutputT", "ResumeState", "RunResult"]

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    OutputT = TypeVar("OutputT", default=str)
else:
    # At run time the bare `RunResult` takes any JSON-ready output, so a stored result of any
    # `output_type` loads; `RunResult[Invoice]` validates an `Invoice`. Type checkers see `str` as
    # the default, so an unparameterised `RunResult` reads as `RunResult[str]`.
    from typing import TypeVar

    OutputT = TypeVar("OutputT")


class Conversation(Record):
    """Where a run's conversation began: the earlier turns it continues, recorded once.

    The earlier turns themselves are the first messages of the run (after its own
    instructions); this record says where they came from, so a resume in another process
    continues from the recorded conversation and never rebuilds it.

    Attributes:
        continues: The run whose result this run continues (``None`` when the history was
            given as messages).
        thread_id: The stored thread the run belongs to (``agent.run(task, thread_id=...)``).
        earlier_messages: How many messages of the earlier turns the run started with.
        earlier_evidence: How many evidence items the run carried over from them.
        earlier_usage: What the earlier runs of the conversation used, summed (every budget of
            this run counts this run alone; this run's ``usage`` plus this is the
            conversation's total, for a cap the application keeps across turns).
    """

    continues: Identifier | None = None
    thread_id: Identifier | None = None
    earlier_messages: int = Field(default=0, ge=0)
    earlier_evidence: int = Field(default=0, ge=0)
    earlier_usage: Usage = Usage()


class ResumeState(Record):
    """What a paused run needs, beyond its result, to continue exactly where it stopped.

    Attributes:
        schema_version: The format version of this record.
        task: The run's task.
        actor: Who the run acts for.
        queue: Tool calls of the current model turn not yet finished, the paused one first.
        admitted_call_id: The queue head's id when it was already admitted (counted, validated).
        last_action: The key of the last proposed action, for repeat detection.
        repeats: How many times in a row it was proposed.
        elapsed_s: Run time used before the pause.
        approvals: Decisions supplied but not yet consumed.
        identities: The identity of each call in progress (the paused one), fixed when it was
            first validated.
    """

    schema_version: Literal[1] = 1
    task: str
    actor: Actor | None = None
    queue: tuple[ToolCall, ...] = ()
    admitted_call_id: Identifier | None = None
    last_action: str | None = None
    repeats: int = Field(default=0, ge=0)
    elapsed_s: float = Field(default=0.0, ge=0)
    approvals: tuple[Approval, ...] = ()
    identities: tuple[CallIdentity, ...] = ()


class RunResult(Record, Generic[OutputT]):
    """The outcome of a run. A budget stop still carries all the work done before it.

    Generic in its output: an agent with ``output_type=Invoice`` returns ``RunResult[Invoice]``,
    whose ``output`` is an ``Invoice``; without one, ``RunResult[str]``.

    Attributes:
        run_id: The run.
        status: How it ended.
        stop_reason: The exact cause.
        detail: A readable explanation of the end, naming the limit or error involved.
        output: The final answer, or ``None``: the text (possibly truncated), or the value of
            the agent's ``output_type``.
        raw_output: The model's last final answer as it gave it, when the agent has an
            ``output_type`` (kept also when that answer was invalid and the run stopped).
        usage: The counters.
        limits: The budgets the run had.
        messages: The whole conversation.
        trace: Every event, in order; with a SQL store a run past 2,000 events holds only its
            latest 1,000-2,000 here (the store holds them all).
        evidence: What tools returned that an answer may cite.
        receipts: The receipt of every tool execution.
        pending: Writes whose effect is unknown.
        approval_requests: Requests waiting for a decision; empty unless the run is paused.
        approvals: Every approval decision applied in the run: the audit trail.
        versions: The versions that produced the run.
        resume: What `Agent.resume` needs to continue a paused run.
        conversation: The earlier turns the run continued, when it continued any
            (``agent.run(task, history=...)`` or ``thread_id=...``).
    """

    run_id: Identifier
    status: RunStatus
    stop_reason: StopReason
    detail: str = Field(default="", max_length=4096)
    output: OutputT | None = None
    raw_output: str | None = None
    usage: Usage = Usage()
    limits: Limits = Field(default_factory=Limits)
    messages: tuple[Message, ...] = ()
    trace: tuple[TraceEvent, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    receipts: tuple[Receipt, ...] = ()
    pending: tuple[PendingOperation, ...] = ()
    approval_requests: tuple[ApprovalRequest, ...] = ()
    approvals: tuple[Approval, ...] = ()
    versions: Versions
    resume: ResumeState | None = None
    conversation: Conversation | None = None

    def summary(self) -> str:
        """Say how the run ended, why, and what it produced, in a few readable lines.

        The first line names the status and the stop reason, then the detail (the limit or
        error involved); a paused run lists the approvals it waits for; the output follows
        when there is one. ``print(result)`` prints the same text.

        Returns:
            The summary, for example ``failed (model_error): the endpoint answered 404 ...``.
        """
        head = f"{self.status.value} ({self.stop_reason.value})"
        lines = [f"{head}: {self.detail}" if self.detail else head]
        lines += [
            f"waiting for approval {request.id}: {request.tool} {request.arguments}"
            for request in self.approval_requests
        ]
        if self.output is not None:
            lines.append(f"output: {self.output}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
