"""The public test kit: how users test their agents the way ownloop tests itself.

- `ScriptedModel` plays a fixed script of responses (or exceptions) and is strict: a call beyond the
  script raises `UnexpectedModelCall`, and `assert_complete` fails on unconsumed steps.
- `FunctionModel` answers each request with a function of the request.
- `FakeClock` makes deadlines and backoff instant and deterministic.
- `block_model_requests` makes any real provider request fail inside a test.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager

from ownloop.clock import FakeClock
from ownloop.contracts import JsonValue, ModelRequest, ModelResponse, ToolCall
from ownloop.exceptions import UnexpectedModelCall
from ownloop.models import allow_model_requests

__all__ = [
    "FakeClock",
    "FunctionModel",
    "ScriptStep",
    "ScriptedModel",
    "block_model_requests",
    "final",
    "tool_call",
]

ScriptStep = ModelResponse | BaseException
"""One step of a script: the response to return, or an exception to raise."""


class ScriptedModel:
    """A model that plays a fixed script, one step per request, and nothing more.

    Args:
        steps: Responses to return, or exceptions to raise, in order.
        model_name: The model name recorded in the run's versions.

    Attributes:
        requests: Every request received, in order.
    """

    def __init__(self, steps: Iterable[ScriptStep], *, model_name: str = "scripted") -> None:
        self._steps = list(steps)
        self._position = 0
        self.model_name = model_name
        self.requests: list[ModelRequest] = []

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Play the next step of the script.

        Args:
            request: The request (recorded in `requests`).

        Returns:
            The scripted response.

        Raises:
            UnexpectedModelCall: If the script is used up.
            BaseException: The scripted exception, when the step is one.
        """
        self.requests.append(request)
        if self._position >= len(self._steps):
            raise UnexpectedModelCall(
                f"ScriptedModel was called {len(self.requests)} times but its script has "
                f"{len(self._steps)} step(s) (run {request.run_id}, step {request.step})"
            )
        step = self._steps[self._position]
        self._position += 1
        if isinstance(step, BaseException):
            raise step
        return step

    @property
    def remaining(self) -> int:
        """How many steps have not been played yet."""
        return len(self._steps) - self._position

    def assert_complete(self) -> None:
        """Fail if any step of the script was never played.

        Raises:
            AssertionError: When steps remain.
        """
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel has {self.remaining} unconsumed step(s) of {len(self._steps)}"
            )

    def __repr__(self) -> str:
        return f"ScriptedModel(steps={len(self._steps)}, played={self._position})"


ResponseFunction = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]


class FunctionModel:
    """A model whose responses come from a function of the request (sync or async).

    Args:
        function: Called with each `ModelRequest`; returns (or awaits to) a `ModelResponse`.
        model_name: The model name recorded in the run's versions.

    Attributes:
        requests: Every request received, in order.
    """

    def __init__(self, function: ResponseFunction, *, model_name: str | None = None) -> None:
        self._function = function
        self.model_name = model_name or getattr(function, "__name__", "function")
        self.requests: list[ModelRequest] = []

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer with the function's response.

        Args:
            request: The request.

        Returns:
            What the function returned.
        """
        self.requests.append(request)
        response = self._function(request)
        if inspect.isawaitable(response):
            return await response
        return response

    def __repr__(self) -> str:
        return f"FunctionModel({self.model_name})"


def tool_call(name: str, call_id: str | None = None, /, **arguments: JsonValue) -> ModelResponse:
    """Build a response proposing one tool call (a shorthand for scripts).

    Args:
        name: The tool name.
        call_id: The call id; ``call-<name>`` by default.
        **arguments: The call's arguments.

    Returns:
        The response.
    """
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id or f"call-{name}", name=name, arguments=dict(arguments)),)
    )


def final(text: str) -> ModelResponse:
    """Build a response with a final answer (a shorthand for scripts).

    Args:
        text: The answer.

    Returns:
        The response.
    """
    return ModelResponse(final_output=text)


@contextmanager
def block_model_requests() -> Iterator[None]:
    """Make any real provider request fail inside the block.

    Yields:
        Nothing.
    """
    with allow_model_requests(False):
        yield
