"""What `Agent.run_stream` costs over `Agent.run`, on the research demo (three model turns).

Both drive the same run (the demo's deterministic model, a fake clock, no store); the stream adds
a sink feeding a queue, a task, budget-warning checks after counting events and the hand-over of
every event to an ``async for``. Run:

    .venv/bin/python benchmarks/bench_stream.py [--runs N] [--rounds R]

It prints microseconds per run for both (the lowest of R round medians, N runs of each per round,
alternating), the overhead per run and per event, and the ratio, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from collections.abc import Awaitable, Callable

from ownloop import Agent
from ownloop.clock import FakeClock
from ownloop.demo.research import ResearchModel, build_registry
from ownloop.validators import citations_observed

TASK = "How should a safe AI agent be evaluated?"


def agent() -> Agent:
    """The research demo's agent."""
    return Agent(
        ResearchModel(),
        build_registry(),
        clock=FakeClock(),
        validators=[citations_observed(min_citations=1)],
    )


async def plain(built: Agent) -> int:
    """One run, awaited whole; returns its event count."""
    return len((await built.run(TASK)).trace)


async def streamed(built: Agent) -> int:
    """One run, read as a stream; returns the events handed out."""
    return len([event async for event in built.run_stream(TASK)])


CASES: dict[str, Callable[[Agent], Awaitable[int]]] = {"run": plain, "run_stream": streamed}


def measure(runs: int, rounds: int) -> dict[str, tuple[float, int]]:
    """Per case: the lowest round median in microseconds (runs alternate), and its event count.

    Agents are built outside the timed part; the two cases alternate run by run, so a neighbour's
    load on the shared machine slows both alike.
    """

    async def one_round() -> dict[str, tuple[float, int]]:
        samples: dict[str, list[float]] = {name: [] for name in CASES}
        counts: dict[str, int] = {}
        for _ in range(runs):
            for name, case in CASES.items():
                built = agent()
                start = time.perf_counter()
                counts[name] = await case(built)
                samples[name].append((time.perf_counter() - start) * 1e6)
        return {name: (statistics.median(samples[name]), counts[name]) for name in CASES}

    best: dict[str, tuple[float, int]] = {}
    for _ in range(rounds):
        for name, (median, count) in asyncio.run(one_round()).items():
            if name not in best or median < best[name][0]:
                best[name] = (median, count)
    return best


def main() -> None:
    """Measure and print the comparison as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    best = measure(arguments.runs, arguments.rounds)
    (run_us, trace_events), (stream_us, stream_events) = best["run"], best["run_stream"]
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "runs": arguments.runs,
                "trace_events": trace_events,
                "stream_events": stream_events,
                "run_us": round(run_us, 1),
                "run_stream_us": round(stream_us, 1),
                "overhead_us_per_run": round(stream_us - run_us, 1),
                "overhead_us_per_event": round((stream_us - run_us) / stream_events, 2),
                "ratio": round(stream_us / run_us, 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
