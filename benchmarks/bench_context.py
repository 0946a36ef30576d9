"""Context growth: tokens sent by a 12-turn run with 8 KB observations, naive vs compacted.

The task: page through an 11-page report (8 KB of text per page) and report the total printed on
the last page, citing it. A deterministic model (a `FunctionModel`) reads only what each request
carries: the latest observation tells it the next page to read, and the last page holds the
total. The answer must cite the page, and a citation check accepts it only if a tool really
returned that page. Each configuration runs the same task through `Agent`; the input tokens sent
are each request's estimate (`ownloop.tokens.estimate_request_tokens`, the heuristic counter),
summed over the run. Run:

    .venv/bin/python benchmarks/bench_context.py

It prints a Markdown table and the ratios as JSON; docs/performance.md reports them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ownloop import Agent, ContextPolicy, Limits, RunResult
from ownloop.contracts import ModelRequest, ModelResponse, TokenUsage, ToolCall, ToolMessage
from ownloop.testing import FunctionModel
from ownloop.tokens import estimate_request_tokens
from ownloop.tools import ToolRegistry
from ownloop.validators import citations_observed

PAGES = 11
PAGE_BYTES = 8 * 1024
TOTAL = 4711
EXPECTED = f"The report's total is {TOTAL} [page-{PAGES}]."
INSTRUCTIONS = "You read reports page by page. Cite the page a number comes from as [page-N]."
TASK = "Read the quarterly report from page 1 to its end and tell me the total it reports."
_NEXT = re.compile(r"next page: (\d+)")
_TOTAL = re.compile(r"TOTAL: (\d+)")


def page_text(page: int) -> str:
    """Return page ``page`` of the report: 8 KB of log-like lines, then where to go next."""
    footer = f"TOTAL: {TOTAL}" if page == PAGES else f"next page: {page + 1}"
    line = f"page {page} line {{n:03d}}: shipments reconciled, no discrepancy found in batch.\n"
    body, n = [], 0
    while sum(map(len, body)) < PAGE_BYTES - 200:
        body.append(line.format(n=n))
        n += 1
    return "".join(body) + footer


def build_registry() -> ToolRegistry:
    """Return the one tool: read a page of the report."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def read_page(page: int) -> dict[str, Any]:
        """Read one page of the report.

        Args:
            page: The page number, from 1.
        """
        return {"id": f"page-{page}", "text": page_text(page)}

    return registry


def decide(request: ModelRequest) -> ModelResponse:
    """The scripted reader: act on the latest observation only, as a careful model would."""
    usage = TokenUsage(input_tokens=estimate_request_tokens(request.messages, request.tools))
    latest = next((m for m in reversed(request.messages) if isinstance(m, ToolMessage)), None)
    if latest is None:
        page = 1
    elif found := _TOTAL.search(latest.content):
        answer = f"The report's total is {found.group(1)} [page-{PAGES}]."
        return ModelResponse(final_output=answer, usage=usage)
    else:
        page = int(_NEXT.findall(latest.content)[-1])
    call = ToolCall(id=f"call-{page}", name="read_page", arguments={"page": page})
    return ModelResponse(tool_calls=(call,), usage=usage)


def summarize(request: ModelRequest) -> ModelResponse:
    """A scripted summarizer: names the pages it was shown, as a terse model would."""
    pages = sorted(set(re.findall(r"page-(\d+)", request.messages[-1].content)), key=int)
    usage = TokenUsage(input_tokens=estimate_request_tokens(request.messages), output_tokens=20)
    text = f"Read pages {', '.join(pages)}: shipments reconciled, no total yet."
    return ModelResponse(final_output=text, usage=usage)


def run(context: ContextPolicy | None, *, summarizer: bool = False) -> tuple[RunResult, int, int]:
    """Run the task once; return the result, the input tokens sent and the largest request.

    With a summarizer, its requests count too: they are part of what the run sends.
    """
    model = FunctionModel(decide, model_name="scripted-reader")
    condenser = FunctionModel(summarize, model_name="scripted-summarizer")
    limits = Limits(max_steps=PAGES + 2, max_observation_chars=PAGE_BYTES + 512)
    agent = Agent(
        model,
        build_registry(),
        limits=limits,
        validators=[citations_observed()],
        instructions=INSTRUCTIONS,
        context=context,
        summarizer=condenser if summarizer else None,
    )
    result = agent.run_sync(TASK)
    sizes = [estimate_request_tokens(r.messages, r.tools) for r in model.requests]
    sent = sum(sizes) + sum(estimate_request_tokens(r.messages) for r in condenser.requests)
    return result, sent, max(sizes)


CONFIGURATIONS: dict[str, tuple[ContextPolicy | None, bool]] = {
    "naive history (no context policy)": (None, False),
    "`ContextPolicy()`: 8,000 tokens, keep 1 turn (the default)": (ContextPolicy(), False),
    "`ContextPolicy()` and a summarizer (its requests counted)": (ContextPolicy(), True),
    "`ContextPolicy(keep_last_turns=2)`": (ContextPolicy(keep_last_turns=2), False),
    "`ContextPolicy(24_000, keep_last_turns=3)` (the former default)": (
        ContextPolicy(max_request_tokens=24_000, keep_last_turns=3),
        False,
    ),
}


def main() -> None:
    """Run every configuration and print the comparison."""
    rows, report, naive = [], {}, 0
    for name, (context, summarizer) in CONFIGURATIONS.items():
        result, sent, largest = run(context, summarizer=summarizer)
        naive = naive or sent
        correct = result.status == "completed" and result.output == EXPECTED
        report[name] = {
            "turns": result.usage.steps,
            "input_tokens_sent": sent,
            "largest_request": largest,
            "ratio_to_naive": round(sent / naive, 3),
            "compactions": result.usage.compactions,
            "answer_correct": correct,
        }
        rows.append(
            f"| {name} | {result.usage.steps} | {sent:,} | {sent / naive:.1%} | {largest:,} "
            f"| {result.usage.compactions} | {'yes' if correct else 'no'} |"
        )
    print(
        "| context | turns | input tokens sent | vs naive | largest request | compactions "
        "| answer correct |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    print("\n".join(rows))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
