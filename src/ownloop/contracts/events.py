"""Trace events: one typed record per transition of a run, discriminated by ``kind``.

Every event carries the run id, a sequence number (1, 2, 3… without gaps) and a timestamp. Payloads
hold what explains the transition (counters, reasons, sizes), bounded and redacted before they are
built; never hidden reasoning.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from ownloop.contracts._base import Identifier, JsonValue, Record
from ownloop.contracts.limits import Limits, Usage
from ownloop.contracts.model import TokenUsage
from ownloop.contracts.status import RunStatus, StopReason, Versions
from ownloop.contracts.tools import ReceiptEffect, ReceiptStatus

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "BudgetExhausted",
    "CompletionRejected",
    "ConfigurationChanged",
    "ContextCompacted",
    "EffectReconciled",
    "EventBase",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "ObservationAdded",
    "OutputInvalid",
    "OutputTruncated",
    "RetryScheduled",
    "RevisionAudited",
    "RunFinished",
    "RunResumed",
    "RunStarted",
    "SinkFailed",
    "ToolDenied",
    "ToolFinished",
    "ToolProposed",
    "ToolRejected",
    "ToolStarted",
    "TraceEvent",
]


class EventBase(Record):
    """Fields every trace event has.

    Attributes:
        run_id: The run.
        seq: The event's position in the run's trace, from 1, without gaps.
        at: When it happened (UTC).
    """

    run_id: Identifier
    seq: int = Field(ge=1)
    at: datetime


class RunStarted(EventBase):
    """A run began: what it runs with.

    Attributes:
        task_chars: Length of the task.
        actor_id: Who the run acts for, if an actor was given.
        tools: The tools registered for the run.
        limits: The run's budgets.
        versions: The versions producing the run.
    """

    kind: Literal["run_started"] = "run_started"
    task_chars: int = Field(ge=0)
    actor_id: Identifier | None = None
    tools: tuple[str, ...] = ()
    limits: Limits
    versions: Versions


class ModelRequested(EventBase):
    """A model call is about to start.

    Attributes:
        step: The step.
        attempt: The attempt number of this step's call, from 1.
        messages: How many messages the request carries.
        request_chars: Total characters of the request's messages.
        tools: How many tools were offered.
    """

    kind: Literal["model_requested"] = "model_requested"
    step: int = Field(ge=1)
    attempt: int = Field(ge=1)
    messages: int = Field(ge=0)
    request_chars: int = Field(ge=0)
    tools: int = Field(ge=0)


class ModelResponded(EventBase):
    """A model call returned a response.

    Attributes:
        step: The step.
        attempt: The attempt that succeeded.
        decision: ``final``, ``tool_calls``, ``stop`` or ``empty``.
        tool_calls: The names of proposed tools, in order.
        stop_reason: The model's explicit stop reason, if any.
        usage: Tokens this response used.
        model: The model the provider reported.
        provider_request_id: The provider's request id.
        duration_s: How long the call took.
        time_to_first_token_s: Seconds until the first streamed token, when streamed.
        provider_requests: Requests the adapter sent for this response (re-asks included).
        notes: What the adapter noticed about the exchange (`ModelResponse.notes`).
    """

    kind: Literal["model_responded"] = "model_responded"
    step: int = Field(ge=1)
    attempt: int = Field(ge=1)
    decision: Literal["final", "tool_calls", "stop", "empty"]
    tool_calls: tuple[str, ...] = ()
    stop_reason: str | None = None
    usage: TokenUsage = TokenUsage()
    model: str | None = None
    provider_request_id: str | None = None
    duration_s: float = Field(ge=0)
    time_to_first_token_s: float | None = Field(default=None, ge=0)
    provider_requests: int = Field(default=1, ge=1)
    notes: tuple[str, ...] = ()


class ModelFailed(EventBase):
    """A model call failed.

    Attributes:
        step: The step.
        attempt: The attempt that failed.
        error: The error's type, category, status and message (no credentials).
        retryable: Whether it is worth retrying.
    """

    kind: Literal["model_failed"] = "model_failed"
    step: int = Field(ge=1)
    attempt: int = Field(ge=1)
    error: dict[str, JsonValue]
    retryable: bool


class RetryScheduled(EventBase):
    """A failed model or tool call will be tried again after a delay.

    Attributes:
        target: ``model`` or ``tool``.
        call_id: The tool call, when the target is a tool.
        next_attempt: The number the next attempt will have (per call).
        delay_s: Seconds the runtime waits first.
        reason: What failed.
    """

    kind: Literal["retry_scheduled"] = "retry_scheduled"
    target: Literal["model", "tool"]
    call_id: str | None = None
    next_attempt: int = Field(ge=2)
    delay_s: float = Field(ge=0)
    reason: str


class ToolProposed(EventBase):
    """The model proposed a tool call.

    Attributes:
        step: The step.
        call_id: The call's id.
        tool: The proposed tool name.
        arguments: The raw arguments, bounded and redacted.
    """

    kind: Literal["tool_proposed"] = "tool_proposed"
    step: int = Field(ge=1)
    call_id: str
    tool: str
    arguments: JsonValue = None


class ToolRejected(EventBase):
    """A proposed call was refused before its handler ran.

    Attributes:
        call_id: The call.
        tool: The proposed tool name.
        code: ``unknown_tool``, ``invalid_arguments`` or another short code.
        reason: What was wrong, as shown to the model.
    """

    kind: Literal["tool_rejected"] = "tool_rejected"
    call_id: str
    tool: str
    code: str
    reason: str


class ToolStarted(EventBase):
    """A tool handler is about to run.

    Attributes:
        call_id: The call.
        tool: The tool.
        attempt: The attempt number for this call, from 1.
    """

    kind: Literal["tool_started"] = "tool_started"
    call_id: str
    tool: str
    attempt: int = Field(ge=1)


class ToolFinished(EventBase):
    """A tool attempt ended, with its receipt's status and effect.

    Attributes:
        call_id: The call.
        tool: The tool.
        attempt: The attempt that ended.
        status: The receipt's status.
        effect: The receipt's effect.
        duration_s: How long the attempt took.
        message: A short explanation for non-ok receipts.
    """

    kind: Literal["tool_finished"] = "tool_finished"
    call_id: str
    tool: str
    attempt: int = Field(ge=1)
    status: ReceiptStatus
    effect: ReceiptEffect
    duration_s: float = Field(ge=0)
    message: str | None = None


class ObservationAdded(EventBase):
    """An observation was added to the conversation.

    Attributes:
        call_id: The call it answers, or ``None`` for runtime feedback.
        source: ``tool``, ``rejection``, ``completion`` or another origin.
        chars: Characters added.
        original_chars: Characters before truncation.
        truncated: Whether the observation was cut to its bound.
    """

    kind: Literal["observation_added"] = "observation_added"
    call_id: str | None = None
    source: str
    chars: int = Field(ge=0)
    original_chars: int = Field(ge=0)
    truncated: bool


class CompletionRejected(EventBase):
    """A final answer failed a completion check.

    Attributes:
        validator: The check that rejected it.
        reason: Why.
        rejections: Rejections so far in the run.
    """

    kind: Literal["completion_rejected"] = "completion_rejected"
    validator: str
    reason: str
    rejections: int = Field(ge=1)


class OutputInvalid(EventBase):
    """A final answer was not a valid value of the agent's ``output_type``.

    Attributes:
        problem: What was wrong (not JSON, the wrong shape, a failing validator), as sent back
            to the model.
        answer_chars: The length of the answer given.
        invalid_outputs: Invalid answers so far in the run.
    """

    kind: Literal["output_invalid"] = "output_invalid"
    problem: str = Field(max_length=4096)
    answer_chars: int = Field(ge=0)
    invalid_outputs: int = Field(ge=1)


class OutputTruncated(EventBase):
    """The final answer was longer than allowed and was cut, with a marker.

    Attributes:
        original_chars: The answer's length.
        chars: The length kept.
    """

    kind: Literal["output_truncated"] = "output_truncated"
    original_chars: int = Field(ge=0)
    chars: int = Field(ge=0)


class BudgetExhausted(EventBase):
    """A budget ran out.

    Attributes:
        budget: The `Limits` field that ran out (or ``deadline_s``).
        limit: Its value.
        observed: What the run had used when checked.
        checkpoint: Where the check was made (``before_model_call``, ``before_tool_call``…).
    """

    kind: Literal["budget_exhausted"] = "budget_exhausted"
    budget: str
    limit: float
    observed: float
    checkpoint: str


class RunFinished(EventBase):
    """The run ended (or paused): the terminal state and final counters.

    Attributes:
        status: The run's status.
        stop_reason: The exact cause.
        detail: A readable explanation.
        usage: The final counters.
    """

    kind: Literal["run_finished"] = "run_finished"
    status: RunStatus
    stop_reason: StopReason
    detail: str
    usage: Usage


class ToolDenied(EventBase):
    """The policy refused a validated call; its handler never ran.

    Attributes:
        call_id: The call.
        tool: The tool.
        reason: Why.
        rule: The rule that refused it.
    """

    kind: Literal["tool_denied"] = "tool_denied"
    call_id: str
    tool: str
    reason: str
    rule: str


class ApprovalRequested(EventBase):
    """A call needs an approval that is not there; the run pauses (or asks the approver).

    Attributes:
        request_id: The request an approval must name.
        call_id: The call waiting.
        tool: The tool.
        digest: The exact call's digest (tool, arguments, revision).
        revision: The revision the call would run against.
        reason: Why approval is needed.
    """

    kind: Literal["approval_requested"] = "approval_requested"
    request_id: str
    call_id: str
    tool: str
    digest: str
    revision: str | None = None
    reason: str


class ApprovalDecided(EventBase):
    """A decision on an approval request was applied (and, when approved, consumed).

    Attributes:
        request_id: The request.
        call_id: The call it decided.
        approved: The decision.
        approver: Who decided.
        reason: The approver's reason.
        source: ``supplied`` (passed to run or resume) or ``approver`` (asked inline).
    """

    kind: Literal["approval_decided"] = "approval_decided"
    request_id: str
    call_id: str
    approved: bool
    approver: str
    reason: str | None = None
    source: Literal["supplied", "approver"]


class RunResumed(EventBase):
    """A paused run continued.

    Attributes:
        approvals: How many decisions were supplied with the resume.
        elapsed_s: Run time already used before the pause (the pause itself does not count).
        taken_over_from: The worker whose unexpired lease this resume took over (an explicit
            take-over, or a holder whose process is gone), if any.
    """

    kind: Literal["run_resumed"] = "run_resumed"
    approvals: int = Field(ge=0)
    elapsed_s: float = Field(ge=0)
    taken_over_from: str | None = Field(default=None, max_length=256)


class RevisionAudited(EventBase):
    """The state revision after a tool, recorded when the policy asks for audits.

    Attributes:
        call_id: The call just executed.
        tool: The tool.
        revision: The revision after it.
    """

    kind: Literal["revision_audited"] = "revision_audited"
    call_id: str
    tool: str
    revision: str | None = None


class EffectReconciled(EventBase):
    """An authoritative lookup was asked about a write whose effect was unknown.

    Attributes:
        call_id: The write's call.
        tool: The write tool.
        outcome: ``confirmed`` (it happened), ``not_applied`` (cleared for a retry with the same
            idempotency key) or ``unknown`` (still pending).
    """

    kind: Literal["effect_reconciled"] = "effect_reconciled"
    call_id: str
    tool: str
    outcome: Literal["confirmed", "not_applied", "unknown"]


class ContextCompacted(EventBase):
    """Earlier turns were removed (or summarized) so the next request fits its budget.

    Attributes:
        before_tokens: Estimated tokens of the conversation before.
        after_tokens: Estimated tokens after.
        dropped_messages: Messages removed.
        dropped_turns: Whole turns removed (a tool call is never separated from its observation).
        summarized: Whether a summarizer replaced them (else a placeholder did).
    """

    kind: Literal["context_compacted"] = "context_compacted"
    before_tokens: int = Field(ge=0)
    after_tokens: int = Field(ge=0)
    dropped_messages: int = Field(ge=0)
    dropped_turns: int = Field(ge=0)
    summarized: bool = False


class SinkFailed(EventBase):
    """A trace sink raised; the run went on without waiting for it (reported once per sink).

    Attributes:
        sink: The sink, as its ``repr`` (bounded).
        error: What it raised, as ``"TypeName: message"``.
        failed_seq: The event it was given when it failed.
    """

    kind: Literal["sink_failed"] = "sink_failed"
    sink: str = Field(max_length=200)
    error: str
    failed_seq: int = Field(ge=1)


class ConfigurationChanged(EventBase):
    """A run was resumed under another configuration than it was recorded with, on purpose.

    Emitted when ``resume(..., accept_changes=True)`` continues a run whose recorded
    ``versions.policy_digest`` differs from the resuming agent's.

    Attributes:
        recorded_digest: The digest the run was recorded with.
        digest: The digest it continues under.
        changes: What differs, in words (limits, offered tools, policy or validators).
    """

    kind: Literal["configuration_changed"] = "configuration_changed"
    recorded_digest: str | None = Field(default=None, max_length=128)
    digest: str | None = Field(default=None, max_length=128)
    changes: tuple[str, ...] = ()


TraceEvent = Annotated[
    RunStarted
    | ModelRequested
    | ModelResponded
    | ModelFailed
    | RetryScheduled
    | ToolProposed
    | ToolRejected
    | ToolStarted
    | ToolFinished
    | ObservationAdded
    | CompletionRejected
    | OutputInvalid
    | OutputTruncated
    | BudgetExhausted
    | RunFinished
    | ToolDenied
    | ApprovalRequested
    | ApprovalDecided
    | RunResumed
    | RevisionAudited
    | EffectReconciled
    | ContextCompacted
    | SinkFailed
    | ConfigurationChanged,
    Field(discriminator="kind"),
]
"""Any trace event, discriminated by ``kind``."""
