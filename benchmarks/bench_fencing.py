"""What fencing and lease renewal cost per step, against the unfenced checkpoint path.

The same scripted task as ``bench_checkpoint.py`` (nine model turns, four reads, four journaled
writes: 18 checkpoints and 8 journal records per run) is driven twice per store, interleaved in
rounds: *fenced* — as `Agent.run` does now, every checkpoint, intent and receipt carrying the
lease, checked in the same statement, with the heartbeat task running — and *unfenced* — the same
driver and records with no lease (the previous path for intents and receipts). The least disturbed
round's medians are kept. Direct medians of one save, one intent and one renewal, with and
without the lease, are reported too. Run:

    .venv/bin/python benchmarks/bench_fencing.py [--runs N] [--rounds R] [--dsn postgresql://...]

Prints JSON; docs/performance.md reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _records import records_registry, throwaway_postgres

from ownloop import Agent
from ownloop.contracts import ModelResponse, WriteIntent
from ownloop.loop import run_loop
from ownloop.policy import allow_writes
from ownloop.runtime import RunSession
from ownloop.store import MemoryRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call

TTL = 30.0
STEPS = 9


def _script() -> list[ModelResponse]:
    """The task of bench_checkpoint.py: four reads, four writes, an answer."""
    steps = []
    for turn in range(4):
        steps.append(tool_call("lookup", f"r{turn}", key=f"k{turn}"))
        steps.append(tool_call("record", f"w{turn}", key=f"k{turn}", value=turn))
    return [*steps, final("done")]


async def _one_run(store: RunStore, fenced: bool) -> float:
    agent = Agent(
        ScriptedModel(_script()), records_registry(), policy=allow_writes("record"), store=store
    )
    run_id = uuid.uuid4().hex
    state = agent.new_state("update the records", run_id=run_id)
    started = time.perf_counter()
    lease = await store.acquire_lease(run_id, "bench", TTL) if fenced else None
    session = RunSession(store, lease, None, ttl_s=TTL)
    async with session.heartbeat():
        result = await agent.driver.drive(run_loop(agent.loop_config, state), session)
    if lease is not None:
        await store.release_lease(lease)
    elapsed = time.perf_counter() - started
    assert result.status.value == "completed", result.detail
    return elapsed


async def _direct(store: RunStore, count: int) -> dict[str, float]:
    run_id = uuid.uuid4().hex
    lease = await store.acquire_lease(run_id, "bench", TTL)
    timings: dict[str, list[float]] = {k: [] for k in ("intent", "intent_fenced", "renew")}
    for index in range(count):
        for kind in ("intent", "intent_fenced"):
            intent = WriteIntent(
                run_id=run_id,
                call_id=f"{kind}#{index}",
                tool="record",
                idempotency_key="k",
                arguments_digest="d",
            )
            started = time.perf_counter()
            await store.record_intent(intent, lease=lease if kind == "intent_fenced" else None)
            timings[kind].append(time.perf_counter() - started)
        started = time.perf_counter()
        lease = await store.renew_lease(lease, TTL)
        timings["renew"].append(time.perf_counter() - started)
    await store.release_lease(lease)
    return {f"{k}_us": statistics.median(v) * 1e6 for k, v in timings.items()}


async def _measure(store: RunStore, runs: int, rounds: int) -> dict[str, Any]:
    best: dict[str, float] | None = None
    for _ in range(rounds):
        medians = {}
        for fenced in (False, True):
            medians["fenced" if fenced else "unfenced"] = statistics.median(
                [await _one_run(store, fenced) for _ in range(runs)]
            )
        if best is None or sum(medians.values()) < sum(best.values()):
            best = medians
    assert best is not None
    direct = await _direct(store, max(runs * 4, 20))
    return {
        "unfenced_ms_per_run": best["unfenced"] * 1e3,
        "fenced_ms_per_run": best["fenced"] * 1e3,
        "fenced_over_unfenced": best["fenced"] / best["unfenced"],
        "extra_ms_per_step": (best["fenced"] - best["unfenced"]) * 1e3 / STEPS,
        **direct,
    }


async def _main(runs: int, rounds: int, dsn: str | None) -> dict[str, Any]:
    report: dict[str, Any] = {"python": platform.python_version(), "runs": runs}
    report["memory"] = await _measure(MemoryRunStore(), runs, rounds)
    with tempfile.TemporaryDirectory() as directory:
        sqlite = SqliteRunStore(Path(directory) / "bench.db")
        report["sqlite"] = await _measure(sqlite, runs, rounds)
        await sqlite.close()
    if dsn:
        async with throwaway_postgres(dsn) as postgres:
            report["postgres"] = await _measure(postgres, runs, rounds)
    return report


def main() -> None:
    """Measure and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(_main(arguments.runs, arguments.rounds, arguments.dsn)), indent=2))


if __name__ == "__main__":
    main()
