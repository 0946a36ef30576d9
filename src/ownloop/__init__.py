"""ownloop: bounded, auditable agent loops. The model proposes; your runtime decides.

This module is the public facade; everything importable from ``ownloop`` is listed in `__all__`.
Names load on first use (PEP 562), so ``import ownloop`` costs almost nothing and never imports a
provider SDK; ``from ownloop import Agent`` loads the runtime, and a model adapter loads the
``openai`` SDK only when it is first used.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ownloop._version import __version__

if _TYPE_CHECKING:
    from ownloop.agent import Agent
    from ownloop.clock import Clock, SystemClock
    from ownloop.context import ContextPolicy
    from ownloop.contracts import (
        Actor,
        Approval,
        ApprovalRequest,
        Conversation,
        Evidence,
        Limits,
        ModelRequest,
        ModelResponse,
        ModelSettings,
        OutputMode,
        PendingOperation,
        Receipt,
        ResumeState,
        RunResult,
        RunStatus,
        StopReason,
        TokenUsage,
        ToolCall,
        ToolSpec,
        TraceEvent,
        Usage,
    )
    from ownloop.cost import Price, PriceTable
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
        RunLeased,
        RunNotFound,
        SchemaVersionError,
        SendRefused,
        StaleCheckpoint,
        StoreError,
        StoreUpgraded,
        ThreadBusy,
        ToolDefinitionError,
        TransientModelError,
        TransientToolError,
        UnexpectedModelCall,
        UnknownApprovalRequest,
        UnknownEffectError,
    )
    from ownloop.models import AgentModel
    from ownloop.policy import Policy
    from ownloop.redaction import Redactor
    from ownloop.retry import RetryPolicy
    from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
    from ownloop.tools import (
        Confirmed,
        NotApplied,
        RunContext,
        Sensitive,
        StillUnknown,
        ToolContext,
        ToolRegistry,
        ToolRejection,
        ValidatedCall,
    )
    from ownloop.validators import (
        Accept,
        CompletionValidator,
        Reject,
        citations_observed,
        require_current_check,
        requires_check_before,
    )

_EXPORTS = {
    "Agent": "ownloop.agent",
    "Clock": "ownloop.clock",
    "SystemClock": "ownloop.clock",
    "ContextPolicy": "ownloop.context",
    "Actor": "ownloop.contracts",
    "Approval": "ownloop.contracts",
    "ApprovalRequest": "ownloop.contracts",
    "Conversation": "ownloop.contracts",
    "Evidence": "ownloop.contracts",
    "Limits": "ownloop.contracts",
    "ModelRequest": "ownloop.contracts",
    "ModelResponse": "ownloop.contracts",
    "ModelSettings": "ownloop.contracts",
    "PendingOperation": "ownloop.contracts",
    "Receipt": "ownloop.contracts",
    "ResumeState": "ownloop.contracts",
    "OutputMode": "ownloop.contracts",
    "RunResult": "ownloop.contracts",
    "RunStatus": "ownloop.contracts",
    "StopReason": "ownloop.contracts",
    "TokenUsage": "ownloop.contracts",
    "ToolCall": "ownloop.contracts",
    "ToolSpec": "ownloop.contracts",
    "TraceEvent": "ownloop.contracts",
    "Usage": "ownloop.contracts",
    "Price": "ownloop.cost",
    "PriceTable": "ownloop.cost",
    "ApprovalRequired": "ownloop.exceptions",
    "ConfigurationError": "ownloop.exceptions",
    "InputRejected": "ownloop.exceptions",
    "LoopSignal": "ownloop.exceptions",
    "ModelError": "ownloop.exceptions",
    "OwnloopError": "ownloop.exceptions",
    "PermanentModelError": "ownloop.exceptions",
    "ProviderError": "ownloop.exceptions",
    "RunError": "ownloop.exceptions",
    "RunLeased": "ownloop.exceptions",
    "RunNotFound": "ownloop.exceptions",
    "SchemaVersionError": "ownloop.exceptions",
    "SendRefused": "ownloop.exceptions",
    "ThreadBusy": "ownloop.exceptions",
    "StaleCheckpoint": "ownloop.exceptions",
    "StoreError": "ownloop.exceptions",
    "StoreUpgraded": "ownloop.exceptions",
    "ToolDefinitionError": "ownloop.exceptions",
    "TransientModelError": "ownloop.exceptions",
    "TransientToolError": "ownloop.exceptions",
    "UnexpectedModelCall": "ownloop.exceptions",
    "UnknownApprovalRequest": "ownloop.exceptions",
    "UnknownEffectError": "ownloop.exceptions",
    "AgentModel": "ownloop.models",
    "Policy": "ownloop.policy",
    "Redactor": "ownloop.redaction",
    "RetryPolicy": "ownloop.retry",
    "MemoryRunStore": "ownloop.store",
    "PostgresRunStore": "ownloop.store",
    "RunStore": "ownloop.store",
    "SqliteRunStore": "ownloop.store",
    "Confirmed": "ownloop.tools",
    "NotApplied": "ownloop.tools",
    "RunContext": "ownloop.tools",
    "Sensitive": "ownloop.tools",
    "StillUnknown": "ownloop.tools",
    "ToolContext": "ownloop.tools",
    "ToolRegistry": "ownloop.tools",
    "ToolRejection": "ownloop.tools",
    "ValidatedCall": "ownloop.tools",
    "Accept": "ownloop.validators",
    "CompletionValidator": "ownloop.validators",
    "Reject": "ownloop.validators",
    "citations_observed": "ownloop.validators",
    "require_current_check": "ownloop.validators",
    "requires_check_before": "ownloop.validators",
}
"""Where each public name lives: ``from ownloop import X`` imports that module on first use."""


def __getattr__(name: str) -> _Any:
    """Import the module of a public name the first time the name is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the public names, loaded or not."""
    return sorted(set(globals()) | set(__all__))


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
    "Confirmed",
    "ContextPolicy",
    "Conversation",
    "Evidence",
    "InputRejected",
    "Limits",
    "LoopSignal",
    "MemoryRunStore",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "NotApplied",
    "OutputMode",
    "OwnloopError",
    "PendingOperation",
    "PermanentModelError",
    "Policy",
    "PostgresRunStore",
    "Price",
    "PriceTable",
    "ProviderError",
    "Receipt",
    "Redactor",
    "Reject",
    "ResumeState",
    "RetryPolicy",
    "RunContext",
    "RunError",
    "RunLeased",
    "RunNotFound",
    "RunResult",
    "RunStatus",
    "RunStore",
    "SchemaVersionError",
    "SendRefused",
    "Sensitive",
    "SqliteRunStore",
    "StaleCheckpoint",
    "StillUnknown",
    "StopReason",
    "StoreError",
    "StoreUpgraded",
    "SystemClock",
    "ThreadBusy",
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
    "UnknownApprovalRequest",
    "UnknownEffectError",
    "Usage",
    "ValidatedCall",
    "__version__",
    "citations_observed",
    "require_current_check",
    "requires_check_before",
]
