"""The SQL stores' checkpoint layout: a state record plus append-only item rows (store schema 3).

Proves that what is loaded is what was saved whatever the sequence of appends, rewrites
(compaction), saves and loads across store instances; that a stale instance never corrupts a
run; that a save refused by fencing writes no item row; that a checkpoint writes only what grew;
and that databases laid out by store schemas 1, 2 and 3 upgrade in place and their runs resume.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop import Actor, Approval, Receipt, RunStatus
from ownloop.contracts import (
    Evidence,
    ModelRequested,
    RunResult,
    RunSnapshot,
    StopReason,
    UserMessage,
)
from ownloop.exceptions import RunLeased, StaleCheckpoint, StoreError
from ownloop.store import PostgresRunStore, SqliteRunStore
from ownloop.store._layout import PARTS, KnownRuns, first_change, plan_save
from ownloop.store._schema import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, STORE_SCHEMA_VERSION
from tests.durable_support import T0, VERSIONS, fresh_schema, postgres_dsn, snapshot
from tests.durable_worker import Job, ledger_rows, make_agent

SAMPLES = Path(__file__).parent / "fixtures" / "snapshots"
Run = Callable[[Coroutine[Any, Any, Any]], Any]
SqlStore = SqliteRunStore | PostgresRunStore


class Database:
    """One database (a SQLite file or a PostgreSQL schema) that opens store instances on it."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = tmp_path / "runs.db"
        self.schema = fresh_schema()
        self.dsn = postgres_dsn() if kind == "postgres" else ""
        self.opened: list[SqlStore] = []

    def open(self) -> SqlStore:
        """Return a new store instance (as another process would have) on this database."""
        store: SqlStore = (
            SqliteRunStore(self.path)
            if self.kind == "sqlite"
            else PostgresRunStore(self.dsn, schema=self.schema)
        )
        self.opened.append(store)
        return store

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run SQL on the database: ``{s}`` is the schema, ``?`` a parameter, ``::text`` for PG."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.path, isolation_level=None) as raw:
                return raw.execute(sql.replace("{s}.", "").replace("::text", ""), params).fetchall()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as raw:
            cursor = raw.execute(sql.replace("{s}", self.schema).replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description else []


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


def _item(part: str, n: int, text: str) -> Any:
    if part == "messages":
        return UserMessage(content=f"{text} #{n}")
    if part == "trace":
        return ModelRequested(
            run_id="r", seq=n + 1, at=T0, step=1, attempt=1, messages=n, request_chars=0, tools=0
        )
    if part == "receipts":
        return Receipt(call_id=f"c{n}", tool="t", status="ok", effect="none", data={"t": text})
    return Evidence(id=f"e{n}", tool="t", call_ids=(f"c{n}",), title=text[:512])


def _with(base: RunSnapshot, parts: dict[str, list[Any]], finished: bool = False) -> RunSnapshot:
    """The snapshot ``base`` holding these parts (and, finished, a result sharing them)."""
    grown = {part: tuple(items) for part, items in parts.items()}
    result = None
    if finished:
        result = RunResult(
            run_id=base.run_id,
            status=RunStatus.COMPLETED,
            stop_reason=StopReason.FINAL_OUTPUT,
            versions=VERSIONS,
            messages=grown["messages"],
            trace=grown["trace"],
            evidence=grown["evidence"],
            receipts=grown["receipts"][:1],  # not the snapshot's own: stored in the state record
        )
    return base.model_copy(update={**grown, "result": result, "state": "running"})


EDITS = st.tuples(
    st.sampled_from(["append", "append", "append", "rewrite", "copy", "cut"]),
    st.sampled_from(PARTS),
    st.integers(1, 4),
    st.text(max_size=40),
)
STEPS = st.lists(
    st.tuples(EDITS, st.sampled_from(["save by 0", "save by 0", "save by 1", "load by 1", "-"])),
    max_size=30,
)


def _edit(parts: dict[str, list[Any]], edit: tuple[str, str, int, str]) -> None:
    """Change one part as a run does: append, or (compaction) rewrite or drop its latest items."""
    operation, part, amount, text = edit
    items = parts[part]
    where = max(len(items) - amount, 0)
    if operation == "append":
        items.extend(_item(part, len(items) + n, text) for n in range(amount))
    elif operation == "cut":
        del items[where:]
    elif items and operation == "rewrite":
        items[where] = _item(part, amount, text + "!")
    elif items:  # an equal item that is another object
        items[where] = items[where].model_copy()


def test_loads_equal_saves_across_instances(database: Database, run: Run) -> None:
    """Whatever two instances append, rewrite, cut, save and load, any one loads the last save."""
    writers = [database.open(), database.open()]
    counter = iter(range(10**6))

    @settings(
        max_examples=80 if database.kind == "sqlite" else 30,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(STEPS, st.integers(0, 40))
    def check(steps: list[tuple[tuple[str, str, int, str], str]], finish_at: int) -> None:
        base = snapshot(f"run-{next(counter)}")
        parts: dict[str, list[Any]] = {part: [] for part in PARTS}
        seen: list[int | None] = [None, None]  # the version each writer last saw
        stored: tuple[int, RunSnapshot] | None = None
        for index, (edit, then) in enumerate(steps):
            _edit(parts, edit)
            if then == "-":
                continue
            writer = int(then[-1])
            if then.startswith("save"):
                saved = _with(base, parts, finished=index >= finish_at)
                try:
                    seen[writer] = run(writers[writer].save(saved, expected_version=seen[writer]))
                    stored = (seen[writer] or 0, saved)
                    continue
                except StaleCheckpoint:  # the other writer saved since: reload, as a resume does
                    assert stored is not None
                    assert seen[writer] != stored[0]
            loaded = run(writers[writer].get(base.run_id))
            assert (loaded is None) == (stored is None)
            if loaded is not None:
                assert (loaded.version, loaded.snapshot) == stored
                seen[writer] = loaded.version
        fresh = database.open()
        loaded = run(fresh.get(base.run_id))
        assert (loaded is None) == (stored is None)
        if loaded is not None:
            assert (loaded.version, loaded.snapshot) == stored
        run(fresh.close())

    check()


def test_a_stale_instance_cannot_corrupt_a_run(database: Database, run: Run) -> None:
    """An instance whose knowledge of a run is out of date is refused, or writes the run whole."""
    first, second = database.open(), database.open()
    parts: dict[str, list[Any]] = {part: [_item(part, 0, "a")] for part in PARTS}
    base = snapshot()
    assert run(first.save(_with(base, parts), expected_version=None)) == 1
    assert run(first.save(_with(base, parts), expected_version=1)) == 2  # first knows version 2
    loaded = run(second.get(base.run_id))
    parts["messages"] = [_item("messages", 9, "compacted")]  # compaction rewrote the messages
    parts["trace"].append(_item("trace", 1, "b"))
    assert run(second.save(_with(base, parts), expected_version=loaded.version)) == 3
    with pytest.raises(StaleCheckpoint, match="version 3, not 2"):
        run(first.save(_with(base, {**parts, "trace": []}), expected_version=2))
    parts["receipts"].append(_item("receipts", 1, "c"))
    assert run(second.save(_with(base, parts), expected_version=3)) == 4
    # `first` still knows only version 2; told the current version, it writes every item again.
    parts["evidence"] = []
    assert run(first.save(_with(base, parts), expected_version=4)) == 5
    stored = run(database.open().get(base.run_id))
    assert (stored.version, stored.snapshot) == (5, _with(base, parts))


def test_a_save_refused_by_fencing_writes_no_item(database: Database, run: Run) -> None:
    """Items appended by a worker that lost its lease never become visible, in any instance."""
    store = database.open()
    parts: dict[str, list[Any]] = {part: [_item(part, 0, "a")] for part in PARTS}
    base = snapshot()
    lease = run(store.acquire_lease(base.run_id, "w1", 30))
    run(store.save(_with(base, parts), expected_version=None, lease=lease))
    run(database.open().acquire_lease(base.run_id, "w2", 30, take_over=True))
    rows_before = database.query("SELECT * FROM {s}.run_items ORDER BY part, position")
    for part in PARTS:
        parts[part].extend(_item(part, n, "lost") for n in range(1, 4))
    with pytest.raises(RunLeased):
        run(store.save(_with(base, parts), expected_version=1, lease=lease))
    assert database.query("SELECT * FROM {s}.run_items ORDER BY part, position") == rows_before
    stored = run(database.open().get(base.run_id))
    assert stored.version == 1
    assert all(len(getattr(stored.snapshot, part)) == 1 for part in PARTS)


def test_a_checkpoint_writes_only_what_grew(database: Database, run: Run) -> None:
    """A save adds a row per new item, and neither the state record nor the result repeats items."""
    store = database.open()
    parts: dict[str, list[Any]] = {part: [] for part in PARTS}
    base, version, sizes = snapshot(), None, []
    for step in range(40):
        for part in PARTS:
            parts[part].append(_item(part, step, "x" * 300))
        version = run(store.save(_with(base, parts, finished=step == 39), expected_version=version))
        (size,) = database.query("SELECT length(snapshot::text) FROM {s}.runs")[0]
        sizes.append(size)
    (rows,) = database.query("SELECT count(*) FROM {s}.run_items")[0]
    assert rows == 40 * len(PARTS)
    assert max(sizes[:-1]) == min(sizes[:-1])  # nothing per item in the state record
    assert sizes[-1] < sizes[0] + 3000  # the result's own receipt, nothing else repeated
    (layout,) = database.query("SELECT layout::text FROM {s}.runs")[0]
    assert json.loads(layout)["result_shares"] == ["messages", "trace", "evidence"]


def test_missing_items_are_a_store_error(database: Database, run: Run) -> None:
    """A run whose item rows do not match its state record fails to load, naming the run."""
    store = database.open()
    parts = {part: [_item(part, n, "a") for n in range(3)] for part in PARTS}
    run(store.save(_with(snapshot(), parts), expected_version=None))
    database.query("DELETE FROM {s}.run_items WHERE part = 'trace' AND position = 2")
    with pytest.raises(StoreError, match="run-1 has 2 stored trace items"):
        run(database.open().get("run-1"))
    database.query("DELETE FROM {s}.run_items WHERE part = 'trace' AND position = 0")
    with pytest.raises(StoreError, match="run-1 lacks its trace item 0"):
        run(database.open().get("run-1"))


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE {s}.run_items SET item = '{\"role\": \"robot\"}' WHERE part = 'messages'",
        "INSERT INTO {s}.run_items VALUES ('run-1', 'future', 0, '{}')",
    ],
)
def test_invalid_items_are_a_store_error(database: Database, run: Run, damage: str) -> None:
    """An item that is not a valid record of its part, or of no known part, fails the load."""
    store = database.open()
    parts = {part: [_item(part, 0, "a")] for part in PARTS}
    run(store.save(_with(snapshot(), parts), expected_version=None))
    database.query(damage)
    with pytest.raises(StoreError, match="stored items of run run-1 are not valid"):
        run(database.open().get("run-1"))


def test_after_a_failed_save_the_next_one_writes_every_item(database: Database, run: Run) -> None:
    """A save that fails in the database changes nothing, and the store stops trusting its cache."""
    store = database.open()
    parts = {part: [_item(part, 0, "a")] for part in PARTS}
    run(store.save(_with(snapshot(), parts), expected_version=None))
    database.query("ALTER TABLE {s}.run_items RENAME TO parked")
    parts["trace"].append(_item("trace", 1, "b"))
    with pytest.raises(StoreError, match="save failed"):
        run(store.save(_with(snapshot(), parts), expected_version=1))
    database.query("ALTER TABLE {s}.parked RENAME TO run_items")
    assert database.query("SELECT version FROM {s}.runs") == [(1,)]
    database.query("DELETE FROM {s}.run_items")  # whatever the failed save may have left
    assert run(store.save(_with(snapshot(), parts), expected_version=1)) == 2
    assert run(database.open().get("run-1")).snapshot == _with(snapshot(), parts)


def test_first_change_finds_where_a_part_was_rewritten() -> None:
    """Appends keep the whole prefix; an equal copy counts as unchanged; a rewrite is found."""
    a, b, c = (_item("messages", n, "m") for n in range(3))
    assert first_change((a, b), (a, b, c)) == 2
    assert first_change((a, b), (a.model_copy(), b)) == 2
    assert first_change((a, b, c), (a, c)) == 1
    assert first_change((a, b, c), (a,)) == 1
    assert first_change((), (a,)) == 0


def test_known_runs_are_bounded_and_forget_finished_runs() -> None:
    """A store remembers the latest runs' parts by exact version, and never a finished run's."""
    known = KnownRuns(capacity=2)
    running = plan_save(snapshot(), None)
    for run_id in ("a", "b", "c"):
        known.saved(run_id, 1, running)
    assert (len(known), known.parts_at("a", 1)) == (2, None)
    assert known.parts_at("c", 1) == running.parts
    assert known.parts_at("c", 2) is None
    assert known.parts_at("c", None) is None
    known.saved("c", 2, plan_save(snapshot(state="finished", status=RunStatus.COMPLETED), None))
    assert (len(known), known.parts_at("c", 2)) == (1, None)


_SCHEMA_5_LISTING = {  # the listing indexes a store of schema 5 created where it opened
    "sqlite": (
        "CREATE INDEX runs_by_recency ON runs (updated_at DESC, run_id DESC)",
        "CREATE INDEX runs_by_state_recency ON runs (state, updated_at DESC, run_id DESC)",
        "CREATE INDEX runs_by_actor_recency ON runs (iif(json_valid(snapshot), "
        "json_extract(snapshot, '$.actor.id'), NULL), updated_at DESC, run_id DESC)",
        "CREATE INDEX runs_by_agent_recency ON runs (iif(json_valid(snapshot), "
        "json_extract(snapshot, '$.versions.policy_digest'), NULL), updated_at DESC, run_id DESC)",
    ),
    "postgres": (
        POSTGRES_MIGRATIONS[5][0],  # run_field(), which schema 5 created with these indexes
        "CREATE INDEX runs_by_recency ON {s}.runs (updated_at DESC, run_id DESC)",
        "CREATE INDEX runs_by_status_recency ON {s}.runs (status, updated_at DESC, run_id DESC)",
        "CREATE INDEX runs_by_actor_recency ON {s}.runs "
        "({s}.run_field(snapshot, 'actor', 'id'), updated_at DESC, run_id DESC)",
    ),
}


def test_a_schema_5_database_upgrades_to_listings_read_from_their_indexes(
    database: Database, run: Run
) -> None:
    """Schema 5 to 6 copies each stored run's actor and agent into columns its new indexes cover."""
    sample = RunSnapshot.model_validate_json((SAMPLES / "v1_paused.json").read_text())
    _old_database(database, 5, sample)
    for statement in _SCHEMA_5_LISTING[database.kind]:
        database.query(statement)
    acting = sample.model_copy(update={"run_id": "run-alice", "actor": Actor(id="alice")})
    database.query(
        "INSERT INTO {s}.runs (run_id, version, state, status, stop_reason, updated_at, snapshot) "
        "VALUES (?, 1, 'paused', 'paused', 'approval_required', '2026-01-02T00:00:00+00:00', ?)",
        acting.run_id,
        acting.model_dump_json(),
    )
    store = database.open()
    digest = sample.versions.policy_digest
    lines = run(store.list_runs())
    assert [(line.run_id, line.actor, line.agent) for line in lines] == [
        ("run-alice", "alice", digest),
        (sample.run_id, None, digest),
    ]
    assert [line.run_id for line in run(store.list_runs(actor="alice"))] == ["run-alice"]
    assert len(run(store.list_runs(agent=digest, state="paused"))) == 2
    assert run(store.list_runs(agent="another agent")) == []
    assert database.query("SELECT max(version) FROM {s}.ownloop_schema") == [(6,)]
    found = database.query(
        "SELECT sql FROM sqlite_master WHERE name = 'runs_by_actor_recency'"
        if database.kind == "sqlite"
        else "SELECT indexdef FROM pg_indexes WHERE indexname = 'runs_by_actor_recency' "
        "AND schemaname = '{s}'"
    )
    assert "(actor, updated_at DESC, run_id DESC" in found[0][0], found
    assert "json" not in found[0][0], found
    assert "run_field" not in found[0][0], found


def _old_database(database: Database, schema_version: int, sample: RunSnapshot) -> None:
    """Lay the database out as store schema ``schema_version`` did, holding ``sample`` whole."""
    migrations = SQLITE_MIGRATIONS if database.kind == "sqlite" else POSTGRES_MIGRATIONS
    statements = [s for version in migrations[:schema_version] for s in version]
    if database.kind == "postgres":
        statements.insert(0, "CREATE SCHEMA {s}")
    statements.append(
        "CREATE TABLE {s}.ownloop_schema (version integer PRIMARY KEY, applied_at text)"
    )
    for statement in statements:
        database.query(statement)
    for version in range(1, schema_version + 1):
        database.query("INSERT INTO {s}.ownloop_schema VALUES (?, 'then')", version)
    database.query(
        "INSERT INTO {s}.runs (run_id, version, state, status, stop_reason, updated_at, snapshot) "
        "VALUES (?, 3, ?, ?, ?, '2026-01-01T00:00:00+00:00', ?)",
        sample.run_id,
        sample.state,
        sample.result.status.value if sample.result else None,
        sample.result.stop_reason.value if sample.result else None,
        sample.model_dump_json(),
    )


@pytest.mark.parametrize("schema_version", [1, 2, 3, 4, 5])
def test_an_old_database_is_upgraded_and_its_paused_run_resumes(
    database: Database, run: Run, tmp_path: Path, schema_version: int
) -> None:
    """A store schema 1-5 database upgrades on open; its paused run loads, resumes, moves."""
    sample = RunSnapshot.model_validate_json((SAMPLES / "v1_paused.json").read_text())
    _old_database(database, schema_version, sample)
    store = database.open()
    stored = run(store.get(sample.run_id))
    assert (stored.version, stored.snapshot) == (3, sample)
    assert database.query("SELECT max(version) FROM {s}.ownloop_schema") == [
        (STORE_SCHEMA_VERSION,)
    ]
    request = sample.approval_requests[0].id
    run(
        store.submit_approval(
            sample.run_id, Approval(request_id=request, approved=True, approver="alice")
        )
    )
    job = Job(run_id=sample.run_id, directory=str(tmp_path), database="-", scenario="refund")
    played = sum(message.role == "assistant" for message in sample.messages)
    result = run(make_agent(job, store, played).resume(sample.run_id))
    assert result.status.value == "completed"
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]
    final = run(database.open().get(sample.run_id))
    assert final.snapshot.trace[: len(sample.trace)] == sample.trace
    assert final.snapshot.result == result.model_copy(
        update={"resume": final.snapshot.result.resume}
    )
    assert database.query("SELECT count(*) FROM {s}.runs WHERE layout IS NULL") == [(0,)]
