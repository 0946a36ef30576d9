"""Every exception ownloop raises, under one root.

This module imports nothing from ownloop so any layer may raise from it. The tree keeps three
families apart: *signals* that steer the loop (a tool asks to be retried, a write's effect is
unknown, an approval is needed), *misuse* of the library by the application (bad configuration, a
tool that cannot be described), and *run failures* that carry the context needed to explain them::

    OwnloopError
    ├── LoopSignal                      steer the loop; never escape a run
    │   ├── TransientToolError          retry this tool call (draws from the attempt budget)
    │   ├── UnknownEffectError          a write may or may not have happened
    │   ├── ApprovalRequired            this call needs an approval that is not there yet
    │   └── SendRefused                 the run's budget refuses another request (a re-ask)
    ├── ConfigurationError              the application configured something impossible
    │   ├── ToolDefinitionError         a tool function cannot become a strict tool
    │   ├── InputRejected               a task or argument is refused before any model call
    │   └── UnknownApprovalRequest      a decision names no request the run waits for
    ├── ModelError                      the model port failed
    │   ├── ProviderError               a provider answered (or did not) with an error
    │   │   ├── TransientModelError     worth retrying (rate limit, 5xx, timeout)
    │   │   └── PermanentModelError     not worth retrying (auth, bad request, quota)
    │   └── UnexpectedModelCall         a scripted model was asked more than its script
    ├── RunError                        a run could not continue; carries run id, step, usage
    └── StoreError                      a run store refused or failed an operation
        ├── StaleCheckpoint             a newer checkpoint exists (optimistic version check)
        ├── RunLeased                   another worker holds the run's lease
        ├── RunNotFound                 no run with that id is stored
        ├── ThreadBusy                  a thread's last run is not finished, or moved on
        └── SchemaVersionError          a stored record is newer than this ownloop reads
            └── StoreUpgraded           a newer release upgraded the store under this process

Handlers of a tool raise the signals; the runtime catches them. Applications catch `OwnloopError`
(or one family) and never need to catch a third-party exception from ownloop's public API.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "ApprovalRequired",
    "ConfigurationError",
    "InputRejected",
    "LoopSignal",
    "ModelError",
    "OwnloopError",
    "PermanentModelError",
    "ProviderError",
    "ProviderErrorCategory",
    "RunError",
    "RunLeased",
    "RunNotFound",
    "SchemaVersionError",
    "SendRefused",
    "StaleCheckpoint",
    "StoreError",
    "StoreUpgraded",
    "ThreadBusy",
    "ToolDefinitionError",
    "TransientModelError",
    "TransientToolError",
    "UnexpectedModelCall",
    "UnknownApprovalRequest",
    "UnknownEffectError",
]

ProviderErrorCategory = Literal[
    "authentication",
    "permission",
    "model_not_found",
    "invalid_request",
    "unsupported_parameter",
    "unsupported_feature",
    "endpoint_not_supported",
    "invalid_tool_schema",
    "tool_generation_failed",
    "rate_limit",
    "quota_exhausted",
    "request_too_large",
    "context_length_exceeded",
    "server_error",
    "overloaded",
    "timeout",
    "connection",
    "stream_error",
    "invalid_response",
    "unknown",
]
"""The provider-neutral name of what went wrong at the model provider."""


class OwnloopError(Exception):
    """The root of every exception raised by ownloop."""


# --------------------------------------------------------------------------- signals


class LoopSignal(OwnloopError):
    """Base of the exceptions a tool handler raises to steer the loop."""


class TransientToolError(LoopSignal):
    """The tool failed in a way that is worth retrying; nothing was changed.

    Args:
        message: What failed, in words a model or an operator can act on.
        retry_after: Seconds the tool asks to wait before the next attempt, if it knows.
    """

    def __init__(
        self, message: str = "transient tool failure", *, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnknownEffectError(LoopSignal):
    """A write was attempted and it is not known whether it took effect.

    The runtime records a pending operation and never retries the write blindly.
    """


class ApprovalRequired(LoopSignal):
    """The call needs an approval bound to its exact arguments and revision.

    Args:
        reason: Why an approval is needed, shown to the approver.
    """

    def __init__(self, reason: str = "approval required") -> None:
        super().__init__(reason)
        self.reason = reason


class SendRefused(LoopSignal):
    """The run's budget refused a request a model port was about to send (an adapter's re-ask).

    Raised by `ownloop.budgets.ask_send_budget` inside a model port; the loop ends the run with
    the breach's stop reason, after counting what the earlier requests of the step used.

    Args:
        message: The breach, in words.
        breach: The `ownloop.budgets.BudgetBreach`.
        usage: The token usage of the step's requests already answered (a ``TokenUsage``).
        sent: How many requests of the step were already sent.
    """

    def __init__(self, message: str, *, breach: Any, usage: Any, sent: int) -> None:
        super().__init__(message)
        self.breach = breach
        self.usage = usage
        self.sent = sent


# --------------------------------------------------------------------------- misuse


class ConfigurationError(OwnloopError):
    """The application configured ownloop in a way that cannot work."""


class ToolDefinitionError(ConfigurationError):
    """A function cannot be registered as a tool (name, signature or schema)."""


class InputRejected(ConfigurationError):
    """An input was refused before any model call (empty, oversized or malformed)."""


class UnknownApprovalRequest(ConfigurationError):
    """A decision names no request the run waits for (or one that already has a decision)."""


# --------------------------------------------------------------------------- model failures


class ModelError(OwnloopError):
    """The model port could not produce a response."""


class ProviderError(ModelError):
    """A model provider failed, described without any provider type.

    Args:
        message: A human-readable explanation; never contains credentials.
        category: The provider-neutral kind of failure.
        retryable: Whether retrying the same request may succeed.
        retry_after: Seconds the provider asked to wait, if it said.
        status: The HTTP status code, if there was a response.
        request_id: The provider's request id, if it sent one.
        parameter: The request parameter the provider objected to, if it named one.
    """

    def __init__(
        self,
        message: str,
        *,
        category: ProviderErrorCategory = "unknown",
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
        request_id: str | None = None,
        parameter: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.category: ProviderErrorCategory = category
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.request_id = request_id
        self.parameter = parameter

    def describe(self) -> dict[str, Any]:
        """Return the error's fields as a JSON-ready mapping, for traces and results."""
        return {
            "type": type(self).__name__,
            "message": self.message,
            "category": self.category,
            "retryable": self.retryable,
            "retry_after": self.retry_after,
            "status": self.status,
            "request_id": self.request_id,
            "parameter": self.parameter,
        }


class TransientModelError(ProviderError):
    """A provider failure worth retrying: rate limits, overload, 5xx, timeouts, lost connections.

    Args:
        message: A human-readable explanation.
        category: The kind of failure; defaults to ``server_error``.
        retry_after: Seconds the provider asked to wait, if it said.
        **context: ``status``, ``request_id`` and ``parameter`` as on `ProviderError`.
    """

    def __init__(
        self,
        message: str = "transient model failure",
        *,
        category: ProviderErrorCategory = "server_error",
        retry_after: float | None = None,
        **context: Any,
    ) -> None:
        super().__init__(
            message, category=category, retryable=True, retry_after=retry_after, **context
        )


class PermanentModelError(ProviderError):
    """A provider failure that retrying will not fix: credentials, bad requests, exhausted quota.

    Args:
        message: A human-readable explanation.
        category: The kind of failure; defaults to ``invalid_request``.
        **context: ``status``, ``request_id``, ``retry_after`` and ``parameter``.
    """

    def __init__(
        self,
        message: str = "permanent model failure",
        *,
        category: ProviderErrorCategory = "invalid_request",
        **context: Any,
    ) -> None:
        super().__init__(message, category=category, retryable=False, **context)


class UnexpectedModelCall(ModelError):
    """A scripted model was called after its script ran out."""


# --------------------------------------------------------------------------- run failures


class RunError(OwnloopError):
    """A run could not continue; carries the context needed to explain it.

    Args:
        message: What happened.
        run_id: The run it happened in.
        step: The step the run was in, if any.
        usage: The run's counters at that moment, as a mapping.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        step: int | None = None,
        usage: dict[str, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step
        self.usage = usage or {}


# --------------------------------------------------------------------------- stores


class StoreError(OwnloopError):
    """A run store refused or failed an operation."""


class StaleCheckpoint(StoreError):
    """The checkpoint being saved is older than the stored one; it was not written."""


class RunLeased(StoreError):
    """Another worker holds an unexpired lease on the run."""


class RunNotFound(StoreError):
    """No run with the given id is stored."""


class ThreadBusy(StoreError):
    """A follow-up cannot continue the thread from where it stands.

    The thread's last run is paused (decide its approval and resume it first), still running,
    or unresolved; or another follow-up was recorded in the thread first, so this one would
    continue a point that is no longer the thread's last (load the thread again).
    """


class SchemaVersionError(StoreError):
    """A stored record has a schema version this ownloop does not know."""


class StoreUpgraded(SchemaVersionError):
    """Another release upgraded the store's schema after this process opened it.

    Raised by the write that found out, which wrote nothing: every write transaction of the SQL
    stores checks the store's schema version (the upgrade fence). Restart the process on a
    release that knows the new version.
    """
