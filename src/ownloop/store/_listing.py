"""Run listings that stay fast as a store grows: keyset pages, filters, and the indexes behind them.

A listing is ordered by last save, newest first, ties broken by run id (descending), and a page
continues after the last line of the previous one — its `run_cursor` — rather than skipping an
OFFSET, so page 2,000 costs what page 1 does. Every filter is an equality or a time range that a
listing index serves in that same order. The SQL of a filter that is not set is left out (an
``x IS NULL OR ...`` filter keeps the planner from using an index). No I/O here.

The indexes (store schema 6, see ``_schema.py``) hold every column of a listing line, the run's
actor and agent included (columns of their own since schema 6, copied from the state record on
each save), so a page reads a few pages of one narrow index and never a run row: those hold the
state record, kilobytes each, and at 100,000 runs are spread over a file of gigabytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ownloop.contracts import RunSummary
from ownloop.exceptions import ConfigurationError

__all__ = [
    "Listing",
    "after_cursor",
    "listing_query",
    "run_cursor",
    "summary_of",
]

_SEPARATOR = "|"
_ORDER = "updated_at DESC, run_id DESC"
_LINE = "run_id, state, status, stop_reason, version, updated_at, actor, agent"
"""A listing line's columns: every one is in each listing index (store schema 6)."""


def run_cursor(summary: RunSummary) -> str:
    """Return where the page after this listing line starts (pass it as ``after``).

    Args:
        summary: The last line of a page.
    """
    return f"{summary.updated_at.astimezone(UTC).isoformat()}{_SEPARATOR}{summary.run_id}"


def after_cursor(cursor: str) -> tuple[datetime, str]:
    """Return the last save time and run id a cursor names.

    Args:
        cursor: A `run_cursor`.

    Raises:
        ConfigurationError: If it is not one.
    """
    moment, separator, run_id = cursor.partition(_SEPARATOR)
    try:
        at = datetime.fromisoformat(moment)
    except ValueError:
        at = None
    if not separator or not run_id or at is None or at.tzinfo is None:
        raise ConfigurationError(f"{cursor!r} is not a listing cursor (TIME|RUN_ID)")
    return at.astimezone(UTC), run_id


@dataclass(frozen=True, slots=True)
class Listing:
    """One page of a run listing: its filters, where it starts and its size.

    Attributes:
        state: Only runs in this snapshot state.
        status: Only runs whose result has this status.
        agent: Only runs of the agent with this configuration digest (``versions.policy_digest``).
        actor: Only runs acting for this actor id.
        since: Only runs last saved at or after this time.
        until: Only runs last saved before this time.
        after: Continue after this `run_cursor`.
        limit: At most this many lines (clamped to 1-1000).
    """

    state: str | None = None
    status: str | None = None
    agent: str | None = None
    actor: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    after: str | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if self.after is not None:
            after_cursor(self.after)  # refuse a bad cursor before any query

    @property
    def size(self) -> int:
        """The page size, clamped to 1-1000."""
        return max(1, min(self.limit, 1000))

    def admits(self, line: RunSummary) -> bool:
        """Say whether a listing line belongs on this page's listing (the memory store's filter).

        Args:
            line: A run's listing line.
        """
        if self.after is not None and (line.updated_at, line.run_id) >= after_cursor(self.after):
            return False
        wanted = (
            (self.state, line.state),
            (self.status, line.status),
            (self.agent, line.agent),
            (self.actor, line.actor),
        )
        if any(value is not None and value != found for value, found in wanted):
            return False
        return (self.since is None or line.updated_at >= self.since) and (
            self.until is None or line.updated_at < self.until
        )


def listing_query(
    listing: Listing, dialect: str, table: str, moment: Any
) -> tuple[str, dict[str, Any]]:
    """Return the query of one page and its parameters.

    Args:
        listing: The page.
        dialect: ``"sqlite"`` or ``"postgres"``.
        table: The runs table, as the engine names it.
        moment: Turns a datetime into the engine's stored form of ``updated_at``.
    """
    mark = ":{}" if dialect == "sqlite" else "%({})s"
    where: list[str] = []
    params: dict[str, Any] = {"limit": listing.size}
    for name in ("state", "status", "agent", "actor"):
        value = getattr(listing, name)
        if value is not None:
            where.append(f"{name} = {mark.format(name)}")
            params[name] = value
    if listing.since is not None:
        where.append(f"updated_at >= {mark.format('since')}")
        params["since"] = moment(listing.since)
    if listing.until is not None:
        where.append(f"updated_at < {mark.format('until')}")
        params["until"] = moment(listing.until)
    if listing.after is not None:
        at, run_id = after_cursor(listing.after)
        # `updated_at <= at` alone is a range the index serves; the OR only breaks the tie.
        where.append(
            f"updated_at <= {mark.format('at')} AND (updated_at < {mark.format('at')} "
            f"OR run_id < {mark.format('after_id')})"
        )
        params.update(at=moment(at), after_id=run_id)
    condition = f"WHERE {' AND '.join(where)} " if where else ""
    query = (
        f"SELECT {_LINE} FROM {table} {condition}ORDER BY {_ORDER} "  # noqa: S608 - constants
        f"LIMIT {mark.format('limit')}"
    )
    return query, params


def summary_of(row: Sequence[Any], updated_at: datetime) -> RunSummary:
    """Return the listing line of a row of `listing_query`.

    Args:
        row: The row.
        updated_at: Its save time, read back from the engine's form.
    """
    run_id, state, status, stop_reason, version, _, actor, agent = row
    return RunSummary(
        run_id=run_id,
        state=state,
        status=status,
        stop_reason=stop_reason,
        version=version,
        updated_at=updated_at,
        actor=actor,
        agent=agent,
    )
