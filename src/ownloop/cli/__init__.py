"""The ``ownloop`` command line.

Each command group lives in its own module with a ``register(commands)`` function that adds its
subcommands and sets ``handler`` (a function of the parsed arguments returning an exit status).
This module only assembles them and turns ownloop errors into a clean message and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ownloop._version import __version__
from ownloop.cli import _ablate, _demo, _mcp, _run, _runs, _trace, _ui, _workers
from ownloop.exceptions import OwnloopError

__all__ = ["build_parser", "main"]

_COMMAND_GROUPS = (_demo, _run, _ablate, _runs, _trace, _workers, _mcp, _ui)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``ownloop`` command with every command registered."""
    parser = argparse.ArgumentParser(
        prog="ownloop", description="Bounded, auditable agent loops. Own the loop; adapt the model."
    )
    parser.add_argument("--version", action="version", version=f"ownloop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in _COMMAND_GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ownloop`` command.

    Args:
        argv: The arguments (``sys.argv[1:]`` by default).

    Returns:
        The exit status: 0 on success, 1 when a run did not complete, 2 on a usage error.
    """
    parser = build_parser()
    arguments = parser.parse_args(argv)
    handler = getattr(arguments, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        status: int = handler(arguments)
    except OwnloopError as error:
        print(f"ownloop: {error}", file=sys.stderr)
        return 2
    return status
