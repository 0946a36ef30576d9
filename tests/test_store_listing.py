"""The listing's indexes and cursors: what a store lays out, what a page reads, the cursor's text.

The listing queries themselves (order, pages, filters) are proven on every store by
``test_store_conformance.py``; here: that each filter has its index, in the listing's order and
holding every column a listing line shows, on both SQL engines; that SQLite reads a page from that
index alone; and that a cursor names its time in UTC whatever the process's time zone.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import RunSummary
from ownloop.store import PostgresRunStore, SqliteRunStore, run_cursor
from ownloop.store._listing import Listing, listing_query
from ownloop.store._sqlite_operations import iso
from tests.durable_support import fresh_schema, postgres_dsn

ORDER = "updated_at DESC, run_id DESC"
EXPECTED = {
    "runs_by_recency": "",
    "runs_by_state_recency": "state, ",
    "runs_by_status_recency": "status, ",
    "runs_by_actor_recency": "actor, ",
    "runs_by_agent_recency": "agent, ",
}
LINE = ("state", "status", "stop_reason", "version", "actor", "agent")


def _index_columns(definition: str) -> list[str]:
    inside = definition[definition.index("(") + 1 : definition.rindex(")")]
    return [part.strip().split()[0] for part in inside.replace(") INCLUDE (", ", ").split(",")]


def test_a_sqlite_store_indexes_every_listing_filter(tmp_path: Path) -> None:
    """A SQLite store has one index per filter, in the listing's order, covering a listing line."""
    asyncio.run(SqliteRunStore(tmp_path / "runs.db").close())
    with sqlite3.connect(tmp_path / "runs.db") as db:
        found = dict(
            db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
            )
        )
    for name, key in EXPECTED.items():
        assert name in found, name
        assert f"({key}{ORDER}, " in found[name], found[name]
        assert set(LINE) <= set(_index_columns(found[name])), found[name]


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "runs_by_recency"),
        ({"after": "2026-01-01T00:00:00+00:00|run-5"}, "runs_by_recency"),
        ({"state": "paused"}, "runs_by_state_recency"),
        ({"status": "completed"}, "runs_by_status_recency"),
        ({"actor": "alice"}, "runs_by_actor_recency"),
        ({"agent": "digest", "status": "completed"}, "runs_by_agent_recency"),
        ({"since": datetime(2026, 1, 1, tzinfo=UTC)}, "runs_by_recency"),
    ],
)
def test_a_sqlite_page_reads_its_covering_index_alone(
    tmp_path: Path, filters: dict[str, Any], index: str
) -> None:
    """Every SQLite listing page reads a covering index in the listing's order: no row, no sort."""
    asyncio.run(SqliteRunStore(tmp_path / "runs.db").close())
    query, params = listing_query(Listing(**filters), "sqlite", "runs", iso)
    with sqlite3.connect(tmp_path / "runs.db") as db:
        plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {query}", params)]
    assert len(plan) == 1, plan
    assert f"USING COVERING INDEX {index}" in plan[0], plan


def test_a_postgres_store_indexes_every_listing_filter() -> None:
    """A PostgreSQL store has the same indexes, the line's other columns included in each."""
    dsn, schema = postgres_dsn(), fresh_schema()

    async def opened() -> dict[str, str]:
        store = PostgresRunStore(dsn, schema=schema)
        try:
            connection = await store._connect()
            cursor = await connection.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (schema,)
            )
            return dict(await cursor.fetchall())
        finally:
            await store.close()

    found = asyncio.run(opened())
    for name, key in EXPECTED.items():
        assert name in found, name
        assert f"({key}{ORDER}) INCLUDE (" in found[name], found[name]
        assert set(LINE) <= set(_index_columns(found[name])), found[name]


@pytest.fixture
def new_york() -> Iterator[None]:
    """The process's local time zone is not UTC for the test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "America/New_York")
        time.tzset()
        yield
    time.tzset()  # the environment is restored: back to the process's own zone


def test_a_cursor_names_its_time_in_utc(new_york: None) -> None:
    """A cursor's text is the line's save time in UTC, whatever the local time zone."""
    line = RunSummary(
        run_id="run-1",
        state="running",
        version=1,
        updated_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert run_cursor(line) == "2026-01-02T03:04:05+00:00|run-1"
