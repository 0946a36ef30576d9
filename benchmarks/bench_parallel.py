"""A turn of five 100 ms I/O tools against one such tool: parallel tool calls, and sequential.

Each run is one `Agent` run with a scripted model (it costs nothing): one turn proposing the
tool calls, then the final answer. The tools wait ``--latency`` seconds like an I/O call would,
in two forms:

- ``async``: ``await asyncio.sleep(latency)`` (an async HTTP client, a database driver);
- ``sync``: ``time.sleep(latency)`` in a plain function, which ownloop runs in a thread.

For each form, three runs alternate round by round so that drift hits them alike:

1. ``one``: a turn of one call (the baseline);
2. ``parallel``: a turn of ``--calls`` calls with the default ``Limits.max_parallel_tools`` (8);
3. ``sequential``: the same turn with ``max_parallel_tools=1`` (one call after another).

It reports the median wall time of each and the ratios ``parallel / one`` (target: at most 1.3)
and ``sequential / one``. Run (about 20 seconds with the defaults):

    .venv/bin/python benchmarks/bench_parallel.py [--rounds 10] [--calls 5] [--latency 0.1]

It prints JSON; docs/performance.md reports the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from typing import Any

from ownloop import Agent, Limits
from ownloop.contracts import ModelResponse, ToolCall
from ownloop.testing import ScriptedModel, final
from ownloop.tools import ToolRegistry


def build_registry(latency_s: float) -> ToolRegistry:
    """Two read tools that wait ``latency_s`` like an I/O call: one async, one sync."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def fetch_async(key: str) -> dict[str, str]:
        """Fetch a record over an async client.

        Args:
            key: The record.
        """
        await asyncio.sleep(latency_s)
        return {"id": key}

    @registry.tool(effect="read")
    def fetch_sync(key: str) -> dict[str, str]:
        """Fetch a record over a blocking client.

        Args:
            key: The record.
        """
        time.sleep(latency_s)
        return {"id": key}

    return registry


def turn(tool: str, calls: int) -> ModelResponse:
    """One model turn proposing ``calls`` calls of ``tool``, each with its own key."""
    return ModelResponse(
        tool_calls=tuple(
            ToolCall(id=f"c{index}", name=tool, arguments={"key": f"k{index}"})
            for index in range(calls)
        )
    )


async def timed_run(registry: ToolRegistry, tool: str, calls: int, parallel: int) -> float:
    """Wall seconds of one run: a turn of ``calls`` calls, then the final answer."""
    agent = Agent(
        ScriptedModel([turn(tool, calls), final("done")]),
        registry,
        limits=Limits(max_parallel_tools=parallel),
    )
    started = time.perf_counter()
    result = await agent.run("fetch the records")
    wall = time.perf_counter() - started
    if result.output != "done" or len(result.receipts) != calls:
        raise RuntimeError(f"the run did not complete: {result.status} {result.detail}")
    return wall


async def measure(options: argparse.Namespace) -> dict[str, Any]:
    """Median wall time of each variant, alternating round by round, and the ratios."""
    registry = build_registry(options.latency)
    variants = {
        "one": (1, 8),
        "parallel": (options.calls, 8),
        "sequential": (options.calls, 1),
    }
    report: dict[str, Any] = {}
    for form in ("async", "sync"):
        tool = f"fetch_{form}"
        walls: dict[str, list[float]] = {name: [] for name in variants}
        await timed_run(registry, tool, 1, 8)  # warm up imports and the thread pool
        for _ in range(options.rounds):
            for name, (calls, parallel) in variants.items():
                walls[name].append(await timed_run(registry, tool, calls, parallel))
        medians = {name: statistics.median(values) for name, values in walls.items()}
        report[form] = {
            "median_ms": {name: round(value * 1000, 1) for name, value in medians.items()},
            "parallel_over_one": round(medians["parallel"] / medians["one"], 3),
            "sequential_over_one": round(medians["sequential"] / medians["one"], 3),
        }
    return report


def main() -> None:
    """Parse the options, measure, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.1)
    options = parser.parse_args()
    report = asyncio.run(measure(options))
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "calls": options.calls,
                "latency_s": options.latency,
                "rounds": options.rounds,
                **report,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
