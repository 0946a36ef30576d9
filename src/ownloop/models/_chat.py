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
        response = to_model_response(
            turn,
            request,
            fallback_model=self.model_name,
            request_id=request_id,
            time_to_first_token_s=ttft,
        )
        if _tools_unseen(body, response):
            response = response.model_copy(update={"notes": (TOOLS_UNSEEN,)})
        return response


TOOLS_UNSEEN = (
    "tools_ignored: tools were offered without tool_choice to a llama.cpp server (the model is "
    "a .gguf file) and no tool call came back; llama-cpp-python's server leaves tools out of the "
    "prompt unless tool_choice is sent: set OWNLOOP_COMPAT=llamacpp (or ModelSettings.tool_choice)"
)
"""The note a response gets when a llama.cpp server probably never showed the model the tools."""


def _tools_unseen(body: dict[str, Any], response: ModelResponse) -> bool:
    """Tools offered without ``tool_choice`` to a ``.gguf`` model, and no tool call came back."""
    model = (response.model or "").lower()
    offered = "tools" in body and "tool_choice" not in body
    return offered and not response.tool_calls and model.endswith(".gguf")
