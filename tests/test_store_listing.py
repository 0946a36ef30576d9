"""The listing's indexes and cursors: what a store creates when it opens, and the cursor's text.

The listing queries themselves (order, pages, filters) are proven on every store by
``test_store_conformance.py``; here: that each filter has its index, in the listing's order, on
both SQL engines, and that a cursor names its time in UTC whatever the process's time zone.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ownloop.contracts import RunSummary
from ownloop.store import PostgresRunStore, SqliteRunStore, run_cursor
from tests.durable_support import fresh_schema, postgres_dsn

ORDER = "updated_at DESC, run_id DESC"
EXPECTED = {
    "runs_by_recency": "",
    "runs_by_state_recency": "state, ",
    "runs_by_status_recency": "status, ",
    "runs_by_actor_recency": "$.actor.id",
    "runs_by_agent_recency": "$.versions.policy_digest",
}


def test_a_sqlite_store_indexes_every_listing_filter(tmp_path: Path) -> None:
    """Opening a SQLite store creates one index per filter, each in the listing's order."""
    asyncio.run(SqliteRunStore(tmp_path / "runs.db").close())
    with sqlite3.connect(tmp_path / "runs.db") as db:
        found = dict(
            db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
            )
        )
    for name, key in EXPECTED.items():
        assert name in found, name
        assert found[name].endswith(f"{ORDER})"), found[name]
        assert key in found[name], found[name]


def test_a_postgres_store_indexes_every_listing_filter() -> None:
    """Opening a PostgreSQL store creates the same indexes, reading fields around bad rows."""
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
    for name in EXPECTED:
        assert name in found, name
        assert found[name].endswith("updated_at DESC, run_id DESC)"), found[name]
    assert (
        "run_field(snapshot, VARIADIC ARRAY['actor'::text, 'id'::text])"
        in (found["runs_by_actor_recency"])
    )
    assert "'policy_digest'" in found["runs_by_agent_recency"]
    assert "(state, updated_at" in found["runs_by_state_recency"]
    assert "(status, updated_at" in found["runs_by_status_recency"]


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
