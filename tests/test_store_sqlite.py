"""`SqliteRunStore` specifics: the file layout, schema versions, errors and concurrency."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from ownloop import ConfigurationError
from ownloop.contracts import WriteIntent
from ownloop.exceptions import SchemaVersionError, StaleCheckpoint, StoreError
from ownloop.store import SqliteRunStore
from ownloop.store._schema import STORE_SCHEMA_VERSION
from tests.durable_support import T0, snapshot

_COLUMNS = "(run_id, version, state, status, stop_reason, updated_at, snapshot)"
"""A run row as store schema 2 wrote it: the whole snapshot, no layout."""


def _store(path: Path, **options: object) -> SqliteRunStore:
    return SqliteRunStore(path, **options)  # type: ignore[arg-type]


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _intent(call_id: str = "c1") -> WriteIntent:
    return WriteIntent(
        run_id="run-1",
        call_id=call_id,
        tool="export",
        idempotency_key="k",
        arguments_digest="d",
        recorded_at=T0,
    )


def test_file_is_in_wal_mode_with_its_schema_version(tmp_path: Path) -> None:
    """A new file gets WAL journaling, its tables and store schema version 3."""
    store = SqliteRunStore(tmp_path / "runs.db")
    raw = _raw(tmp_path / "runs.db")
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    tables = {name for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "run_items", "leases", "journal", "approvals", "threads", "ownloop_schema"} <= (
        tables
    )
    versions = raw.execute("SELECT version FROM ownloop_schema").fetchall()
    assert versions == [(n,) for n in range(1, STORE_SCHEMA_VERSION + 1)]
    raw.close()
    asyncio.run(store.close())
    reopened = SqliteRunStore(tmp_path / "runs.db")  # migrations do not run twice
    assert repr(reopened) == f"SqliteRunStore({str(tmp_path / 'runs.db')!r})"
    asyncio.run(reopened.close())


def test_snapshot_is_stored_as_json_not_pickle(tmp_path: Path) -> None:
    """The stored snapshot is the Pydantic JSON of the record, readable by any tool."""
    store = SqliteRunStore(tmp_path / "runs.db")
    asyncio.run(store.save(snapshot(), expected_version=None))
    raw = _raw(tmp_path / "runs.db")
    (text,) = raw.execute("SELECT snapshot FROM runs").fetchone()
    raw.close()
    assert json.loads(text)["schema_version"] == 2
    asyncio.run(store.close())


def test_hand_written_newer_snapshot_fails_fast(tmp_path: Path) -> None:
    """A stored snapshot with a newer schema version (and unknown fields) raises on load."""
    store = SqliteRunStore(tmp_path / "runs.db")
    future = {**json.loads(snapshot().model_dump_json()), "schema_version": 3, "new_field": [1]}
    raw = _raw(tmp_path / "runs.db")
    raw.execute(
        f"INSERT INTO runs {_COLUMNS} VALUES ('run-1', 1, 'running', NULL, NULL, '2026', ?)",
        (json.dumps(future),),
    )
    raw.close()
    with pytest.raises(SchemaVersionError, match="schema version 3"):
        asyncio.run(store.get("run-1"))
    asyncio.run(store.close())


def test_newer_snapshot_with_known_fields_fails_fast(tmp_path: Path) -> None:
    """A newer schema version is refused even when every field happens to validate."""
    store = SqliteRunStore(tmp_path / "runs.db")
    future = {**json.loads(snapshot().model_dump_json()), "schema_version": 7}
    raw = _raw(tmp_path / "runs.db")
    raw.execute(
        f"INSERT INTO runs {_COLUMNS} VALUES ('run-1', 1, 'running', NULL, NULL, '2026', ?)",
        (json.dumps(future),),
    )
    raw.close()
    with pytest.raises(SchemaVersionError, match="upgrade ownloop"):
        asyncio.run(store.get("run-1"))
    asyncio.run(store.close())


@pytest.mark.parametrize("text", ["{not json", '{"schema_version": 1}', "[1, 2]"])
def test_corrupt_snapshot_is_a_store_error(tmp_path: Path, text: str) -> None:
    """A stored snapshot that is not a valid snapshot raises StoreError naming the run."""
    store = SqliteRunStore(tmp_path / "runs.db")
    raw = _raw(tmp_path / "runs.db")
    raw.execute(
        f"INSERT INTO runs {_COLUMNS} VALUES ('run-1', 1, 'running', NULL, NULL, '2026', ?)",
        (text,),
    )
    raw.close()
    with pytest.raises(StoreError, match="run-1 is not valid"):
        asyncio.run(store.get("run-1"))
    asyncio.run(store.close())


def test_corrupt_journal_record_is_a_store_error(tmp_path: Path) -> None:
    """A journal row that is not a valid intent raises StoreError."""
    store = SqliteRunStore(tmp_path / "runs.db")
    raw = _raw(tmp_path / "runs.db")
    raw.execute("INSERT INTO journal VALUES ('run-1', 'c1', '{}', NULL)")
    raw.close()
    with pytest.raises(StoreError, match="WriteIntent of run run-1"):
        asyncio.run(store.journal("run-1"))
    asyncio.run(store.close())


def test_database_of_a_newer_store_schema_is_refused(tmp_path: Path) -> None:
    """Opening a file laid out by a newer ownloop fails fast and leaves it untouched."""
    asyncio.run(SqliteRunStore(tmp_path / "runs.db").close())
    raw = _raw(tmp_path / "runs.db")
    raw.execute("INSERT INTO ownloop_schema VALUES (?, 'later')", (STORE_SCHEMA_VERSION + 1,))
    raw.close()
    with pytest.raises(
        SchemaVersionError, match=f"store schema version {STORE_SCHEMA_VERSION + 1}"
    ):
        SqliteRunStore(tmp_path / "runs.db")


def test_two_stores_on_one_file_share_the_compare_and_set(tmp_path: Path) -> None:
    """Two connections (as two processes would) cannot both save over the same version."""
    first, second = SqliteRunStore(tmp_path / "r.db"), SqliteRunStore(tmp_path / "r.db")
    asyncio.run(first.save(snapshot(), expected_version=None))
    assert asyncio.run(second.save(snapshot(at=1), expected_version=1)) == 2
    with pytest.raises(StaleCheckpoint, match="version 2, not 1"):
        asyncio.run(first.save(snapshot(at=2), expected_version=1))
    asyncio.run(first.close())
    asyncio.run(second.close())


def test_reintent_without_receipt_replaces_it_in_place(tmp_path: Path) -> None:
    """Journaling a write again before its receipt keeps one entry at its original position."""
    store = SqliteRunStore(tmp_path / "runs.db")
    asyncio.run(store.record_intent(_intent("c1")))
    asyncio.run(store.record_intent(_intent("c2")))
    asyncio.run(store.record_intent(_intent("c1").model_copy(update={"idempotency_key": "k2"})))
    entries = asyncio.run(store.journal("run-1"))
    assert [(e.intent.call_id, e.intent.idempotency_key) for e in entries] == [
        ("c1", "k2"),
        ("c2", "k"),
    ]
    asyncio.run(store.close())


def test_full_synchronous_mode_is_kept(tmp_path: Path) -> None:
    """synchronous='FULL' stores work as usual and journal writes leave the mode as chosen."""
    store = _store(tmp_path / "runs.db", synchronous="FULL")
    asyncio.run(store.record_intent(_intent()))
    assert asyncio.run(store.save(snapshot(), expected_version=None)) == 1
    assert store.synchronous == "FULL"
    asyncio.run(store.close())


def test_unknown_synchronous_mode_is_a_configuration_error(tmp_path: Path) -> None:
    """Only NORMAL and FULL are accepted."""
    with pytest.raises(ConfigurationError, match="synchronous"):
        _store(tmp_path / "runs.db", synchronous="OFF")


def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    """A path that cannot hold a database raises StoreError, not sqlite3.Error."""
    with pytest.raises(StoreError, match="cannot open"):
        SqliteRunStore(tmp_path / "missing-dir" / "runs.db")
    (tmp_path / "not-a-db").write_bytes(b"this is not a database file" * 100)
    with pytest.raises(StoreError, match="open failed"):
        SqliteRunStore(tmp_path / "not-a-db")


def test_closed_store_refuses_operations(tmp_path: Path) -> None:
    """After close (also by `async with`) every operation raises StoreError; close is idempotent."""

    async def scenario() -> None:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await store.save(snapshot(), expected_version=None)
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await store.get("run-1")

    asyncio.run(scenario())


def test_a_writer_holding_the_file_past_the_timeout_is_a_store_error(tmp_path: Path) -> None:
    """When another process keeps the write lock past the busy timeout, the save fails cleanly."""
    store = _store(tmp_path / "runs.db", busy_timeout_s=0.05)
    blocker = _raw(tmp_path / "runs.db")
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="locked"):
        asyncio.run(store.save(snapshot(), expected_version=None))
    with pytest.raises(StoreError, match="locked"):
        asyncio.run(store.acquire_lease("run-1", "w", 1))
    blocker.execute("ROLLBACK")
    blocker.close()
    assert asyncio.run(store.save(snapshot(), expected_version=None)) == 1
    asyncio.run(store.close())


def test_one_store_is_safe_across_threads(tmp_path: Path) -> None:
    """Threads sharing one store each save their own runs without errors."""
    store = SqliteRunStore(tmp_path / "runs.db")
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            version = asyncio.run(store.save(snapshot(f"run-{index}"), expected_version=None))
            for step in range(20):
                version = asyncio.run(
                    store.save(snapshot(f"run-{index}", at=step), expected_version=version)
                )
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [line.version for line in asyncio.run(store.list_runs())] == [21] * 4
    asyncio.run(store.close())


def test_a_version_1_file_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    """A file laid out by store schema 1 gains the lease holder columns; its runs stay."""
    from ownloop.store._schema import SQLITE_MIGRATIONS

    raw = _raw(tmp_path / "old.db")
    for statement in SQLITE_MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute("CREATE TABLE ownloop_schema (version INTEGER PRIMARY KEY, applied_at TEXT)")
    raw.execute("INSERT INTO ownloop_schema VALUES (1, 'then')")
    raw.execute("INSERT INTO leases VALUES ('run-1', 'old-worker', 'tok', 0)")
    raw.commit()
    raw.close()
    store = SqliteRunStore(tmp_path / "old.db")
    lease = asyncio.run(store.acquire_lease("run-1", "new-worker", 60))
    assert (lease.owner, lease.taken_over_from) == ("new-worker", None)
    asyncio.run(store.close())
