"""`SqliteRunStore`: runs in one SQLite file (standard library ``sqlite3``), no server needed.

The file is opened once, in WAL mode, with a busy timeout so several processes on one machine can
share it. Every compare-and-set is a single SQL statement, so it is atomic across processes; taking
a lease is one ``BEGIN IMMEDIATE`` transaction. The SQL is fast enough (tens of microseconds) to
run inline on the event loop, so no thread pool is involved; a lock guards the one connection when
a store is shared between threads.

Durability: checkpoints commit with ``synchronous=NORMAL`` by default — durable against a crashed
*process*, while a power loss may lose the last checkpoints (the run then resumes from an earlier
one). Intents, receipts and approvals always commit with ``synchronous=FULL``, which also flushes
every earlier commit, so the write journal survives a power loss too and a write is never executed
twice. Pass ``synchronous="FULL"`` to make every checkpoint survive a power loss as well.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from ownloop.clock import Clock, SystemClock
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
from ownloop.store._layout import KnownRuns, plan_save, rebuild
from ownloop.store._legacy_fence import SQLITE_LEGACY_FENCE
from ownloop.store._listing import Listing, listing_query, summary_of
from ownloop.store._port import StoredRun
from ownloop.store._retention import Retention, RetentionSchedule
from ownloop.store._rules import (
    check_store_schema,
    check_submission,
    holder_is_gone,
    this_host,
    withdrawn,
)
from ownloop.store._schema import SQLITE_MIGRATIONS, SQLITE_SCHEMA_NOW, STORE_SCHEMA_VERSION
from ownloop.store._sql import (
    lease_held,
    lease_lost,
    load_record,
    load_snapshot,
    newer_store_schema,
    receipt_exists,
    stale,
)
from ownloop.store._sqlite_operations import SqliteOperations, iso
from ownloop.store._threads_sql import SqliteThreads

__all__ = ["SqliteRunStore"]

_SAVED = object()
"""The outcome of a save that committed (else the stored version it found)."""

_LEASED = "EXISTS (SELECT 1 FROM leases WHERE run_id = ? AND token = ? AND expires_at > ?)"


class _Refused(Exception):
    """A compare-and-set that matched no row: the transaction is rolled back, then explained."""


class SqliteRunStore(SqliteThreads, SqliteOperations):
    """Keeps runs in a SQLite file, shared safely by the processes of one machine.

    Args:
        path: The database file (created with its tables if missing).
        synchronous: ``"NORMAL"`` (default) or ``"FULL"`` for checkpoints; the write journal and
            approvals are always committed with ``FULL`` (see the module's durability note).
        busy_timeout_s: How long a statement waits for another process's write to finish.
        clock: Judges lease expiry; the system clock by default (a `FakeClock` in tests).
        retention: Prune as runs finish, one batch at a time (see `Retention`); a failed
            automatic prune never fails the save that triggered it (it is kept in
            ``retention_error`` and tried again at the next one).

    Raises:
        ConfigurationError: If ``synchronous`` is neither ``"NORMAL"`` nor ``"FULL"``.
        StoreError: If the file cannot be opened or its tables created.
        SchemaVersionError: If the file was laid out by a newer ownloop.
    """

    saves_changes: ClassVar[bool] = True
    """A checkpoint may carry only its new items (`ChangeStore`): they are appended."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 5.0,
        clock: Clock | None = None,
        retention: Retention | None = None,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigurationError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        self.path = os.fspath(path)
        self.synchronous = synchronous
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.Lock()
        self._known = KnownRuns()
        self._schedule = RetentionSchedule(retention) if retention is not None else None
        self.retention_error: StoreError | None = None
        self._closed = False
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the run store at {self.path}: {error}") from error
        try:
            with self._guard("open"):
                # Before the first table: a new file frees pruned pages with incremental_vacuum.
                self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={synchronous}")
                self._migrate()
        except BaseException:
            self._db.close()
            raise

    @contextmanager
    def _guard(self, operation: str) -> Iterator[sqlite3.Connection]:
        """Hold the connection for one operation; turn sqlite3 errors into `StoreError`."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            try:
                yield self._db
            except sqlite3.Error as error:
                if self._db.in_transaction:
                    self._db.rollback()
                raise StoreError(f"{operation} failed in {self!r}: {error}") from error

    @contextmanager
    def _transaction(self, *, durable: bool = False, fenced: bool = True) -> Iterator[None]:
        """Run statements in one ``BEGIN IMMEDIATE`` transaction (call inside `_guard`).

        A fenced transaction first checks that the file is still at the store schema version
        this store opened it at (``BEGIN IMMEDIATE`` holds the write lock, so no upgrade commits
        in between); only the migration itself is not fenced.
        """
        full = durable and self.synchronous != "FULL"
        if full:
            self._db.execute("PRAGMA synchronous=FULL")
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if fenced:
                    found = self._db.execute(SQLITE_SCHEMA_NOW).fetchone()[0]
                    check_store_schema(self.path, found, STORE_SCHEMA_VERSION)
                yield
            except BaseException:
                self._db.rollback()
                raise
            self._db.execute("COMMIT")
        finally:
            if full:
                self._db.execute(f"PRAGMA synchronous={self.synchronous}")

    def _migrate(self) -> None:
        with self._transaction(fenced=False):
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS ownloop_schema "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            row = self._db.execute(SQLITE_SCHEMA_NOW)
            current: int = row.fetchone()[0]
            if current > STORE_SCHEMA_VERSION:
                raise newer_store_schema(self.path, current)
            for version in range(current + 1, STORE_SCHEMA_VERSION + 1):
                for statement in SQLITE_MIGRATIONS[version - 1]:
                    self._db.execute(statement)
                self._db.execute(
                    "INSERT INTO ownloop_schema VALUES (?, ?)", (version, iso(datetime.now(UTC)))
                )
            self._db.execute(SQLITE_LEGACY_FENCE)  # no table change: no schema version

    async def save(
        self,
        snapshot: RunSnapshot,
        *,
        expected_version: int | None,
        lease: Lease | None = None,
        kept: Mapping[str, int] | None = None,
    ) -> int:
        """Store a snapshot if the stored version is still ``expected_version`` (see `ChangeStore`).

        Only the items added since the version this instance last wrote or read are written, in
        the transaction of the compare-and-set (see the storage layout in ``_layout.py``).
        """
        run_id = snapshot.run_id
        with self._lock:  # `KnownRuns` is shared by the threads using this store
            known = self._known.parts_at(run_id, expected_version)
        plan = plan_save(snapshot, known, kept)
        row = plan.row
        values = (
            row.state,
            row.status,
            row.stop_reason,
            iso(row.updated_at),
            row.snapshot,
            row.actor,
            row.agent,
        )
        held = self._held(lease)
        guard = _LEASED if lease is not None else "1"
        version: Any = _SAVED
        fenced = False
        saved = 0
        with self._guard("save") as db:
            try:
                with self._transaction():
                    if expected_version is None:
                        cursor = db.execute(
                            "INSERT INTO runs (run_id, version, state, status, stop_reason, "
                            "updated_at, snapshot, actor, agent, layout) "
                            f"SELECT ?, 1, ?, ?, ?, ?, ?, ?, ?, ? "
                            f"WHERE {guard} ON CONFLICT (run_id) DO NOTHING",
                            (run_id, *values, plan.layout, *held),
                        )
                    else:
                        cursor = db.execute(
                            "UPDATE runs SET version = version + 1, state = ?, status = ?, "  # noqa: S608 - {guard} is a constant
                            "stop_reason = ?, updated_at = ?, snapshot = ?, actor = ?, agent = ?, "
                            "layout = ? "
                            f"WHERE run_id = ? AND version = ? AND {guard}",
                            (*values, plan.layout, run_id, expected_version, *held),
                        )
                    if cursor.rowcount != 1:
                        raise _Refused
                    db.executemany(
                        "DELETE FROM run_items WHERE run_id = ? AND part = ? AND position >= ?",
                        [(run_id, part, start) for part, start in plan.cuts],
                    )
                    db.executemany(
                        "INSERT INTO run_items VALUES (?, ?, ?, ?) ON CONFLICT "
                        "(run_id, part, position) DO UPDATE SET item = excluded.item",
                        [(run_id, *put) for put in plan.puts],
                    )
            except _Refused:
                found = db.execute("SELECT version FROM runs WHERE run_id = ?", (run_id,))
                version = found.fetchone()
                fenced = lease is not None and not self._current(db, lease)
            except BaseException:
                self._known.forget(run_id)
                raise
            else:
                saved = (expected_version or 0) + 1
                self._known.saved(run_id, saved, plan)
        if version is _SAVED:
            await self._retain(row.state)
            return saved
        if fenced:
            raise lease_lost(run_id)
        raise stale(run_id, version[0] if version else None, expected_version)

    async def get(self, run_id: str) -> StoredRun | None:
        """Return the latest snapshot and version, or ``None`` (see `RunStore`)."""
        with self._guard("get") as db:
            db.execute("BEGIN")  # one read snapshot for the run's row and its items
            try:
                row = db.execute(
                    "SELECT version, snapshot, layout FROM runs WHERE run_id = ?", (run_id,)
                ).fetchone()
                items = (
                    db.execute(
                        "SELECT part, position, item FROM run_items WHERE run_id = ? "
                        "ORDER BY part, position",
                        (run_id,),
                    ).fetchall()
                    if row is not None and row[2] is not None
                    else []
                )
            finally:
                db.execute("COMMIT")
            if row is None:
                return None
            snapshot, parts = rebuild(run_id, row[1], row[2], items)
            if parts is not None:
                self._known.remember(run_id, row[0], parts)
        return StoredRun(snapshot, row[0])

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
        query, params = listing_query(page, "sqlite", "runs", iso)
        with self._guard("list_runs") as db:
            rows = db.execute(query, params).fetchall()
        return [summary_of(row, datetime.fromisoformat(row[5])) for row in rows]

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _held(self, lease: Lease | None) -> tuple[str | float, ...]:
        """The parameters of `_LEASED` for a fenced statement (none when unfenced)."""
        return () if lease is None else (lease.run_id, lease.token, self._now())

    def _current(self, db: sqlite3.Connection, lease: Lease) -> bool:
        row = db.execute(f"SELECT {_LEASED}", self._held(lease)).fetchone()
        return bool(row[0])

    async def acquire_lease(
        self, run_id: str, owner: str, ttl_s: float, *, take_over: bool = False
    ) -> Lease:
        """Take a new lease on the run unless another acquisition holds it (see `RunStore`)."""
        with self._guard("acquire_lease") as db, self._transaction():
            now = self._now()
            held = db.execute(
                "SELECT owner, expires_at, host, pid FROM leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            taken_from = None
            if held is not None and held[1] > now:
                if not (take_over or holder_is_gone(held[2], held[3])):
                    raise lease_held(run_id, held[0], datetime.fromtimestamp(held[1], UTC))
                taken_from = held[0]
            token, expires_at = uuid.uuid4().hex, now + ttl_s
            db.execute(
                "INSERT INTO leases (run_id, owner, token, expires_at, host, pid) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at, "
                "host = excluded.host, pid = excluded.pid",
                (run_id, owner, token, expires_at, this_host(), os.getpid()),
            )
        return Lease(
            run_id=run_id,
            owner=owner,
            token=token,
            expires_at=datetime.fromtimestamp(expires_at, UTC),
            host=this_host(),
            pid=os.getpid(),
            taken_over_from=taken_from,
        )

    async def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a lease that is still current and unexpired (see `RunStore`)."""
        with self._guard("renew_lease") as db, self._transaction():
            now = self._now()
            cursor = db.execute(
                "UPDATE leases SET expires_at = ? "
                "WHERE run_id = ? AND token = ? AND expires_at > ?",
                (now + ttl_s, lease.run_id, lease.token, now),
            )
        if cursor.rowcount != 1:
            raise lease_lost(lease.run_id)
        return lease.model_copy(update={"expires_at": datetime.fromtimestamp(now + ttl_s, UTC)})

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back if it is still held (see `RunStore`)."""
        with self._guard("release_lease") as db, self._transaction():
            db.execute(
                "DELETE FROM leases WHERE run_id = ? AND token = ?", (lease.run_id, lease.token)
            )

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        """Durably record a write about to execute (see `RunStore`).

        Raises:
            StaleCheckpoint: If the write already has a receipt: the caller's view is stale.
            RunLeased: If ``lease`` is no longer current.
        """
        with self._guard("record_intent") as db, self._transaction(durable=True):
            if lease is not None and not self._current(db, lease):
                raise lease_lost(intent.run_id)
            cursor = db.execute(
                "INSERT INTO journal VALUES (?, ?, ?, NULL) ON CONFLICT (run_id, call_id) "
                "DO UPDATE SET intent = excluded.intent, receipt = NULL "
                "WHERE journal.receipt IS NULL "
                "OR json_extract(journal.receipt, '$.status') = 'unknown'",
                (intent.run_id, intent.call_id, intent.model_dump_json()),
            )
            if cursor.rowcount == 0:
                raise receipt_exists(intent.run_id, intent.call_id)

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        """Durably record how a journaled write ended (see `RunStore`).

        Raises:
            RunLeased: If ``lease`` is no longer current.
        """
        with self._guard("record_receipt") as db, self._transaction(durable=True):
            if lease is not None and not self._current(db, lease):
                raise lease_lost(run_id)
            db.execute(
                "UPDATE journal SET receipt = ? WHERE run_id = ? AND call_id = ?",
                (receipt.model_dump_json(), run_id, call_id),
            )

    async def journal(self, run_id: str) -> list[JournalEntry]:
        """Return the run's write journal, in the order the intents were recorded."""
        with self._guard("journal") as db:
            rows = db.execute(
                "SELECT intent, receipt FROM journal WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
        return [
            JournalEntry(
                intent=load_record(WriteIntent, run_id, intent),
                receipt=None if receipt is None else load_record(Receipt, run_id, receipt),
            )
            for intent, receipt in rows
        ]

    async def submit_approval(self, run_id: str, approval: Approval) -> None:
        """Durably store a decision for a request the run waits for (see `RunStore`)."""
        with self._guard("submit_approval") as db, self._transaction(durable=True):
            snapshot = self._state_record(db, run_id)
            if not check_submission(run_id, snapshot, approval, self._approvals(db, run_id)):
                return
            db.execute(
                "INSERT INTO approvals SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM approvals "
                "WHERE run_id = ?",
                (run_id, approval.model_dump_json(), run_id),
            )

    def _state_record(self, db: sqlite3.Connection, run_id: str) -> RunSnapshot | None:
        """The run's state record: enough for decisions (requests and decisions are no items)."""
        row = db.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else load_snapshot(run_id, row[0])

    def _approvals(self, db: sqlite3.Connection, run_id: str) -> list[Approval]:
        rows = db.execute(
            "SELECT approval FROM approvals WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        return [load_record(Approval, run_id, text) for (text,) in rows]

    async def withdraw_approvals(self, run_id: str, decides_what: str) -> int:
        """Delete the stored decisions on a request, by its id or digest (see `RunStore`)."""
        with self._guard("withdraw_approvals") as db, self._transaction(durable=True):
            snapshot = self._state_record(db, run_id)
            removed = 0
            for seq, text in db.execute(
                "SELECT seq, approval FROM approvals WHERE run_id = ?", (run_id,)
            ).fetchall():
                if withdrawn(snapshot, load_record(Approval, run_id, text), decides_what):
                    db.execute("DELETE FROM approvals WHERE run_id = ? AND seq = ?", (run_id, seq))
                    removed += 1
        return removed

    async def submitted_approvals(self, run_id: str) -> list[Approval]:
        """Return the decisions submitted for the run, in order."""
        with self._guard("submitted_approvals") as db:
            return self._approvals(db, run_id)

    async def close(self) -> None:
        """Close the database connection; the store cannot be used afterwards."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    async def __aenter__(self) -> SqliteRunStore:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"SqliteRunStore({self.path!r})"
