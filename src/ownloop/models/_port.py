"""The model port, and the switch that keeps real provider calls out of test suites.

Adapters that reach a real provider call `check_model_requests_allowed` before every request. Test
suites turn requests off (``OWNLOOP_ALLOW_MODEL_REQUESTS=0`` in the environment, or
`allow_model_requests(False)` as a context manager), so a test that forgot to use a scripted model
fails loudly instead of spending money or leaking data.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.exceptions import ConfigurationError

__all__ = [
    "AgentModel",
    "allow_model_requests",
    "check_model_requests_allowed",
    "model_requests_allowed",
]

_ENVIRONMENT_SWITCH = "OWNLOOP_ALLOW_MODEL_REQUESTS"
_override: list[bool] = []


@runtime_checkable
class AgentModel(Protocol):
    """The model port: propose the next action for a request.

    Implementations translate the request for one provider and the provider's answer back; they
    never decide authorization, approvals or completion.
    """

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Return the model's proposal for this request.

        Args:
            request: The conversation, eligible tools and settings for this step.

        Returns:
            A final answer, tool calls or an explicit stop.

        Raises:
            ProviderError: On failure; `TransientModelError` when retrying may help.
        """
        ...


def model_requests_allowed() -> bool:
    """Return whether real provider requests may be made right now."""
    if _override:
        return _override[-1]
    return os.environ.get(_ENVIRONMENT_SWITCH, "1").strip().lower() not in {"0", "false", "no"}


def check_model_requests_allowed(adapter: str) -> None:
    """Refuse a real provider request when requests are switched off.

    Args:
        adapter: The adapter about to make the request, named in the error.

    Raises:
        ConfigurationError: If requests are switched off.
    """
    if not model_requests_allowed():
        raise ConfigurationError(
            f"{adapter} tried to reach a real model provider while model requests are switched "
            f"off ({_ENVIRONMENT_SWITCH}=0 or allow_model_requests(False)); use "
            "ownloop.testing.ScriptedModel or FunctionModel in tests"
        )


@contextmanager
def allow_model_requests(allowed: bool) -> Iterator[None]:
    """Switch real provider requests on or off inside a ``with`` block.

    Args:
        allowed: Whether requests are allowed inside the block.

    Yields:
        Nothing; the previous setting returns when the block ends.
    """
    _override.append(allowed)
    try:
        yield
    finally:
        _override.pop()
