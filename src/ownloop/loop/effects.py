"""The loop's requests to the outside world, and what comes back.

The loop core never performs I/O: it yields one of these effects and receives the outcome. A driver
(the runtime) performs it — awaiting the model, running the tool, sleeping on the clock — and sends
the outcome back. Tests can drive the core by hand the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownloop.budgets import SendBudget
from ownloop.contracts import (
    Approval,
    ApprovalRequest,
    ModelRequest,
    ModelResponse,
    Receipt,
    RunSnapshot,
    WriteIntent,
)
from ownloop.tools import ToolContext, ValidatedCall

__all__ = [
    "AskApprover",
    "CallModel",
    "ConfirmLease",
    "Decided",
    "Effect",
    "Failure",
    "InvokeTool",
    "InvokeTools",
    "Outcome",
    "Persist",
    "ReadRevision",
    "Reconcile",
    "RecordIntent",
    "RecordReceipt",
    "Revision",
    "Sleep",
    "Summarize",
    "ToolResults",
    "ToolReturn",
]


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask the model port for a response.

    Attributes:
        request: The request to send.
        timeout_s: The most seconds the call may take before the run's deadline.
        budget: What the port asks before any further request of the same attempt (a re-ask);
            the driver installs it with `ownloop.budgets.send_budget`.
    """

    request: ModelRequest
    timeout_s: float
    budget: SendBudget | None = None


@dataclass(frozen=True, slots=True)
class InvokeTool:
    """Run a validated tool call's handler once.

    Attributes:
        call: The validated call.
        context: What the handler is told about the run.
    """

    call: ValidatedCall
    context: ToolContext


@dataclass(frozen=True, slots=True)
class InvokeTools:
    """Run the first attempts of several admitted calls at the same time.

    The driver runs at most ``limit`` of them at once, each until the run's deadline (like a lone
    `InvokeTool`), and answers with `ToolResults` in the order of ``calls``, whichever finished
    first. Cancelling the run cancels every one still running.

    Attributes:
        calls: The attempts, in the order the model proposed them.
        limit: How many may run at once (`Limits.max_parallel_tools`).
    """

    calls: tuple[InvokeTool, ...]
    limit: int


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait before the next attempt.

    Attributes:
        seconds: How long.
    """

    seconds: float


@dataclass(frozen=True, slots=True)
class ReadRevision:
    """Read the application's current state revision."""


@dataclass(frozen=True, slots=True)
class AskApprover:
    """Ask the configured approver to decide a request now.

    Attributes:
        request: The request.
    """

    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class Reconcile:
    """Ask a write tool's authoritative lookup whether an unknown effect happened.

    Attributes:
        call: The write's validated call.
        context: The write's context (same idempotency key).
    """

    call: ValidatedCall
    context: ToolContext


@dataclass(frozen=True, slots=True)
class Summarize:
    """Ask the summarizer model to condense turns being dropped from the context.

    Attributes:
        request: The summarization request.
        timeout_s: The most seconds the call may take before the run's deadline.
    """

    request: ModelRequest
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Persist:
    """Checkpoint the run in the store.

    Attributes:
        snapshot: The run as it stands.
        kept: When set, the snapshot's trace, receipts and evidence hold only the items after the
            first ``kept[part]`` of the version the save expects, which the store keeps (a store
            that ``saves_changes``); ``None``: the snapshot is whole.
    """

    snapshot: RunSnapshot
    kept: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class RecordIntent:
    """Durably record that a write is about to execute (before it does).

    Attributes:
        intent: The write.
    """

    intent: WriteIntent


@dataclass(frozen=True, slots=True)
class ConfirmLease:
    """Confirm in the store that this worker still holds the run, before a write is retried.

    The intent is fenced when it is recorded; a retry of the same write executes it again later,
    after the worker may have lost the run (a take-over during the backoff), so every further
    attempt is fenced too: a worker that lost its lease gets `RunLeased` and executes nothing.
    """


@dataclass(frozen=True, slots=True)
class RecordReceipt:
    """Durably record how a journaled write ended.

    Attributes:
        run_id: The run.
        call_id: The write's call.
        receipt: The receipt.
    """

    run_id: str
    call_id: str
    receipt: Receipt


@dataclass(frozen=True, slots=True)
class Revision:
    """The revision read.

    Attributes:
        value: The revision, or ``None`` when the application tracks none.
    """

    value: str | None


@dataclass(frozen=True, slots=True)
class Decided:
    """What the approver decided.

    Attributes:
        approval: The decision, or ``None`` when the approver did not decide.
    """

    approval: Approval | None


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """A tool handler returned.

    Attributes:
        value: What it returned.
    """

    value: Any


@dataclass(frozen=True, slots=True)
class ToolResults:
    """How each attempt of an `InvokeTools` ended, in the order of its calls.

    Attributes:
        outcomes: Each attempt's `ToolReturn` or `Failure`.
        durations_s: How long each attempt ran, in seconds (waiting for a free slot excluded).
    """

    outcomes: tuple[ToolReturn | Failure, ...]
    durations_s: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Failure:
    """A model call or tool handler raised.

    Attributes:
        error: The exception.
    """

    error: BaseException


Effect = (
    CallModel
    | InvokeTool
    | InvokeTools
    | Sleep
    | ReadRevision
    | AskApprover
    | Reconcile
    | Persist
    | RecordIntent
    | RecordReceipt
    | ConfirmLease
    | Summarize
)
"""Anything the core may ask the driver to do."""

Outcome = ModelResponse | ToolReturn | ToolResults | Failure | Revision | Decided | None
"""Anything the driver may send back (``None`` after a sleep)."""
