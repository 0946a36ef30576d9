"""Tool calls written into the reply text, recognised only when a profile asks for it.

Some set-ups (Qwen through Ollama, vLLM without the right tool parser) return a tool call as text:
``{"name": "search", "arguments": {...}}`` (bare, fenced, or inside ``<tool_call>`` tags), or
Qwen3-Coder's XML ``<tool_call><function=NAME><parameter=P>value``. Recognition is strict: every
recognised call must name a declared tool, or the text stays text. Arguments come back as JSON
text so they go through the same validation as native calls. Nothing here does I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

__all__ = ["recognize_text_tool_calls"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(
    r"<parameter=([^>\s]+)>(.*?)(?=</parameter>|<parameter=|</function>|$)", re.DOTALL
)

Call = tuple[str, str]


def _json_calls(text: str) -> list[Call] | None:
    fenced = _FENCE.match(text.strip())
    body = fenced.group(1) if fenced else text.strip()
    try:
        value = json.loads(body)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls: list[Call] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            calls.append((item["name"], arguments))
        else:
            calls.append((item["name"], json.dumps(arguments, ensure_ascii=False)))
    return calls or None


def _value(raw: str) -> Any:
    text = raw.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text


def _xml_calls(block: str) -> list[Call] | None:
    calls: list[Call] = []
    for name, body in _FUNCTION.findall(block):
        arguments = {key: _value(value) for key, value in _PARAMETER.findall(body)}
        calls.append((name, json.dumps(arguments, ensure_ascii=False)))
    return calls or None


def recognize_text_tool_calls(
    text: str, declared: Collection[str]
) -> tuple[str | None, list[Call]] | None:
    """Find tool calls written as JSON or XML in a reply's text.

    Args:
        text: The reply text.
        declared: The names of the tools offered in the request.

    Returns:
        The text left outside the calls (``None`` if nothing is left) and the calls as
        ``(name, arguments JSON text)``, or ``None`` when the text holds no call to a declared
        tool (then it stays text).
    """
    blocks = _BLOCK.findall(text)
    calls: list[Call] = []
    if blocks:
        for block in blocks:
            found = _xml_calls(block) if "<function=" in block else _json_calls(block)
            if found is None:
                return None
            calls.extend(found)
        remaining = _BLOCK.sub("", text).strip() or None
    else:
        found = _json_calls(text)
        if found is None:
            return None
        calls, remaining = found, None
    if not all(name in declared for name, _ in calls):
        return None
    return remaining, calls
