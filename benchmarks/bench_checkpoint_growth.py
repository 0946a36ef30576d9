"""Does a checkpoint cost the same at step 200 as at step 5? Per-step checkpoint time as runs grow.

One long scripted run per store drives `Agent.run` (with its lease and heartbeat) through N model
turns: each turn reads a record (an observation of about 400 characters, a receipt, evidence),
every fourth turn also writes one (an intent and a receipt in the journal), and a default
`ContextPolicy` compacts the conversation as it grows — so the trace, the receipts and the
evidence grow with the run while the messages are rewritten now and then. The scripted model
keeps no requests (holding every request of a 1000-step run slows the process, not the store).
Every checkpoint is timed in two parts: building the snapshot in the loop core (``snapshot_of``)
and saving it (``store.save``). The figure per step is the sum over the step's checkpoints (and
its two parts, ``build_`` and ``save_``); the report gives the median over a window of steps
around step 5, step 200 (and step 1000 with ``--steps 1000``), the median over runs, and the
ratio to step 5. Run:

    .venv/bin/python benchmarks/bench_checkpoint_growth.py [--steps 200] [--runs 3] [--dsn ...]

PostgreSQL is measured when ``--dsn`` (or ``OWNLOOP_TEST_POSTGRES_DSN``) names a server, in a
throwaway schema dropped afterwards; otherwise it is skipped with one line. Prints JSON;
docs/performance.md reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from _records import records_registry, throwaway_postgres

from ownloop import Agent, ContextPolicy, Limits
from ownloop.contracts import ModelRequest, ModelResponse, RunSnapshot
from ownloop.loop import core
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call

WINDOW = 2  # steps either side of a measured step
TEXT = "The quarterly figures were reconciled against the ledger; no gaps were found. " * 5


def _script(steps: int) -> list[ModelResponse]:
    responses = []
    for turn in range(1, steps):
        if turn % 4 == 0:
            responses.append(tool_call("record", f"w{turn}", key=f"k{turn}", value=turn))
        else:
            responses.append(tool_call("lookup", f"r{turn}", key=f"k{turn}"))
    return [*responses, final("done")]


def _describe(key: str) -> dict[str, Any]:
    return {"title": f"record {key}", "text": TEXT}


class _Forgetful(ScriptedModel):
    """Plays the script without keeping every request, which a long run would make quadratic."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        response = await super().respond(request)
        self.requests.clear()
        return response


class _Timed:
    """Times every save of the wrapped store, by the step of the saved snapshot."""

    def __init__(self, store: RunStore, costs: dict[int, float]) -> None:
        self.store = store
        self.costs = costs
        self.bytes: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
        started = time.perf_counter()
        version = await self.store.save(snapshot, **options)
        self.costs[snapshot.usage.steps] += time.perf_counter() - started
        return version


def _time_snapshot_building(costs: dict[int, float]) -> None:
    """Wrap the core's snapshot builder so each build is timed (a benchmark-only patch)."""
    build = core.snapshot_of

    def timed(*args: Any, **kwargs: Any) -> RunSnapshot:
        started = time.perf_counter()
        snapshot = build(*args, **kwargs)
        costs[snapshot.usage.steps] += time.perf_counter() - started
        return snapshot

    core.snapshot_of = timed  # type: ignore[assignment]


async def _one_run(store: RunStore, steps: int) -> dict[str, dict[int, float]]:
    """Per-step seconds of building and of saving checkpoints, in one run of ``steps`` turns."""
    build: dict[int, float] = defaultdict(float)
    save: dict[int, float] = defaultdict(float)
    _time_snapshot_building(build)
    agent = Agent(
        _Forgetful(_script(steps)),
        records_registry(_describe),
        policy=allow_writes("record"),
        context=ContextPolicy(),  # compacts the conversation now and then: messages are rewritten
        store=_Timed(store, save),  # type: ignore[arg-type]
        limits=Limits(
            max_steps=steps + 1,
            max_tool_calls=steps,
            max_tool_attempts=steps * 2,
            max_model_attempts=steps * 2,
            max_total_tokens=10**9,
            deadline_s=3600,
        ),
    )
    result = await agent.run("reconcile the records", run_id=uuid.uuid4().hex)
    assert result.status.value == "completed", result.detail
    total = {step: build[step] + save[step] for step in build}
    return {"total": total, "build": dict(build), "save": dict(save)}


def _window(costs: dict[int, float], step: int) -> float:
    return statistics.median(costs[s] for s in range(step - WINDOW, step + WINDOW + 1))


async def _measure(store: RunStore, steps: int, runs: int, marks: list[int]) -> dict[str, Any]:
    await _one_run(store, 12)  # warm-up: imports, caches, prepared statements
    per_mark: dict[tuple[str, int], list[float]] = {}
    for _ in range(runs):
        costs = await _one_run(store, steps + WINDOW + 1)
        for kind, by_step in costs.items():
            for mark in marks:
                per_mark.setdefault((kind, mark), []).append(_window(by_step, mark))
    line: dict[str, Any] = {}
    for (kind, mark), values in per_mark.items():
        name = f"ms_at_step_{mark}" if kind == "total" else f"{kind}_ms_at_step_{mark}"
        line[name] = round(statistics.median(values) * 1000, 3)
    base = line[f"ms_at_step_{marks[0]}"]
    for mark in marks[1:]:
        line[f"step_{mark}_over_step_{marks[0]}"] = round(line[f"ms_at_step_{mark}"] / base, 2)
    return line


async def _all(steps: int, runs: int, dsn: str | None, directory: Path) -> dict[str, Any]:
    marks = [5, *(mark for mark in (200, 1000) if mark <= steps)]
    report: dict[str, Any] = {"memory": await _measure(MemoryRunStore(), steps, runs, marks)}
    sqlite = SqliteRunStore(directory / "growth.db")
    report["sqlite"] = await _measure(sqlite, steps, runs, marks)
    await sqlite.close()
    if not dsn:
        print("postgres skipped: no --dsn or OWNLOOP_TEST_POSTGRES_DSN", file=sys.stderr)
        return report
    async with throwaway_postgres(dsn) as postgres:
        report["postgres"] = await _measure(postgres, steps, runs, marks)
    return report


def main() -> None:
    """Measure every store and print the per-step checkpoint times as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as directory:  # the disk the project lives on
        stores = asyncio.run(_all(arguments.steps, arguments.runs, arguments.dsn, Path(directory)))
    report = {"python": platform.python_version(), "steps": arguments.steps, "runs": arguments.runs}
    print(json.dumps({**report, "stores": stores}, indent=2))


if __name__ == "__main__":
    main()
