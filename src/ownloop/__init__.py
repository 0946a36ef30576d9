"""ownloop: bounded, auditable agent loops. The model proposes; your runtime decides.

This module is the public facade; everything importable from ``ownloop`` is listed in `__all__`.
"""

from ownloop._version import __version__
from ownloop.agent import Agent
from ownloop.clock import Clock, SystemClock
from ownloop.contracts import (
    Actor,
    Approval,
    ApprovalRequest,
    Evidence,
    Limits,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    PendingOperation,
    Receipt,
    RunResult,
    RunStatus,
    StopReason,
    TokenUsage,
    ToolCall,
    ToolSpec,
    TraceEvent,
    Usage,
)
from ownloop.exceptions import (
    ApprovalRequired,
    ConfigurationError,
    InputRejected,
    LoopSignal,
    ModelError,
    OwnloopError,
    PermanentModelError,
    ProviderError,
    RunError,
    ToolDefinitionError,
    TransientModelError,
    TransientToolError,
    UnexpectedModelCall,
    UnknownEffectError,
)
from ownloop.models import AgentModel
from ownloop.retry import RetryPolicy
from ownloop.tools import Sensitive, ToolContext, ToolRegistry, ToolRejection, ValidatedCall
from ownloop.validators import Accept, CompletionValidator, Reject, citations_observed

__all__ = [
    "Accept",
    "Actor",
    "Agent",
    "AgentModel",
    "Approval",
    "ApprovalRequest",
    "ApprovalRequired",
    "Clock",
    "CompletionValidator",
    "ConfigurationError",
    "Evidence",
    "InputRejected",
    "Limits",
    "LoopSignal",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OwnloopError",
    "PendingOperation",
    "PermanentModelError",
    "ProviderError",
    "Receipt",
    "Reject",
    "RetryPolicy",
    "RunError",
    "RunResult",
    "RunStatus",
    "Sensitive",
    "StopReason",
    "SystemClock",
    "TokenUsage",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolRejection",
    "ToolSpec",
    "TraceEvent",
    "TransientModelError",
    "TransientToolError",
    "UnexpectedModelCall",
    "UnknownEffectError",
    "Usage",
    "ValidatedCall",
    "__version__",
    "citations_observed",
]
