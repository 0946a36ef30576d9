"""The ``ownloop`` command line.

Each command group lives in its own module with a ``register(commands)`` function that adds its
subcommands and sets ``handler`` (a function of the parsed arguments returning an exit status).
This module only assembles them, turns ownloop errors into a clean message and exit status 2, and
keeps start-up short: ``ownloop --version`` loads no command module, and a command loads only its
own group (``ownloop trace show`` never imports the runtime or a provider SDK).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from ownloop._version import __version__
from ownloop.exceptions import OwnloopError

__all__ = ["build_parser", "main"]

_GROUPS = {
    "demo": "_demo",
    "run": "_run",
    "ablate": "_ablate",
    "runs": "_runs",
    "approve": "_runs",
    "resume": "_runs",
    "trace": "_trace",
    "workers": "_workers",
    "mcp": "_mcp",
    "ui": "_ui",
}
"""Each command and the module that registers it (in the order of ``ownloop --help``)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Return the argument parser of the ``ownloop`` command.

    Args:
        command: Register only the group of this command (a name ``ownloop --help`` lists), so
            running it imports nothing else; every command by default.

    Returns:
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog="ownloop", description="Bounded, auditable agent loops. Own the loop; adapt the model."
    )
    parser.add_argument("--version", action="version", version=f"ownloop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [_GROUPS[command]] if command in _GROUPS else list(dict.fromkeys(_GROUPS.values()))
    for module in modules:
        import_module(f"{__name__}.{module}").register(commands)
    _remember_parsers(parser)
    return parser


_PARSER = "_ownloop_parser"
"""Where each (sub)command's parser records itself, so its own usage answers its errors."""


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                subparser.set_defaults(**{_PARSER: subparser})
                _remember_parsers(subparser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ownloop`` command.

    Args:
        argv: The arguments (``sys.argv[1:]`` by default).

    Returns:
        The exit status: 0 on success, 1 when a run did not complete, 2 on a usage error.
    """
    arguments_list = list(sys.argv[1:] if argv is None else argv)
    if arguments_list == ["--version"]:
        print(f"ownloop {__version__}")
        return 0
    command = next((item for item in arguments_list if not item.startswith("-")), None)
    parser = build_parser(command)
    arguments, unknown = parser.parse_known_args(arguments_list)
    if unknown:  # said by the command's own parser: its usage line, not the top-level one
        getattr(arguments, _PARSER, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    handler = getattr(arguments, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        status: int = handler(arguments)
        sys.stdout.flush()
    except OwnloopError as error:
        # An error may quote a value or a DSN. Imported here: `ownloop --version` and `--help`
        # do not load the redaction rules.
        output = import_module("ownloop.cli._output")
        output.say(f"ownloop: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (``| head``) went away: stop quietly, as other command line tools do. Point
        # stdout at /dev/null so the interpreter's final flush does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status
