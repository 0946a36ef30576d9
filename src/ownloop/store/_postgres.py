"""`PostgresRunStore`: runs in PostgreSQL, shared by workers on many machines.

Needs the extra ``ownloop[postgres]`` (psycopg 3). psycopg is imported when a store is created, so
``ownloop.store`` imports without it. Every operation is one SQL statement on an autocommit
connection, so each is atomic on its own: a save is a compare-and-set on the version that also
holds the lease row (``FOR SHARE``), and taking a lease is one ``INSERT ... ON CONFLICT DO
UPDATE ... WHERE`` that succeeds only for the holder or after expiry, judged by the server's clock
so workers on different machines agree. Tables live in their own schema (``ownloop`` by default);
records are stored as ``json`` — verbatim text, which also keeps strings ``jsonb`` refuses (NUL).
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from ownloop.contracts import (
    Approval,
    JournalEntry,
    Lease,
    Receipt,
    RunSnapshot,
    RunSummary,
    WriteIntent,
)
from ownloop.exceptions import ConfigurationError, StoreError
from ownloop.store._dsn import normalize_dsn
from ownloop.store._layout import KnownRuns, plan_save, rebuild
from ownloop.store._legacy_fence import (
    POSTGRES_LEGACY_FENCE,
    POSTGRES_LEGACY_FENCE_PRESENT,
    TRIGGER,
)
from ownloop.store._listing import Listing, listing_query, summary_of
from ownloop.store._port import StoredRun
from ownloop.store._postgres_operations import PostgresOperations
from ownloop.store._postgres_sql import (
    ACQUIRE,
    CURRENT,
    INSERT,
    INTENT,
    RECEIPT,
    RELEASE,
    RENEW,
    SAVE,
    UPDATE,
    guards,
)
from ownloop.store._retention import Retention, RetentionSchedule
from ownloop.store._rules import (
    check_store_schema,
    check_submission,
    holder_is_gone,
    this_host,
    withdrawn,
)
from ownloop.store._schema import POSTGRES_MIGRATIONS, POSTGRES_SCHEMA_NOW, STORE_SCHEMA_VERSION
from ownloop.store._sql import (
    lease_held,
    lease_lost,
    load_record,
    load_snapshot,
    newer_store_schema,
    receipt_exists,
    stale,
)
from ownloop.store._threads_sql import PostgresThreads

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg import Error as DriverError

__all__ = ["PostgresRunStore"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresRunStore(PostgresThreads, PostgresOperations):
    """Keeps runs in PostgreSQL, shared by workers on any number of machines.

    The connection opens on first use (one per event loop, since ``run_sync`` starts a new loop
    per call); `close` ends it.

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host:5432/db``).
        schema: The schema holding the tables, created with them if missing.
        connect_timeout_s: How long to wait for the server when connecting.
        retention: Prune as runs finish, one batch at a time (see `Retention`); a failed
            automatic prune never fails the save that triggered it (it is kept in
            ``retention_error`` and tried again at the next one).

    Raises:
        ConfigurationError: If psycopg is not installed (``pip install 'ownloop[postgres]'``),
            the DSN cannot be parsed, or ``schema`` is not a lowercase SQL identifier.
    """

    saves_changes: ClassVar[bool] = True
    """A checkpoint may carry only its new items (`ChangeStore`): they are appended."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "ownloop",
        connect_timeout_s: float = 10.0,
        retention: Retention | None = None,
    ) -> None:
        try:
            import psycopg  # the optional extra: imported only when a store is made
        except ImportError as error:
            raise ConfigurationError(
                "PostgresRunStore needs psycopg 3: pip install 'ownloop[postgres]'"
            ) from error
        if not _SCHEMA_NAME.match(schema):
            raise ConfigurationError(f"schema must be a lowercase SQL identifier, not {schema!r}")
        dsn = normalize_dsn(dsn)
        try:
            where = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            # libpq's message quotes the DSN's text, a password included: none of it is shown
            raise ConfigurationError(
                "cannot parse the PostgreSQL DSN: give a libpq key=value string or a "
                "postgresql:// URL (the DSN is not shown)"
            ) from None
        self.schema = schema
        self._dsn = dsn
        self._timeout = max(1, round(connect_timeout_s))
        self._where = (
            f"{where.get('host', 'localhost')}:{where.get('port', 5432)}/{where.get('dbname', '')}"
        )
        self._driver_error: type[DriverError] = psycopg.Error
        self._connection_class: type[AsyncConnection[Any]] = psycopg.AsyncConnection
        self._connection: AsyncConnection[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting = asyncio.Lock()
        self._known = KnownRuns()
        self._schedule = RetentionSchedule(retention) if retention is not None else None
        self.retention_error: StoreError | None = None

    def _sql(self, template: str, **parts: str) -> str:
        return template.format(s=self.schema, **parts)

    async def _connect(self) -> AsyncConnection[Any]:
        """Return this event loop's connection, opening (and migrating) it when needed."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._abandon()
            self._loop, self._connecting = loop, asyncio.Lock()
        async with self._connecting:
            if self._connection is None or self._connection.closed:
                connection = await self._connection_class.connect(
                    self._dsn, autocommit=True, connect_timeout=self._timeout
                )
                try:
                    await self._migrate(connection)
                except BaseException:
                    await connection.close()
                    raise
                self._connection = connection
            return self._connection

    def _abandon(self) -> None:
        """Close a connection left by an event loop that is gone (it cannot be awaited)."""
        if self._connection is not None and not self._connection.closed:
            self._connection.pgconn.finish()
        self._connection = None

    async def _migrate(self, connection: AsyncConnection[Any]) -> None:
        async with connection.transaction():
            # Serialize migrators: CREATE ... IF NOT EXISTS is not safe under concurrency.
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ownloop:{self.schema}",)
            )
            await connection.execute(self._sql("CREATE SCHEMA IF NOT EXISTS {s}"))
            await connection.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {s}.ownloop_schema (version integer PRIMARY KEY, "
                    "applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            cursor = await connection.execute(self._sql(POSTGRES_SCHEMA_NOW))
            row = await cursor.fetchone()
            current: int = row[0] if row is not None else 0
            if current > STORE_SCHEMA_VERSION:
                raise newer_store_schema(self._place, current)
            if current < STORE_SCHEMA_VERSION:
                # Wait for the writes in flight (each reads this table in its upgrade fence) and
                # hold every later one until the upgrade commits: they then see the new version.
                # The runs table, which the upgrade to 6 alters, is locked first: a write locks its
                # table first, then reads this one, so the upgrade never deadlocks a write.
                tables = "{s}.runs, {s}.ownloop_schema" if current else "{s}.ownloop_schema"
                await connection.execute(self._sql(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE"))
            for version in range(current + 1, STORE_SCHEMA_VERSION + 1):
                for statement in POSTGRES_MIGRATIONS[version - 1]:
                    await connection.execute(self._sql(statement))
                await connection.execute(
                    self._sql("INSERT INTO {s}.ownloop_schema (version) VALUES (%s)"), (version,)
                )
            await self._fence_legacy_writers(connection)

    async def _fence_legacy_writers(self, connection: AsyncConnection[Any]) -> None:
        """Install the trigger refusing old releases' whole snapshots, if it is missing.

        See ``_legacy_fence.py``; creating it locks ``runs``, so only when it is absent.
        """
        cursor = await connection.execute(POSTGRES_LEGACY_FENCE_PRESENT, (self.schema, TRIGGER))
        row = await cursor.fetchone()
        if row is not None and row[0]:
            return
        for statement in POSTGRES_LEGACY_FENCE:
            await connection.execute(self._sql(statement))

    @property
    def _place(self) -> str:
        return f"{self._where} (schema {self.schema})"

    async def _check_schema(self, connection: AsyncConnection[Any]) -> None:
        """Raise `StoreUpgraded` if the store is no longer at the schema this ownloop writes."""
        cursor = await connection.execute(self._sql(POSTGRES_SCHEMA_NOW))
        row = await cursor.fetchone()
        check_store_schema(self._place, row[0] if row is not None else 0, STORE_SCHEMA_VERSION)

    @asynccontextmanager
    async def _use(self, operation: str) -> AsyncIterator[AsyncConnection[Any]]:
        """Lend the connection for one operation; turn driver errors into `StoreError`."""
        try:
            yield await self._connect()
        except self._driver_error as error:
            raise StoreError(f"{operation} failed in {self!r}: {error}") from error

    async def _rows(
        self, operation: str, sql: str, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[Any]:
        async with self._use(operation) as connection:
            cursor = await connection.execute(self._sql(sql), params)
            return await cursor.fetchall()

    async def save(
        self,
        snapshot: RunSnapshot,
        *,
        expected_version: int | None,
        lease: Lease | None = None,
        kept: Mapping[str, int] | None = None,
    ) -> int:
        """Store a snapshot if the stored version is still ``expected_version`` (see `ChangeStore`).

        Only the items added since the version this instance last wrote or read are sent, in
        the statement of the compare-and-set (see the storage layout in ``_layout.py``).
        """
        run_id = snapshot.run_id
        plan = plan_save(snapshot, self._known.parts_at(run_id, expected_version), kept)
        params: dict[str, Any] = {
            **plan.row._asdict(),
            "layout": plan.layout,
            "expected": expected_version,
            "token": None if lease is None else lease.token,
            "cut_parts": [part for part, _ in plan.cuts],
            "cut_from": [start for _, start in plan.cuts],
            "put_parts": [part for part, _, _ in plan.puts],
            "put_positions": [position for _, position, _ in plan.puts],
            "put_items": [item for _, _, item in plan.puts],
        }
        held, guard = guards(lease is not None)
        write = (INSERT if expected_version is None else UPDATE).format(guard=guard, s="{s}")
        async with self._use("save") as connection:
            try:
                sql = self._sql(SAVE.format(held=held, write=write, s="{s}"))
                cursor = await connection.execute(sql, params)
                saved = await cursor.fetchone()
            except BaseException:
                self._known.forget(run_id)
                raise
            if saved is not None and saved[0] == 1:
                version = (expected_version or 0) + 1
                self._known.saved(run_id, version, plan)
                await self._retain(plan.row.state)
                return version
            await self._check_schema(connection)
            cursor = await connection.execute(
                self._sql("SELECT version FROM {s}.runs WHERE run_id = %(run_id)s"), params
            )
            found = await cursor.fetchone()
            current = True
            if lease is not None:
                cursor = await connection.execute(self._sql(CURRENT), params)
                lease_row = await cursor.fetchone()
                current = bool(lease_row and lease_row[0])
        if not current:
            raise lease_lost(run_id)
        raise stale(run_id, found[0] if found is not None else None, expected_version)

    async def get(self, run_id: str) -> StoredRun | None:
        """Return the latest snapshot and version, or ``None`` (see `RunStore`)."""
        async with self._use("get") as connection:
            # One read snapshot for the run's row and its items (the connection is shared by
            # coroutines, so both reads are one statement rather than one transaction).
            cursor = await connection.execute(
                self._sql(
                    "SELECT 0, version, snapshot::text, layout::text, NULL, NULL FROM {s}.runs "
                    "WHERE run_id = %(run_id)s UNION ALL "
                    "SELECT 1, NULL, item.item::text, NULL, item.part, item.position "
                    "FROM {s}.run_items AS item JOIN {s}.runs AS run "
                    "ON run.run_id = item.run_id AND run.layout IS NOT NULL "
                    "WHERE item.run_id = %(run_id)s ORDER BY 1, 5, 6"
                ),
                {"run_id": run_id},
            )
            rows = await cursor.fetchall()
        if not rows or rows[0][0] != 0:
            return None
        _, version, state, layout, _, _ = rows[0]
        items = [(part, position, text) for _, _, text, _, part, position in rows[1:]]
        snapshot, parts = rebuild(run_id, state, layout, items)
        if parts is not None:
            self._known.remember(run_id, version, parts)
        return StoredRun(snapshot, version)

    async def list_runs(
        self,
        *,
        state: str | None = None,
        status: str | None = None,
        agent: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> list[RunSummary]:
        """List one page of runs, most recently saved first (see `RunStore`)."""
        page = Listing(state, status, agent, actor, since, until, after, limit)
        query, params = listing_query(page, "postgres", "{s}.runs", lambda moment: moment)
        rows = await self._rows("list_runs", query, params)
        return [summary_of(row, row[5].astimezone(UTC)) for row in rows]

    async def acquire_lease(
        self, run_id: str, owner: str, ttl_s: float, *, take_over: bool = False
    ) -> Lease:
        """Take a new lease on the run unless another acquisition holds it (see `RunStore`)."""
        params: dict[str, Any] = {
            "run_id": run_id,
            "owner": owner,
            "token": uuid.uuid4().hex,
            "ttl": ttl_s,
            "host": this_host(),
            "pid": os.getpid(),
            "force": take_over,
            "replace": None,
        }
        rows = await self._rows("acquire_lease", ACQUIRE, params)
        if not rows:
            async with self._use("acquire_lease") as connection:
                await self._check_schema(connection)
            held = await self._rows(
                "acquire_lease",
                "SELECT owner, expires_at, host, pid, token FROM {s}.leases WHERE run_id = %s",
                (run_id,),
            )
            if held and not holder_is_gone(held[0][2], held[0][3]):
                raise lease_held(run_id, held[0][0], held[0][1].astimezone(UTC))
            params["replace"] = held[0][4] if held else None  # that very (dead) acquisition
            rows = await self._rows("acquire_lease", ACQUIRE, params)
            if not rows:  # pragma: no cover - another worker took it between two statements
                return await self.acquire_lease(run_id, owner, ttl_s, take_over=take_over)
        expires_at, taken_from = rows[0]
        return Lease(
            run_id=run_id,
            owner=owner,
            token=params["token"],
            expires_at=expires_at.astimezone(UTC),
            host=this_host(),
            pid=os.getpid(),
            taken_over_from=taken_from,
        )

    async def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a lease that is still current and unexpired (see `RunStore`)."""
        rows = await self._rows(
            "renew_lease",
            RENEW,
            (ttl_s, lease.run_id, lease.token),
        )
        if not rows:
            async with self._use("renew_lease") as connection:
                await self._check_schema(connection)
            raise lease_lost(lease.run_id)
        return lease.model_copy(update={"expires_at": rows[0][0].astimezone(UTC)})

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back if it is still held (see `RunStore`)."""
        async with self._use("release_lease") as connection:
            cursor = await connection.execute(
                self._sql(RELEASE),
                (lease.run_id, lease.token),
            )
            if cursor.rowcount == 0:
                await self._check_schema(connection)

    async def _fenced(
        self, operation: str, template: str, params: dict[str, Any], lease: Lease | None
    ) -> int:
        """Run one journal statement, applied only while ``lease`` is current (when given)."""
        params = {**params, "token": None if lease is None else lease.token}
        held, guard = guards(lease is not None)
        async with self._use(operation) as connection:
            sql = self._sql(template.format(held=held, guard=guard, s="{s}"))
            cursor = await connection.execute(sql, params)
            if cursor.rowcount == 0:
                await self._check_schema(connection)
            if cursor.rowcount == 0 and lease is not None:
                cursor = await connection.execute(self._sql(CURRENT), params)
                current = await cursor.fetchone()
                if not (current and current[0]):
                    raise lease_lost(lease.run_id)
                return 0
            return cursor.rowcount

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        """Durably record a write about to execute (see `RunStore`).

        Raises:
            StaleCheckpoint: If the write already has a receipt: the caller's view is stale.
            RunLeased: If ``lease`` is no longer current.
        """
        params = {
            "run_id": intent.run_id,
            "call_id": intent.call_id,
            "intent": intent.model_dump_json(),
        }
        if await self._fenced("record_intent", INTENT, params, lease) == 0:
            raise receipt_exists(intent.run_id, intent.call_id)

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        """Durably record how a journaled write ended (see `RunStore`).

        Raises:
            RunLeased: If ``lease`` is no longer current.
        """
        params = {"run_id": run_id, "call_id": call_id, "receipt": receipt.model_dump_json()}
        await self._fenced("record_receipt", RECEIPT, params, lease)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        """Return the run's write journal, in the order the intents were recorded."""
        rows = await self._rows(
            "journal",
            "SELECT intent::text, receipt::text FROM {s}.journal WHERE run_id = %s ORDER BY seq",
            (run_id,),
        )
        return [
            JournalEntry(
                intent=load_record(WriteIntent, run_id, intent),
                receipt=None if receipt is None else load_record(Receipt, run_id, receipt),
            )
            for intent, receipt in rows
        ]

    async def submit_approval(self, run_id: str, approval: Approval) -> None:
        """Durably store a decision for a request the run waits for (see `RunStore`)."""
        async with self._use("submit_approval") as connection, connection.transaction():
            # The run's row lock makes deciders of one run take turns: of two concurrent
            # decisions on one request, the second sees the first and is refused.
            snapshot = await self._state_record(connection, run_id)
            if not check_submission(
                run_id,
                snapshot,
                approval,
                [item for _, item in await self._approvals(connection, run_id)],
            ):
                return
            await connection.execute(
                self._sql("INSERT INTO {s}.approvals (run_id, approval) VALUES (%s, %s::json)"),
                (run_id, approval.model_dump_json()),
            )

    async def _state_record(
        self, connection: AsyncConnection[Any], run_id: str
    ) -> RunSnapshot | None:
        """Check the fence, then lock and read the run's state record (in a transaction).

        The state record is enough for decisions: requests and decisions are never item rows.
        """
        await self._check_schema(connection)  # its lock on the schema table lasts to the commit
        cursor = await connection.execute(
            self._sql("SELECT snapshot::text FROM {s}.runs WHERE run_id = %s FOR UPDATE"),
            (run_id,),
        )
        row = await cursor.fetchone()
        return None if row is None else load_snapshot(run_id, row[0])

    async def _approvals(
        self, connection: AsyncConnection[Any], run_id: str
    ) -> list[tuple[int, Approval]]:
        cursor = await connection.execute(
            self._sql(
                "SELECT seq, approval::text FROM {s}.approvals WHERE run_id = %s ORDER BY seq"
            ),
            (run_id,),
        )
        return [(seq, load_record(Approval, run_id, text)) for seq, text in await cursor.fetchall()]

    async def withdraw_approvals(self, run_id: str, decides_what: str) -> int:
        """Delete the stored decisions on a request, by its id or digest (see `RunStore`)."""
        async with self._use("withdraw_approvals") as connection, connection.transaction():
            snapshot = await self._state_record(connection, run_id)
            doomed = [
                seq
                for seq, approval in await self._approvals(connection, run_id)
                if withdrawn(snapshot, approval, decides_what)
            ]
            for seq in doomed:
                await connection.execute(
                    self._sql("DELETE FROM {s}.approvals WHERE run_id = %s AND seq = %s"),
                    (run_id, seq),
                )
        return len(doomed)

    async def submitted_approvals(self, run_id: str) -> list[Approval]:
        """Return the decisions submitted for the run, in order."""
        async with self._use("submitted_approvals") as connection:
            return [approval for _, approval in await self._approvals(connection, run_id)]

    async def close(self) -> None:
        """Close the connection (a later operation opens a new one)."""
        connection, self._connection = self._connection, None
        if connection is None or connection.closed:
            return
        if asyncio.get_running_loop() is self._loop:
            await connection.close()
        else:
            connection.pgconn.finish()

    async def __aenter__(self) -> PostgresRunStore:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"PostgresRunStore({self._where!r}, schema={self.schema!r})"
