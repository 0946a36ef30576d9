"""Context across turns: tokens sent by a 50-turn conversation with 8 KB observations.

Each turn is one run continuing the last (``agent.run(task, history=previous)``): the person asks
about the next item, the model looks it up (an 8 KB observation) and answers citing it. A
deterministic model (a `FunctionModel`) reads only what each request carries. Naive history
resends every earlier turn; with a `ContextPolicy` the conversation is compacted across turns, and
the carried history stays compacted. The input tokens sent are each request's estimate
(`ownloop.tokens.estimate_request_tokens`, the heuristic counter), summed over the conversation.
Run:

    .venv/bin/python benchmarks/bench_conversation.py [--turns 50]

It prints a Markdown table and the numbers as JSON; docs/conversations.md reports them.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ownloop import Agent, ContextPolicy, Limits, RunResult
from ownloop.contracts import ModelRequest, ModelResponse, TokenUsage, ToolCall, ToolMessage
from ownloop.testing import FunctionModel
from ownloop.tokens import estimate_request_tokens
from ownloop.tools import ToolRegistry
from ownloop.validators import citations_observed

OBSERVATION_BYTES = 8 * 1024
_ASKED = re.compile(r"item (\d+)\?$")


def item_text(item: int) -> str:
    """Return 8 KB of log-like lines about one item."""
    line = f"item {item} line {{n:03d}}: shipment reconciled, no discrepancy found.\n"
    body, n = [], 0
    while sum(map(len, body)) < OBSERVATION_BYTES:
        body.append(line.format(n=n))
        n += 1
    return "".join(body)


def build_registry() -> ToolRegistry:
    """Return the one tool: look an item up."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(item: int) -> dict[str, Any]:
        """Look an item up.

        Args:
            item: The item number.
        """
        return {"id": f"item-{item}", "text": item_text(item)}

    return registry


def decide(request: ModelRequest) -> ModelResponse:
    """Answer the latest question: look the item up, then cite it."""
    usage = TokenUsage(input_tokens=estimate_request_tokens(request.messages, request.tools))
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        item = last.call_id.removeprefix("call-")
        return ModelResponse(final_output=f"Item {item} is reconciled [item-{item}].", usage=usage)
    item = int(_ASKED.search(str(last.content)).group(1))  # type: ignore[union-attr]
    call = ToolCall(id=f"call-{item}", name="lookup", arguments={"item": item})
    return ModelResponse(tool_calls=(call,), usage=usage)


def converse(turns: int, context: ContextPolicy | None) -> tuple[list[int], RunResult]:
    """Hold a conversation of ``turns`` runs; return every request's size and the last result."""
    model = FunctionModel(decide, model_name="scripted-clerk")
    agent = Agent(
        model,
        build_registry(),
        limits=Limits(
            max_steps=4,
            max_observation_chars=OBSERVATION_BYTES + 512,
            max_total_tokens=10_000_000,  # naive history would cross the default by turn 25
        ),
        validators=[citations_observed()],
        instructions="Answer about items; cite what you looked up as [item-N].",
        context=context,
    )
    previous: RunResult | None = None
    for turn in range(1, turns + 1):
        previous = agent.run_sync(f"What about item {turn}?", history=previous)
        assert previous.status == "completed", previous.summary()
    sizes = [estimate_request_tokens(r.messages, r.tools) for r in model.requests]
    assert previous is not None
    return sizes, previous


def main() -> None:
    """Run the conversation naive and compacted and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    turns = parser.parse_args().turns
    report: dict[str, Any] = {}
    configurations = {
        "naive history (no context policy)": None,
        "`ContextPolicy()` (8,000 tokens, keep 1 turn)": ContextPolicy(),
    }
    for name, context in configurations.items():
        sizes, last = converse(turns, context)
        report[name] = {
            "turns": turns,
            "requests": len(sizes),
            "input_tokens_sent": sum(sizes),
            "largest_request": max(sizes),
            "carried_messages": len(last.messages),
        }
    naive = report["naive history (no context policy)"]["input_tokens_sent"]
    print("| context | turns | input tokens sent | vs naive | largest request |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, row in report.items():
        row["ratio_to_naive"] = round(row["input_tokens_sent"] / naive, 4)
        print(
            f"| {name} | {row['turns']} | {row['input_tokens_sent']:,} | "
            f"{row['ratio_to_naive']:.1%} | {row['largest_request']:,} |"
        )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
