"""From a parsed turn to the port's `ModelResponse`: tool-call ids and explicit stops.

Tool-call ids are unique within a run: a missing, empty, oversized or repeated id, or one the
conversation already used, is replaced by a stable synthesized one (derived from the run, step,
attempt and response), and a Responses item follows the id assigned to its call. A hallucinated
``multi_tool_use.parallel`` wrapper is fanned out into the calls it wraps. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from ownloop.contracts import (
    MAX_ID_CHARS,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    TokenUsage,
    ToolCall,
    ToolMessage,
)
from ownloop.exceptions import TransientModelError
from ownloop.models._normalize import ParsedTurn, RawCall, arguments_text
from ownloop.tokens import estimate_request_tokens, token_counter

__all__ = ["estimated_usage", "to_model_response", "used_call_ids"]

_WRAPPERS = frozenset({"parallel", "multi_tool_use.parallel"})


def used_call_ids(messages: Iterable[object]) -> set[str]:
    """Return every tool-call id already used in a conversation."""
    used: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            used.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            used.add(message.call_id)
    return used


def _expand_wrapper(call: RawCall, declared: frozenset[str]) -> list[tuple[str, str]] | None:
    """Fan out a hallucinated ``multi_tool_use.parallel`` call into the calls it wraps."""
    if call.name not in _WRAPPERS or call.name.rpartition(".")[2] in declared:
        return None
    arguments = call.arguments
    try:
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return None
    uses = arguments.get("tool_uses") if isinstance(arguments, dict) else None
    if not isinstance(uses, list) or not uses:
        return None
    expanded = []
    for use in uses:
        if not isinstance(use, dict) or not isinstance(use.get("recipient_name"), str):
            return None
        name = use["recipient_name"].removeprefix("functions.")
        expanded.append((name, json.dumps(use.get("parameters") or {}, ensure_ascii=False)))
    return expanded


class _Ids:
    """Hands out tool-call ids that are unique within the run and stable for a given turn."""

    def __init__(self, used: set[str], seed: str) -> None:
        self._used = used
        self._seed = seed
        self._count = 0

    def take(self, raw: str | None) -> str:
        candidate = raw if isinstance(raw, str) else ""
        if not candidate.strip() or len(candidate) > MAX_ID_CHARS or candidate in self._used:
            candidate = self._synthesize()
        self._used.add(candidate)
        return candidate

    def _synthesize(self) -> str:
        while True:
            self._count += 1
            digest = hashlib.sha256(f"{self._seed}|{self._count}".encode()).hexdigest()[:24]
            candidate = f"call_{digest}"
            if candidate not in self._used:
                return candidate


def _tool_calls(turn: ParsedTurn, request: ModelRequest, seed: str) -> tuple[ToolCall, ...]:
    ids = _Ids(used_call_ids(request.messages), seed)
    declared = frozenset(spec.name for spec in request.tools)
    calls: list[ToolCall] = []
    for raw in turn.calls:
        call_id = ids.take(raw.id)
        if raw.item is not None:
            raw.item["call_id"] = call_id
        wrapped = _expand_wrapper(raw, declared)
        if wrapped is None:
            arguments = raw.arguments
            if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
                arguments = "{}"
            calls.append(ToolCall(id=call_id, name=raw.name[:256], arguments=arguments))
            continue
        for index, (name, arguments) in enumerate(wrapped):
            child = ids.take(f"{call_id}#{index}")
            calls.append(ToolCall(id=child, name=name[:256], arguments=arguments))
    return tuple(calls)


def _stop_reason(turn: ParsedTurn, has_calls: bool) -> str | None:
    if has_calls:
        return None
    if turn.refusal:
        return f"refusal: {turn.refusal}"[:512]
    if turn.finish == "content_filter":
        return "content_filter: the provider's content filter stopped the response"
    if turn.finish == "length":
        return "max_output_tokens: the response was cut off at the output token limit"
    return None


def estimated_usage(request: ModelRequest, turn: ParsedTurn) -> TokenUsage:
    """Estimate a reply's tokens when the server reported none, marked as estimated.

    Budgets must not trust a server to report usage (a stream without ``include_usage``, a
    server that omits it): the request is counted with `estimate_request_tokens`, and everything
    the reply carried with the same counter: its text, refusal, reasoning text (replayed or not)
    and tool calls (names and arguments).

    Args:
        request: The request sent.
        turn: The reply read.

    Returns:
        The estimate, ``estimated=True``.
    """
    count = token_counter()
    output = count(turn.text or "") + count(turn.refusal or "") + count(turn.reasoning)
    for call in turn.calls:
        output += count(call.name) + count(arguments_text(call.arguments))
    return TokenUsage(
        input_tokens=estimate_request_tokens(request.messages, request.tools, count),
        output_tokens=output,
        cached_tokens=turn.usage.cached_tokens,
        estimated=True,
    )


def to_model_response(
    turn: ParsedTurn,
    request: ModelRequest,
    *,
    fallback_model: str,
    request_id: str | None,
    time_to_first_token_s: float | None = None,
) -> ModelResponse:
    """Turn a parsed turn into the port's response.

    Args:
        turn: The parsed turn.
        request: The request it answers (its history decides which ids are taken).
        fallback_model: The configured model, used when the server reported none.
        request_id: The provider's request id from the headers, if any.
        time_to_first_token_s: Seconds to the first streamed token, when streamed.

    Returns:
        The response.

    Raises:
        TransientModelError: If the turn has no text, no tool call and no reason to stop
            (an empty reply, worth another attempt).
    """
    seed = f"{request.run_id}|{request.step}|{request.attempt}|{turn.response_id}"
    calls = _tool_calls(turn, request, seed)
    stop = _stop_reason(turn, bool(calls))
    if not calls and turn.text is None and stop is None:
        raise TransientModelError(
            "invalid_response: the provider returned no text and no tool call",
            category="invalid_response",
        )
    provider_id = request_id or turn.response_id
    usage = turn.usage if turn.usage.total_tokens else estimated_usage(request, turn)
    return ModelResponse(
        final_output=turn.text,
        tool_calls=calls,
        stop_reason=stop,
        usage=usage,
        model=(turn.model or fallback_model)[:256],
        provider_request_id=provider_id[:MAX_ID_CHARS] if provider_id else None,
        provider_items=tuple(turn.items),
        time_to_first_token_s=time_to_first_token_s,
    )
