"""Bursts of concurrent runs after idle pauses: ownloop's own HTTP client against a raw loop.

The server and the research task are those of ``bench_http.py`` (a separate process serving an
OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1; three model turns per run). Here each
side builds its own client, as applications do:

- ``raw``: the hand-written loop on ``openai.AsyncOpenAI(base_url=..., max_retries=0)``, the SDK's
  defaults for everything else;
- ``ownloop``: `Agent` with ``OpenAIChatModel("bench", base_url=...)``, whose adapter builds and
  owns its client.

Three measurements, the two loops alternating round by round so that drift hits both alike:

1. one run at a time: the median wall time per run;
2. bursts of ``--concurrency`` runs started together, back to back: runs per second;
3. the same bursts, each after a few runs and an idle pause longer than the pool's keep-alive
   expiry (5 s), so that every burst starts with expired connections in the pool: runs per second.

Run (about two minutes with the defaults; the pauses dominate):

    .venv/bin/python benchmarks/bench_load.py [--runs 150] [--rounds 3] [--concurrency 100] \
        [--idle 8]

It prints JSON; docs/performance.md reports the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import socket
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from bench_http import _server_main, _tools, ownloop_run, raw_run

from ownloop import Agent, Limits
from ownloop.demo.research import build_registry
from ownloop.models import OpenAIChatModel, allow_model_requests
from ownloop.validators import citations_observed

Run = Callable[[], Awaitable[Any]]


def build_agent(url: str) -> Agent:
    """The agent, its adapter building its own client."""
    return Agent(
        OpenAIChatModel("bench", api_key="bench", base_url=url, compat="openai"),
        build_registry(),
        limits=Limits(max_steps=6),
        validators=[citations_observed(min_citations=1)],
        instructions="Answer with citations.",
    )


async def one_at_a_time(run: Run, runs: int) -> list[float]:
    """Wall seconds of each of ``runs`` runs, one after another."""
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        await run()
        walls.append(time.perf_counter() - started)
    return walls


async def burst(run: Run, concurrency: int, timeout_s: float) -> float:
    """Runs per second when ``concurrency`` runs start together (bounded by ``timeout_s``)."""
    started = time.perf_counter()
    async with asyncio.timeout(timeout_s):
        await asyncio.gather(*(run() for _ in range(concurrency)))
    return concurrency / (time.perf_counter() - started)


async def measure(url: str, options: argparse.Namespace) -> dict[str, Any]:
    """Measure both loops: one at a time, bursts, bursts after idle pauses."""
    client = openai.AsyncOpenAI(api_key="bench", base_url=url, max_retries=0)
    specs, functions = _tools()
    agent = build_agent(url)
    loops: dict[str, Run] = {
        "raw": lambda: raw_run(client, specs, functions),
        "ownloop": lambda: ownloop_run(agent),
    }
    walls: dict[str, list[float]] = {name: [] for name in loops}
    bursts: dict[str, list[float]] = {name: [] for name in loops}
    idle_bursts: dict[str, list[float]] = {name: [] for name in loops}
    for run in loops.values():  # warm-up: connections, imports, schema caches
        await one_at_a_time(run, 20)
    for _ in range(options.rounds):
        for name, run in loops.items():
            walls[name] += await one_at_a_time(run, options.runs // options.rounds)
    for _ in range(options.rounds):
        for name, run in loops.items():
            bursts[name].append(await burst(run, options.concurrency, options.timeout))
    for _ in range(options.rounds):
        for name, run in loops.items():
            await one_at_a_time(run, 3)
            await asyncio.sleep(options.idle)
            idle_bursts[name].append(await burst(run, options.concurrency, options.timeout))
    await client.close()
    await agent.model.aclose()  # type: ignore[attr-defined]
    report: dict[str, Any] = {
        name: {
            "wall_ms_per_run": round(statistics.median(walls[name]) * 1000, 3),
            "runs_per_s_bursts": round(statistics.median(bursts[name]), 1),
            "runs_per_s_bursts_after_idle": round(statistics.median(idle_bursts[name]), 1),
        }
        for name in loops
    }
    ours, raw = report["ownloop"], report["raw"]
    report["ownloop_vs_raw"] = {
        "wall_one_at_a_time": round(ours["wall_ms_per_run"] / raw["wall_ms_per_run"], 3),
        "throughput_bursts": round(ours["runs_per_s_bursts"] / raw["runs_per_s_bursts"], 3),
        "throughput_bursts_after_idle": round(
            ours["runs_per_s_bursts_after_idle"] / raw["runs_per_s_bursts_after_idle"], 3
        ),
    }
    return report


def main() -> None:
    """Start the server process, measure, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150, help="one-at-a-time runs per loop")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--concurrency", type=int, default=100, help="runs per burst")
    parser.add_argument("--idle", type=float, default=8.0, help="seconds of idle before a burst")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a burst may take")
    options = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(
        target=_server_main, args=(listener,), daemon=True
    )
    server.start()
    listener.close()
    try:
        with allow_model_requests(True):
            report = asyncio.run(measure(f"http://127.0.0.1:{port}/v1", options))
    finally:
        server.terminate()
        server.join()
    report = {
        "python": platform.python_version(),
        "openai": openai.__version__,
        "turns_per_run": 3,
        "one_at_a_time_runs": options.runs,
        "concurrency": options.concurrency,
        "idle_s": options.idle,
        "rounds": options.rounds,
        **report,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
