"""In-process overhead of ownloop per model turn, against a raw loop over the same work.

Both loops run the research task (search -> read -> cited answer: three model turns, two tool
executions) with a scripted model whose responses are built in advance, so what is measured is the
loop machinery itself: ownloop's validation, budgets, receipts, evidence and typed trace versus a
bare 20-line loop that calls the same tool functions. Run:

    .venv/bin/python benchmarks/bench_loop_overhead.py [--runs N]

It prints the per-run and per-turn times and their ratio as JSON; docs/performance.md reports them.
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
from ownloop.demo.research import build_registry
from ownloop.testing import ScriptedModel
from ownloop.validators import citations_observed

TURNS = 3
SCRIPT = [
    ModelResponse(
        tool_calls=(
            ToolCall(id="s1", name="search_documents", arguments='{"query": "evaluation"}'),
        )
    ),
    ModelResponse(
        tool_calls=(ToolCall(id="r1", name="read_document", arguments='{"document_id": "R-02"}'),)
    ),
    ModelResponse(final_output="Evaluate on held-out tasks before autonomy [R-02]."),
]


def raw_loop(tools: dict[str, Any]) -> str:
    """The baseline: the same decisions and tool functions with no checks at all."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    for decision in SCRIPT:
        messages.append({"role": "assistant", "decision": decision})
        if decision.final_output is not None:
            return decision.final_output
        for call in decision.tool_calls:
            arguments = json.loads(str(call.arguments))
            result = tools[call.name](**arguments)
            messages.append({"role": "tool", "id": call.id, "content": json.dumps(result)})
    raise RuntimeError("script ended without an answer")


async def ownloop_runs(runs: int) -> list[float]:
    """Time ``runs`` complete ownloop runs of the scripted research task."""
    registry = build_registry()
    limits = Limits(max_steps=6)
    validators = [citations_observed(min_citations=1)]
    timings = []
    for _ in range(runs):
        agent = Agent(ScriptedModel(SCRIPT), registry, limits=limits, validators=validators)
        started = time.perf_counter()
        result = await agent.run("How should agents be evaluated?")
        timings.append(time.perf_counter() - started)
        assert result.status.value == "completed", result.detail
    return timings


def raw_runs(runs: int) -> list[float]:
    """Time ``runs`` raw-loop runs over the same tool functions."""
    tools = {tool.spec.name: tool.function for tool in build_registry()}
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        raw_loop(tools)
        timings.append(time.perf_counter() - started)
    return timings


def main() -> None:
    """Measure both loops and print the comparison as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    runs = parser.parse_args().runs
    asyncio.run(ownloop_runs(200))  # warm-up: imports, pydantic schema caches
    raw_runs(200)
    ours = statistics.median(asyncio.run(ownloop_runs(runs)))
    raw = statistics.median(raw_runs(runs))
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "runs": runs,
                "turns_per_run": TURNS,
                "raw_ms_per_run": round(raw * 1000, 4),
                "ownloop_ms_per_run": round(ours * 1000, 4),
                "ownloop_overhead_ms_per_turn": round((ours - raw) * 1000 / TURNS, 4),
                "ratio_ownloop_to_raw": round(ours / raw, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
