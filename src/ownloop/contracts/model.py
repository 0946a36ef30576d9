"""The model port's request and response: provider-neutral, bounded, JSON-ready."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ownloop.contracts._base import Identifier, JsonValue, NonNegativeInt, Record
from ownloop.contracts.messages import Message
from ownloop.contracts.tools import ToolCall, ToolSpec

__all__ = [
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputFormat",
    "OutputMode",
    "TokenUsage",
]

OutputMode = Literal["native", "tool", "prompted"]
"""How a typed final answer is asked for: the provider's structured-output mechanism
(``native``), a final-result tool the model calls (``tool``), or instructions and a JSON answer in
the text (``prompted``)."""


class ModelSettings(Record):
    """Sampling settings passed through to the provider when set.

    Attributes:
        temperature: Sampling temperature.
        max_output_tokens: The most tokens one response may use.
        parallel_tool_calls: Whether the model may propose several calls in one turn.
        stream: Whether the adapter should stream the response (server-sent events).
        tool_choice: Whether the model must, may or must not call a tool when tools are offered:
            ``auto``, ``none``, ``required`` or the name of one offered tool. ``None`` sends nothing
            unless the compatibility profile says the server needs it (then ``auto``).
    """

    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1)
    parallel_tool_calls: bool | None = None
    stream: bool = False
    tool_choice: str | None = Field(default=None, min_length=1, max_length=256)


class TokenUsage(Record):
    """Tokens one model response used, as the provider reported them.

    Attributes:
        input_tokens: Tokens read, including cached ones.
        output_tokens: Tokens written, including reasoning ones.
        reasoning_tokens: Of the output, tokens spent on hidden reasoning.
        cached_tokens: Of the input, tokens served from the provider's cache.
        estimated: Whether the counts are ownloop's estimate because the server reported no
            usage (a stream without usage, a server that omits it).
    """

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    reasoning_tokens: NonNegativeInt = 0
    cached_tokens: NonNegativeInt = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class OutputFormat(Record):
    """The typed final answer a request asks for: its strict JSON schema and how to ask.

    Attributes:
        name: The schema's name (also the final-result tool's name in ``tool`` mode).
        json_schema: The strict JSON schema of the answer (every object closed, every property
            required; optional fields accept ``null``). An answer that is not an object is
            wrapped as ``{"result": ...}``.
        mode: How the adapter asks for it (see `OutputMode`).
        wrapped: Whether the schema wraps a non-object answer in ``{"result": ...}``.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    json_schema: dict[str, JsonValue]
    mode: OutputMode = "native"
    wrapped: bool = False


class ModelRequest(Record):
    """What the loop asks a model port for one step.

    Attributes:
        run_id: The run this request belongs to.
        step: The step number, from 1.
        attempt: The attempt number of this step's model call, from 1.
        messages: The bounded conversation so far.
        tools: The tools this actor may use now.
        settings: Sampling settings.
        output: The typed answer asked for, when the agent has an ``output_type``; ``None``
            asks for text.
    """

    run_id: Identifier
    step: int = Field(ge=1)
    attempt: int = Field(default=1, ge=1)
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = ModelSettings()
    output: OutputFormat | None = None


class ModelResponse(Record):
    """What a model proposed: a final answer, tool calls, or an explicit stop.

    Attributes:
        final_output: The model's answer, when it gives one.
        tool_calls: Tool calls it proposes, in order.
        stop_reason: An explicit stop (for example ``"INSUFFICIENT_EVIDENCE"``).
        usage: Tokens used.
        model: The model name the provider reported.
        provider_request_id: The provider's request id, for support and audit.
        provider_items: Opaque items to echo back on the next turn (never decoded).
        time_to_first_token_s: Seconds until the first streamed token arrived, when streamed.
        provider_requests: Requests the adapter sent to produce this response (more than one
            when it re-asked, e.g. a text ReAct model rewriting an unparseable reply); each
            counts against the run's model attempts.
        notes: What the adapter noticed about the exchange that a reader of the trace should
            know (for example that the server probably never showed the offered tools to the
            model); recorded in the ``model_responded`` event.
    """

    final_output: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = Field(default=None, max_length=512)
    usage: TokenUsage = TokenUsage()
    model: str | None = Field(default=None, max_length=256)
    provider_request_id: Identifier | None = None
    provider_items: tuple[JsonValue, ...] = ()
    time_to_first_token_s: float | None = Field(default=None, ge=0)
    provider_requests: int = Field(default=1, ge=1, le=100)
    notes: tuple[Annotated[str, Field(max_length=1024)], ...] = Field(default=(), max_length=8)
