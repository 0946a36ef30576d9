"""The upgrade fence: a store opened before another release upgraded its database writes nothing.

Every write transaction of the SQL stores reads the store's schema version; once it is not the
one the store opened, the write raises `StoreUpgraded` and changes nothing. The upgrade is made
behind the store's back, from another connection, as a newer release's migration would.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop import Approval, Receipt, RunStatus
from ownloop.contracts import ApprovalRequest, WriteIntent
from ownloop.exceptions import SchemaVersionError, StoreUpgraded
from ownloop.store import PostgresRunStore, Retention, SqliteRunStore
from ownloop.store._schema import STORE_SCHEMA_VERSION
from tests.durable_support import T0, fresh_schema, postgres_dsn, snapshot

Run = Callable[[Coroutine[Any, Any, Any]], Any]
SqlStore = SqliteRunStore | PostgresRunStore
NEWER = STORE_SCHEMA_VERSION + 1


class Database:
    """A SQLite file or a PostgreSQL schema, with a raw connection of its own."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = tmp_path / "runs.db"
        self.schema = fresh_schema()
        self.opened: list[SqlStore] = []

    def open(self) -> SqlStore:
        """Open a store on the database (as a worker process would)."""
        store: SqlStore = (
            SqliteRunStore(self.path)
            if self.kind == "sqlite"
            else PostgresRunStore(postgres_dsn(), schema=self.schema)
        )
        self.opened.append(store)
        return store

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Run SQL on another connection; ``{s}.`` names the store's schema."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.path, isolation_level=None) as raw:
                return raw.execute(sql.replace("{s}.", "")).fetchall()
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as raw:
            cursor = raw.execute(sql.replace("{s}", self.schema))  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def upgrade(self) -> None:
        """Record a newer store schema, as a newer release's migration does when it commits."""
        when = ", 'later'" if self.kind == "sqlite" else ""
        column = "" if self.kind == "sqlite" else " (version)"
        self.query(f"INSERT INTO {{s}}.ownloop_schema{column} VALUES ({NEWER}{when})")


@pytest.fixture
def run() -> Iterator[Run]:
    """One event loop per test, so PostgreSQL stores keep their connections."""
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    loop.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path, run: Run) -> Iterator[Database]:
    """Each SQL database kind, empty."""
    opened = Database(request.param, tmp_path)
    yield opened
    for store in opened.opened:
        run(store.close())


def _paused_run(store: SqlStore, run: Run) -> None:
    request = ApprovalRequest(id="req-1", call_id="c1", tool="export", arguments={}, digest="dg")
    paused = snapshot(state="paused", status=RunStatus.PAUSED)
    run(
        store.save(
            paused.model_copy(update={"approval_requests": (request,)}), expected_version=None
        )
    )


def test_a_store_upgraded_behind_its_back_fails_its_next_save_and_writes_nothing(
    database: Database, run: Run
) -> None:
    """After another release's upgrade, the next save raises StoreUpgraded naming both versions."""
    store = database.open()
    _paused_run(store, run)
    database.upgrade()
    with pytest.raises(StoreUpgraded) as refused:
        run(store.save(snapshot(task="the old layout"), expected_version=1))
    where = str(database.path) if database.kind == "sqlite" else f"(schema {database.schema})"
    place, _, rest = str(refused.value).partition(" is now at ")
    assert place.startswith("the run store at ")
    assert place.endswith(where)
    assert rest == (
        f"store schema version {NEWER}, but this process opened it at version "
        f"{STORE_SCHEMA_VERSION} and writes only that layout, so it wrote nothing: an ownloop "
        f"release that knows version {NEWER} changed the store while this process ran. Stop "
        "this worker and restart it on that release (see 'Rolling upgrades' in "
        "docs/concepts/durability.md)"
    )
    assert isinstance(refused.value, SchemaVersionError)
    assert database.query("SELECT version, state FROM {s}.runs") == [(1, "paused")]
    stored = run(store.get("run-1"))  # reading is still allowed
    assert (stored.version, stored.snapshot.task) == (1, "task")
    with pytest.raises(StoreUpgraded):
        run(store.save(snapshot("run-2"), expected_version=None))
    assert database.query("SELECT count(*) FROM {s}.runs") == [(1,)]


def test_every_write_of_a_fenced_store_is_refused(database: Database, run: Run) -> None:
    """Journal records, leases, decisions and threads of a fenced store are refused; no change."""
    store = database.open()
    _paused_run(store, run)
    lease = run(store.acquire_lease("run-1", "worker-a", 60))
    intent = WriteIntent(
        run_id="run-1",
        call_id="c1",
        tool="export",
        idempotency_key="k1",
        arguments_digest="d" * 64,
        recorded_at=T0,
    )
    run(store.record_intent(intent, lease=lease))
    run(store.submit_approval("run-1", Approval(request_id="req-1", approved=True, approver="a")))
    run(store.append_to_thread("t-1", "run-1", after=None))
    database.upgrade()
    receipt = Receipt(call_id="c1", tool="export", status="ok", effect="applied")
    writes: list[Coroutine[Any, Any, Any]] = [
        store.record_intent(intent.model_copy(update={"call_id": "c2"})),
        store.record_intent(intent.model_copy(update={"call_id": "c3"}), lease=lease),
        store.record_receipt("run-1", "c1", receipt),
        store.record_receipt("run-1", "c1", receipt, lease=lease),
        store.acquire_lease("run-2", "worker-b", 60),
        store.acquire_lease("run-1", "worker-b", 60, take_over=True),
        store.renew_lease(lease, 60),
        store.release_lease(lease),
        store.submit_approval("run-1", Approval(digest="dg", approved=False, approver="b")),
        store.withdraw_approvals("run-1", "req-1"),
        store.append_to_thread("t-1", "run-2", after="run-1"),
    ]
    for write in writes:
        with pytest.raises(StoreUpgraded):
            run(write)
    assert database.query("SELECT call_id, receipt FROM {s}.journal") == [("c1", None)]
    assert database.query("SELECT run_id, owner FROM {s}.leases") == [("run-1", "worker-a")]
    assert database.query("SELECT count(*) FROM {s}.approvals") == [(1,)]
    assert database.query("SELECT run_id FROM {s}.threads") == [("run-1",)]


def test_a_store_opened_after_the_upgrade_is_refused_at_once(database: Database, run: Run) -> None:
    """A process of the older release that starts after the upgrade is refused when it opens."""
    run(database.open().list_runs())
    database.upgrade()
    with pytest.raises(SchemaVersionError, match=f"store schema version {NEWER}"):
        run(database.open().list_runs())


def test_the_fence_passes_while_the_schema_is_unchanged(database: Database, run: Run) -> None:
    """Two stores of this release on one database both write: the fence is only the version."""
    first, second = database.open(), database.open()
    _paused_run(first, run)
    assert run(second.save(snapshot(task="next"), expected_version=1)) == 2
    assert database.query("SELECT max(version) FROM {s}.ownloop_schema") == [
        (STORE_SCHEMA_VERSION,)
    ]


def test_a_running_agent_stops_at_its_next_checkpoint_after_an_upgrade(tmp_path: Path) -> None:
    """A run whose store is upgraded mid-run raises StoreUpgraded at its next checkpoint."""
    from ownloop import Agent, ToolRegistry
    from ownloop.testing import ScriptedModel, final, tool_call

    database = Database("sqlite", tmp_path)
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def status() -> str:
        """Read the status (meanwhile a newer release upgrades the store)."""
        database.upgrade()
        return "green"

    async def scenario() -> list[tuple[Any, ...]]:
        async with SqliteRunStore(database.path) as store:
            model = ScriptedModel([tool_call("status", "c1"), final("all green")])
            agent = Agent(model, registry, store=store)
            with pytest.raises(StoreUpgraded, match=f"now at store schema version {NEWER}"):
                await agent.run("check the status", run_id="run-1")
        return database.query("SELECT version, state FROM runs")

    ((version, state),) = asyncio.run(scenario())
    assert state == "running"  # the checkpoint after the tool call never landed
    assert database.query("SELECT count(*) FROM run_items WHERE part = 'messages'") == [(2,)]
    assert version >= 1


def test_a_postgres_upgrade_waits_for_a_write_in_flight(tmp_path: Path) -> None:
    """An upgrade on PostgreSQL takes the schema table's lock: it waits for a fenced write's end."""
    import threading

    import psycopg

    from ownloop.store._schema import POSTGRES_MIGRATIONS

    database = Database("postgres", tmp_path)
    statements = [s for version in POSTGRES_MIGRATIONS[:3] for s in version]
    for statement in [
        "CREATE SCHEMA {s}",
        *statements,
        "CREATE TABLE {s}.ownloop_schema (version integer PRIMARY KEY, applied_at timestamptz)",
        "INSERT INTO {s}.ownloop_schema VALUES (1, now()), (2, now()), (3, now())",
    ]:
        database.query(statement)
    with psycopg.connect(postgres_dsn()) as writer:  # a transaction, as a write of schema 3 holds
        writer.execute(f"SELECT max(version) FROM {database.schema}.ownloop_schema")  # type: ignore[arg-type]
        upgraded = threading.Event()

        def upgrade() -> None:
            asyncio.run(_open_and_close(database))
            upgraded.set()

        upgrader = threading.Thread(target=upgrade)
        upgrader.start()
        waiting = (
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT l.granted "
            f"AND c.relname = 'ownloop_schema' AND n.nspname = '{database.schema}'"
        )
        _wait_until(lambda: database.query(waiting) == [(1,)])
        assert not upgraded.is_set()
        writer.commit()
    upgrader.join(60)
    assert upgraded.is_set()
    assert database.query("SELECT max(version) FROM {s}.ownloop_schema") == [
        (STORE_SCHEMA_VERSION,)
    ]


async def _open_and_close(database: Database) -> None:
    async with PostgresRunStore(postgres_dsn(), schema=database.schema) as store:
        await store.list_runs()


def _wait_until(condition: Callable[[], bool]) -> None:
    import time

    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def test_a_prune_after_an_upgrade_removes_nothing(database: Database, run: Run) -> None:
    """A store opened before another release's upgrade prunes nothing: StoreUpgraded."""
    store = database.open()
    done = snapshot("done", state="finished", status=RunStatus.COMPLETED)
    run(store.save(done, expected_version=None))
    database.upgrade()
    with pytest.raises(StoreUpgraded):
        run(store.prune_runs(Retention(keep_latest=0)))
    assert database.query("SELECT run_id FROM {s}.runs") == [("done",)]
