"""Retention: which stored runs a prune may remove, and which it must spare.

A `Retention` names the runs that may go — finished runs older than a cutoff, or beyond the newest
``keep_latest`` — and a store's ``prune_runs`` removes them, a bounded batch per call, each run's
row, items, journal, decisions and lease in one transaction. Three kinds of run are spared unless
the retention names the risk it takes:

- a **paused** run: someone is asked to decide, and removing it loses the question;
- a run with an **unknown effect** (status ``unresolved``, or a journaled write without a
  receipt, or whose receipt says its effect is unknown): its journal is the only record that the
  write may have happened, and it is what keeps a resume from executing it twice;
- a **leased** run: a worker holds it now (a current, unexpired lease).

The stores express these rules in their own SQL; `spared_because` is the same rule for one run in
memory, so the memory store and the tests agree with the SQL. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ownloop.contracts import JournalEntry, RunStatus

__all__ = [
    "SPARE_REASONS",
    "PruneReport",
    "Retention",
    "RetentionSchedule",
    "SpareReason",
    "open_write",
    "spared_because",
]

SpareReason = Literal["paused", "unknown_effect", "leased"]
"""Why a run that matches a retention was kept."""

SPARE_REASONS: tuple[SpareReason, ...] = ("paused", "unknown_effect", "leased")
"""The reasons, in the order a run is judged (it is counted under the first that holds)."""


class Retention(BaseModel):
    """Which runs a prune removes: finished runs older than a cutoff, or beyond a count.

    The retention matches finished and paused runs (never a running one) of the given statuses
    that are older than ``older_than`` *or* beyond the newest ``keep_latest`` of them; a matched
    run goes unless it is spared (paused, with an unknown effect, or leased: see the module).

    Attributes:
        older_than: Runs last saved longer ago than this go.
        keep_latest: Keep this many of the most recently saved runs; older ones go.
        statuses: Only runs whose result has one of these statuses (every status by default).
        include_paused: Also remove paused runs: the decisions people were asked for are lost.
        include_unknown_effects: Also remove runs with a write whose effect is unknown: the only
            record that it may have happened is lost, and nothing then stops it running again.
        include_leased: Also remove runs a worker holds now: its next write is refused.
        batch: At most this many runs per call (and per transaction).
        interval_s: As a store's policy: at least this many seconds between automatic prunes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    older_than: timedelta | None = None
    keep_latest: int | None = Field(default=None, ge=0)
    statuses: tuple[RunStatus, ...] = ()
    include_paused: bool = False
    include_unknown_effects: bool = False
    include_leased: bool = False
    batch: int = Field(default=1000, ge=1, le=100_000)
    interval_s: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _names_what_goes(self) -> Self:
        if self.older_than is None and self.keep_latest is None:
            raise ValueError("a retention needs older_than, keep_latest, or both")
        if self.older_than is not None and self.older_than < timedelta(0):
            raise ValueError("older_than must not be negative")
        return self

    def status_values(self) -> tuple[str, ...]:
        """Return the statuses it covers as stored (empty: every status)."""
        return tuple(status.value for status in self.statuses)

    def cutoff(self, now: datetime) -> datetime | None:
        """Return the time before which a run is old enough to go, if an age is set.

        Args:
            now: The present, by the store's clock.
        """
        return None if self.older_than is None else now - self.older_than


class PruneReport(BaseModel):
    """What one prune removed (or, in a dry run, would remove) and what it spared.

    Attributes:
        run_ids: The runs removed (or that would be), oldest first.
        dry_run: Nothing was removed.
        spared: How many runs the retention matched but kept, by reason.
        more: The batch was full: another call may remove more.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_ids: tuple[str, ...] = ()
    dry_run: bool = False
    spared: dict[SpareReason, int] = Field(default_factory=dict)
    more: bool = False


def open_write(entries: Iterable[JournalEntry]) -> bool:
    """Say whether a journal holds a write whose effect is unknown.

    Args:
        entries: The run's journal.

    Returns:
        ``True`` when an intent has no receipt, or its receipt's status is ``unknown``.
    """
    return any(entry.receipt is None or entry.receipt.status == "unknown" for entry in entries)


def spared_because(
    retention: Retention,
    *,
    state: str,
    status: str | None,
    unknown_effect: bool,
    leased: bool,
) -> SpareReason | None:
    """Return why a run the retention matches is kept, or ``None`` when it may go.

    Args:
        retention: The retention.
        state: The run's snapshot state.
        status: Its result's status.
        unknown_effect: Its journal holds a write whose effect is unknown.
        leased: A worker holds a current lease on it.
    """
    if state == "paused" and not retention.include_paused:
        return "paused"
    if (unknown_effect or status == RunStatus.UNRESOLVED.value) and not (
        retention.include_unknown_effects
    ):
        return "unknown_effect"
    if leased and not retention.include_leased:
        return "leased"
    return None


class RetentionSchedule:
    """When a store with a retention policy prunes as it is used.

    After a save that finishes a run, at most once every ``interval_s`` (by the store's clock),
    one batch.

    Args:
        retention: The store's policy.
    """

    def __init__(self, retention: Retention) -> None:
        self.retention = retention
        self._last: datetime | None = None

    def due(self, state: str, now: datetime) -> bool:
        """Say whether a save that left a run in ``state`` should prune now (and note it did).

        Args:
            state: The saved snapshot's state.
            now: The present.
        """
        if state != "finished":
            return False
        if self._last is not None and now - self._last < timedelta(
            seconds=self.retention.interval_s
        ):
            return False
        self._last = now
        return True
