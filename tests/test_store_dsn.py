"""PostgreSQL DSNs: a raw `@` in the password reads as people mean it; no part of it is shown."""

from __future__ import annotations

import asyncio
import socket
import uuid

import psycopg
import pytest

from ownloop.exceptions import ConfigurationError, StoreError
from ownloop.store import PostgresRunStore
from tests.durable_support import fresh_schema, postgres_dsn

PASSWORD = "p@ssW0rd!"
TAILS = ("ssW0rd", "W0rd!")


def test_the_last_at_before_the_host_ends_the_password() -> None:
    """`postgresql://u:p@ssW0rd!@host/db`: the host is `host`, and the repr has no password part."""
    store = PostgresRunStore(f"postgresql://u:{PASSWORD}@db.example:6543/runs")
    assert repr(store) == "PostgresRunStore('db.example:6543/runs', schema='ownloop')"
    for tail in TAILS:
        assert tail not in repr(store)


def test_an_encoded_password_and_a_url_without_one_are_kept() -> None:
    """An escaped `%40`, a user without a password and a bare host read as before."""
    for dsn, where in [
        ("postgresql://u:p%40ss@h/db", "h:5432/db"),
        ("postgres://u@h:7/db", "h:7/db"),
        ("postgresql://h/db?sslmode=disable", "h:5432/db"),
        ("host=h password=p@ss dbname=d", "h:5432/d"),
    ]:
        assert repr(PostgresRunStore(dsn)) == f"PostgresRunStore({where!r}, schema='ownloop')"


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u:pa/ss@host/db",  # a raw "/" in the password: the path would hold an "@"
        "postgresql://u:pa?ss@host/db",
        "host=h password=s3cr3tW0rd bogus",  # not a DSN libpq can read
    ],
)
def test_an_ambiguous_or_unreadable_dsn_is_refused_without_showing_it(dsn: str) -> None:
    """The error says what to do and shows no part of the DSN."""
    with pytest.raises(ConfigurationError) as raised:
        PostgresRunStore(dsn)
    message = str(raised.value)
    assert "the DSN is not shown" in message
    for part in ("pa/ss", "pa?ss", "ss@host", "s3cr3tW0rd", "bogus"):
        assert part not in message


def test_a_failed_connection_names_the_host_but_no_password_part() -> None:
    """A server that refuses the connection: the error names host and port, not the password."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there

    async def scenario() -> str:
        store = PostgresRunStore(
            f"postgresql://u:{PASSWORD}@127.0.0.1:{port}/db", connect_timeout_s=2
        )
        with pytest.raises(StoreError) as raised:
            await store.get("r-1")
        return str(raised.value)

    message = asyncio.run(scenario())
    assert f"127.0.0.1:{port}" in message
    for tail in TAILS:
        assert tail not in message


def test_a_password_with_a_raw_at_connects() -> None:
    """A role whose password holds an `@` connects with the DSN written as people write it."""
    admin = postgres_dsn()
    role = f"dsn_{uuid.uuid4().hex[:12]}"
    info = psycopg.conninfo.conninfo_to_dict(admin)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}' SUPERUSER")
    try:
        host, port, db = info.get("host", "127.0.0.1"), info.get("port", 5432), info["dbname"]
        dsn = f"postgresql://{role}:{PASSWORD}@{host}:{port}/{db}"

        async def scenario() -> None:
            async with PostgresRunStore(dsn, schema=fresh_schema()) as store:
                assert await store.get("nothing") is None

        asyncio.run(scenario())
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f"DROP OWNED BY {role}")
            connection.execute(f"DROP ROLE {role}")
