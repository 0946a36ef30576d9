"""Pydantic contracts for everything that crosses a boundary or is stored.

No I/O happens here. Each record round-trips through JSON exactly:
``Model.model_validate_json(record.model_dump_json()) == record``.
"""

from ownloop.contracts._base import MAX_ID_CHARS, TOOL_NAME_PATTERN, JsonValue, utc_now
from ownloop.contracts.events import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetExhausted,
    CompletionRejected,
    EffectReconciled,
    EventBase,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ObservationAdded,
    OutputTruncated,
    RetryScheduled,
    RevisionAudited,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolDenied,
    ToolFinished,
    ToolProposed,
    ToolRejected,
    ToolStarted,
    TraceEvent,
)
from ownloop.contracts.limits import Limits, Usage
from ownloop.contracts.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from ownloop.contracts.model import ModelRequest, ModelResponse, ModelSettings, TokenUsage
from ownloop.contracts.policy import Actor, Approval, ApprovalRequest, PendingOperation
from ownloop.contracts.results import ResumeState, RunResult
from ownloop.contracts.status import RunStatus, StopReason, Versions
from ownloop.contracts.tools import (
    Effect,
    Evidence,
    Receipt,
    ReceiptEffect,
    ReceiptStatus,
    ToolCall,
    ToolSpec,
)

__all__ = [
    "MAX_ID_CHARS",
    "TOOL_NAME_PATTERN",
    "Actor",
    "Approval",
    "ApprovalDecided",
    "ApprovalRequest",
    "ApprovalRequested",
    "AssistantMessage",
    "BudgetExhausted",
    "CompletionRejected",
    "Effect",
    "EffectReconciled",
    "EventBase",
    "Evidence",
    "JsonValue",
    "Limits",
    "Message",
    "ModelFailed",
    "ModelRequest",
    "ModelRequested",
    "ModelResponded",
    "ModelResponse",
    "ModelSettings",
    "ObservationAdded",
    "OutputTruncated",
    "PendingOperation",
    "Receipt",
    "ReceiptEffect",
    "ReceiptStatus",
    "ResumeState",
    "RetryScheduled",
    "RevisionAudited",
    "RunFinished",
    "RunResult",
    "RunResumed",
    "RunStarted",
    "RunStatus",
    "StopReason",
    "SystemMessage",
    "TokenUsage",
    "ToolCall",
    "ToolDenied",
    "ToolFinished",
    "ToolMessage",
    "ToolProposed",
    "ToolRejected",
    "ToolSpec",
    "ToolStarted",
    "TraceEvent",
    "Usage",
    "UserMessage",
    "Versions",
    "utc_now",
]
