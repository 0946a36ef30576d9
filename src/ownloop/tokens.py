"""Token estimation: how big a request is before it is sent.

With the optional extra ``ownloop[tokens]`` and an encoding available locally, `tiktoken` counts
exactly; otherwise a documented heuristic estimates: one token per four characters of text (rounded
up), except that each CJK character (and any other character from U+2E80 on) counts as a token of
its own, plus four tokens of framing per message and the characters of tool schemas. The heuristic
errs a little high for English prose and is within ±25% for code and JSON; counting CJK text by
the character keeps it from undercounting Chinese, Japanese or Korean three- or fourfold. Good
enough to refuse a request that would cross a budget, never a substitute for the provider's
reported usage.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from ownloop.contracts import AssistantMessage, Message, ToolSpec

__all__ = [
    "TokenCounter",
    "estimate_message_tokens",
    "estimate_request_tokens",
    "heuristic_tokens",
    "token_counter",
]

TokenCounter = Callable[[str], int]
"""Counts the tokens of one text."""

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
# CJK ideographs, kana, Hangul and everything above them: BPE encodings spend about a token on
# each, where Latin, Cyrillic or Greek text averages three to five characters per token.
_WIDE = re.compile("[\u2e80-\U0010ffff]")


def heuristic_tokens(text: str) -> int:
    """Estimate tokens: one per four characters, rounded up, and one per CJK character.

    Args:
        text: The text.

    Returns:
        The estimate.
    """
    if text.isascii():
        return math.ceil(len(text) / CHARS_PER_TOKEN)
    wide = _WIDE.subn("", text)[1]
    return math.ceil((len(text) - wide) / CHARS_PER_TOKEN) + wide


@lru_cache(maxsize=1)
def token_counter() -> TokenCounter:
    """Return the best counter available: tiktoken's ``o200k_base`` if it loads, else the heuristic.

    Returns:
        A function counting the tokens of a text.
    """
    try:
        tiktoken = importlib.import_module("tiktoken")  # the optional extra ownloop[tokens]
        encoding = tiktoken.get_encoding("o200k_base")
    except Exception:  # not installed, or its encoding file cannot be fetched offline
        return heuristic_tokens

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count


def estimate_message_tokens(message: Message, count: TokenCounter = heuristic_tokens) -> int:
    """Estimate one message's tokens, framing and replayed provider items included.

    What an adapter sends back with an assistant message counts: a ReAct reply's text, a
    ``reasoning_content`` or a Responses item's ``encrypted_content`` (an over-estimate when a
    profile does not replay them, never an under-estimate).

    Args:
        message: The message.
        count: The text counter.

    Returns:
        The estimate.
    """
    total = MESSAGE_OVERHEAD_TOKENS + count(getattr(message, "content", None) or "")
    if isinstance(message, AssistantMessage):
        if message.provider_items:  # replayed as sent: ReAct text, reasoning, encrypted content
            total += count(json.dumps(list(message.provider_items), ensure_ascii=False))
        for call in message.tool_calls:
            arguments = (
                call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            )
            total += count(call.name) + count(arguments) + MESSAGE_OVERHEAD_TOKENS
    return total


def estimate_request_tokens(
    messages: Iterable[Message],
    tools: Iterable[ToolSpec] = (),
    count: TokenCounter = heuristic_tokens,
) -> int:
    """Estimate the input tokens of a model request.

    Args:
        messages: The conversation.
        tools: The tool specs offered.
        count: The text counter.

    Returns:
        The estimate.
    """
    total = sum(estimate_message_tokens(message, count) for message in messages)
    for spec in tools:
        total += count(spec.name) + count(spec.description) + count(json.dumps(spec.parameters))
    return total
