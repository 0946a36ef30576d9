"""``ownloop ui``: serve the browser view of a store's runs and approvals.

The store is the one ``runs`` reads (``--db`` / ``--dsn``), or the store of the agent a factory
returns (``--agent MODULE:FACTORY``); with an agent, a run whose requests are all decided is
resumed at once. The web stack is an extra (``pip install 'ownloop[ui]'``), imported only here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from ownloop.agent import Agent
from ownloop.cli._output import agent_redactor
from ownloop.cli._runs import _current_user, _load_agent, _store_options, open_store
from ownloop.exceptions import ConfigurationError
from ownloop.redaction import Redactor
from ownloop.store import RunStore

__all__ = ["register", "serve_ui"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ui`` command.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    parser = commands.add_parser("ui", help="serve the browser view of runs and approvals")
    _store_options(parser)
    parser.add_argument(
        "--agent",
        metavar="MODULE:FACTORY",
        help="resume runs with this agent (and its store) once their requests are decided",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any)")
    parser.add_argument("--approver", help="who decides (default: the current user)")
    parser.set_defaults(handler=serve_ui)


def serve_ui(arguments: argparse.Namespace) -> int:
    """Serve until interrupted.

    Args:
        arguments: The parsed command line.

    Returns:
        0.

    Raises:
        ConfigurationError: If the ``ui`` extra is missing or the store cannot be opened.
    """
    try:
        import ownloop.ui as ui  # noqa: PLR0402 - resolved via sys.modules
    except ImportError as error:
        raise ConfigurationError(
            f"ownloop ui needs the ui extra: pip install 'ownloop[ui]' ({error})"
        ) from error
    agent = _load_agent(arguments.agent) if arguments.agent else None
    store: RunStore = agent.store if agent is not None and agent.store else open_store(arguments)
    app = ui.create_app(
        store,
        approver=arguments.approver or _current_user(),
        redactor=_redactor(agent),
        resume=agent.resume if agent is not None else None,
    )
    if not ui.is_loopback(arguments.host):
        print(
            f"warning: listening on {arguments.host}, reachable from other machines; anyone "
            "with the address below can decide approvals",
            file=sys.stderr,
        )

    def ready(url: str) -> None:
        print(f"ownloop ui: open {url}", flush=True)

    async def run() -> None:
        try:
            await ui.serve(app, host=arguments.host, port=arguments.port, on_ready=ready)
        finally:
            await store.close()  # type: ignore[attr-defined]

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


def _redactor(agent: Agent | None) -> Redactor:
    """The agent's redaction rules, with its tools' sensitive parameters; else the built-in."""
    return agent_redactor(agent)
