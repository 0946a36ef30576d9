"""Threads in the SQL stores: the ``threads`` table of store schema 5 (see ``_threads.py``).

Appending is a compare-and-set on the thread's end inside one fenced write: SQLite holds the file's
write lock for it (``BEGIN IMMEDIATE``); PostgreSQL inserts the next position in one statement,
and of two follow-ups inserting the same position the second finds the first's row and inserts
nothing. Kept apart so the store modules stay about checkpoints, leases and journals.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ownloop.store._schema import STORE_SCHEMA_VERSION
from ownloop.store._sqlite_operations import iso
from ownloop.store._threads import already_threaded, check_thread_id, thread_moved

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresThreads", "SqliteThreads"]


class SqliteThreads:
    """Threads of a SQLite store (mixed into `SqliteRunStore`)."""

    def _guard(self, operation: str) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # pragma: no cover - the store's

    def _transaction(self, *, durable: bool = False) -> AbstractContextManager[None]:
        raise NotImplementedError  # pragma: no cover - the store's

    async def append_to_thread(self, thread_id: str, run_id: str, *, after: str | None) -> int:
        """Record the thread's next run if its last is still ``after`` (see `ThreadStore`)."""
        check_thread_id(thread_id)
        with self._guard("append_to_thread") as db, self._transaction(durable=True):
            other = db.execute("SELECT thread_id FROM threads WHERE run_id = ?", (run_id,))
            found = other.fetchone()
            if found is not None:
                raise already_threaded(run_id, found[0])
            row = db.execute(
                "SELECT run_id, position FROM threads WHERE thread_id = ? "
                "ORDER BY position DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
            last, position = (row[0], int(row[1])) if row is not None else (None, 0)
            if last != after:
                raise thread_moved(thread_id, run_id, after, last)
            db.execute(
                "INSERT INTO threads VALUES (?, ?, ?, ?)",
                (thread_id, position + 1, run_id, iso(datetime.now(UTC))),
            )
        return position + 1

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Return the ids of the thread's runs, first to last (see `ThreadStore`)."""
        with self._guard("thread_runs") as db:
            rows = db.execute(
                "SELECT run_id FROM threads WHERE thread_id = ? ORDER BY position", (thread_id,)
            ).fetchall()
        return [run_id for (run_id,) in rows]


_APPEND = """
INSERT INTO {s}.threads (thread_id, position, run_id)
SELECT %(thread)s, COALESCE(MAX(position), 0) + 1, %(run)s FROM {s}.threads
WHERE thread_id = %(thread)s
HAVING (array_agg(run_id ORDER BY position DESC))[1] IS NOT DISTINCT FROM %(after)s
AND (SELECT MAX(version) FROM {s}.ownloop_schema) = %(version)s
ON CONFLICT DO NOTHING RETURNING position
"""


class PostgresThreads:
    """Threads of a PostgreSQL store (mixed into `PostgresRunStore`)."""

    def _use(self, operation: str) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        raise NotImplementedError  # pragma: no cover - the store's

    def _sql(self, template: str, **parts: str) -> str:
        raise NotImplementedError  # pragma: no cover - the store's

    async def _check_schema(self, connection: AsyncConnection[Any]) -> None:
        raise NotImplementedError  # pragma: no cover - the store's

    async def _rows(
        self, operation: str, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[Any]:
        raise NotImplementedError  # pragma: no cover - the store's

    async def append_to_thread(self, thread_id: str, run_id: str, *, after: str | None) -> int:
        """Record the thread's next run if its last is still ``after`` (see `ThreadStore`)."""
        check_thread_id(thread_id)
        params = {
            "thread": thread_id,
            "run": run_id,
            "after": after,
            "version": STORE_SCHEMA_VERSION,
        }
        async with self._use("append_to_thread") as connection:
            cursor = await connection.execute(self._sql(_APPEND), params)
            row = await cursor.fetchone()
            if row is not None:
                return int(row[0])
            await self._check_schema(connection)
        other = await self._rows(
            "append_to_thread",
            "SELECT thread_id FROM {s}.threads WHERE run_id = %s",
            (run_id,),
        )
        if other:
            raise already_threaded(run_id, other[0][0])
        runs = await self.thread_runs(thread_id)
        raise thread_moved(thread_id, run_id, after, runs[-1] if runs else None)

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Return the ids of the thread's runs, first to last (see `ThreadStore`)."""
        rows = await self._rows(
            "thread_runs",
            "SELECT run_id FROM {s}.threads WHERE thread_id = %s ORDER BY position",
            (thread_id,),
        )
        return [run_id for (run_id,) in rows]
