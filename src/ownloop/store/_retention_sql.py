"""The SQL of a prune, written once for both SQL stores (see `_retention.py` for the rules).

A `Dialect` says how SQLite and PostgreSQL differ here (parameters, JSON, the clock, lists);
the statements are built from the retention, so a filter that is not set is not in the SQL (an
``x IS NULL OR ...`` filter would keep the planner from using an index). No I/O here.
"""

# ruff: noqa: S608 - every name and fragment put into these statements is a constant of this
# module or a dialect's; values are always bound parameters.
from __future__ import annotations

from dataclasses import dataclass

from ownloop.store._retention import Retention

__all__ = ["POSTGRES", "SQLITE", "Dialect", "removable", "removal", "spared"]

_TABLES = ("run_items", "journal", "approvals", "leases")
"""What a run owns besides its row, removed with it."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL engine writes the parts of a prune that differ.

    Attributes:
        prefix: Put before a table name (PostgreSQL's ``{s}.`` schema).
        marker: A named parameter, with ``{}`` for its name.
        receipt_status: The stored receipt's status, from a journal row ``j``.
        now: The present, compared with a lease's expiry.
        listed: A column's membership in the list parameter ``statuses``.
    """

    prefix: str
    marker: str
    receipt_status: str
    now: str
    listed: str

    def param(self, name: str) -> str:
        """Return the placeholder of a named parameter."""
        return self.marker.format(name)


SQLITE = Dialect(
    prefix="",
    marker=":{}",
    receipt_status="json_extract(j.receipt, '$.status')",
    now=":now",
    listed="{} IN (SELECT value FROM json_each(:statuses))",
)
POSTGRES = Dialect(
    prefix="{s}.",
    marker="%({})s",
    receipt_status="j.receipt->>'status'",
    now="clock_timestamp()",
    listed="{} = ANY(%(statuses)s)",
)


def _covered(dialect: Dialect, retention: Retention, alias: str) -> str:
    where = f"{alias}.state IN ('finished', 'paused')"
    if retention.statuses:
        where += " AND " + dialect.listed.format(f"{alias}.status")
    return where


def _matched(dialect: Dialect, retention: Retention) -> str:
    """Runs the retention matches: covered, and old enough or beyond the newest ones kept."""
    reasons = []
    if retention.older_than is not None:
        reasons.append(f"r.updated_at < {dialect.param('cutoff')}")
    if retention.keep_latest is not None:
        reasons.append(
            f"r.run_id NOT IN (SELECT k.run_id FROM {dialect.prefix}runs AS k "
            f"WHERE {_covered(dialect, retention, 'k')} "
            f"ORDER BY k.updated_at DESC, k.run_id DESC LIMIT {dialect.param('keep')})"
        )
    return f"{_covered(dialect, retention, 'r')} AND ({' OR '.join(reasons)})"


def _unknown(dialect: Dialect) -> str:
    return (
        "(COALESCE(r.status, '') = 'unresolved' OR EXISTS (SELECT 1 FROM "
        f"{dialect.prefix}journal AS j WHERE j.run_id = r.run_id "
        f"AND (j.receipt IS NULL OR {dialect.receipt_status} = 'unknown')))"
    )


def _leased(dialect: Dialect) -> str:
    return (
        f"EXISTS (SELECT 1 FROM {dialect.prefix}leases AS l "
        f"WHERE l.run_id = r.run_id AND l.expires_at > {dialect.now})"
    )


def _protections(dialect: Dialect, retention: Retention) -> list[tuple[str, str]]:
    """The spare reasons the retention does not override, each with its condition on ``r``."""
    found = []
    if not retention.include_paused:
        found.append(("paused", "r.state = 'paused'"))
    if not retention.include_unknown_effects:
        found.append(("unknown_effect", _unknown(dialect)))
    if not retention.include_leased:
        found.append(("leased", _leased(dialect)))
    return found


def removable(dialect: Dialect, retention: Retention) -> str:
    """Return the query of the runs a prune removes, oldest first, one more than the batch.

    Parameters: ``cutoff``, ``keep``, ``statuses``, ``now`` (SQLite), ``batch``.
    """
    where = _matched(dialect, retention)
    for _, condition in _protections(dialect, retention):
        where += f" AND NOT {condition}"
    return (
        f"SELECT r.run_id FROM {dialect.prefix}runs AS r WHERE {where} "
        f"ORDER BY r.updated_at, r.run_id LIMIT {dialect.param('batch')} + 1"
    )


def spared(dialect: Dialect, retention: Retention) -> str | None:
    """Return the query counting the matched runs kept, by reason (``None``: nothing is kept).

    Each row is ``(reason, count)``; a run is counted under the first reason that holds.
    """
    protections = _protections(dialect, retention)
    if not protections:
        return None
    cases = " ".join(f"WHEN {condition} THEN '{reason}'" for reason, condition in protections)
    return (
        f"SELECT reason, count(*) FROM (SELECT CASE {cases} END AS reason "
        f"FROM {dialect.prefix}runs AS r WHERE {_matched(dialect, retention)}) AS matched "
        "WHERE reason IS NOT NULL GROUP BY reason"
    )


def removal(dialect: Dialect, retention: Retention, fence: str) -> str:
    """Return PostgreSQL's one statement removing a batch of runs with all they own.

    One statement is one atomic unit on an autocommit connection: the rows are locked (``FOR
    UPDATE``, skipping rows another prune holds), re-judged, and removed with their items,
    journal, decisions and lease, or nothing is — nothing either once ``fence`` (the upgrade
    fence) no longer holds.
    """
    select = removable(dialect, retention).replace(
        f" ORDER BY r.updated_at, r.run_id LIMIT {dialect.param('batch')} + 1",
        f" AND {fence} ORDER BY r.updated_at, r.run_id LIMIT {dialect.param('batch')}",
    )
    owned = ", ".join(
        f"{table} AS (DELETE FROM {dialect.prefix}{table} AS t USING doomed "
        "WHERE t.run_id = doomed.run_id)"
        for table in _TABLES
    )
    return (
        f"WITH doomed AS ({select} FOR UPDATE OF r SKIP LOCKED), {owned}, "
        f"gone AS (DELETE FROM {dialect.prefix}runs AS t USING doomed "
        "WHERE t.run_id = doomed.run_id RETURNING t.run_id, t.updated_at) "
        "SELECT run_id FROM gone ORDER BY updated_at, run_id"
    )
