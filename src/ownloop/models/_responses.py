"""`OpenAIResponsesModel`: the model port over the Responses API."""

from __future__ import annotations

import re
from typing import Any

import openai

from ownloop.contracts import ModelRequest, ModelResponse, OutputMode
from ownloop.models._adapter import Fail, OpenAIAdapter
from ownloop.models._compat import CompatProfile
from ownloop.models._normalize import ParsedTurn
from ownloop.models._response import to_model_response
from ownloop.models._responses_convert import parse_response, responses_body

__all__ = ["OpenAIResponsesModel", "is_reasoning_model"]

_REASONING = re.compile(r"(^|[/:._-])(o\d|gpt-5(?!-chat)|codex)", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """Guess from its name whether a model reasons (o-series, gpt-5 except gpt-5-chat, codex).

    Args:
        model: The model (or deployment) name.

    Returns:
        Whether to ask for encrypted reasoning by default.
    """
    return _REASONING.search(model) is not None


class OpenAIResponsesModel(OpenAIAdapter):
    """The model port over ``/responses``, stateless (``store=false`` with the openai profile).

    Every output item (reasoning, message, function call) is kept as an opaque provider item and
    sent back inline on the next turn, so reasoning models keep their reasoning across a tool loop
    without the server storing anything; tool results go back as ``function_call_output`` keyed
    by ``call_id``.

    Args:
        model: The model name.
        reasoning: Ask for encrypted reasoning (``include``), which reasoning models need to keep
            reasoning across a stateless tool loop and other models reject; guessed from the
            model's name when ``None`` (set it for a deployment with a name of its own).
        api_key: As for `OpenAIAdapter`.
        base_url: As for `OpenAIAdapter`.
        compat: As for `OpenAIAdapter`.
        timeout_s: As for `OpenAIAdapter`.
        connect_timeout_s: As for `OpenAIAdapter`.
        client: As for `OpenAIAdapter`.
    """

    @property
    def output_mode(self) -> OutputMode:
        """How this adapter asks for a typed answer by default: ``native``.

        The Responses API takes the answer's JSON schema as ``text.format``.
        """
        return "native"

    def __init__(
        self,
        model: str | None = None,
        *,
        reasoning: bool | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        compat: str | CompatProfile | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            compat=compat,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            client=client,
        )
        self.reasoning = is_reasoning_model(self.model_name) if reasoning is None else reasoning

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Ask the server for the next step.

        Args:
            request: The conversation, eligible tools and settings.

        Returns:
            Text, tool calls, or an explicit stop (a refusal, a content filter, an incomplete
            response).

        Raises:
            ProviderError: On any failure, `TransientModelError` when retrying may help.
            ConfigurationError: If model requests are switched off.
        """
        body = responses_body(
            request, model=self.model_name, profile=self.profile, reasoning=self.reasoning
        )

        def parse(payload: Any, fail: Fail) -> ParsedTurn:
            return parse_response(payload, fail=fail)

        turn, request_id, ttft = await self._exchange("responses", body, parse)
        return to_model_response(
            turn,
            request,
            fallback_model=self.model_name,
            request_id=request_id,
            time_to_first_token_s=ttft,
        )
