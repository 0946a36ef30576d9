"""Chat Completions, both ways: ownloop's request to a request body, a completion to a turn.

Pure mapping, no I/O. Requests follow the compatibility profile (which fields a server takes);
replies are read defensively: content ``""`` or missing means no text, tool calls may come without
ids, types or arguments, in a second choice, as an object instead of a list, or (when the profile
asks) written into the text. Vendor fields a server needs back within a tool loop travel as opaque
provider items and are replayed only while that loop lasts (after the last user message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ownloop.contracts import (
    AssistantMessage,
    JsonValue,
    Message,
    ModelRequest,
    SystemMessage,
    ToolSpec,
    UserMessage,
)
from ownloop.models._compat import CompatProfile
from ownloop.models._fold import ends_with_tool_results, fold_tool_results
from ownloop.models._normalize import (
    ParsedTurn,
    RawCall,
    arguments_text,
    as_dict,
    as_int,
    normalize_finish,
    text_of,
    token_usage,
)
from ownloop.models._output_format import chat_response_format
from ownloop.models._text_calls import recognize_text_tool_calls

__all__ = ["chat_body", "parse_completion", "tool_choice"]

_REASONING_ITEM = "chat.reasoning_content"
_EXTRA_ITEM = "chat.tool_call_extra"


def chat_body(
    request: ModelRequest,
    *,
    model: str,
    profile: CompatProfile,
    messages: list[dict[str, Any]] | None = None,
    stop: Sequence[str] = (),
) -> dict[str, Any]:
    """Build the Chat Completions request body for a request.

    Args:
        request: ownloop's request.
        model: The model name to ask for.
        profile: What the server accepts.
        messages: Wire messages to send instead of the request's (the text ReAct adapter
            renders its own, and then offers no native tools).
        stop: Stop sequences to send (when the profile allows them).

    Returns:
        The JSON-ready body.
    """
    native = messages is None
    offer = bool(request.tools) and native
    if messages is None and profile.fold_tool_results:
        offer = offer and not ends_with_tool_results(request.messages)
        messages = _messages(fold_tool_results(request.messages), profile)
    wire = _messages(request.messages, profile) if messages is None else messages
    body: dict[str, Any] = {"model": model, "messages": wire}
    settings = request.settings
    if offer:
        body["tools"] = [_tool(spec, profile) for spec in request.tools]
        choice = tool_choice(settings.tool_choice, profile)
        if choice is not None:
            body["tool_choice"] = choice
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_output_tokens is not None:
        body[profile.max_tokens_field] = settings.max_output_tokens
    tools_sent = "tools" in body
    if settings.parallel_tool_calls is not None and tools_sent and profile.parallel_tool_calls:
        body["parallel_tool_calls"] = settings.parallel_tool_calls
    if stop and profile.stop_sequences:
        body["stop"] = list(stop)
    response_format = chat_response_format(request, profile) if native else None
    if response_format is not None:
        body["response_format"] = response_format
    if settings.stream and (profile.stream_with_tools or "tools" not in body):
        body["stream"] = True
        if profile.stream_usage:
            body["stream_options"] = {"include_usage": True}
    return body


def tool_choice(chosen: str | None, profile: CompatProfile) -> str | dict[str, Any] | None:
    """Return the chat ``tool_choice`` to send with offered tools, or ``None`` to send none.

    Args:
        chosen: ``ModelSettings.tool_choice``.
        profile: Whether the server needs an explicit choice and accepts ``required``.

    Returns:
        ``auto``, ``none``, ``required``, a named function, or ``None``.
    """
    if chosen is None:
        return "auto" if profile.explicit_tool_choice else None
    if chosen == "required" and not profile.required_tool_choice:
        return "auto"
    if chosen in {"auto", "none", "required"}:
        return chosen
    return {"type": "function", "function": {"name": chosen}}


def _tool(spec: ToolSpec, profile: CompatProfile) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec.name, "parameters": spec.parameters}
    if spec.description:
        function["description"] = spec.description
    if spec.strict and profile.strict_tools:
        function["strict"] = True
    return {"type": "function", "function": function}


def _messages(messages: Sequence[Message], profile: CompatProfile) -> list[dict[str, Any]]:
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    wire: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            wire.append({"role": profile.system_role, "content": message.content})
        elif isinstance(message, UserMessage):
            wire.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            replay = profile.replay_vendor_fields and position > last_user
            wire.append(_assistant(message, profile, replay=replay))
        else:
            wire.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )
    return wire


def _assistant(
    message: AssistantMessage, profile: CompatProfile, *, replay: bool
) -> dict[str, Any]:
    extras: dict[str, dict[str, Any]] = {}
    reasoning: str | None = None
    for item in message.provider_items if replay else ():
        if isinstance(item, dict) and item.get("type") == _REASONING_ITEM:
            text = item.get("text")
            reasoning = text if isinstance(text, str) else None
        elif isinstance(item, dict) and item.get("type") == _EXTRA_ITEM:
            extra, call_id = item.get("extra_content"), item.get("call_id")
            if isinstance(extra, dict) and isinstance(call_id, str):
                extras[call_id] = extra
    wire: dict[str, Any] = {"role": "assistant"}
    if message.content is not None:
        wire["content"] = message.content
    elif message.tool_calls:
        wire["content"] = None if profile.null_assistant_content else ""
    else:
        wire["content"] = ""
    if reasoning is not None:
        wire["reasoning_content"] = reasoning
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_text(call.arguments)},
                **({"extra_content": extras[call.id]} if call.id in extras else {}),
            }
            for call in message.tool_calls
        ]
    return wire


def _choices(body: dict[str, Any]) -> list[dict[str, Any]]:
    choices = body.get("choices")
    if isinstance(choices, list):
        found = [choice for choice in choices if isinstance(choice, dict)]
        return sorted(found, key=lambda c: as_int(c.get("index")))
    if isinstance(body.get("message"), dict):  # Ollama's native /api/chat shape
        return [{"message": body["message"], "finish_reason": body.get("done_reason")}]
    return []


def _calls(message: dict[str, Any], keep_extra: bool, items: list[JsonValue]) -> list[RawCall]:
    entries = message.get("tool_calls")
    if isinstance(entries, dict):
        entries = [entries]
    calls: list[RawCall] = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("function"), dict):
            continue  # a zero-value placeholder such as {"custom": {"name": ""}}
        function = entry["function"]
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        if not name and not function.get("arguments"):
            continue  # nothing but zero values
        call = RawCall(entry.get("id"), name, function.get("arguments"))
        extra = entry.get("extra_content")
        if keep_extra and isinstance(extra, dict):
            call.item = {"type": _EXTRA_ITEM, "call_id": call.id or "", "extra_content": extra}
            items.append(call.item)
        calls.append(call)
    legacy = message.get("function_call")
    legacy_name = legacy.get("name") if isinstance(legacy, dict) else None
    if not calls and isinstance(legacy, dict) and isinstance(legacy_name, str) and legacy_name:
        calls.append(RawCall(None, legacy["name"], legacy.get("arguments")))
    return calls


def reasoning_text(message: dict[str, Any]) -> str:
    """The reasoning a chat message carries (``reasoning_content``, or ``reasoning`` as text).

    Servers send it under either name (llama.cpp, vLLM, DeepSeek, OpenRouter); it costs tokens
    whether or not the profile replays it.
    """
    return "".join(
        text
        for key in ("reasoning_content", "reasoning")
        if isinstance(text := message.get(key), str)
    )


def parse_completion(
    body: Any, *, profile: CompatProfile, declared: Sequence[str] = ()
) -> ParsedTurn:
    """Read a chat completion (or an assembled stream) into a turn.

    Every choice is read: text comes from the first choice that has any, tool calls from all of
    them in order (a server that puts the call in a second choice loses nothing).

    Args:
        body: The decoded response body.
        profile: Decides whether vendor fields are kept and text tool calls recognised.
        declared: The names of the tools offered, for text tool-call recognition.

    Returns:
        The turn.
    """
    body = body if isinstance(body, dict) else {}
    turn = ParsedTurn(usage=token_usage(body.get("usage"), prefix=("prompt", "completion")))
    turn.model = body.get("model") if isinstance(body.get("model"), str) else None
    turn.response_id = body.get("id") if isinstance(body.get("id"), str) and body["id"] else None
    raw_finish: Any = None
    for choice in _choices(body):
        message = as_dict(choice.get("message"))
        if turn.text is None:
            turn.text = text_of(message.get("content"))
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip() and turn.refusal is None:
            turn.refusal = refusal
        reasoning = message.get("reasoning_content")
        if profile.replay_vendor_fields and isinstance(reasoning, str) and reasoning:
            turn.items.append({"type": _REASONING_ITEM, "text": reasoning})
        turn.reasoning += reasoning_text(message)
        found = _calls(message, profile.replay_vendor_fields, turn.items)
        turn.calls.extend(found)
        finish = choice.get("finish_reason", message.get("finish_reason"))
        if raw_finish is None or found:
            raw_finish = finish
    if profile.text_tool_calls and not turn.calls and turn.text is not None:
        recognised = recognize_text_tool_calls(turn.text, declared)
        if recognised is not None:
            turn.text = recognised[0]
            turn.calls = [RawCall(None, name, arguments) for name, arguments in recognised[1]]
    turn.finish = normalize_finish(raw_finish, bool(turn.calls))
    return turn
