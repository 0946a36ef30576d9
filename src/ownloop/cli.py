"""The ``ownloop`` command line: the offline demo, and (later) runs, approvals and traces."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ownloop._version import __version__
from ownloop.contracts import Limits, RunResult
from ownloop.demo.research import DEFAULT_QUESTION, build_agent, build_registry
from ownloop.exceptions import OwnloopError
from ownloop.tracing import format_trace

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``ownloop`` command."""
    parser = argparse.ArgumentParser(
        prog="ownloop", description="Bounded, auditable agent loops. Own the loop; adapt the model."
    )
    parser.add_argument("--version", action="version", version=f"ownloop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run the offline research demo (no key, no network)")
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
    return parser


def _print_summary(result: RunResult) -> None:
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


def _run_demo(arguments: argparse.Namespace) -> int:
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
        _print_summary(result)
    return 0 if result.status.value == "completed" else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ownloop`` command.

    Args:
        argv: The arguments (``sys.argv[1:]`` by default).

    Returns:
        The exit status: 0 on success, 1 when a run did not complete, 2 on a usage error.
    """
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "demo":
            return _run_demo(arguments)
    except OwnloopError as error:
        print(f"ownloop: {error}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
