"""What an operator does with a PostgreSQL store: prune it and sum it up.

`PostgresOperations` is the part of `PostgresRunStore` that keeps a store healthy over months (see
``_retention.py`` and ``_stats.py`` for the rules); the store supplies the connection and runs the
statements. Kept apart so the store module stays about checkpoints, leases and journals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ownloop.exceptions import StoreError
from ownloop.store._layout import KnownRuns
from ownloop.store._postgres_sql import FENCE
from ownloop.store._retention import PruneReport, Retention, RetentionSchedule, SpareReason
from ownloop.store._retention_sql import POSTGRES, removable, removal, spared
from ownloop.store._stats import RunStats, gather, stats_queries

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresOperations"]


class PostgresOperations:
    """Pruning and stats of a PostgreSQL store (mixed into `PostgresRunStore`)."""

    _known: KnownRuns
    _schedule: RetentionSchedule | None
    retention_error: StoreError | None

    def _sql(self, template: str, **parts: str) -> str:
        raise NotImplementedError  # pragma: no cover - the store's

    def _use(self, operation: str) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        raise NotImplementedError  # pragma: no cover - the store's

    async def _rows(
        self, operation: str, sql: str, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[Any]:
        raise NotImplementedError  # pragma: no cover - the store's

    async def _check_schema(self, connection: AsyncConnection[Any]) -> None:
        raise NotImplementedError  # pragma: no cover - the store's

    async def _retain(self, state: str) -> None:
        """Prune one batch if the store has a retention policy and a prune is due."""
        schedule = self._schedule
        if schedule is None or not schedule.due(state, datetime.now(UTC)):
            return
        try:
            await self.prune_runs(schedule.retention)
        except StoreError as error:
            self.retention_error = error
        else:
            self.retention_error = None

    async def prune_runs(self, retention: Retention, *, dry_run: bool = False) -> PruneReport:
        """Remove a batch of the runs the retention matches (see `RunStore` and `Retention`).

        The batch is removed by one statement (see `removal`), judged by the server's clock.
        """
        cutoff = retention.cutoff(datetime.now(UTC))
        params = {
            "cutoff": cutoff,
            "keep": retention.keep_latest,
            "statuses": list(retention.status_values()),
            "batch": retention.batch,
        }
        counting = spared(POSTGRES, retention)
        found = await self._rows("prune_runs", removable(POSTGRES, retention), params)
        if dry_run:
            doomed = [run_id for (run_id,) in found[: retention.batch]]
        else:
            rows = await self._rows("prune_runs", removal(POSTGRES, retention, FENCE), params)
            if found and not rows:  # nothing removed: say so if the store was upgraded
                async with self._use("prune_runs") as connection:
                    await self._check_schema(connection)
            doomed = [run_id for (run_id,) in rows]
            for run_id in doomed:
                self._known.forget(run_id)
        counts = await self._rows("prune_runs", counting, params) if counting else []
        reasons: dict[SpareReason, int] = dict(counts)
        return PruneReport(
            run_ids=tuple(doomed),
            dry_run=dry_run,
            spared=reasons,
            more=len(found) > retention.batch,
        )

    async def run_stats(self) -> RunStats:
        """Return a summary of the store (see `RunStore`), from one read snapshot."""
        queries = stats_queries(
            "postgres",
            "{s}.",
            "{{s}}.run_field(snapshot, 'usage', '{name}')",
            "clock_timestamp()",
        )
        async with self._use("run_stats") as connection, connection.transaction():
            await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            found = []
            for name in ("groups", "usage", "unknown", "leased"):
                cursor = await connection.execute(self._sql(queries[name]))
                found.append(await cursor.fetchall())
        groups = [
            (state, status, reason, count, oldest.astimezone(UTC))
            for state, status, reason, count, oldest in found[0]
        ]
        return gather(groups, tuple(found[1][0]), found[2][0][0], found[3][0][0])
