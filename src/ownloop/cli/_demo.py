"""``ownloop demo``: the offline demos — research (a readable run summary) and harness (JSON lines).

``ownloop demo`` and ``ownloop demo research`` run the research demo; ``ownloop demo harness`` runs
the harness article's five loop scenarios against a local export worker and prints one JSON line
each. The budget flags apply to the research demo only.
"""

from __future__ import annotations

import argparse
import json

from ownloop.contracts import Limits, RunResult
from ownloop.demo.harness import run_harness_scenarios
from ownloop.demo.research import DEFAULT_QUESTION, build_agent, build_registry
from ownloop.tracing import format_trace

__all__ = ["print_summary", "register", "run_demo", "run_harness"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    demo = commands.add_parser(
        "demo", help="run an offline demo: research (default) or harness (no key, no network)"
    )
    demo.add_argument(
        "which",
        nargs="?",
        choices=("research", "harness"),
        default="research",
        help="research: answer a question with citations; harness: the five loop scenarios",
    )
    demo.add_argument("--question", default=DEFAULT_QUESTION, help="the question to research")
    demo.add_argument("--json", action="store_true", help="print the whole RunResult as JSON")
    demo.add_argument("--max-steps", type=int, default=6, help="step budget (default 6)")
    demo.add_argument("--max-tool-calls", type=int, default=6, help="tool-call budget (default 6)")
    demo.add_argument(
        "--deadline", type=float, default=60.0, help="wall-clock budget in seconds (default 60)"
    )
    demo.add_argument(
        "--schemas", action="store_true", help="print the demo tools' strict schemas and exit"
    )
    demo.set_defaults(handler=run_demo)


def print_summary(result: RunResult) -> None:
    """Print a run's status, answer, counters, evidence and readable trace.

    Args:
        result: The run's result.
    """
    usage = result.usage
    print(f"status:      {result.status.value} ({result.stop_reason.value})")
    print(f"detail:      {result.detail}")
    print(f"answer:      {result.output}")
    print(
        f"counters:    steps={usage.steps} model_attempts={usage.model_attempts} "
        f"tool_calls={usage.tool_calls} tool_attempts={usage.tool_attempts} "
        f"tokens={usage.total_tokens}"
    )
    print(f"evidence:    {', '.join(item.id for item in result.evidence) or 'none'}")
    print("trace:")
    print(format_trace(result.trace))


def run_demo(arguments: argparse.Namespace) -> int:
    """Run the demo as the parsed arguments say.

    Args:
        arguments: The parsed command line.

    Returns:
        0 when the run completed (harness: every scenario ended as expected), 1 otherwise.
    """
    if arguments.which == "harness":
        return run_harness()
    if arguments.schemas:
        specs = [spec.model_dump(mode="json") for spec in build_registry().specs()]
        print(json.dumps(specs, indent=2))
        return 0
    limits = Limits(
        max_steps=arguments.max_steps,
        max_tool_calls=arguments.max_tool_calls,
        deadline_s=arguments.deadline,
    )
    result = build_agent(limits=limits).run_sync(arguments.question)
    if arguments.json:
        print(result.model_dump_json(indent=2))
    else:
        print_summary(result)
    return 0 if result.status.value == "completed" else 1


def run_harness() -> int:
    """Run the harness scenarios and print one JSON line per scenario.

    Returns:
        0 when every scenario ended with its expected status and stop reason, 1 otherwise.
    """
    summaries = run_harness_scenarios()
    for summary in summaries:
        print(json.dumps(summary))
    return 0 if all(summary["as_expected"] for summary in summaries) else 1
