"""Read a tool's description and parameter descriptions from a Google-style docstring.

Only two things are taken: the summary (the first paragraph) and the entries of the ``Args:``
section. Other sections (``Returns:``, ``Raises:``, ``Examples:`` ...) are ignored, and a docstring
that is not Google-style yields its first paragraph and no parameter descriptions. Never raises.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_ARGS_HEADERS = frozenset({"args", "arguments", "parameters", "params"})
_SECTION = re.compile(r"^([A-Z][A-Za-z ]{0,30}):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")


@dataclass(frozen=True, slots=True)
class Docstring:
    """What a docstring says about a tool.

    Attributes:
        summary: The first paragraph, joined into one line (empty without a docstring).
        params: The description of each parameter named in the ``Args:`` section.
    """

    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """Parse the summary and the ``Args:`` section of a Google-style docstring.

    Args:
        doc: The docstring, as found in ``function.__doc__`` (may be ``None``).

    Returns:
        The summary and the per-parameter descriptions.
    """
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    return Docstring(summary=_summary(lines), params=_args_section(lines))


def _summary(lines: list[str]) -> str:
    """Join the lines of the first paragraph, stopping at a blank line or a section header."""
    paragraph: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        paragraph.append(line.strip())
    return " ".join(paragraph)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _args_section(lines: list[str]) -> dict[str, str]:
    """Collect ``name: description`` entries (continuation lines included) of ``Args:``."""
    params: dict[str, str] = {}
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if line.strip().rstrip(":").lower() in _ARGS_HEADERS and line.strip().endswith(":")
        ),
        None,
    )
    if start is None:
        return params
    header_indent = _indent(lines[start])
    entry_indent: int | None = None
    current: str | None = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break
        if entry_indent is None:
            entry_indent = indent
        match = _ENTRY.match(line.strip())
        if indent == entry_indent and match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return params
