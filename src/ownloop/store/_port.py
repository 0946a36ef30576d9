"""The `RunStore` port: where runs are checkpointed, journaled, leased and listed.

Every implementation keeps the same promises, proven by one shared test suite:

- ``save`` is an optimistic compare-and-set on the snapshot's version: a stale writer gets
  `StaleCheckpoint` and changes nothing; a snapshot of an unknown schema version is refused;
- a lease gives one worker the run until it expires; a second worker gets `RunLeased`, and an
  expired lease can be taken over;
- an intent is durable before ``record_intent`` returns, and so is a receipt;
- approvals submitted from another process wait in the store until a resume applies them.
"""

from __future__ import annotations

from dataclasses import dataclass
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

__all__ = ["RunStore", "StoredRun"]


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
        self, *, state: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[RunSummary]:
        """List runs, most recently updated first.

        Args:
            state: Only runs in this snapshot state (``running``, ``paused``, ``finished``).
            status: Only runs whose result has this status.
            limit: At most this many (1-1000).
        """
        ...

    async def acquire_lease(self, run_id: str, owner: str, ttl_s: float) -> Lease:
        """Take the run's lease for ``ttl_s`` seconds.

        Raises:
            RunLeased: If another owner holds an unexpired lease.
        """
        ...

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back (doing nothing if it was already lost)."""
        ...

    async def record_intent(self, intent: WriteIntent) -> None:
        """Durably record that a write is about to execute."""
        ...

    async def record_receipt(self, run_id: str, call_id: str, receipt: Receipt) -> None:
        """Durably record how a journaled write ended."""
        ...

    async def journal(self, run_id: str) -> list[JournalEntry]:
        """Return the run's write journal, in order."""
        ...

    async def submit_approval(self, run_id: str, approval: Approval) -> None:
        """Store a decision for the next resume of a paused run (from any process)."""
        ...

    async def submitted_approvals(self, run_id: str) -> list[Approval]:
        """Return the decisions submitted for the run, in order."""
        ...
