"""Releases before store schema 3 are fenced by a trigger: their whole-snapshot saves write nothing.

A worker of such a release has no upgrade fence in its own code; its save overwrites the run row's
``snapshot`` with the whole snapshot and never touches ``layout``. Each test runs that release's
exact SQL (its ``INSERT`` and compare-and-set ``UPDATE``, copied from the store schema 2 code) on a
raw connection, beside a store of this release, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop import Agent, ToolRegistry
from ownloop.contracts import RunSnapshot
from ownloop.store import PostgresRunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final
from tests.durable_support import fresh_schema, postgres_dsn

SqlStore = SqliteRunStore | PostgresRunStore

# The store schema 2 release's save, as it was written (guard: no lease held).
_OLD_SQLITE_INSERT = (
    "INSERT INTO runs (run_id, version, state, status, stop_reason, updated_at, "
    "snapshot) SELECT ?, 1, ?, ?, ?, ?, ? WHERE 1 "
    "ON CONFLICT (run_id) DO NOTHING"
)
_OLD_SQLITE_UPDATE = (
    "UPDATE runs SET version = version + 1, state = ?, status = ?, "
    "stop_reason = ?, updated_at = ?, snapshot = ? "
    "WHERE run_id = ? AND version = ? AND 1"
)
_OLD_POSTGRES_INSERT = (
    "INSERT INTO {s}.runs (run_id, version, state, status, stop_reason, updated_at, snapshot) "
    "SELECT %(run_id)s, 1, %(state)s, %(status)s, %(stop_reason)s, %(updated_at)s, "
    "%(snapshot)s::json WHERE TRUE ON CONFLICT (run_id) DO NOTHING"
)
_OLD_POSTGRES_UPDATE = (
    "UPDATE {s}.runs SET version = version + 1, state = %(state)s, status = %(status)s, "
    "stop_reason = %(stop_reason)s, updated_at = %(updated_at)s, snapshot = %(snapshot)s::json "
    "WHERE run_id = %(run_id)s AND version = %(expected)s AND TRUE"
)


class OldWriter:
    """A store schema 2 worker's saves, on a connection of its own."""

    def __init__(self, kind: str, path: Path, schema: str) -> None:
        self.kind, self.path, self.schema = kind, path, schema

    def _run(self, sqlite_sql: str, postgres_sql: str, values: dict[str, Any]) -> int:
        if self.kind == "sqlite":
            with sqlite3.connect(self.path, isolation_level=None) as raw:
                order = ("run_id", "state", "status", "stop_reason", "updated_at")
                if sqlite_sql.startswith("INSERT"):
                    row = (*[values[k] for k in order], values["snapshot"])
                else:
                    row = (
                        *[values[k] for k in order[1:]],
                        values["snapshot"],
                        values["run_id"],
                        values["expected"],
                    )
                return raw.execute(sqlite_sql, row).rowcount
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as raw:
            return raw.execute(postgres_sql.replace("{s}", self.schema), values).rowcount  # type: ignore[arg-type]

    def save(self, snapshot: RunSnapshot, expected: int | None) -> int:
        """Save the whole snapshot as that release did; return the rows written."""
        values = {
            "run_id": snapshot.run_id,
            "state": snapshot.state,
            "status": None if snapshot.result is None else snapshot.result.status.value,
            "stop_reason": None,
            "updated_at": snapshot.saved_at.isoformat(),
            "snapshot": snapshot.model_dump_json(),
            "expected": expected,
        }
        if expected is None:
            return self._run(_OLD_SQLITE_INSERT, _OLD_POSTGRES_INSERT, values)
        return self._run(_OLD_SQLITE_UPDATE, _OLD_POSTGRES_UPDATE, values)

    def refused(self) -> type[Exception]:
        """The error the old release's driver raises for the trigger's abort."""
        if self.kind == "sqlite":
            return sqlite3.IntegrityError
        import psycopg

        return psycopg.errors.CheckViolation


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop per test, so PostgreSQL stores keep their connections."""
    made = asyncio.new_event_loop()
    yield made
    made.close()


@pytest.fixture(params=["sqlite", "postgres"])
def stores(
    request: pytest.FixtureRequest, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> Iterator[tuple[SqlStore, OldWriter]]:
    """A store of this release and an old release's writer on the same database."""
    path, schema = tmp_path / "runs.db", ""
    if request.param == "sqlite":
        store: SqlStore = SqliteRunStore(path)
    else:
        schema = fresh_schema()
        store = PostgresRunStore(postgres_dsn(), schema=schema)
    yield store, OldWriter(request.param, path, schema)
    loop.run_until_complete(store.close())


def _finished_run(store: SqlStore, loop: asyncio.AbstractEventLoop, run_id: str) -> Any:
    agent = Agent(ScriptedModel([final("Done.")]), ToolRegistry(), store=store)
    loop.run_until_complete(agent.run("Do it.", run_id=run_id))
    stored = loop.run_until_complete(store.get(run_id))
    assert stored is not None
    return stored


def test_an_old_releases_whole_snapshot_save_on_a_laid_out_run_is_refused_and_writes_nothing(
    stores: tuple[SqlStore, OldWriter], loop: asyncio.AbstractEventLoop
) -> None:
    """The trigger aborts the old compare-and-set, naming the upgrade; the run stays as it was."""
    store, old = stores
    stored = _finished_run(store, loop, "run-new")
    with pytest.raises(old.refused(), match="a newer release upgraded this run store"):
        old.save(stored.snapshot.model_copy(update={"state": "running"}), stored.version)
    again = loop.run_until_complete(store.get("run-new"))
    assert again is not None
    assert (again.version, again.snapshot) == (stored.version, stored.snapshot)


def test_a_run_the_new_release_never_laid_out_stays_writable_by_the_old_one_until_it_is(
    stores: tuple[SqlStore, OldWriter], loop: asyncio.AbstractEventLoop
) -> None:
    """A whole-snapshot row has no items to disagree with; once laid out, old saves are refused."""
    store, old = stores
    whole = _finished_run(store, loop, "run-a").snapshot.model_copy(update={"run_id": "legacy"})
    assert old.save(whole, None) == 1
    assert old.save(whole, 1) == 1  # the old release's own rows: its saves still land
    legacy = loop.run_until_complete(store.get("legacy"))
    assert legacy is not None
    assert (legacy.version, legacy.snapshot) == (2, whole)
    assert loop.run_until_complete(store.save(whole, expected_version=2)) == 3  # laid out now
    with pytest.raises(old.refused(), match="Stop this worker"):
        old.save(whole, 3)
    latest = loop.run_until_complete(store.get("legacy"))
    assert latest is not None
    assert (latest.version, latest.snapshot) == (3, whole)
