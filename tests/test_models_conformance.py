"""Conformance: every recorded exchange in tests/fixtures/openai, replayed over real HTTP.

For each fixture a local server replays the recorded responses (status, headers, body or SSE
stream) to the real `openai` client inside our adapter. Each outcome, read through the public
`ModelResponse` / `ProviderError`, must equal the fixture's normalized ``expected`` turn, and every
request body we send must validate against the OpenAPI request schema.

How the normalized fields map to ownloop's contracts (the mapping, not the expectations, is ours):

- ``text`` is ``final_output``; ``tool_calls`` are ``tool_calls`` (arguments parsed from JSON);
  ``normalized_tool_calls`` win over ``tool_calls`` when present (the preferred behaviour).
- An expected id ``<synthesized...>`` or one the conversation already used must come back as a
  fresh id, unique in the run (ids are unique within a run; repeated ``call_0`` is renamed).
- ``usage``: ``TokenUsage`` has no separate total; ``output_tokens`` counts every billed output
  token, so when a provider reports ``total > input + output`` (xAI, Gemini: hidden reasoning only
  in the total) ours is ``total - input``; input, total, reasoning and cached compare exactly.
- ``finish_reason``: ours is ``tool_calls`` with calls, ``length`` / ``content_filter`` as an
  explicit stop, else ``stop``; ``finish_reason_normalized`` wins when present.
- ``reasoning_text``: must never appear in the text; the ``deepseek`` profile keeps it verbatim.
- Responses ``output_items`` are the opaque ``provider_items`` (type, item id, call id, name,
  arguments, encrypted content, summary and content parts, text, phase); ``response_id`` is
  ``provider_request_id``; ``status`` is ``completed`` for any returned response.
- Errors: ``category``, ``retryable``, ``http_status``, ``retry_after_seconds`` and ``param`` are
  the `ProviderError` fields; codes and quoted messages must appear in its message.
- Not compared, by design: ``store`` (the echo of the recorded request's setting; the requests we
  send are checked instead), ``choices_count`` and ``args_from_deltas`` (properties of the input).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from ownloop.exceptions import ProviderError
from ownloop.models import OpenAIChatModel, OpenAIResponsesModel, allow_model_requests

from .openai_server import CONFORMANCE, OpenAIServer, Received, Reply, request_schema_errors

FOLDERS = {"chat": 15, "chat-stream": 5, "responses": 12, "errors": 23, "quirks": 22}
FIXTURES = sorted(path for folder in FOLDERS for path in (CONFORMANCE / folder).glob("*.json"))

# Where a fixture's normalized expectation is itself wrong, the corrected value and why.
CORRECTIONS: dict[tuple[str, int, str], tuple[Any, str]] = {
    ("quirks/rec-snowflake-cortex-zero-value-fields", 1, "finish_reason_normalized"): (
        "stop",
        "turn 2 is a text-only answer with no tool calls; the fixture's own MUST infers "
        "'tool_calls' only 'because tool_calls is non-empty', so a correct adapter reports stop",
    ),
}
PROFILES = {"openai": "openai", "azure-openai": "openai", "deepseek": "deepseek"}


def _profile(provider: str) -> str:
    if provider.startswith("google-gemini"):
        return "gemini"
    return PROFILES.get(provider, "compatible")


def _reply(response: dict[str, Any]) -> Reply:
    headers = dict(response.get("headers") or {})
    if "sse_raw" in response:
        pieces = [piece + "\n\n" for piece in response["sse_raw"].split("\n\n") if piece.strip()]
        headers.setdefault("content-type", "text/event-stream")
        return Reply(response["status"], headers, events=pieces)
    if "sse_events" in response:
        pieces = []
        for event in response["sse_events"]:
            prefix = f"event: {event['event']}\n" if event.get("event") else ""
            pieces.append(f"{prefix}data: {json.dumps(event['data'])}\n\n")
        headers.setdefault("content-type", "text/event-stream")
        return Reply(response["status"], headers, events=pieces)
    headers.setdefault("content-type", "application/json")
    return Reply(response["status"], headers, body=response.get("body"))


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _opening(body: dict[str, Any] | None, fixture_id: str) -> list[Message]:
    """The conversation's opening messages, read from a recorded request body."""
    if body is None:
        return [UserMessage(content=f"Conformance case {fixture_id}.")]
    opening: list[Message] = []
    if isinstance(body.get("instructions"), str):
        opening.append(SystemMessage(content=body["instructions"]))
    entries = body.get("messages") or body.get("input")
    if isinstance(entries, str):
        entries = [{"role": "user", "content": entries}]
    for entry in entries or []:
        role = entry.get("role")
        if role not in {"system", "developer", "user"}:
            break
        content = _text(entry.get("content"))
        opening.append(
            UserMessage(content=content) if role == "user" else SystemMessage(content=content)
        )
    return opening or [UserMessage(content=f"Conformance case {fixture_id}.")]


def _tools(body: dict[str, Any] | None, expected: list[dict[str, Any]]) -> tuple[ToolSpec, ...]:
    specs: dict[str, ToolSpec] = {}
    for tool in (body or {}).get("tools") or []:
        function = tool.get("function", tool)
        name = function.get("name")
        if tool.get("type") != "function" or not name:
            continue
        specs[name] = ToolSpec(
            name=name,
            description=function.get("description") or "",
            parameters=function.get("parameters") or {"type": "object", "properties": {}},
            strict=bool(function.get("strict")),
        )
    for turn in expected:  # cases recorded without a request: declare the tools they call
        for call in turn.get("tool_calls") or []:
            if call["name"] not in specs and call["name"] != "parallel":
                specs[call["name"]] = ToolSpec(
                    name=call["name"], parameters={"type": "object", "properties": {}}, strict=False
                )
    return tuple(specs.values())


def _tool_outputs(body: dict[str, Any] | None) -> list[str]:
    entries = (body or {}).get("messages") or (body or {}).get("input") or []
    outputs = []
    for entry in entries if isinstance(entries, list) else []:
        if entry.get("role") == "tool":
            outputs.append(_text(entry.get("content")))
        elif entry.get("type") == "function_call_output":
            outputs.append(str(entry.get("output")))
    return outputs


def _continues(body: dict[str, Any] | None) -> bool:
    return bool(_tool_outputs(body))


class Conversation:
    """Drives one fixture: builds each request, continuing the dialogue where the case did."""

    def __init__(self, fixture: dict[str, Any]) -> None:
        self.fixture = fixture
        first = next((i["request"]["body"] for i in fixture["interactions"] if i["request"]), None)
        self.tools = _tools(first, fixture["expected"]["turns"])
        self.messages: list[Message] = _opening(first, fixture["id"])
        self.last: ModelResponse | None = None

    def request(self, index: int, interaction: dict[str, Any]) -> ModelRequest:
        """Build the request for one interaction."""
        body = interaction["request"]["body"] if interaction["request"] else None
        if index and self.last is not None and _continues(body):
            outputs = _tool_outputs(body)
            self.messages.append(
                AssistantMessage(
                    content=self.last.final_output,
                    tool_calls=self.last.tool_calls,
                    provider_items=self.last.provider_items,
                )
            )
            for position, call in enumerate(self.last.tool_calls):
                content = outputs[position] if position < len(outputs) else "ok"
                self.messages.append(ToolMessage(call_id=call.id, name=call.name, content=content))
            if not self.last.tool_calls:
                self.messages.append(UserMessage(content="Please continue."))
        elif index and body is not None and not _continues(body):
            self.messages = _opening(body, self.fixture["id"])
        streamed = "sse_raw" in interaction["response"] or "sse_events" in interaction["response"]
        return ModelRequest(
            run_id="conformance",
            step=index + 1,
            messages=tuple(self.messages),
            tools=self.tools,
            settings=ModelSettings(stream=streamed),
        )


def _arguments(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _earlier_ids(request: ModelRequest) -> set[str]:
    return {
        call.id
        for message in request.messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }


def _check_id(ours: str, expected: str, earlier: set[str], seen: set[str]) -> None:
    assert ours not in seen, f"id {ours} repeats in the turn"
    if expected.startswith("<synthesized") or expected in earlier:
        assert ours
        assert ours != expected
        assert ours not in earlier
    else:
        assert ours == expected


def _check_usage(ours: ModelResponse, expected: dict[str, Any] | None) -> None:
    usage = ours.usage
    if expected is None or usage.estimated:  # no usage reported: ownloop estimates it
        assert usage.estimated
        assert expected is None or expected["total_tokens"] == 0
        return
    assert usage.input_tokens == expected["input_tokens"]
    assert usage.total_tokens == expected["total_tokens"]
    hidden = expected["total_tokens"] - expected["input_tokens"]
    assert usage.output_tokens == max(expected["output_tokens"], hidden)
    if "reasoning_tokens" in expected:
        assert usage.reasoning_tokens == expected["reasoning_tokens"]
    if "cached_input_tokens" in expected:
        assert usage.cached_tokens == expected["cached_input_tokens"]


def _finish(ours: ModelResponse) -> str:
    if ours.tool_calls:
        return "tool_calls"
    reason = ours.stop_reason or ""
    if reason.startswith("max_output_tokens"):
        return "length"
    return "content_filter" if reason.startswith("content_filter") else "stop"


def _check_items(ours: ModelResponse, expected: list[dict[str, Any]], earlier: set[str]) -> None:
    items = [item for item in ours.provider_items if isinstance(item, dict)]
    assert [item["type"] for item in items] == [item["type"] for item in expected]
    for item, want in zip(items, expected, strict=True):
        assert item.get("id") == want.get("item_id")
        if want["type"] == "function_call":
            _check_id(str(item["call_id"]), want["call_id"], earlier, set())
            assert (item["name"], _arguments(item["arguments"])) == (
                want["name"],
                want["arguments"],
            )
        elif want["type"] == "reasoning":
            assert bool(item.get("encrypted_content")) == want["has_encrypted_content"]
            assert len(item.get("summary") or []) == want["summary_parts"]
            assert len(item.get("content") or []) == want["content_parts"]
        else:
            texts = [part.get("text", "") for part in item["content"]]
            assert "".join(texts) == want["text"]
            assert item.get("phase") == want.get("phase")


def check_turn(
    case: str,
    index: int,
    ours: ModelResponse,
    want: dict[str, Any],
    request: ModelRequest,
) -> None:
    """Compare one successful turn with the fixture's normalized expectation."""
    earlier = _earlier_ids(request)
    seen: set[str] = set()
    if "text" in want:
        assert ours.final_output == want["text"]
    calls = want.get("normalized_tool_calls", want.get("tool_calls", []))
    assert [call.name for call in ours.tool_calls] == [call["name"] for call in calls]
    for call, expected in zip(ours.tool_calls, calls, strict=True):
        _check_id(call.id, expected.get("id", expected.get("call_id")), earlier, seen)
        seen.add(call.id)
        assert _arguments(call.arguments) == expected["arguments"]
    if "usage" in want:
        _check_usage(ours, want["usage"])
    finish = want.get("finish_reason_normalized", want.get("finish_reason"))
    finish = CORRECTIONS.get((case, index, "finish_reason_normalized"), (finish, ""))[0]
    if isinstance(finish, str) and finish:
        assert _finish(ours) == finish
    if want.get("reasoning_text"):
        assert want["reasoning_text"] not in (ours.final_output or "")
    if "output_items" in want:
        _check_items(ours, want["output_items"], earlier)
        assert want["status"] == "completed"
    if "response_id" in want:
        assert ours.provider_request_id == want["response_id"]


def check_error(error: ProviderError, want: dict[str, Any]) -> None:
    """Compare one failed turn with the fixture's normalized error."""
    assert (error.category, error.retryable) == (want["category"], want["retryable"])
    assert error.status == want["http_status"]
    if "retry_after_seconds" in want:
        assert error.retry_after == want["retry_after_seconds"]
    if "param" in want:
        assert error.parameter == want["param"]
    if want.get("error_code") is not None:
        assert f"code {want['error_code']}" in error.message
    for key in ("message_contains", "upstream_message_contains", "failed_generation_contains"):
        if key in want:
            assert want[key] in error.message
    if "tool_name" in want:
        assert want["tool_name"] in error.message
    if want.get("in_stream"):
        assert "in the stream" in error.message


def check_partial(error: ProviderError) -> None:
    """A stream cut off mid-way is a typed, retryable stream error, never a crash."""
    assert (error.category, error.retryable) == ("stream_error", True)


def _adapter(fixture: dict[str, Any], url: str) -> OpenAIChatModel | OpenAIResponsesModel:
    adapter = OpenAIResponsesModel if fixture["api"] == "responses" else OpenAIChatModel
    return adapter(
        "conformance-model",
        api_key="sk-conformance",
        base_url=url,
        compat=_profile(fixture["provider"]),
    )


def _check_request(received: Received, fixture: dict[str, Any]) -> None:
    assert request_schema_errors(received) == []
    body = received.body
    if fixture["api"] == "responses":
        calls = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
        if _profile(fixture["provider"]) == "openai":
            assert body["store"] is False
    else:
        calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
        outputs = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert len(set(calls)) == len(calls), "a call id repeats in the request"
    assert set(outputs) <= set(calls), "a tool result answers no call"


async def _play(fixture: dict[str, Any], server: OpenAIServer) -> list[Any]:
    outcomes: list[Any] = []
    conversation = Conversation(fixture)
    async with _adapter(fixture, server.url) as model:
        for index, interaction in enumerate(fixture["interactions"]):
            server.add(_reply(interaction["response"]))
            request = conversation.request(index, interaction)
            try:
                conversation.last = await model.respond(request)
                outcomes.append((request, conversation.last))
            except ProviderError as error:
                outcomes.append((request, error))
    return outcomes


def test_conformance_cases_are_all_present() -> None:
    """The conformance corpus is in the repository, with every case of the index (never skipped)."""
    assert CONFORMANCE.is_dir(), f"missing {CONFORMANCE}: the corpus is part of the repository"
    for folder, count in FOLDERS.items():
        assert len(list((CONFORMANCE / folder).glob("*.json"))) == count, folder


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_conformance_case(path: Path) -> None:
    """The adapter's outcome for each recorded exchange equals the case's normalized outcome."""
    fixture = json.loads(path.read_text(encoding="utf-8"))
    case = fixture["id"]
    with OpenAIServer() as server, allow_model_requests(True):
        outcomes = asyncio.run(_play(fixture, server))
    assert server.unplayed == 0
    for index, ((request, outcome), want) in enumerate(
        zip(outcomes, fixture["expected"]["turns"], strict=True)
    ):
        if want.get("partial") is True:
            assert isinstance(outcome, ProviderError), outcome
            check_partial(outcome)
        elif want.get("kind") == "error":
            assert isinstance(outcome, ProviderError), outcome
            check_error(outcome, want)
        else:
            assert isinstance(outcome, ModelResponse), outcome
            check_turn(case, index, outcome, want, request)
    for received in server.requests:
        _check_request(received, fixture)
