"""``ownloop runs prune`` and ``ownloop runs stats``: retention, and what a store holds.

Registered by ``_runs`` under ``ownloop runs`` with that group's store options; the store is
opened through the group's helper it is given, so this module needs nothing else of it.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ownloop.contracts import RunStatus, utc_now
from ownloop.exceptions import ConfigurationError
from ownloop.store import PruneReport, Retention, RunStats, RunStore, SqliteRunStore

__all__ = ["add_actions", "parse_age", "prune", "stats"]

WithStore = Callable[[argparse.Namespace, Any], Any]

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RISKS = {
    "paused": "paused (--include-paused)",
    "unknown_effect": "with an unknown effect (--include-unknown-effects)",
    "leased": "held by a worker (--include-leased)",
}


def parse_age(text: str) -> timedelta:
    """Return the age an operator wrote: a number and a unit, ``s``, ``m``, ``h``, ``d`` or ``w``.

    Args:
        text: For example ``30d`` or ``12h``.

    Raises:
        ConfigurationError: If it is not a number followed by one of those units.
    """
    found = _AGE.match(text.strip())
    if found is None:
        raise ConfigurationError(f"an age is a number and a unit (s, m, h, d, w), not {text!r}")
    return timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2)])


def add_actions(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    store_options: Callable[[argparse.ArgumentParser], None],
    with_store: WithStore,
) -> None:
    """Add ``runs prune``.

    Args:
        actions: The ``runs`` command's subparsers.
        store_options: Adds ``--db`` and ``--dsn`` to a parser.
        with_store: Opens the store the command line names, runs ``work(store)`` and closes it.
    """
    pruning = actions.add_parser(
        "prune",
        help="remove finished runs older than an age or beyond a count (never paused runs, "
        "runs with an unknown effect or runs a worker holds, unless told)",
    )
    pruning.add_argument("--older-than", metavar="AGE", help="runs last saved before, e.g. 30d")
    pruning.add_argument(
        "--keep", type=int, metavar="N", help="keep the N most recently saved runs covered"
    )
    pruning.add_argument(
        "--status",
        action="append",
        choices=[status.value for status in RunStatus],
        help="only runs with this status (repeatable; every status by default)",
    )
    pruning.add_argument("--dry-run", action="store_true", help="print what would go, remove none")
    pruning.add_argument(
        "--include-paused",
        action="store_true",
        help="also remove paused runs: the decisions people were asked for are lost",
    )
    pruning.add_argument(
        "--include-unknown-effects",
        action="store_true",
        help="also remove runs with a write whose effect is unknown: the only record that it may "
        "have happened is lost, and nothing then stops it running again",
    )
    pruning.add_argument(
        "--include-leased",
        action="store_true",
        help="also remove runs a worker holds now: its next write is refused",
    )
    pruning.add_argument(
        "--batch", type=int, default=1000, help="runs per transaction (default 1000)"
    )
    pruning.add_argument(
        "--vacuum", action="store_true", help="then compact a SQLite file (VACUUM; blocks writers)"
    )
    store_options(pruning)
    pruning.set_defaults(handler=functools.partial(prune, with_store=with_store))
    summary = actions.add_parser(
        "stats", help="what the store holds: runs by status, paused and unknown, usage totals"
    )
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    store_options(summary)
    summary.set_defaults(handler=functools.partial(stats, with_store=with_store))


def prune(arguments: argparse.Namespace, *, with_store: WithStore) -> int:
    """Remove (or list, with ``--dry-run``) the runs the command line's retention matches.

    Batches are removed one transaction each until none is left, so an interrupted prune leaves
    every run either whole or gone.

    Args:
        arguments: The parsed command line.
        with_store: Opens the store, runs the work, closes the store.

    Returns:
        0.

    Raises:
        ConfigurationError: If neither ``--older-than`` nor ``--keep`` is given, or one is invalid.
    """
    if arguments.older_than is None and arguments.keep is None:
        raise ConfigurationError("say which runs go: --older-than AGE, --keep N, or both")
    try:
        retention = Retention(
            older_than=None if arguments.older_than is None else parse_age(arguments.older_than),
            keep_latest=arguments.keep,
            statuses=tuple(RunStatus(value) for value in arguments.status or ()),
            include_paused=arguments.include_paused,
            include_unknown_effects=arguments.include_unknown_effects,
            include_leased=arguments.include_leased,
            batch=100_000 if arguments.dry_run else arguments.batch,
        )
    except ValueError as error:
        raise ConfigurationError(f"invalid retention: {error}") from error

    verb = "would remove" if arguments.dry_run else "removed"

    async def work(store: RunStore) -> tuple[int, PruneReport]:
        count = 0
        while True:
            report = await store.prune_runs(retention, dry_run=arguments.dry_run)
            for run_id in report.run_ids:
                print(f"{verb} {run_id}", flush=True)  # as each batch commits
            count += len(report.run_ids)
            if arguments.dry_run or not report.more:
                break
        if arguments.vacuum and not arguments.dry_run and isinstance(store, SqliteRunStore):
            await store.vacuum()
        return count, report

    count, last = with_store(arguments, work)
    more = " (and more: the listing stops at 100000)" if arguments.dry_run and last.more else ""
    print(f"{verb} {count} run(s){more}")
    if last.spared:
        kept = ", ".join(
            f"{last.spared[reason]} {_RISKS[reason]}" for reason in _RISKS if reason in last.spared
        )
        print(f"spared: {kept}")
    return 0


def stats(arguments: argparse.Namespace, *, with_store: WithStore) -> int:
    """Print what the store holds: the same figures the OpenTelemetry metrics give.

    Args:
        arguments: The parsed command line.
        with_store: Opens the store, runs the work, closes the store.

    Returns:
        0.
    """
    summary: RunStats = with_store(arguments, lambda store: store.run_stats())
    if arguments.json:
        print(summary.model_dump_json(indent=2))
        return 0
    states = ", ".join(f"{name} {count}" for name, count in sorted(summary.runs.items()))
    print(f"runs:             {sum(summary.runs.values())} ({states or 'none'})")
    print(f"by status:        {_counts(summary.statuses)}")
    print(f"by stop reason:   {_counts(summary.stop_reasons)}")
    paused = summary.runs.get("paused", 0)
    waited = ""
    if summary.oldest_paused_at is not None:
        age = timedelta(seconds=round(summary.paused_age_s(utc_now())))
        waited = f", the oldest for {age} (since {summary.oldest_paused_at.isoformat()})"
    print(f"paused, waiting:  {paused}{waited}")
    print(f"unknown effects:  {summary.unknown_effects}")
    print(f"leased now:       {summary.leased}")
    usage = ", ".join(f"{name} {value:g}" for name, value in summary.usage.items())
    print(f"usage (all runs): {usage}")
    return 0


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "none"
