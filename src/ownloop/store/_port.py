"""The `RunStore` port: where runs are checkpointed, journaled, leased and listed.

Every implementation keeps the same promises, proven by one shared test suite:

- ``save`` is an optimistic compare-and-set on the snapshot's version: a stale writer gets
  `StaleCheckpoint` and changes nothing; a snapshot of an unknown schema version is refused;
- a lease is one acquisition, with a fencing token that changes on every acquisition (never an
  owner name): while it is current and unexpired every other acquisition gets `RunLeased`, unless
  it takes the run over explicitly or the holder is a process of this host that has ended;
- fencing: given the writer's lease, ``save``, ``record_intent`` and ``record_receipt`` apply only
  while that lease is current and unexpired, checked in the same transaction as the write, so a
  worker that lost its lease records nothing — above all no intent, so it executes no write;
- ``renew_lease`` (the heartbeat) extends a current lease and keeps its token;
- an intent is durable before ``record_intent`` returns, and so is a receipt;
- approvals submitted from another process wait in the store until a resume applies them; a
  decision naming no request the run waits for is refused at submission, and stored decisions
  can be listed and withdrawn;
- one decision per request, however it names the request: a second decision for a request named
  by its id or by its digest is refused until the first is withdrawn, atomically even between
  processes (of two concurrent deciders exactly one is stored);
- the upgrade fence (SQL stores): a write finding the store's schema version changed since the
  store was opened raises `StoreUpgraded` and writes nothing;
- ``prune_runs`` removes the runs a `Retention` matches, a bounded batch per call, each with its
  items, journal, decisions and lease in one transaction, and never a paused run, a run with an
  unknown effect or a leased run unless the retention names that risk.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ownloop.contracts import (
    Approval,
    JournalEntry,
    Lease,
    Receipt,
    RunSnapshot,
    RunSummary,
    WriteIntent,
)
from ownloop.store._retention import PruneReport, Retention
from ownloop.store._stats import RunStats

__all__ = ["ChangeStore", "RunStore", "StoredRun", "takes_changes"]


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A snapshot as stored, with its version.

    Attributes:
        snapshot: The run's latest snapshot.
        version: Its version; pass it as ``expected_version`` to save the next one.
    """

    snapshot: RunSnapshot
    version: int


@runtime_checkable
class RunStore(Protocol):
    """Durable storage of runs."""

    async def save(
        self, snapshot: RunSnapshot, *, expected_version: int | None, lease: Lease | None = None
    ) -> int:
        """Store a snapshot if the stored version is still ``expected_version``.

        Args:
            snapshot: The snapshot.
            expected_version: The version this writer last saw; ``None`` for a new run.
            lease: The writer's lease, checked to still be held when given.

        Returns:
            The new version.

        Raises:
            StaleCheckpoint: If another snapshot was saved in between (or the run exists).
            RunLeased: If ``lease`` is no longer held.
            SchemaVersionError: If the snapshot's schema version is unknown.
        """
        ...

    async def get(self, run_id: str) -> StoredRun | None:
        """Return the run's latest snapshot and version, or ``None``.

        Raises:
            SchemaVersionError: If the stored snapshot is newer than this ownloop reads.
        """
        ...

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
        """List one page of runs, most recently saved first (ties: run id, descending).

        Pages are keyset pages: pass the `run_cursor` of a page's last line as ``after`` for the
        next one, which costs what the first page does however deep it is.

        Args:
            state: Only runs in this snapshot state (``running``, ``paused``, ``finished``).
            status: Only runs whose result has this status.
            agent: Only runs of the agent with this configuration digest
                (``versions.policy_digest``).
            actor: Only runs acting for this actor id.
            since: Only runs last saved at or after this time.
            until: Only runs last saved before this time.
            after: Continue after this `run_cursor`.
            limit: At most this many (1-1000).

        Raises:
            ConfigurationError: If ``after`` is not a cursor.
        """
        ...

    async def acquire_lease(
        self, run_id: str, owner: str, ttl_s: float, *, take_over: bool = False
    ) -> Lease:
        """Take a new lease (a new fencing token) on the run for ``ttl_s`` seconds.

        Args:
            run_id: The run.
            owner: This worker's name (for messages; it grants nothing).
            ttl_s: Seconds until the lease expires unless renewed.
            take_over: Take the run even from a current holder (an operator's decision that the
                holder is dead or stuck); fencing keeps whatever it still does from counting.

        Returns:
            The lease; ``taken_over_from`` names a current holder it replaced.

        Raises:
            RunLeased: If another acquisition holds an unexpired lease (and its process is not
                known to be gone), and ``take_over`` is false.
        """
        ...

    async def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a current lease to ``ttl_s`` seconds from now, keeping its token.

        Raises:
            RunLeased: If the lease expired or another acquisition replaced it.
        """
        ...

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back (doing nothing if it was already lost)."""
        ...

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        """Durably record that a write is about to execute.

        Args:
            intent: The write.
            lease: The writer's lease; the intent is recorded only while it is current.

        Raises:
            StaleCheckpoint: If the write already has a receipt.
            RunLeased: If ``lease`` is no longer current.
        """
        ...

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        """Durably record how a journaled write ended.

        Raises:
            RunLeased: If ``lease`` is no longer current.
        """
        ...

    async def journal(self, run_id: str) -> list[JournalEntry]:
        """Return the run's write journal, in order."""
        ...

    async def submit_approval(self, run_id: str, approval: Approval) -> None:
        """Store a decision for the next resume of a paused run (from any process).

        Raises:
            RunNotFound: If the run is not stored.
            UnknownApprovalRequest: If the run waits for no request the decision names (by
                request id or digest), or that request already has a stored decision (named by
                its id or by its digest).
        """
        ...

    async def submitted_approvals(self, run_id: str) -> list[Approval]:
        """Return the decisions submitted for the run, in order."""
        ...

    async def withdraw_approvals(self, run_id: str, decides_what: str) -> int:
        """Delete the stored decisions on a request, named by its id or by its digest.

        A decision that named the request the other way is deleted too.

        Returns:
            How many were deleted.
        """
        ...

    async def prune_runs(self, retention: Retention, *, dry_run: bool = False) -> PruneReport:
        """Remove (at most ``retention.batch`` of) the runs the retention matches.

        Args:
            retention: Which runs go, and which risks the prune may take.
            dry_run: Only report what would go.

        Returns:
            The runs removed, oldest first, and how many matched runs were spared, by reason.
        """
        ...

    async def run_stats(self) -> RunStats:
        """Return a summary of the store (``ownloop runs stats``).

        Runs by state, status and stop reason, the oldest paused run, unknown effects
        outstanding, current leases and usage totals.
        """
        ...


@runtime_checkable
class ChangeStore(RunStore, Protocol):
    """A `RunStore` that can be handed a checkpoint's changes alone (the SQL stores).

    An agent with such a store (``saves_changes`` true) sends, after a run's first checkpoint, only
    the trace events, receipts and evidence added since the last one, so a checkpoint costs the
    same at step 10,000 as at step 5. What `get` returns is always the whole snapshot.

    Attributes:
        saves_changes: True: ``save`` takes ``kept``.
    """

    saves_changes: bool

    async def save(
        self,
        snapshot: RunSnapshot,
        *,
        expected_version: int | None,
        lease: Lease | None = None,
        kept: Mapping[str, int] | None = None,
    ) -> int:
        """Store a snapshot if the stored version is still ``expected_version`` (see `RunStore`).

        Args:
            snapshot: The snapshot.
            expected_version: The version this writer last saw; ``None`` for a new run.
            lease: The writer's lease, checked to still be held when given.
            kept: When given, the snapshot's ``trace``, ``receipts`` and ``evidence`` hold only
                the items after the first ``kept[part]`` of the stored ``expected_version``,
                which are kept as they are; the new version is those items followed by the
                snapshot's (the loop core vouches for them: it never rewrites a stored item).

        Returns:
            The new version.
        """
        ...


def takes_changes(store: object) -> bool:
    """Say whether a store may be handed a checkpoint's changes alone (a `ChangeStore`).

    It must say so (``saves_changes``) and its ``save`` must take ``kept``, by name or through
    ``**kwargs``: a wrapper that forwards attributes to a SQL store but defines its own ``save``
    without ``kept`` gets whole snapshots.

    Args:
        store: The store.
    """
    if getattr(store, "saves_changes", False) is not True:
        return False
    try:
        parameters = inspect.signature(store.save).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False
    return "kept" in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()
    )
