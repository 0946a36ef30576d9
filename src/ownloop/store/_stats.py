"""What a store holds, summed up: `RunStats` (``ownloop runs stats`` and the OTel store gauges).

The SQL stores count with aggregate queries (a scan of the runs table for the usage totals, so
this is an operator's summary, not something to call per request); the memory store counts its
dicts. No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ownloop.contracts import RunStats

__all__ = ["USAGE_FIELDS", "RunStats", "gather", "stats_queries"]

USAGE_FIELDS = (
    "steps",
    "model_attempts",
    "tool_attempts",
    "input_tokens",
    "output_tokens",
    "cost",
)
"""The usage counters summed over every stored run."""


def stats_queries(dialect: str, prefix: str, field: str, now: str) -> dict[str, str]:
    """Return the queries of `RunStats` for one engine.

    Args:
        dialect: ``"sqlite"`` or ``"postgres"`` (only for the numeric cast).
        prefix: Put before table names.
        field: A template reading a usage counter from the state record (``{name}``).
        now: The present, compared with lease expiry.
    """
    cast = "REAL" if dialect == "sqlite" else "numeric"
    sums = ", ".join(
        f"COALESCE(SUM(CAST({field.format(name=name)} AS {cast})), 0)" for name in USAGE_FIELDS
    )
    return {
        "groups": (
            "SELECT state, status, stop_reason, count(*), min(updated_at) "  # noqa: S608 - constants
            f"FROM {prefix}runs GROUP BY state, status, stop_reason"
        ),
        "usage": f"SELECT {sums} FROM {prefix}runs",  # noqa: S608 - constants
        "unknown": (
            f"SELECT count(*) FROM {prefix}journal AS j WHERE j.receipt IS NULL OR "  # noqa: S608
            + (
                "json_extract(j.receipt, '$.status') = 'unknown'"
                if dialect == "sqlite"
                else "j.receipt->>'status' = 'unknown'"
            )
        ),
        "leased": f"SELECT count(*) FROM {prefix}leases WHERE expires_at > {now}",  # noqa: S608
    }


def gather(
    groups: Sequence[tuple[str, str | None, str | None, int, datetime | None]],
    usage: tuple[float, ...],
    unknown: int,
    leased: int,
) -> RunStats:
    """Return the stats of the rows the queries returned (or the memory store counted).

    Args:
        groups: ``(state, status, stop_reason, count, oldest save)`` per group.
        usage: The sums of `USAGE_FIELDS`, in order.
        unknown: Open journal entries.
        leased: Current leases.
    """
    runs: dict[str, int] = {}
    statuses: dict[str, int] = {}
    reasons: dict[str, int] = {}
    oldest: datetime | None = None
    for state, status, stop_reason, count, earliest in groups:
        runs[state] = runs.get(state, 0) + count
        if status is not None:
            statuses[status] = statuses.get(status, 0) + count
        if stop_reason is not None:
            reasons[stop_reason] = reasons.get(stop_reason, 0) + count
        if state == "paused" and earliest is not None and (oldest is None or earliest < oldest):
            oldest = earliest
    return RunStats(
        runs=runs,
        statuses=statuses,
        stop_reasons=reasons,
        oldest_paused_at=oldest,
        unknown_effects=unknown,
        leased=leased,
        usage={name: float(value) for name, value in zip(USAGE_FIELDS, usage, strict=True)},
    )
