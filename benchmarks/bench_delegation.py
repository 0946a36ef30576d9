"""The cost of one delegation hop, as a ratio to a plain tool call, on the scripted model.

Both runs have the same shape for the parent (one tool call, then a final answer). In the plain
run the tool is an async function (a sync one would add a thread hand-off that the agent tool
does not have); in the delegated run it is an agent (``Agent.as_tool``) that answers
in one model turn. The difference is one hop: deriving the child's budgets and policy, building
and running a child run, and folding its usage back. Run:

    .venv/bin/python benchmarks/bench_delegation.py [--runs N]

It prints the per-run times, the per-hop cost and the ratio as JSON; docs/performance.md quotes
them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time

from ownloop import Agent, ToolRegistry
from ownloop.testing import ScriptedModel, final, tool_call


def _plain(runs: int) -> list[Agent[None, str]]:
    agents = []
    for _ in range(runs):
        registry = ToolRegistry()

        @registry.tool(effect="read")
        async def answer(task: str) -> str:  # async, as the delegating handler is
            """Answer a task.

            Args:
                task: The task.
            """
            return f"answered {task}"

        model = ScriptedModel([tool_call("answer", "c1", task="x"), final("done")])
        agents.append(Agent(model, registry))
    return agents


def _delegated(runs: int) -> list[Agent[None, str]]:
    agents = []
    for _ in range(runs):
        child = Agent(ScriptedModel([final("answered x")]))
        registry = ToolRegistry()
        registry.register(child.as_tool(name="answer", description="Answers.", effect="read"))
        model = ScriptedModel([tool_call("answer", "c1", task="x"), final("done")])
        agents.append(Agent(model, registry))
    return agents


async def _time(agents: list[Agent[None, str]]) -> list[float]:
    times = []
    for agent in agents:
        started = time.perf_counter()
        result = await agent.run("go")
        times.append(time.perf_counter() - started)
        assert result.output == "done", result.detail
    return times


async def main(runs: int) -> dict[str, object]:
    """Measure ``runs`` plain and delegated runs (after a warm-up of each), interleaved."""
    await _time(_plain(5) + _delegated(5))
    plain: list[float] = []
    delegated: list[float] = []
    for one, other in zip(_plain(runs), _delegated(runs), strict=True):  # load drifts: alternate
        plain += await _time([one])
        delegated += await _time([other])
    plain_ms = statistics.median(plain) * 1000
    delegated_ms = statistics.median(delegated) * 1000
    return {
        "runs": runs,
        "python": platform.python_version(),
        "plain_tool_run_ms": round(plain_ms, 3),
        "delegated_run_ms": round(delegated_ms, 3),
        "hop_ms": round(delegated_ms - plain_ms, 3),
        "ratio": round(delegated_ms / plain_ms, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    print(json.dumps(asyncio.run(main(parser.parse_args().runs)), indent=2))
