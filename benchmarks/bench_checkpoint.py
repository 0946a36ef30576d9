"""Per-step cost of durable checkpoints: SQLite (WAL) and PostgreSQL against an in-memory store.

Every store runs the same scripted task: nine model turns, four reads and four journaled writes
(each write records an intent before and a receipt after), then a final answer — 18 checkpoints and
8 journal records per run. The model is scripted, so what differs between stores is only
checkpointing: building the snapshot (every store, the in-memory one included), serializing it to
JSON and committing it. Runs are interleaved across stores in rounds and the least disturbed
round's median is kept, because other processes on a shared machine only ever add time. Direct
medians of one ``save`` of a mid-run snapshot and of one journal record are reported too, and
``checkpoint_ms_per_step`` derives the per-step cost from them. Run:

    .venv/bin/python benchmarks/bench_checkpoint.py [--runs N] [--dsn postgresql://...]

PostgreSQL is measured when ``--dsn`` (or ``OWNLOOP_TEST_POSTGRES_DSN``) names a server; it
uses a throwaway schema that is dropped afterwards. Prints JSON; docs/performance.md reports it.
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

from _records import records_registry

from ownloop import Agent
from ownloop.contracts import ModelResponse, RunSnapshot, WriteIntent
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call

STEPS = 9
JOURNAL_RECORDS = 8  # an intent and a receipt for each of the four writes
SCHEMA = f"bench_{uuid.uuid4().hex[:8]}"


def _script() -> list[ModelResponse]:
    steps = []
    for turn in range(4):
        steps.append(tool_call("lookup", f"r{turn}", key=f"k{turn}"))
        steps.append(tool_call("record", f"w{turn}", key=f"k{turn}", value=turn))
    return [*steps, final("done")]


class _Counting:
    """Counts saves and keeps the last mid-run snapshot for the direct save measure."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.saves = 0
        self.sample: RunSnapshot | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
        self.saves += 1
        if self.saves == 9:
            self.sample = snapshot
        return await self.store.save(snapshot, **options)


async def _runs(store: RunStore | None, runs: int) -> tuple[list[float], _Counting | None]:
    registry = records_registry(lambda key: {"title": f"record {key}"})
    counting = _Counting(store) if store is not None else None
    timings = []
    for _ in range(runs):
        agent = Agent(
            ScriptedModel(_script()),
            registry,
            policy=allow_writes("record"),
            store=counting,  # type: ignore[arg-type]
        )
        started = time.perf_counter()
        result = await agent.run("update the records", run_id=uuid.uuid4().hex)
        timings.append(time.perf_counter() - started)
        assert result.status.value == "completed", result.detail
    return timings, counting


async def _direct_saves(store: RunStore, sample: RunSnapshot, count: int) -> float:
    """Median seconds of one compare-and-set save of a mid-run snapshot."""
    snapshot = sample.model_copy(update={"run_id": uuid.uuid4().hex})
    version = await store.save(snapshot, expected_version=None)
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        version = await store.save(snapshot, expected_version=version)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


async def _journal_record(store: RunStore, count: int) -> float:
    """Median seconds of durably recording one intent (the write journal's commit)."""
    run_id, timings = uuid.uuid4().hex, []
    for index in range(count):
        intent = WriteIntent(
            run_id=run_id,
            call_id=f"c{index}",
            tool="record",
            idempotency_key=f"k{index}",
            arguments_digest="d" * 64,
        )
        started = time.perf_counter()
        await store.record_intent(intent)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


async def _stores(dsn: str | None, directory: Path) -> list[tuple[str, RunStore | None]]:
    stores: list[tuple[str, RunStore | None]] = [("none (no checkpoints)", None)]
    stores.append(("memory", MemoryRunStore()))
    for synchronous in ("NORMAL", "FULL"):
        path = directory / f"{synchronous}.db"
        store = SqliteRunStore(path, synchronous=synchronous)  # type: ignore[arg-type]
        stores.append((f"sqlite WAL synchronous={synchronous}", store))
    if dsn:
        stores.append(("postgres (loopback)", PostgresRunStore(dsn, schema=SCHEMA)))
    return stores


async def _all(runs: int, rounds: int, dsn: str | None, directory: Path) -> list[dict[str, Any]]:
    stores = await _stores(dsn, directory)
    timings: dict[str, list[float]] = {name: [] for name, _ in stores}  # a median per round
    samples: dict[str, _Counting] = {}
    for _name, store in stores:  # warm-up: imports, caches, prepared statements
        await _runs(store, 20)
    for _ in range(rounds):  # interleaved, so load changes hit every store alike
        for name, store in stores:
            measured, counting = await _runs(store, runs // rounds)
            timings[name].append(statistics.median(measured))
            if counting is not None:
                samples[name] = counting
    lines = []
    for name, store in stores:
        per_run = min(timings[name])  # the least disturbed round: other processes only add
        line: dict[str, Any] = {"store": name, "ms_per_run": round(per_run * 1000, 3)}
        line["ms_per_step"] = round(per_run * 1000 / STEPS, 3)
        counting = samples.get(name)
        if store is not None and counting is not None and counting.sample is not None:
            line["checkpoints_per_run"] = counting.saves // (runs // rounds)
            line["snapshot_bytes"] = len(counting.sample.model_dump_json())
            save = await _direct_saves(store, counting.sample, 500)
            line["ms_per_save"] = round(save * 1000, 3)
            record = await _journal_record(store, 200)
            line["ms_per_journal_record"] = round(record * 1000, 3)
            per_step = (counting.saves / (runs // rounds) * save + JOURNAL_RECORDS * record) / STEPS
            line["checkpoint_ms_per_step"] = round(per_step * 1000, 3)
        lines.append(line)
    memory = lines[1]["ms_per_step"]
    for line in lines[1:]:
        line["checkpoint_ms_per_step_over_memory"] = round(line["ms_per_step"] - memory, 3)
        line["ratio_to_memory"] = round(line["ms_per_step"] / memory, 2)
    for _, store in stores:
        if isinstance(store, SqliteRunStore | PostgresRunStore):
            await store.close()
    if dsn:
        await _drop_schema(dsn)
    return lines


async def _drop_schema(dsn: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await admin.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


def main() -> None:
    """Measure every store and print the comparison as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as directory:  # the disk the project lives on
        lines = asyncio.run(_all(arguments.runs, arguments.rounds, arguments.dsn, Path(directory)))
    report = {"python": platform.python_version(), "runs": arguments.runs, "steps_per_run": STEPS}
    print(json.dumps({**report, "stores": lines}, indent=2))


if __name__ == "__main__":
    main()
