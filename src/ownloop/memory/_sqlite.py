"""`SqliteMemoryStore`: long-term memory in one SQLite file (standard library ``sqlite3``).

Search uses SQLite's FTS5 full-text index (BM25 ranking, Porter stemming) when this Python's
SQLite was built with it, and keyword matching (``LIKE``, scored by the query words found) when
not; ``search="auto"`` decides at run time. Queries in scripts written without spaces (Chinese,
Japanese) always use keyword matching, which finds substrings, because FTS5 would only match whole
runs of such text. The memories table is the truth; the FTS index is kept beside it and rebuilt
when a file written without FTS5 is opened with it. Like the run store, the SQL runs inline on the
event loop (tens of microseconds) under a lock that guards the one connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from ownloop._text import clean_text
from ownloop.exceptions import ConfigurationError, SchemaVersionError, StoreError
from ownloop.memory._port import Memory, MemoryLimits, MemoryScope, Remembered
from ownloop.memory._search import (
    FTS_TABLE,
    SCHEMA,
    fts5_available,
    full_text_query,
    keyword_clause,
    keyword_score,
    prefers_keywords,
    terms_of,
)

__all__ = ["SqliteMemoryStore"]

SCHEMA_VERSION = 1
_COLUMNS = "seq, id, text, tags, created_at"


def _key(scope: MemoryScope) -> tuple[str, str]:
    """Scope columns: an empty string stands for "no tenant" and "shared by the tenant"."""
    return scope.tenant or "", scope.actor or ""


def _memory(row: Sequence[Any], score: float | None = None) -> Memory:
    return Memory(
        id=row[1],
        text=row[2],
        tags=tuple(json.loads(row[3])),
        created_at=datetime.fromisoformat(row[4]),
        score=score,
    )


class SqliteMemoryStore:
    """Keeps memories in a SQLite file, each in exactly one scope.

    Args:
        path: The database file (created if missing), or ``":memory:"`` for a private one.
        limits: Entry size, count per scope, what happens when full, and query bounds.
        search: ``fts5``, ``keyword``, or ``auto`` (FTS5 when available, else keyword).
        busy_timeout_s: How long a statement waits for another process's write.

    Raises:
        ConfigurationError: If ``search`` is ``fts5`` and this SQLite has no FTS5, or unknown.
        StoreError: If the file cannot be opened or its tables created.
        SchemaVersionError: If the file was laid out by a newer ownloop.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: MemoryLimits | None = None,
        search: Literal["auto", "fts5", "keyword"] = "auto",
        busy_timeout_s: float = 5.0,
    ) -> None:
        if search not in ("auto", "fts5", "keyword"):
            raise ConfigurationError(f"search must be 'auto', 'fts5' or 'keyword', not {search!r}")
        if search == "fts5" and not fts5_available():
            raise ConfigurationError(
                f"this Python's SQLite {sqlite3.sqlite_version} has no FTS5; use search='keyword'"
            )
        self.path = os.fspath(path)
        self.limits = limits if limits is not None else MemoryLimits()
        self.search: Literal["fts5", "keyword"] = (
            "fts5" if search == "fts5" or (search == "auto" and fts5_available()) else "keyword"
        )
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the memory store at {self.path}: {error}") from error
        try:
            with self._guard("open"), self._transaction():
                self._create()
        except BaseException:
            self._db.close()
            raise

    @contextmanager
    def _guard(self, operation: str) -> Iterator[sqlite3.Connection]:
        """Hold the connection for one operation; turn sqlite3 errors into `StoreError`."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            try:
                yield self._db
            except sqlite3.Error as error:
                raise StoreError(f"{operation} failed in {self!r}: {error}") from error

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.rollback()
            raise
        self._db.execute("COMMIT")

    def _create(self) -> None:
        for statement in SCHEMA:
            self._db.execute(statement)
        stored = self._meta("schema_version")
        if stored is not None and int(stored) > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.path} has memory schema {stored}; this ownloop reads {SCHEMA_VERSION}"
            )
        self._set_meta("schema_version", str(SCHEMA_VERSION))
        if self.search == "fts5":
            self._db.execute(FTS_TABLE)
            if self._meta("fts_synced") != "1":  # written without FTS5, or never indexed
                self._db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
                self._set_meta("fts_synced", "1")

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM memory_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO memory_meta VALUES (?, ?)", (key, value))

    def _index(self, row: Sequence[Any], *, delete: bool = False) -> None:
        """Keep the FTS index in step with one row of the memories table."""
        if self.search == "keyword":
            self._set_meta("fts_synced", "0")
            return
        command = "'delete', " if delete else ""
        columns = "memories_fts, rowid" if delete else "rowid"
        self._db.execute(
            f"INSERT INTO memories_fts({columns}, text, tags) VALUES ({command}?, ?, ?)",  # noqa: S608
            (row[0], row[2], row[3]),
        )

    async def remember(
        self,
        text: str,
        tags: Sequence[str] = (),
        *,
        scope: MemoryScope,
        idempotency_key: str | None = None,
    ) -> Remembered:
        """Store a fact in a scope, evicting the oldest memories or refusing when it is full.

        Args:
            text: The fact (stripped; refused when empty or longer than ``max_entry_chars``).
            tags: Keywords to find it by.
            scope: Whose memory it is.
            idempotency_key: A key that makes a repeated call store nothing new.

        Returns:
            What was stored, and what was evicted to make room.

        Raises:
            InputRejected: If the text or tags break the limits.
            StoreError: If the scope is full and ``on_full`` is ``refuse``, or storage failed.
        """
        text, kept = self.limits.check_text(text), self.limits.check_tags(tags)
        tenant, actor = _key(scope)
        with self._guard("remember"), self._transaction():
            if idempotency_key is not None:
                row = self._db.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND actor = ? "  # noqa: S608
                    "AND idempotency_key = ?",
                    (tenant, actor, idempotency_key),
                ).fetchone()
                if row is not None:
                    return Remembered(memory=_memory(row), duplicate=True)
            evicted = self._make_room(scope)
            memory_id, created = f"mem-{uuid.uuid4().hex[:16]}", datetime.now(UTC).isoformat()
            cursor = self._db.execute(
                "INSERT INTO memories (id, tenant, actor, text, tags, created_at, idempotency_key)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (memory_id, tenant, actor, text, json.dumps(kept), created, idempotency_key),
            )
            row = (cursor.lastrowid, memory_id, text, json.dumps(kept), created)
            self._index(row)
        return Remembered(memory=_memory(row), evicted=evicted)

    def _make_room(self, scope: MemoryScope) -> tuple[str, ...]:
        tenant, actor = _key(scope)
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM memories WHERE tenant = ? AND actor = ?", (tenant, actor)
        ).fetchone()
        excess = count - self.limits.max_entries + 1
        if excess <= 0:
            return ()
        if self.limits.on_full == "refuse":
            raise StoreError(
                f"the memory of {scope} is full ({count} of {self.limits.max_entries}); "
                "forget some memories first"
            )
        oldest = self._db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND actor = ? "  # noqa: S608
            "ORDER BY seq LIMIT ?",
            (tenant, actor, excess),
        ).fetchall()
        for row in oldest:
            self._index(row, delete=True)
            self._db.execute("DELETE FROM memories WHERE seq = ?", (row[0],))
        return tuple(row[1] for row in oldest)

    async def recall(self, query: str, k: int = 3, *, scope: MemoryScope) -> list[Memory]:
        """Return up to ``k`` memories of the scope that best match the query.

        Args:
            query: Keywords (cut to ``max_query_chars``); without any word, the newest memories.
            k: How many at most, from 1 to ``max_results``.
            scope: Whose memories to search; no other scope's memory is ever returned.

        Returns:
            The best matches first; ties and keyword-less queries: the newest first.
        """
        limit = max(1, min(k, self.limits.max_results))
        query = clean_text(query[: self.limits.max_query_chars])  # keywords: U+FFFD matches nothing
        terms = terms_of(query)
        tenant, actor = _key(scope)
        with self._guard("recall"):
            if not terms:
                rows = self._db.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND actor = ? "  # noqa: S608
                    "ORDER BY seq DESC LIMIT ?",
                    (tenant, actor, limit),
                ).fetchall()
                return [_memory(row) for row in rows]
            if self.search == "fts5" and not prefers_keywords(query):
                return self._full_text(terms, tenant, actor, limit)
            return self._keywords(terms, tenant, actor, limit)

    def _full_text(self, terms: list[str], tenant: str, actor: str, limit: int) -> list[Memory]:
        rows = self._db.execute(
            "SELECT m.seq, m.id, m.text, m.tags, m.created_at, bm25(memories_fts) "
            "FROM memories_fts JOIN memories AS m ON m.seq = memories_fts.rowid "
            "WHERE memories_fts MATCH ? AND m.tenant = ? AND m.actor = ? "
            "ORDER BY bm25(memories_fts), m.seq DESC LIMIT ?",
            (full_text_query(terms), tenant, actor, limit),
        ).fetchall()
        return [_memory(row, score=-float(row[5])) for row in rows]

    def _keywords(self, terms: list[str], tenant: str, actor: str, limit: int) -> list[Memory]:
        clause, patterns = keyword_clause(terms)
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND actor = ? "  # noqa: S608
            f"AND ({clause})",
            (tenant, actor, *patterns),
        ).fetchall()
        scored = [(keyword_score(terms, row[2], json.loads(row[3])), row) for row in rows]
        scored.sort(key=lambda pair: (-pair[0], -pair[1][0]))
        return [_memory(row, score=float(score)) for score, row in scored[:limit] if score]

    async def forget(self, memory_id: str, *, scope: MemoryScope) -> bool:
        """Delete one memory of the scope.

        Args:
            memory_id: The memory's id.
            scope: Whose memory it is; a memory of another scope is never deleted.

        Returns:
            Whether a memory was deleted.
        """
        tenant, actor = _key(scope)
        with self._guard("forget"), self._transaction():
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ? AND tenant = ? AND actor = ?",  # noqa: S608
                (memory_id, tenant, actor),
            ).fetchone()
            if row is None:
                return False
            self._index(row, delete=True)
            self._db.execute("DELETE FROM memories WHERE seq = ?", (row[0],))
        return True

    async def count(self, *, scope: MemoryScope) -> int:
        """Return how many memories the scope holds.

        Args:
            scope: The scope.
        """
        with self._guard("count"):
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM memories WHERE tenant = ? AND actor = ?", _key(scope)
            ).fetchone()
        return int(count)

    def close(self) -> None:
        """Close the file; later operations raise `StoreError`."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __repr__(self) -> str:
        return f"SqliteMemoryStore(path={self.path!r}, search={self.search!r})"
