"""The memory store's tables and how a query becomes SQL: full text (FTS5) or keywords (LIKE).

Pure helpers and constants; the store runs the statements. Query words are extracted here (never
pasted into SQL): full-text queries quote each word, keyword patterns escape ``LIKE`` wildcards.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from functools import cache

__all__ = [
    "FTS_TABLE",
    "SCHEMA",
    "fts5_available",
    "full_text_query",
    "keyword_clause",
    "keyword_score",
    "prefers_keywords",
    "terms_of",
]

MAX_TERMS = 16
"""Words of a query used at most."""

_TERM = re.compile(r"\w+")
_WIDE = re.compile("[\u2e80-\U0010ffff]")  # CJK and other scripts written without spaces

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS memories (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL, actor TEXT NOT NULL, text TEXT NOT NULL, tags TEXT NOT NULL,
        created_at TEXT NOT NULL, idempotency_key TEXT,
        UNIQUE (tenant, actor, idempotency_key))""",
    "CREATE INDEX IF NOT EXISTS memories_by_scope ON memories (tenant, actor, seq)",
    "CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
"""The tables every store file has: the memories (the truth) and a key-value meta table."""

FTS_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, tags, content='memories', "
    "content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2')"
)
"""The full-text index over the memories, created only where FTS5 is available."""


@cache
def fts5_available() -> bool:
    """Return whether this Python's SQLite can build FTS5 full-text indexes."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
    except sqlite3.Error:
        return False
    finally:
        probe.close()
    return True


def terms_of(query: str) -> list[str]:
    """Return the distinct lower-case words of a query, at most `MAX_TERMS`.

    Args:
        query: The query text.
    """
    return list(dict.fromkeys(_TERM.findall(query.lower())))[:MAX_TERMS]


def prefers_keywords(query: str) -> bool:
    """Return whether a query needs substring matching (it has CJK or similar characters).

    Args:
        query: The query text.
    """
    return _WIDE.search(query) is not None


def full_text_query(terms: Sequence[str]) -> str:
    """Return an FTS5 ``MATCH`` expression finding any of the words, each quoted.

    Args:
        terms: Words from `terms_of`.
    """
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def keyword_clause(terms: Sequence[str]) -> tuple[str, list[str]]:
    """Return a ``WHERE`` condition matching any word in the text or tags, and its parameters.

    Args:
        terms: Words from `terms_of`.
    """
    clause = " OR ".join("text LIKE ? ESCAPE '\\' OR tags LIKE ? ESCAPE '\\'" for _ in terms)
    patterns = []
    for term in terms:
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        patterns += [f"%{escaped}%"] * 2
    return clause, patterns


def keyword_score(terms: Sequence[str], text: str, tags: Sequence[str]) -> int:
    """Return how many of the words a memory contains (in its text or tags), ignoring case.

    Args:
        terms: Words from `terms_of`.
        text: The memory's text.
        tags: The memory's tags.
    """
    haystack = f"{text} {' '.join(tags)}".lower()
    return sum(term in haystack for term in terms)
