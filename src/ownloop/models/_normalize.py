"""What both wire APIs share once parsed: a turn, its usage, its text and its arguments.

The chat and Responses parsers (streamed or not) produce a `ParsedTurn` (`_response` turns it into
the port's `ModelResponse`). Here live the reading rules that must not differ between APIs: usage
missing or malformed is zero, a reported total larger than input plus output counts as output
(hidden reasoning some servers report only in the total), empty text is no text, tool calls win
over a ``stop`` finish reason, and missing arguments are ``"{}"``. Nothing here does I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ownloop.contracts import (
    JsonValue,
    TokenUsage,
)

__all__ = [
    "ParsedTurn",
    "RawCall",
    "arguments_text",
    "as_dict",
    "as_int",
    "normalize_finish",
    "text_of",
    "token_usage",
]

_FINISH = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


@dataclass(slots=True)
class RawCall:
    """A tool call as the server sent it, before ownloop assigns its id.

    Attributes:
        id: The server's id (``None`` or ``""`` when it gave none).
        name: The tool name.
        arguments: The raw arguments: JSON text, an object, or ``None``.
        item: The Responses ``function_call`` item it came from, whose ``call_id`` follows the
            id ownloop assigns (so a replay stays consistent).
    """

    id: str | None
    name: str
    arguments: Any
    item: dict[str, Any] | None = None


@dataclass(slots=True)
class ParsedTurn:
    """One model turn read from either wire API.

    Attributes:
        text: The reply text, ``None`` when empty.
        calls: The tool calls, in order.
        finish: The normalized finish reason (``stop``, ``tool_calls``, ``length``,
            ``content_filter``) or ``None``.
        refusal: A refusal message, when the model refused.
        usage: Tokens used.
        model: The model the server reported.
        response_id: The server's id for the response.
        items: Opaque items to replay on the next turn.
        reasoning: Reasoning text the server sent (``reasoning_content``), replayed or not:
            counted when the server reports no usage.
    """

    text: str | None = None
    calls: list[RawCall] = field(default_factory=list)
    finish: str | None = None
    refusal: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str | None = None
    response_id: str | None = None
    items: list[JsonValue] = field(default_factory=list)
    reasoning: str = ""


def as_dict(value: Any) -> dict[str, Any]:
    """Return the value if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int:
    """Return a non-negative integer count, or 0 for anything else (None, text, negatives)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(int(value), 0)


def _detail(usage: dict[str, Any], key: str, name: str) -> int:
    details = usage.get(key)
    return as_int(details.get(name)) if isinstance(details, dict) else 0


def token_usage(raw: Any, *, prefix: tuple[str, str]) -> TokenUsage:
    """Map a usage object of either API to `TokenUsage`; missing usage is all zeros.

    Args:
        raw: The ``usage`` object.
        prefix: The input and output key stems: ``("prompt", "completion")`` for chat,
            ``("input", "output")`` for Responses.

    Returns:
        The usage; when the reported total exceeds input plus output, the difference counts as
        output (xAI and Gemini report hidden reasoning only in the total).
    """
    if not isinstance(raw, dict):
        return TokenUsage()
    inputs, outputs = prefix
    input_tokens = as_int(raw.get(f"{inputs}_tokens"))
    output_tokens = as_int(raw.get(f"{outputs}_tokens"))
    total = as_int(raw.get("total_tokens"))
    cached = _detail(raw, f"{inputs}_tokens_details", "cached_tokens") or as_int(
        raw.get("prompt_cache_hit_tokens")
    )
    return TokenUsage(
        input_tokens=input_tokens,
        output_tokens=max(output_tokens, total - input_tokens),
        reasoning_tokens=_detail(raw, f"{outputs}_tokens_details", "reasoning_tokens"),
        cached_tokens=cached,
    )


def text_of(content: Any) -> str | None:
    """Return message content as text: a string, or the text parts of a list; ``None`` if empty."""
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict)]
        content = "".join(part for part in parts if isinstance(part, str))
    if not isinstance(content, str) or not content.strip():
        return None
    return content


def normalize_finish(raw: Any, has_calls: bool) -> str | None:
    """Return the finish reason a correct server would report (tool calls win over ``stop``)."""
    if has_calls:
        return "tool_calls"
    if not isinstance(raw, str) or not raw:
        return None
    return _FINISH.get(raw, "stop")


def arguments_text(arguments: JsonValue) -> str:
    """Return arguments as the JSON text a wire API expects; nothing becomes ``"{}"``."""
    if isinstance(arguments, str):
        return arguments if arguments.strip() else "{}"
    if arguments is None:
        return "{}"
    return json.dumps(arguments, ensure_ascii=False)
