"""Evidence and citations: which tool outputs count as evidence, and how an answer cites them.

Evidence is *what the model was shown from a tool whose output is a fact source*. A tool is a fact
source unless it is declared otherwise (``@registry.tool(effect="read", evidence=False)``; the
memory tools are declared so: a model must not cite what it wrote itself). From a fact source's
result, an `EvidenceRule` finds the identified items (by default, objects with a string ``id``,
``document_id``, ``doc_id``, ``url`` or ``source`` field), and only the ids that appear in the
observation the model actually received count: an id cut off by truncation was never seen. A write
confirmed later by its reconcile lookup counts like one that answered directly.

Answers cite evidence in square brackets: ``[R-02]``, or a list ``[R-01, R-02]`` (commas or
semicolons), every id checked. A bracket that looks like a citation but cannot be read as one
(``[ R-02 ]``, ``[R 02]``, ``【R-02】``) is reported, never ignored. Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_EVIDENCE_FIELDS",
    "EvidenceExtractor",
    "EvidenceRule",
    "parse_citations",
    "shown_evidence",
]

DEFAULT_EVIDENCE_FIELDS = ("id", "document_id", "doc_id", "url", "source")
"""The fields that identify an item, in order of preference (the first present wins)."""

MAX_EVIDENCE_ID_CHARS = 128
"""The longest id that counts."""

EvidenceExtractor = Callable[[Any], Iterable["str | tuple[str, str | None]"]]
"""Finds the ids (or ``(id, title)`` pairs) in a tool's JSON-ready result."""

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/#-]{0,127}")
_BRACKETED = re.compile(
    r"\[([^\[\]\n]{1,200})\](?!\()"  # ASCII brackets, not a Markdown link's text
    # Full-width and CJK brackets: never a readable citation.
    r"|([\u3010\uff3b\u3014\u3016][^\n]{1,200}?[\u3011\uff3d\u3015\u3017])"
)
_CITATION_LIKE = re.compile(r"^[\s\w.:/#,;-]+$")


def _valid_id(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_EVIDENCE_ID_CHARS:
        return value
    return None


@dataclass(frozen=True, slots=True)
class EvidenceRule:
    """How a tool result becomes evidence items.

    Args:
        fields: The fields that identify an item, first present wins (`DEFAULT_EVIDENCE_FIELDS`).
        extract: A function finding the ids in a result instead of the fields.
    """

    fields: tuple[str, ...] = DEFAULT_EVIDENCE_FIELDS
    extract: EvidenceExtractor | None = None

    def collect(self, data: Any) -> list[tuple[str, str | None]]:
        """Find the identified items in a tool's JSON-ready result.

        With fields: the result itself, the elements of a list result and the elements of lists
        directly inside a mapping result are candidates; a candidate is a mapping with one of the
        fields holding a string of 1-128 characters (its ``title`` is kept when present).

        Args:
            data: The result.

        Returns:
            ``(id, title)`` pairs, in the order found.
        """
        if self.extract is not None:
            found: list[tuple[str, str | None]] = []
            for item in self.extract(data):
                pair = item if isinstance(item, tuple) else (item, None)
                item_id = _valid_id(pair[0])
                if item_id is not None:
                    title = pair[1] if isinstance(pair[1], str) else None
                    found.append((item_id, title[:512] if title else None))
            return found
        candidates: list[Any] = [data]
        if isinstance(data, list):
            candidates = list(data)
        elif isinstance(data, dict):
            candidates.extend(
                item for value in data.values() if isinstance(value, list) for item in value
            )
        return [item for item in map(self._item, candidates) if item is not None]

    def _item(self, value: Any) -> tuple[str, str | None] | None:
        if not isinstance(value, dict):
            return None
        for field in self.fields:
            item_id = _valid_id(value.get(field))
            if item_id is not None:
                title = value.get("title")
                return item_id, title[:512] if isinstance(title, str) else None
        return None

    def describe(self) -> str:
        """Say, for a rejection message, how a tool's output becomes evidence under this rule."""
        if self.extract is not None:
            name = getattr(self.extract, "__name__", type(self.extract).__name__)
            return f"the evidence extractor {name} finds its id in a fact-source tool's result"
        fields = ", ".join(self.fields)
        return (
            f"a fact-source tool returns an object (or a list of objects) with a string field "
            f"among {fields}"
        )


def shown_evidence(rule: EvidenceRule, data: Any, shown: str) -> list[tuple[str, str | None]]:
    """The items of ``data`` whose id appears in ``shown``, the text the model received.

    Args:
        rule: How items are found.
        data: The tool's JSON-ready result.
        shown: The observation as the model received it (truncated, if it was).

    Returns:
        ``(id, title)`` pairs of the items the model saw.
    """
    return [
        (item_id, title)
        for item_id, title in rule.collect(data)
        if item_id in shown or json.dumps(item_id)[1:-1] in shown
    ]


def parse_citations(text: str) -> tuple[list[str], list[str]]:
    """Read every citation of an answer.

    Args:
        text: The answer.

    Returns:
        The cited ids in order (duplicates removed), and the bracketed texts that look like
        citations but cannot be read as ``[ID]`` or ``[ID, ID...]``.
    """
    cited: list[str] = []
    unreadable: list[str] = []
    for match in _BRACKETED.finditer(text):
        content = match.group(1)
        if content is None:
            if any(char.isdigit() or char == "-" for char in match.group(2)):
                unreadable.append(match.group(0))
            continue
        parts = re.split(r"[,;] ?", content)
        if all(_ID.fullmatch(part) for part in parts):
            cited.extend(parts)
        elif _CITATION_LIKE.match(content) and any(char.isdigit() for char in content):
            unreadable.append(match.group(0))
    return list(dict.fromkeys(cited)), list(dict.fromkeys(unreadable))
