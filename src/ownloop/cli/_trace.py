"""``ownloop trace``: read a JSON lines trace as a timeline, or diagnose what went wrong."""

from __future__ import annotations

import argparse
import json
import sys

from ownloop.contracts import EventBase
from ownloop.tracing import diagnose, nest_runs, read_trace, split_runs, timeline

__all__ = ["register", "run_diagnose", "run_show"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``trace`` command and its ``show`` and ``diagnose`` subcommands.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    trace = commands.add_parser("trace", help="inspect a JSON lines trace file")
    trace.set_defaults(handler=lambda _: _usage(trace))
    actions = trace.add_subparsers(dest="trace_command", metavar="ACTION")
    show = actions.add_parser("show", help="print each run as a timeline: think, act, observe")
    _common(show)
    show.set_defaults(handler=run_show)
    check = actions.add_parser(
        "diagnose", help="find repeated actions, slow tools, retries, budgets near their limit"
    )
    _common(check)
    check.add_argument(
        "--slow-tool-s", type=float, default=5.0, help="a slower tool attempt is reported (5)"
    )
    check.add_argument(
        "--repeats", type=int, default=2, help="same call this many times is reported (2)"
    )
    check.add_argument(
        "--budget-ratio", type=float, default=0.8, help="budget use reported from (0.8)"
    )
    check.set_defaults(handler=run_diagnose)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a trace written by JsonlSink (one event a line)")
    parser.add_argument("--run", help="only the run with this id")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _runs(arguments: argparse.Namespace) -> dict[str, list[EventBase]] | None:
    try:
        events = read_trace(arguments.file)
    except OSError as error:
        print(f"ownloop: cannot read {arguments.file}: {error.strerror or error}", file=sys.stderr)
        return None
    runs = split_runs(events)
    if arguments.run is not None:
        runs = {run_id: run for run_id, run in runs.items() if run_id == arguments.run}
    if not runs:
        wanted = f"run {arguments.run}" if arguments.run else "events"
        print(f"ownloop: no {wanted} in {arguments.file}", file=sys.stderr)
        return None
    return runs


def run_show(arguments: argparse.Namespace) -> int:
    """Print every run of the file as a timeline.

    Args:
        arguments: The parsed command line.

    Returns:
        0, or 2 when the file cannot be read or holds no matching run.
    """
    runs = _runs(arguments)
    if runs is None:
        return 2
    nested = nest_runs(runs)  # a delegated agent's run follows its caller's, indented
    timelines = [(depth, timeline(runs[run_id])) for depth, run_id in nested]
    if arguments.json:
        print(json.dumps([item.model_dump(mode="json") for _, item in timelines], indent=2))
    else:
        print("\n\n".join(_indent(item.render(), depth) for depth, item in timelines))
    return 0


def _indent(text: str, depth: int) -> str:
    prefix = "    " * depth
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def run_diagnose(arguments: argparse.Namespace) -> int:
    """Print the findings of every run of the file.

    Args:
        arguments: The parsed command line.

    Returns:
        0 when no run has a warning or an error, 1 when one has, 2 when the file cannot be read
        or holds no matching run.
    """
    runs = _runs(arguments)
    if runs is None:
        return 2
    diagnoses = [
        diagnose(
            run,
            slow_tool_s=arguments.slow_tool_s,
            repeat_threshold=arguments.repeats,
            budget_ratio=arguments.budget_ratio,
        )
        for run in runs.values()
    ]
    if arguments.json:
        print(json.dumps([item.model_dump(mode="json") for item in diagnoses], indent=2))
    else:
        print("\n\n".join(item.render() for item in diagnoses))
    return 0 if all(item.ok for item in diagnoses) else 1
