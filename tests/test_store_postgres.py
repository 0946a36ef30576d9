"""`PostgresRunStore` specifics: the optional extra, its schema, errors and event loops."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator

import pytest

from ownloop import ConfigurationError
from ownloop.exceptions import SchemaVersionError, StoreError
from ownloop.store import PostgresRunStore
from ownloop.store._schema import STORE_SCHEMA_VERSION
from tests.durable_support import fresh_schema, postgres_dsn, snapshot


@pytest.fixture
def dsn() -> str:
    """This session's test database."""
    return postgres_dsn()


@pytest.fixture
def store(dsn: str) -> Iterator[PostgresRunStore]:
    """A store in a schema of its own."""
    store = PostgresRunStore(dsn, schema=fresh_schema())
    yield store
    asyncio.run(store.close())


def _execute(dsn: str, sql: str, *params: object) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql, params)  # type: ignore[arg-type]  # test-only SQL


def test_store_package_imports_without_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extra, constructing the store says how to install it."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"ownloop\[postgres\]"):
        PostgresRunStore("postgresql://localhost/db")


@pytest.mark.parametrize("schema", ["Upper", "1st", "a;drop", ""])
def test_schema_must_be_a_plain_identifier(schema: str) -> None:
    """A schema name that would need quoting is refused before any connection."""
    pytest.importorskip("psycopg")
    with pytest.raises(ConfigurationError, match="schema"):
        PostgresRunStore("postgresql://localhost/db", schema=schema)


def test_unparsable_dsn_is_a_configuration_error() -> None:
    """A DSN libpq cannot parse is refused at construction."""
    pytest.importorskip("psycopg")
    with pytest.raises(ConfigurationError, match="DSN"):
        PostgresRunStore("host=localhost port")


def test_repr_names_the_server_but_never_the_password() -> None:
    """The repr shows host, port, database and schema; credentials stay out of logs."""
    pytest.importorskip("psycopg")
    store = PostgresRunStore("postgresql://app:s3cret@db.example:6543/runs", schema="audit")
    assert repr(store) == "PostgresRunStore('db.example:6543/runs', schema='audit')"
    assert "s3cret" not in repr(store)


def test_unreachable_server_is_a_store_error() -> None:
    """A server that does not answer raises StoreError, not a psycopg exception."""
    pytest.importorskip("psycopg")
    store = PostgresRunStore("postgresql://postgres@127.0.0.1:9/x", connect_timeout_s=1)
    with pytest.raises(StoreError, match="get failed"):
        asyncio.run(store.get("run-1"))


def test_tables_live_in_the_stores_schema(store: PostgresRunStore, dsn: str) -> None:
    """The store creates its schema with its tables and records store schema version 3."""
    import psycopg

    asyncio.run(store.save(snapshot(), expected_version=None))
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (store.schema,),
        ).fetchall()
        version = connection.execute(
            f"SELECT version FROM {store.schema}.ownloop_schema"
        ).fetchall()
    assert {name for (name,) in rows} == {
        "runs",
        "run_items",
        "leases",
        "journal",
        "approvals",
        "threads",
        "ownloop_schema",
    }
    assert version == [(n,) for n in range(1, STORE_SCHEMA_VERSION + 1)]


def test_hand_written_newer_snapshot_fails_fast(store: PostgresRunStore, dsn: str) -> None:
    """A stored snapshot with a newer schema version raises SchemaVersionError on load."""
    asyncio.run(store.get("warm-up"))  # creates the tables
    future = {**json.loads(snapshot().model_dump_json()), "schema_version": 3, "new": True}
    _execute(
        dsn,
        f"INSERT INTO {store.schema}.runs VALUES ('run-1', 1, 'running', NULL, NULL, now(), %s)",
        json.dumps(future),
    )
    with pytest.raises(SchemaVersionError, match="schema version 3"):
        asyncio.run(store.get("run-1"))


def test_corrupt_records_are_store_errors(store: PostgresRunStore, dsn: str) -> None:
    """Stored JSON that is not a valid record raises StoreError naming the run."""
    asyncio.run(store.get("warm-up"))
    _execute(
        dsn,
        f"INSERT INTO {store.schema}.runs VALUES ('run-1', 1, 'running', NULL, NULL, now(), %s)",
        '{"schema_version": 1}',
    )
    _execute(dsn, f"INSERT INTO {store.schema}.approvals (run_id, approval) VALUES ('run-1', '[]')")
    with pytest.raises(StoreError, match="run-1 is not valid"):
        asyncio.run(store.get("run-1"))
    with pytest.raises(StoreError, match="Approval of run run-1"):
        asyncio.run(store.submitted_approvals("run-1"))


def test_schema_of_a_newer_store_is_refused(store: PostgresRunStore, dsn: str) -> None:
    """A schema laid out by a newer ownloop fails fast on connection."""
    asyncio.run(store.get("warm-up"))
    _execute(
        dsn,
        f"INSERT INTO {store.schema}.ownloop_schema (version) VALUES ({STORE_SCHEMA_VERSION + 1})",
    )
    newcomer = PostgresRunStore(dsn, schema=store.schema)
    with pytest.raises(
        SchemaVersionError, match=f"store schema version {STORE_SCHEMA_VERSION + 1}"
    ):
        asyncio.run(newcomer.get("run-1"))


def test_store_follows_run_sync_across_event_loops(store: PostgresRunStore) -> None:
    """Each asyncio.run (as run_sync does) gets a working connection; close works from any."""
    asyncio.run(store.save(snapshot(), expected_version=None))
    assert asyncio.run(store.save(snapshot(at=1), expected_version=1)) == 2
    asyncio.run(store.close())
    asyncio.run(store.close())
    stored = asyncio.run(store.get("run-1"))
    assert stored is not None
    assert stored.version == 2


def test_concurrent_first_use_opens_one_connection(dsn: str) -> None:
    """Coroutines racing to use a fresh store share one connection and one migration."""
    schema = fresh_schema()

    async def scenario() -> None:
        async with PostgresRunStore(dsn, schema=schema) as first:
            second = PostgresRunStore(dsn, schema=schema)
            await asyncio.gather(
                *(first.save(snapshot(f"run-{n}"), expected_version=None) for n in range(5)),
                second.get("run-0"),
            )
            assert len(await first.list_runs()) == 5
            await second.close()

    asyncio.run(scenario())
