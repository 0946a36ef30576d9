"""The Responses API, both ways: ownloop's request to input items, a response to a turn.

Pure mapping, no I/O. Every output item the model produced (reasoning, message, function call) is
kept as an opaque provider item in a replay-ready, spec-valid shape and sent back in the same
place on the next turn, so ``store=false`` works: reasoning travels inline, never decoded. Tool
results go back as ``function_call_output`` keyed by ``call_id`` (never the item id).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ownloop.contracts import (
    AssistantMessage,
    JsonValue,
    Message,
    ModelRequest,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from ownloop.exceptions import ProviderError
from ownloop.models._chat_convert import tool_choice
from ownloop.models._compat import CompatProfile
from ownloop.models._normalize import (
    ParsedTurn,
    RawCall,
    arguments_text,
    normalize_finish,
    token_usage,
)
from ownloop.models._output_format import responses_text_format

__all__ = ["parse_response", "responses_body", "sanitize_item"]

_REPLAYED = frozenset({"reasoning", "message", "function_call"})
_WRAPPERS = frozenset({"parallel", "multi_tool_use.parallel"})


def responses_body(
    request: ModelRequest, *, model: str, profile: CompatProfile, reasoning: bool
) -> dict[str, Any]:
    """Build the Responses API request body for a request.

    Args:
        request: ownloop's request.
        model: The model name to ask for.
        profile: What the server accepts.
        reasoning: Ask for encrypted reasoning (reasoning models only: others reject it).

    Returns:
        The JSON-ready body.
    """
    body: dict[str, Any] = {"model": model, "input": _input(request.messages, profile)}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": spec.name,
                **({"description": spec.description} if spec.description else {}),
                "parameters": spec.parameters,
                "strict": spec.strict and profile.strict_tools,
            }
            for spec in request.tools
        ]
        choice = tool_choice(request.settings.tool_choice, profile)
        if isinstance(choice, dict):
            choice = {"type": "function", "name": choice["function"]["name"]}
        if choice is not None:
            body["tool_choice"] = choice
    if profile.store:
        body["store"] = False
        if reasoning:
            body["include"] = ["reasoning.encrypted_content"]
    settings = request.settings
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_output_tokens is not None:
        body["max_output_tokens"] = settings.max_output_tokens
    if settings.parallel_tool_calls is not None and request.tools and profile.parallel_tool_calls:
        body["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.stream:
        body["stream"] = True
    text = responses_text_format(request, profile)
    if text is not None:
        body["text"] = text
    return body


def _input(messages: Sequence[Message], profile: CompatProfile) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    wrappers: set[str] = set()
    grouped: dict[str, list[Any]] = {}
    for message in messages:
        if isinstance(message, SystemMessage):
            items.append({"role": profile.system_role, "content": message.content})
        elif isinstance(message, UserMessage):
            items.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, wrappers))
        else:
            items.extend(_output_item(message, wrappers, grouped))
    for item in items:
        if item.get("type") == "function_call_output" and item["call_id"] in grouped:
            item["output"] = json.dumps(grouped[item["call_id"]], ensure_ascii=False)
    return items


def _assistant_items(message: AssistantMessage, wrappers: set[str]) -> list[dict[str, Any]]:
    replayed = [
        dict(item)
        for item in message.provider_items
        if isinstance(item, dict) and item.get("type") in _REPLAYED
    ]
    covered = {item.get("call_id") for item in replayed if item["type"] == "function_call"}
    for item in replayed:
        if item["type"] == "function_call" and item.get("name") in _WRAPPERS:
            wrappers.add(str(item.get("call_id")))
    if not replayed and message.content is not None:
        replayed.append({"type": "message", "role": "assistant", "content": message.content})
    for call in message.tool_calls:
        parent = call.id.rpartition("#")[0]
        if call.id in covered or parent in covered:
            continue
        replayed.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": arguments_text(call.arguments),
            }
        )
    return replayed


def _output_item(
    message: ToolMessage, wrappers: set[str], grouped: dict[str, list[Any]]
) -> list[dict[str, Any]]:
    parent = message.call_id.rpartition("#")[0]
    if parent not in wrappers:
        return [
            {"type": "function_call_output", "call_id": message.call_id, "output": message.content}
        ]
    # The calls fanned out of one ``multi_tool_use.parallel`` item answer it together.
    results = grouped.setdefault(parent, [])
    results.append({"recipient_name": f"functions.{message.name}", "output": message.content})
    if len(results) > 1:
        return []
    return [{"type": "function_call_output", "call_id": parent, "output": ""}]


def sanitize_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """Return an output item in the shape the Responses API accepts back as input.

    Output-only fields (``status: null``, log probabilities, annotations) are dropped; reasoning
    content and encrypted content are kept exactly as received.

    Args:
        item: An output item as the server sent it.

    Returns:
        The replayable item, or ``None`` for item types ownloop does not replay.
    """
    kind = item.get("type")
    if kind == "reasoning":
        kept: dict[str, Any] = {
            key: item[key] for key in ("id", "summary", "encrypted_content") if key in item
        }
        kept["summary"] = item.get("summary") if isinstance(item.get("summary"), list) else []
        if isinstance(item.get("content"), list) and item["content"]:
            kept["content"] = item["content"]
        return {"type": "reasoning", **kept}
    if kind == "function_call":
        call: dict[str, Any] = {"type": "function_call"}
        if isinstance(item.get("id"), str) and item["id"]:
            call["id"] = item["id"]
        arguments = item.get("arguments")
        call["call_id"] = str(item.get("call_id") or "")
        call["name"] = str(item.get("name") or "")
        call["arguments"] = arguments_text(arguments if isinstance(arguments, str | dict) else None)
        return call
    if kind == "message":
        return _sanitize_message(item)
    return None


def _sanitize_message(item: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    content = item.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "refusal":
            parts.append({"type": "refusal", "refusal": str(part.get("refusal") or "")})
        elif isinstance(part.get("text"), str):
            text = part["text"]
            parts.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    kept: dict[str, Any] = {"type": "message", "role": "assistant", "status": "completed"}
    if isinstance(item.get("id"), str) and item["id"]:
        kept["id"] = item["id"]
    if isinstance(item.get("phase"), str):
        kept["phase"] = item["phase"]
    kept["content"] = parts
    return kept


def _reasoning_text(item: dict[str, Any]) -> str:
    """The readable text of a reasoning item: its summary and its reasoning content parts."""
    parts: list[Any] = []
    for key in ("summary", "content"):
        value = item.get(key)
        if isinstance(value, list):
            parts.extend(value)
    texts = (part.get("text") for part in parts if isinstance(part, dict))
    return "".join(text for text in texts if isinstance(text, str))


def _read_items(output: Any, turn: ParsedTurn) -> None:
    texts: list[str] = []
    for raw in output if isinstance(output, list) else ():
        item = sanitize_item(raw) if isinstance(raw, dict) else None
        if item is None:
            continue
        turn.items.append(item)
        if item["type"] == "reasoning":
            turn.reasoning += _reasoning_text(raw)
        if item["type"] == "function_call" and item["name"]:
            turn.calls.append(RawCall(item["call_id"], item["name"], item["arguments"], item))
        elif item["type"] == "message":
            for part in item["content"]:
                if part["type"] == "refusal" and part["refusal"]:
                    turn.refusal = part["refusal"]
                elif part["type"] == "output_text" and part["text"]:
                    texts.append(part["text"])
    turn.text = "\n".join(texts) if "".join(texts).strip() else None


def parse_response(body: Any, *, fail: Callable[[Any], ProviderError]) -> ParsedTurn:
    """Read a Responses API response (or an assembled stream) into a turn.

    Args:
        body: The decoded response object.
        fail: Builds the error to raise for a failed response from its ``error`` object.

    Returns:
        The turn; an incomplete response finishes with ``length`` or ``content_filter``.

    Raises:
        ProviderError: If the response failed.
    """
    body = body if isinstance(body, dict) else {}
    status = body.get("status")
    if status == "failed":
        raise fail(body.get("error") or body)
    turn = ParsedTurn(usage=token_usage(body.get("usage"), prefix=("input", "output")))
    turn.model = body.get("model") if isinstance(body.get("model"), str) else None
    turn.response_id = body.get("id") if isinstance(body.get("id"), str) and body["id"] else None
    _read_items(body.get("output"), turn)
    if turn.text is None and isinstance(body.get("output_text"), str) and body["output_text"]:
        turn.text = body["output_text"]
    raw_finish: JsonValue = "stop"
    details = body.get("incomplete_details")
    if status == "incomplete" and isinstance(details, dict):
        raw_finish = "content_filter" if details.get("reason") == "content_filter" else "length"
    turn.finish = normalize_finish(raw_finish, bool(turn.calls))
    return turn
