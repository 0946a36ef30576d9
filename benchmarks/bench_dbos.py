"""ownloop runs on DBOS: throughput with 1, 2 and 4 worker processes, and per-step engine cost.

Needs a PostgreSQL server (``--dsn`` or ``OWNLOOP_TEST_POSTGRES_DSN``; ``.ci/run`` shows how to
start a throwaway one). The script creates two fresh databases on it (the run store and the DBOS
system database) and drops them at the end.

- Throughput: N worker processes (DBOS executors on one queue) take ``--runs`` runs of the export
  task (three model turns with a fixed ``--latency``, a read, a journaled write); runs/second is
  measured from the first enqueue until every run's snapshot is finished.
- Per-step overhead: in one process, the same task with zero model latency, run sequentially as
  a DBOS workflow (started directly, no queue) and as a plain ``Agent.run`` on the same
  PostgreSQL store; the difference divided by the steps a run takes (13) is the engine's cost.

Run:

    .venv/bin/python benchmarks/bench_dbos.py [--runs 120] [--latency 0.05] [--workers 1 2 4]

It prints JSON; docs/performance.md reports the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import time
import uuid
from pathlib import Path
from typing import Any

from ownloop import Agent
from ownloop.contracts import AssistantMessage, ModelRequest, ModelResponse
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.tools import ToolContext, ToolRegistry

SCRIPT = [
    tool_call("search_orders", "c1", query="q3"),
    tool_call("export", "c2", name="q3"),
    final("Exported q3."),
]
STEPS_PER_RUN = 13  # begin, 3 model calls, read, write, receipt, 6 checkpoints


def make_agent(latency_s: float, store: PostgresRunStore | None = None) -> Agent:
    """The export agent: a model answering from the conversation, a read and a write."""

    async def respond(request: ModelRequest) -> ModelResponse:
        if latency_s:
            await asyncio.sleep(latency_s)
        return SCRIPT[sum(isinstance(m, AssistantMessage) for m in request.messages)]

    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search_orders(query: str) -> list[dict[str, str]]:
        """Find orders.

        Args:
            query: Keywords.
        """
        return [{"id": f"order-{query}"}]

    @registry.tool(effect="write")
    def export(name: str, ctx: ToolContext) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        return {"done": name}

    return Agent(
        FunctionModel(respond, model_name="scripted"),
        registry,
        policy=allow_writes("export"),
        store=store,
    )


def runner_for(settings: dict[str, Any]) -> Any:
    """The runner every process builds from the same settings."""
    from ownloop.dbos import DbosRunner

    return DbosRunner(
        PostgresRunStore(settings["dsn"], schema=settings["schema"]),
        {"export": lambda: make_agent(settings["latency"])},
        queue=settings["queue"],
        system_database_url=settings["system_url"],
        polling_interval_s=0.05,
    )


def serve(settings: dict[str, Any], name: str) -> None:
    """A worker process: serve the queue until the stop file appears."""
    from dbos import DBOS

    from ownloop.dbos import worker_config

    DBOS(config=worker_config("ownloop-bench", settings["system_url"], name, log_level="ERROR"))
    runner = runner_for(settings)
    runner.register(worker=True)
    DBOS.launch()
    runner.start()
    Path(settings["dir"], f"ready-{name}").write_text("ready")
    while not Path(settings["dir"], "stop").exists():
        time.sleep(0.02)
    runner.shutdown(destroy_registry=True)


async def _enqueue_and_wait(settings: dict[str, Any], runs: int) -> float:
    runner = runner_for(settings)
    store = runner.store
    try:
        await runner._dbos_client()  # connect before timing
        started = time.perf_counter()
        for _ in range(runs):
            await runner.enqueue("export", "export the q3 report")
        while len(await store.list_runs(state="finished", limit=1000)) < runs:
            await asyncio.sleep(0.02)
        return time.perf_counter() - started
    finally:
        runner.close()
        await store.close()


def throughput(settings: dict[str, Any], workers: int, runs: int) -> float:
    """Runs per second with ``workers`` processes."""
    context = multiprocessing.get_context("forkserver")
    settings = {
        **settings,
        "schema": f"b_{uuid.uuid4().hex[:8]}",
        "queue": f"q-{uuid.uuid4().hex[:8]}",
        "dir": str(Path(settings["dir"], uuid.uuid4().hex[:8])),
    }
    Path(settings["dir"]).mkdir()
    names = [f"bench-{uuid.uuid4().hex[:6]}" for _ in range(workers)]
    processes = [context.Process(target=serve, args=(settings, name)) for name in names]
    for process in processes:
        process.start()
    while not all(Path(settings["dir"], f"ready-{name}").exists() for name in names):
        time.sleep(0.01)
    try:
        seconds = asyncio.run(_enqueue_and_wait(settings, runs))
    finally:
        Path(settings["dir"], "stop").write_text("stop")
        for process in processes:
            process.join(30)
    return runs / seconds


def overhead(settings: dict[str, Any], runs: int) -> dict[str, float]:
    """Seconds per run, sequential, zero model latency: DBOS workflow vs plain durable run."""
    from dbos import DBOS, SetWorkflowID

    from ownloop.dbos import worker_config

    settings = {**settings, "latency": 0.0, "schema": f"b_{uuid.uuid4().hex[:8]}", "queue": "x"}

    async def plain() -> float:
        store = PostgresRunStore(settings["dsn"], schema=f"p_{uuid.uuid4().hex[:8]}")
        agent = make_agent(0.0, store)
        try:
            await agent.run("warm up")
            started = time.perf_counter()
            for _ in range(runs):
                await agent.run("export the q3 report")
            return (time.perf_counter() - started) / runs
        finally:
            await store.close()

    DBOS(config=worker_config("ownloop-bench", settings["system_url"], "bench-overhead"))
    runner = runner_for(settings)
    workflow = runner.register(worker=False)  # starts segments itself, never from the queue
    DBOS.launch()

    async def engine() -> float:
        start = {"kind": "start", "task": "export the q3 report", "actor": None}

        async def one() -> None:
            run_id = uuid.uuid4().hex
            with SetWorkflowID(f"ownloop:{run_id}:start"):
                handle = await DBOS.start_workflow_async(workflow, "export", run_id, start)
            await handle.get_result()

        await one()
        started = time.perf_counter()
        for _ in range(runs):
            await one()
        return (time.perf_counter() - started) / runs

    try:
        plain_s = asyncio.run(plain())
        dbos_s = asyncio.run(engine())
    finally:
        DBOS.destroy(destroy_registry=True)
        asyncio.run(runner.store.close())
    return {
        "plain_ms_per_run": plain_s * 1000,
        "dbos_ms_per_run": dbos_s * 1000,
        "engine_ms_per_step": (dbos_s - plain_s) * 1000 / STEPS_PER_RUN,
    }


def main() -> None:
    """Parse the arguments, create the databases, measure, print JSON, drop the databases."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--overhead-runs", type=int, default=30)
    arguments = parser.parse_args()
    if not arguments.dsn:
        parser.error("give --dsn or set OWNLOOP_TEST_POSTGRES_DSN")
    suffix = uuid.uuid4().hex[:8]
    store_db, system_db = f"ownloop_bench_{suffix}", f"ownloop_bench_dbos_{suffix}"
    where = conninfo_to_dict(arguments.dsn)
    with psycopg.connect(arguments.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{store_db}"')
    host, port = where.get("host", "127.0.0.1"), where.get("port", "5432")
    settings: dict[str, Any] = {
        "dsn": make_conninfo(arguments.dsn, dbname=store_db),
        "system_url": f"postgresql://{where.get('user', 'postgres')}@{host}:{port}/{system_db}",
        "latency": arguments.latency,
        "dir": f"/tmp/ownloop-bench-{suffix}",
    }
    Path(settings["dir"]).mkdir()
    try:
        result: dict[str, Any] = {"runs": arguments.runs, "model_latency_s": arguments.latency}
        result["overhead"] = overhead(settings, arguments.overhead_runs)
        result["runs_per_second"] = {
            str(n): round(throughput(settings, n, arguments.runs), 1) for n in arguments.workers
        }
        print(json.dumps(result, indent=2))
    finally:
        with psycopg.connect(arguments.dsn, autocommit=True) as admin:
            for name in (store_db, system_db):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
