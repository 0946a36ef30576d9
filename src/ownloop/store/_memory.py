"""An in-memory `RunStore` for tests and single-process use: the reference semantics."""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timedelta
from typing import Any

from ownloop.clock import Clock, SystemClock
from ownloop.contracts import (
    SNAPSHOT_SCHEMA_VERSION,
    Approval,
    JournalEntry,
    Lease,
    Receipt,
    RunSnapshot,
    RunSummary,
    WriteIntent,
)
from ownloop.exceptions import SchemaVersionError, StaleCheckpoint
from ownloop.store._listing import Listing
from ownloop.store._port import StoredRun
from ownloop.store._retention import (
    PruneReport,
    Retention,
    RetentionSchedule,
    SpareReason,
    open_write,
    spared_because,
)
from ownloop.store._rules import (
    check_submission,
    holder_is_gone,
    lease_held,
    lease_lost,
    receipt_exists,
    this_host,
    withdrawn,
)
from ownloop.store._stats import USAGE_FIELDS, RunStats, gather
from ownloop.store._threads import MemoryThreads

__all__ = ["MemoryRunStore", "check_schema", "summarize"]


def check_schema(snapshot: RunSnapshot) -> None:
    """Refuse a snapshot whose schema version this ownloop does not know.

    Args:
        snapshot: The snapshot.

    Raises:
        SchemaVersionError: If its version is newer (or not positive).
    """
    if not 1 <= snapshot.schema_version <= SNAPSHOT_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"run {snapshot.run_id} has snapshot schema version {snapshot.schema_version}; this "
            f"ownloop reads versions 1 to {SNAPSHOT_SCHEMA_VERSION} (upgrade ownloop to resume it)"
        )


def summarize(snapshot: RunSnapshot, version: int) -> RunSummary:
    """Return the listing line of a stored snapshot.

    Args:
        snapshot: The snapshot.
        version: Its stored version.
    """
    result = snapshot.result
    return RunSummary(
        run_id=snapshot.run_id,
        state=snapshot.state,
        status=result.status.value if result is not None else None,
        stop_reason=result.stop_reason.value if result is not None else None,
        version=version,
        updated_at=snapshot.saved_at,
        actor=snapshot.actor.id if snapshot.actor is not None else None,
        agent=snapshot.versions.policy_digest,
    )


class MemoryRunStore(MemoryThreads):
    """Keeps runs in a dict; lost when the process ends.

    Args:
        clock: Judges lease expiry (a `FakeClock` lets tests stall a worker past its lease).
        retention: Prune as runs finish, one batch at a time (see `Retention`).
    """

    def __init__(self, *, clock: Clock | None = None, retention: Retention | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._schedule = RetentionSchedule(retention) if retention is not None else None
        self._runs: dict[str, StoredRun] = {}
        self._leases: dict[str, Lease] = {}
        self._journal: dict[str, list[JournalEntry]] = {}
        self._approvals: dict[str, list[Approval]] = {}
        self._threads: dict[str, list[str]] = {}
        self._thread_of: dict[str, str] = {}

    async def save(
        self, snapshot: RunSnapshot, *, expected_version: int | None, lease: Lease | None = None
    ) -> int:
        """Store a snapshot if the stored version is still ``expected_version`` (see `RunStore`)."""
        check_schema(snapshot)
        self._fence(snapshot.run_id, lease)
        current = self._runs.get(snapshot.run_id)
        found = current.version if current is not None else None
        if found != expected_version:
            raise StaleCheckpoint(
                f"run {snapshot.run_id} is at version {found}, not {expected_version}: "
                "another writer saved it first"
            )
        version = (found or 0) + 1
        self._runs[snapshot.run_id] = StoredRun(snapshot, version)
        schedule = self._schedule
        if schedule is not None and schedule.due(snapshot.state, self._clock.now()):
            await self.prune_runs(schedule.retention)
        return version

    async def get(self, run_id: str) -> StoredRun | None:
        """Return the latest snapshot and version, or ``None``."""
        return self._runs.get(run_id)

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
        lines = [summarize(stored.snapshot, stored.version) for stored in self._runs.values()]
        lines = [line for line in lines if page.admits(line)]
        lines.sort(key=lambda line: (line.updated_at, line.run_id), reverse=True)
        return lines[: page.size]

    async def acquire_lease(
        self, run_id: str, owner: str, ttl_s: float, *, take_over: bool = False
    ) -> Lease:
        """Take a new lease on the run unless another acquisition holds it (see `RunStore`)."""
        now = self._clock.now()
        held = self._leases.get(run_id)
        taken_from = None
        if held is not None and held.expires_at > now:
            if not (take_over or holder_is_gone(held.host, held.pid)):
                raise lease_held(run_id, held.owner, held.expires_at)
            taken_from = held.owner
        lease = Lease(
            run_id=run_id,
            owner=owner,
            token=uuid.uuid4().hex,
            expires_at=now + timedelta(seconds=ttl_s),
            host=this_host(),
            pid=os.getpid(),
            taken_over_from=taken_from,
        )
        self._leases[run_id] = lease
        return lease

    async def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a lease that is still current and unexpired (see `RunStore`)."""
        self._fence(lease.run_id, lease)
        renewed = self._leases[lease.run_id].model_copy(
            update={"expires_at": self._clock.now() + timedelta(seconds=ttl_s)}
        )
        self._leases[lease.run_id] = renewed
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back if it is still held."""
        held = self._leases.get(lease.run_id)
        if held is not None and held.token == lease.token:
            del self._leases[lease.run_id]

    def _fence(self, run_id: str, lease: Lease | None) -> None:
        if lease is None:
            return
        held = self._leases.get(run_id)
        if held is None or held.token != lease.token or held.expires_at <= self._clock.now():
            raise lease_lost(run_id)

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        """Record a write about to execute; refuse one whose write already has a receipt.

        An intent without a receipt, or whose receipt says its effect is unknown, is replaced (a
        lookup cleared the write for a retry with the same key).

        Raises:
            StaleCheckpoint: If the write already finished: this worker's view is out of date.
            RunLeased: If ``lease`` is no longer current.
        """
        self._fence(intent.run_id, lease)
        entries = self._journal.setdefault(intent.run_id, [])
        for index, entry in enumerate(entries):
            if entry.intent.call_id == intent.call_id:
                if entry.receipt is not None and entry.receipt.status != "unknown":
                    raise receipt_exists(intent.run_id, intent.call_id)
                entries[index] = JournalEntry(intent=intent)
                return
        entries.append(JournalEntry(intent=intent))

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        """Record how a journaled write ended (see `RunStore`)."""
        self._fence(run_id, lease)
        entries = self._journal.get(run_id, [])
        for index, entry in enumerate(entries):
            if entry.intent.call_id == call_id:
                entries[index] = entry.model_copy(update={"receipt": receipt})

    async def journal(self, run_id: str) -> list[JournalEntry]:
        """Return the run's write journal."""
        return list(self._journal.get(run_id, []))

    async def submit_approval(self, run_id: str, approval: Approval) -> None:
        """Store a decision for a request the run waits for (see `RunStore`)."""
        stored = self._runs.get(run_id)
        earlier = self._approvals.get(run_id, [])
        if check_submission(run_id, stored.snapshot if stored else None, approval, earlier):
            self._approvals.setdefault(run_id, []).append(approval)

    async def submitted_approvals(self, run_id: str) -> list[Approval]:
        """Return the decisions submitted for the run."""
        return list(self._approvals.get(run_id, []))

    async def withdraw_approvals(self, run_id: str, decides_what: str) -> int:
        """Delete the stored decisions naming a request id or digest (see `RunStore`)."""
        stored = self._runs.get(run_id)
        snapshot = stored.snapshot if stored is not None else None
        kept = [
            a for a in self._approvals.get(run_id, []) if not withdrawn(snapshot, a, decides_what)
        ]
        removed = len(self._approvals.get(run_id, [])) - len(kept)
        self._approvals[run_id] = kept
        return removed

    async def prune_runs(self, retention: Retention, *, dry_run: bool = False) -> PruneReport:
        """Remove a batch of the runs the retention matches (see `RunStore` and `Retention`)."""
        now = self._clock.now()
        statuses = retention.status_values()
        covered = sorted(
            (
                stored.snapshot
                for stored in self._runs.values()
                if stored.snapshot.state in ("finished", "paused")
                and (not statuses or summarize(stored.snapshot, 1).status in statuses)
            ),
            key=lambda snapshot: (snapshot.saved_at, snapshot.run_id),
            reverse=True,
        )
        cutoff = retention.cutoff(now)
        keep = retention.keep_latest
        removable: list[str] = []
        spared: dict[SpareReason, int] = {}
        for rank, snapshot in enumerate(covered):
            old = cutoff is not None and snapshot.saved_at < cutoff
            if not (old or (keep is not None and rank >= keep)):
                continue
            lease = self._leases.get(snapshot.run_id)
            reason = spared_because(
                retention,
                state=snapshot.state,
                status=summarize(snapshot, 1).status,
                unknown_effect=open_write(self._journal.get(snapshot.run_id, [])),
                leased=lease is not None and lease.expires_at > now,
            )
            if reason is None:
                removable.append(snapshot.run_id)
            else:
                spared[reason] = spared.get(reason, 0) + 1
        removable.reverse()  # oldest first
        doomed = tuple(removable[: retention.batch])
        if not dry_run:
            for run_id in doomed:
                for table in (self._runs, self._leases, self._journal, self._approvals):
                    table.pop(run_id, None)
        return PruneReport(
            run_ids=doomed, dry_run=dry_run, spared=spared, more=len(removable) > len(doomed)
        )

    async def run_stats(self) -> RunStats:
        """Return a summary of the store (see `RunStore`)."""
        groups: dict[tuple[str, str | None, str | None], tuple[int, Any]] = {}
        totals = dict.fromkeys(USAGE_FIELDS, 0.0)
        for stored in self._runs.values():
            line = summarize(stored.snapshot, stored.version)
            key = (line.state, line.status, line.stop_reason)
            count, oldest = groups.get(key, (0, line.updated_at))
            groups[key] = (count + 1, min(oldest, line.updated_at))
            for name in USAGE_FIELDS:
                totals[name] += getattr(stored.snapshot.usage, name)
        now = self._clock.now()
        return gather(
            [(*key, count, oldest) for key, (count, oldest) in groups.items()],
            tuple(totals.values()),
            sum(
                entry.receipt is None or entry.receipt.status == "unknown"
                for entries in self._journal.values()
                for entry in entries
            ),
            sum(lease.expires_at > now for lease in self._leases.values()),
        )

    def __repr__(self) -> str:
        return f"MemoryRunStore(runs={len(self._runs)})"
