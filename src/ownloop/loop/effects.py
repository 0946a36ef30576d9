"""The loop's requests to the outside world, and what comes back.

The loop core never performs I/O: it yields one of these effects and receives the outcome. A driver
(the runtime) performs it — awaiting the model, running the tool, sleeping on the clock — and sends
the outcome back. Tests can drive the core by hand the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.tools import ToolContext, ValidatedCall

__all__ = ["CallModel", "Effect", "Failure", "InvokeTool", "Outcome", "Sleep", "ToolReturn"]


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask the model port for a response.

    Attributes:
        request: The request to send.
        timeout_s: The most seconds the call may take before the run's deadline.
    """

    request: ModelRequest
    timeout_s: float


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
class Sleep:
    """Wait before the next attempt.

    Attributes:
        seconds: How long.
    """

    seconds: float


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """A tool handler returned.

    Attributes:
        value: What it returned.
    """

    value: Any


@dataclass(frozen=True, slots=True)
class Failure:
    """A model call or tool handler raised.

    Attributes:
        error: The exception.
    """

    error: BaseException


Effect = CallModel | InvokeTool | Sleep
"""Anything the core may ask the driver to do."""

Outcome = ModelResponse | ToolReturn | Failure | None
"""Anything the driver may send back (``None`` after a sleep)."""
