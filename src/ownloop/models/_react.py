"""`ReActTextModel`: tool use for models without tool calling, in the text ReAct format.

The model sees the tools in its prompt and answers ``Thought`` / ``Action`` / ``Action Input`` or
``Thought`` / ``Final Answer``. A parsed action becomes an ordinary `ToolCall`, so the loop
validates it against the tool's strict schema exactly like a native call (a bad name or bad JSON
is fed back as an observation). A reply that cannot be parsed at all is handled here, without the
loop: the adapter adds the reply and a "rewrite this turn in the format" observation and asks
again, at most ``max_format_retries`` times within the same step, summing the usage of every
request; if the model still does not comply, the step fails with a permanent ``invalid_response``.
Each re-ask is a model attempt like any other: it asks the run's budget first (attempts, tokens,
money; see `ownloop.budgets.ask_send_budget`) and is not sent when refused, and the bad reply it
resends is cut to 16,000 characters, so a re-ask never grows with what the server sent.
"""

from __future__ import annotations

from typing import Any

import openai

from ownloop.contracts import ModelRequest, ModelResponse, OutputMode, TokenUsage
from ownloop.exceptions import ConfigurationError, PermanentModelError
from ownloop.models._adapter import Fail, OpenAIAdapter
from ownloop.models._chat_convert import chat_body, parse_completion
from ownloop.models._compat import CompatProfile
from ownloop.models._normalize import ParsedTurn, RawCall
from ownloop.models._react_format import (
    REPLY_ITEM,
    STOP_SEQUENCE,
    FormatProblem,
    ReactAction,
    format_feedback,
    parse_react,
    react_messages,
)
from ownloop.models._response import to_model_response

__all__ = ["ReActTextModel"]

_MAX_REPLY_CHARS = 16_000


def _add(total: TokenUsage, more: TokenUsage) -> TokenUsage:
    return TokenUsage(
        input_tokens=total.input_tokens + more.input_tokens,
        output_tokens=total.output_tokens + more.output_tokens,
        reasoning_tokens=total.reasoning_tokens + more.reasoning_tokens,
        cached_tokens=total.cached_tokens + more.cached_tokens,
    )


class ReActTextModel(OpenAIAdapter):
    """The model port for models without tool calling, over ``/chat/completions`` in plain text.

    Args:
        model: The model name.
        max_format_retries: How many times one step may ask the model to rewrite a reply it
            could not parse (each one is another request, within the step's time budget).
        api_key: As for `OpenAIAdapter`.
        base_url: As for `OpenAIAdapter`.
        compat: As for `OpenAIAdapter`; the ``stop_sequences`` field decides whether the
            request asks the server to stop at ``Observation:``.
        timeout_s: As for `OpenAIAdapter`.
        connect_timeout_s: As for `OpenAIAdapter`.
        client: As for `OpenAIAdapter`.

    Raises:
        ConfigurationError: If ``max_format_retries`` is negative, or as for `OpenAIAdapter`.
    """

    @property
    def output_mode(self) -> OutputMode:
        """How this adapter asks for a typed answer by default: ``prompted``.

        A text ReAct model is told the schema and answers JSON in its final answer's text.
        """
        return "prompted"

    def __init__(
        self,
        model: str | None = None,
        *,
        max_format_retries: int = 2,
        api_key: str | None = None,
        base_url: str | None = None,
        compat: str | CompatProfile | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if max_format_retries < 0:
            raise ConfigurationError("ReActTextModel.max_format_retries must not be negative")
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            compat=compat,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            client=client,
        )
        self.max_format_retries = max_format_retries

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Ask the model for the next step in the ReAct format and parse it.

        Args:
            request: The conversation, eligible tools and settings.

        Returns:
            One tool call (the parsed action), the final answer, or an explicit stop.

        Raises:
            PermanentModelError: If no reply followed the format within the retries.
            ProviderError: On any failure of a request.
        """
        messages = react_messages(request.messages, request.tools)
        usage = TokenUsage()
        problem = FormatProblem("no reply")

        def parse(payload: Any, fail: Fail) -> ParsedTurn:
            return parse_completion(payload, profile=self.profile)

        for sent in range(1, self.max_format_retries + 2):
            body = chat_body(
                request,
                model=self.model_name,
                profile=self.profile,
                messages=messages,
                stop=(STOP_SEQUENCE,),
            )
            turn, request_id, ttft = await self._exchange(
                "chat", body, parse, spent=usage, sent=sent - 1
            )
            usage = _add(usage, turn.usage)
            turn.usage = usage
            parsed = parse_react(turn.text) if turn.text is not None else None
            if isinstance(parsed, FormatProblem):
                problem = parsed
                messages = [
                    *messages,
                    {"role": "assistant", "content": (turn.text or "")[:_MAX_REPLY_CHARS]},
                    {"role": "user", "content": format_feedback(parsed)},
                ]
                continue
            if parsed is not None:
                turn.items = [{"type": REPLY_ITEM, "text": (turn.text or "")[:_MAX_REPLY_CHARS]}]
            if isinstance(parsed, ReactAction):
                turn.text, turn.calls = None, [RawCall(None, parsed.name, parsed.arguments)]
            elif parsed is not None:
                turn.text = parsed.answer
            response = to_model_response(
                turn,
                request,
                fallback_model=self.model_name,
                request_id=request_id,
                time_to_first_token_s=ttft,
            )
            return response.model_copy(update={"provider_requests": sent})
        raise PermanentModelError(
            f"invalid_response: the model did not follow the ReAct format in "
            f"{self.max_format_retries + 1} replies; last problem: {problem.reason}",
            category="invalid_response",
        )
