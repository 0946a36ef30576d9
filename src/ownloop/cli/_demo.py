"""``ownloop demo``: the offline demos — research (a readable run summary) and harness (scenarios).

``ownloop demo`` and ``ownloop demo research`` run the research demo; ``ownloop demo harness`` runs
the harness article's five loop scenarios against a local export worker and prints one line each.
``--json`` prints machine-readable output for both (the whole `RunResult`; one JSON line per
scenario); ``--trace FILE`` appends the run's events to a JSON lines file that ``ownloop trace
show|diagnose`` reads. The budget flags apply to the research demo only.

The demo modules are imported by the handler, not at start-up, so other commands stay fast.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ownloop.cli._output import say

if TYPE_CHECKING:
    from ownloop.contracts import RunResult
    from ownloop.tracing import TraceSink

__all__ = ["print_summary", "register", "run_demo", "run_harness", "trace_sinks"]


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
    demo.add_argument(
        "--question", default=None, help="the question to research (default: about agent safety)"
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="research: print the whole RunResult as JSON; harness: one JSON line per scenario",
    )
    add_trace_option(demo)
    demo.add_argument("--max-steps", type=int, default=6, help="step budget (default 6)")
    demo.add_argument("--max-tool-calls", type=int, default=6, help="tool-call budget (default 6)")
    demo.add_argument(
        "--deadline", type=float, default=60.0, help="wall-clock budget in seconds (default 60)"
    )
    demo.add_argument(
        "--schemas", action="store_true", help="print the demo tools' strict schemas and exit"
    )
    demo.set_defaults(handler=run_demo)


def add_trace_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--trace FILE``: append the run's trace events to a JSON lines file.

    Args:
        parser: The command's parser.
    """
    parser.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="append the trace as JSON lines to FILE (read it with 'ownloop trace show FILE')",
    )


def trace_sinks(arguments: argparse.Namespace) -> list[TraceSink]:
    """Return the trace sinks ``--trace`` asks for: a `JsonlSink`, or none.

    Args:
        arguments: The parsed command line.

    Returns:
        The sinks.
    """
    if arguments.trace is None:
        return []
    from ownloop.tracing import JsonlSink

    return [JsonlSink(arguments.trace)]


def print_summary(result: RunResult) -> None:
    """Print a run's status, answer, counters, evidence and readable trace.

    Args:
        result: The run's result.
    """
    from ownloop.tracing import format_trace

    usage = result.usage
    print(f"status:      {result.status.value} ({result.stop_reason.value})")
    say(f"detail:      {result.detail}")
    say(f"answer:      {result.output}")
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
        return run_harness(as_json=arguments.json, trace=arguments.trace)
    from ownloop.contracts import Limits
    from ownloop.demo.research import DEFAULT_QUESTION, build_agent, build_registry

    if arguments.schemas:
        specs = [spec.model_dump(mode="json") for spec in build_registry().specs()]
        print(json.dumps(specs, indent=2))
        return 0
    limits = Limits(
        max_steps=arguments.max_steps,
        max_tool_calls=arguments.max_tool_calls,
        deadline_s=arguments.deadline,
    )
    agent = build_agent(limits=limits, trace_sinks=trace_sinks(arguments))
    result = agent.run_sync(arguments.question or DEFAULT_QUESTION)
    if arguments.json:
        print(result.model_dump_json(indent=2))
    else:
        print_summary(result)
    return 0 if result.status.value == "completed" else 1


def run_harness(*, as_json: bool = False, trace: str | None = None) -> int:
    """Run the harness scenarios and print one line per scenario.

    Args:
        as_json: Print each scenario's whole summary as one JSON line instead of a readable line.
        trace: A JSON lines file to append every scenario's trace events to.

    Returns:
        0 when every scenario ended with its expected status and stop reason, 1 otherwise.
    """
    from ownloop.demo.harness import harness_scenarios, run_harness_scenario
    from ownloop.tracing import JsonlSink

    sink = JsonlSink(trace) if trace is not None else None
    expected = True
    for scenario in harness_scenarios():
        summary, result, _ = run_harness_scenario(scenario)
        if sink is not None:
            for event in result.trace:
                sink(event)
        expected = expected and summary["as_expected"]
        print(json.dumps(summary) if as_json else _harness_line(summary))
    return 0 if expected else 1


def _harness_line(summary: dict[str, Any]) -> str:
    verdict = "as expected" if summary["as_expected"] else "NOT as expected"
    outcome = f"{summary['status']} ({summary['stop_reason']})"
    return f"{summary['scenario']:<24} {outcome:<38} {verdict}: {summary['lesson']}"
