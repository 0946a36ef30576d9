"""Shared builders for the context tests: a paging tool, scripts, and the provider ordering rule."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ownloop.contracts import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ownloop.testing import final
from ownloop.tools import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]
"""The repository: documentation pages and benchmarks are read from here."""

INSTRUCTIONS = "Read carefully and cite pages."
TASK = "Read the report and summarize it."


def page_registry(chars: int = 2_000) -> ToolRegistry:
    """Return a registry whose ``read_page`` returns ``chars`` characters of page text."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def read_page(page: int) -> dict[str, Any]:
        """Read one page.

        Args:
            page: The page number.
        """
        return {"id": f"page-{page}", "text": f"page {page}: " + "x" * chars}

    return registry


def read(*pages: int) -> ModelResponse:
    """Return a response reading the given pages in one turn (ids ``p<page>``)."""
    return ModelResponse(
        tool_calls=tuple(
            ToolCall(id=f"p{page}", name="read_page", arguments={"page": page}) for page in pages
        )
    )


def paging_script(pages: int, answer: str = "done [page-1]") -> list[ModelResponse]:
    """Read pages 1..``pages`` one per turn, then answer."""
    return [*(read(page) for page in range(1, pages + 1)), final(answer)]


def turns_of(messages: Sequence[Message]) -> list[list[Message]]:
    """Split messages after the pinned head into turns, each led by an assistant message."""
    turns: list[list[Message]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            turns.append([message])
        elif turns:
            turns[-1].append(message)
    return turns


def assert_tool_pairs(messages: Sequence[Message]) -> None:
    """Assert the provider rule: every call answered before the next turn, no orphan answer."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            assert message.call_id in open_calls, f"orphan observation {message.call_id}"
            open_calls.discard(message.call_id)
            continue
        assert not open_calls, f"calls {open_calls} unanswered before a {message.role} message"
        if isinstance(message, AssistantMessage):
            open_calls = {call.id for call in message.tool_calls}
    assert not open_calls, f"calls {open_calls} unanswered at the end"


def assert_wire_pairs(wire: Sequence[dict[str, Any]]) -> None:
    """The same rule on Chat Completions wire messages."""
    open_calls: set[str] = set()
    for message in wire:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a tool message answers no open call"
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"calls {open_calls} unanswered before a {message['role']} message"
        if message["role"] == "assistant":
            open_calls = {call["id"] for call in message.get("tool_calls") or []}
    assert not open_calls, f"calls {open_calls} unanswered at the end"


def head_is_kept(messages: Sequence[Message]) -> bool:
    """Whether a request starts with the instructions and the task."""
    return (
        len(messages) >= 2
        and messages[0] == SystemMessage(content=INSTRUCTIONS)
        and messages[1] == UserMessage(content=TASK)
    )


def markdown_python(path: str) -> list[str]:
    """Return the Python code blocks of a documentation page, in order."""
    text = (ROOT / path).read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def run_markdown(path: str) -> dict[str, Any]:
    """Execute a page's Python blocks in order, in one namespace, and return the namespace."""
    namespace: dict[str, Any] = {"__name__": "docs"}
    for number, block in enumerate(markdown_python(path), start=1):
        exec(compile(block, f"{path}#block{number}", "exec"), namespace)
    return namespace
