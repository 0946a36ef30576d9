"""`OpenAIChatModel`: the model port over the Chat Completions API."""

from __future__ import annotations

from typing import Any

from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.models._adapter import Fail, OpenAIAdapter
from ownloop.models._chat_convert import chat_body, parse_completion
from ownloop.models._deltas import report_text_delta
from ownloop.models._normalize import ParsedTurn
from ownloop.models._response import to_model_response

__all__ = ["OpenAIChatModel"]


class OpenAIChatModel(OpenAIAdapter):
    """The model port over ``/chat/completions``: OpenAI and every compatible server.

    Messages become chat messages (assistant ``tool_calls``, ``tool`` messages keyed by
    ``tool_call_id``), tools become strict function tools, and replies come back with tool calls
    whose ids are unique within the run. ``ModelSettings.stream`` streams the reply and records the
    time to the first token; a profile that cannot stream with tools (``llamacpp``) sends such a
    request whole and replays its text to the stream listeners. See `OpenAIAdapter` for the
    arguments.
    """

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Ask the server for the next step.

        Args:
            request: The conversation, eligible tools and settings.

        Returns:
            Text, tool calls, or an explicit stop (a refusal, a content filter, a cut-off reply).

        Raises:
            ProviderError: On any failure, `TransientModelError` when retrying may help.
            ConfigurationError: If model requests are switched off.
        """
        body = chat_body(request, model=self.model_name, profile=self.profile)
        declared = [spec.name for spec in request.tools]

        def parse(payload: Any, fail: Fail) -> ParsedTurn:
            return parse_completion(payload, profile=self.profile, declared=declared)

        turn, request_id, ttft = await self._exchange("chat", body, parse)
        if request.settings.stream and not body.get("stream") and turn.text:
            report_text_delta(turn.text)  # sent whole (the profile's stream_with_tools): replay
        return to_model_response(
            turn,
            request,
            fallback_model=self.model_name,
            request_id=request_id,
            time_to_first_token_s=ttft,
        )
