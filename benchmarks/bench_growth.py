"""Growth as work grows: a 10,000-step run's checkpoint cost, bytes stored and memory.

One long scripted run per store, the same run as ``bench_checkpoint_growth.py`` (a read every turn,
a journaled write every fourth, a default `ContextPolicy` compacting the conversation), driven
through `Agent.run` to ``--steps`` turns. It reports:

- the checkpoint time per step (building the snapshot plus ``store.save``), the median over a
  window of steps around step 5, 1,000, 5,000 and 9,990 (``Limits.max_steps`` caps a run at
  10,000), and each ratio to step 5;
- the bytes stored: the run's rows (state record, item rows, journal) after it ends, per run and
  per step, and the SQLite file's size;
- the process's peak resident memory when the run passes steps 1,000, 5,000 and 10,000 (what
  still grows is the run's receipts and evidence — with a SQL store the run holds only its latest
  trace events (``trace_events``: how many its result holds); the conversation sent to the
  model stays bounded by the context policy).

Run:

    .venv/bin/python benchmarks/bench_growth.py [--steps 10000] [--dsn ...]

Prints JSON; docs/performance.md reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sqlite3
import sys
import tempfile
import time
import types
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import bench_checkpoint_growth
from _records import records_registry, throwaway_postgres
from bench_checkpoint_growth import (
    _describe,
    _Forgetful,
    _script,
    _time_snapshot_building,
    _Timed,
    _window,
)

from ownloop import Agent, ContextPolicy, Limits
from ownloop.contracts import RunSnapshot
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore, RunStore, SqliteRunStore

MARKS = (5, 1000, 5000, 9990)
"""The steps measured: the last is the window just before step 10,000 (``max_steps`` caps there)."""


class _Sampled(_Timed):
    """Also notes the peak resident memory (MiB) and the conversation's length at each mark."""

    def __init__(self, store: RunStore, costs: dict[int, float]) -> None:
        super().__init__(store, costs)
        self.memory: dict[int, float] = {}
        self.messages: dict[int, int] = {}

    async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
        step = snapshot.usage.steps
        if step in MARKS and step not in self.memory:
            self.memory[step] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            self.messages[step] = len(snapshot.messages)
        return await super().save(snapshot, **options)


async def _bytes(store: RunStore, run_id: str) -> int:
    """The bytes of the run's rows: its state record, item rows and journal."""
    if isinstance(store, SqliteRunStore):
        with sqlite3.connect(store.path) as db:
            row = db.execute(
                "SELECT (SELECT length(snapshot) + length(layout) FROM runs WHERE run_id = ?1) "
                "+ (SELECT COALESCE(SUM(length(item)), 0) FROM run_items WHERE run_id = ?1) "
                "+ (SELECT COALESCE(SUM(length(intent) + COALESCE(length(receipt), 0)), 0) "
                "FROM journal WHERE run_id = ?1)",
                (run_id,),
            ).fetchone()
        return int(row[0])
    assert isinstance(store, PostgresRunStore)
    connection = await store._connect()
    s = store.schema
    cursor = await connection.execute(
        f"SELECT (SELECT pg_column_size(r.*) FROM {s}.runs AS r WHERE run_id = %(id)s) "
        f"+ (SELECT COALESCE(SUM(pg_column_size(i.*)), 0) FROM {s}.run_items AS i "
        f"WHERE run_id = %(id)s) + (SELECT COALESCE(SUM(pg_column_size(j.*)), 0) "
        f"FROM {s}.journal AS j WHERE run_id = %(id)s)",
        {"id": run_id},
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _run(store: RunStore, steps: int) -> dict[str, Any]:
    build: dict[int, float] = defaultdict(float)
    save: dict[int, float] = defaultdict(float)
    _time_snapshot_building(build)
    sampled = _Sampled(store, save)
    agent = Agent(
        _Forgetful(_script(steps)),
        records_registry(_describe),
        policy=allow_writes("record"),
        context=ContextPolicy(),
        store=sampled,  # type: ignore[arg-type]
        limits=Limits(
            max_steps=steps,
            max_tool_calls=steps,
            max_tool_attempts=steps * 2,
            max_model_attempts=steps * 2,
            max_total_tokens=10**10,
            deadline_s=36_000,
        ),
    )
    run_id = uuid.uuid4().hex
    result = await agent.run("reconcile the records", run_id=run_id)
    assert result.status.value == "completed", result.detail
    total = {step: build[step] + save[step] for step in build}
    marks = [mark for mark in MARKS if mark + 2 <= steps]
    times = {mark: round(_window(total, mark) * 1000, 3) for mark in marks}
    stored = await _bytes(store, run_id)
    return {
        "checkpoint_ms_at_step": times,
        "ratio_to_step_5": {mark: round(times[mark] / times[5], 2) for mark in marks[1:]},
        "bytes_per_run": stored,
        "bytes_per_step": round(stored / steps),
        "peak_rss_mib_at_step": sampled.memory,
        "messages_at_step": sampled.messages,
        "trace_events": len(result.trace),
    }


async def _all(steps: int, dsn: str | None, directory: Path) -> dict[str, Any]:
    path = directory / "growth.db"
    async with SqliteRunStore(path) as sqlite:
        report: dict[str, Any] = {"sqlite": await _run(sqlite, steps)}
    report["sqlite"]["file_bytes"] = os.path.getsize(path)
    if not dsn:
        print("postgres skipped: no --dsn or OWNLOOP_TEST_POSTGRES_DSN", file=sys.stderr)
        return report
    async with throwaway_postgres(dsn) as postgres:
        report["postgres"] = await _run(postgres, steps)
    return report


def main() -> None:
    """Measure one long run per store and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000, help="at most 10,000")
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time checkpoints in this process's CPU seconds (steadier on a loaded machine; "
        "leaves out a server's work, so use it for SQLite and the memory store)",
    )
    arguments = parser.parse_args()
    if arguments.cpu:
        bench_checkpoint_growth.time = types.SimpleNamespace(perf_counter=time.process_time)  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(dir=".") as directory:
        stores = asyncio.run(_all(arguments.steps, arguments.dsn, Path(directory)))
    clock = "cpu" if arguments.cpu else "wall"
    report = {"python": platform.python_version(), "steps": arguments.steps, "clock": clock}
    print(json.dumps(report | stores, indent=2))


if __name__ == "__main__":
    main()
