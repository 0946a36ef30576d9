"""What an operator does with a SQLite store: prune it, sum it up, compact it.

`SqliteOperations` is the part of `SqliteRunStore` that keeps a store healthy over months (see
``_retention.py`` and ``_stats.py`` for the rules); the store supplies the connection, its lock and
its transactions. Kept apart so the store module stays about checkpoints, leases and journals.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime

from ownloop.clock import Clock
from ownloop.exceptions import StoreError
from ownloop.store._layout import KnownRuns
from ownloop.store._retention import PruneReport, Retention, RetentionSchedule, SpareReason
from ownloop.store._retention_sql import SQLITE, removable, spared
from ownloop.store._stats import RunStats, gather, stats_queries

__all__ = ["SqliteOperations", "iso"]


def iso(moment: datetime) -> str:
    """Return a UTC timestamp that sorts as text in time order."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


class SqliteOperations:
    """Pruning, stats and vacuuming of a SQLite store (mixed into `SqliteRunStore`)."""

    _clock: Clock
    _known: KnownRuns
    _schedule: RetentionSchedule | None
    _db: sqlite3.Connection
    retention_error: StoreError | None

    def _guard(self, operation: str) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # pragma: no cover - the store's

    def _transaction(self, *, durable: bool = False) -> AbstractContextManager[None]:
        raise NotImplementedError  # pragma: no cover - the store's

    def _now(self) -> float:
        raise NotImplementedError  # pragma: no cover - the store's

    async def _retain(self, state: str) -> None:
        """Prune one batch if the store has a retention policy and a prune is due."""
        schedule = self._schedule
        if schedule is None or not schedule.due(state, self._clock.now()):
            return
        try:
            await self.prune_runs(schedule.retention)
        except StoreError as error:
            self.retention_error = error
        else:
            self.retention_error = None

    async def prune_runs(self, retention: Retention, *, dry_run: bool = False) -> PruneReport:
        """Remove a batch of the runs the retention matches (see `RunStore` and `Retention`).

        The runs are judged and removed in one ``BEGIN IMMEDIATE`` transaction, so no other
        process changes them in between; a file created by this ownloop then returns the freed
        pages to the file system (``incremental_vacuum``). `vacuum` compacts an older file.
        """
        cutoff = retention.cutoff(self._clock.now())
        params = {
            "cutoff": None if cutoff is None else iso(cutoff),
            "keep": retention.keep_latest,
            "statuses": json.dumps(retention.status_values()),
            "now": self._now(),
            "batch": retention.batch,
        }
        counting = spared(SQLITE, retention)
        with self._guard("prune_runs") as db:
            with self._reading() if dry_run else self._transaction():
                found = [run_id for (run_id,) in db.execute(removable(SQLITE, retention), params)]
                counts = db.execute(counting, params).fetchall() if counting else []
                doomed = found[: retention.batch]
                if not dry_run:
                    for table in ("run_items", "journal", "approvals", "leases", "runs"):
                        db.executemany(
                            f"DELETE FROM {table} WHERE run_id = ?",  # noqa: S608 - constants
                            [(run_id,) for run_id in doomed],
                        )
            if doomed and not dry_run:
                for run_id in doomed:
                    self._known.forget(run_id)
                # executescript steps the pragma to its end (execute frees one page per step).
                db.executescript("PRAGMA incremental_vacuum")
        reasons: dict[SpareReason, int] = dict(counts)
        return PruneReport(
            run_ids=tuple(doomed), dry_run=dry_run, spared=reasons, more=len(found) > len(doomed)
        )

    async def run_stats(self) -> RunStats:
        """Return a summary of the store (see `RunStore`), from one read snapshot."""
        queries = stats_queries(
            "sqlite",
            "",
            "iif(json_valid(snapshot), json_extract(snapshot, '$.usage.{name}'), NULL)",
            ":now",
        )
        with self._guard("run_stats") as db, self._reading():
            groups = [
                (state, status, reason, count, datetime.fromisoformat(oldest))
                for state, status, reason, count, oldest in db.execute(queries["groups"])
            ]
            usage = db.execute(queries["usage"]).fetchone()
            unknown = db.execute(queries["unknown"]).fetchone()[0]
            leased = db.execute(queries["leased"], {"now": self._now()}).fetchone()[0]
        return gather(groups, tuple(usage), unknown, leased)

    async def vacuum(self) -> None:
        """Compact the file, returning every free page to the file system (``VACUUM``).

        It rewrites the whole file and blocks other writers while it does; a file created before
        this ownloop is switched to incremental vacuuming, so later prunes shrink it as they go.
        """
        with self._guard("vacuum") as db:
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("VACUUM")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read snapshot for several statements (call inside `_guard`)."""
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("COMMIT")
