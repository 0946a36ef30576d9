"""``ownloop mcp serve MODULE:REGISTRY``: serve a registry's tools over MCP (stdio).

Every call goes through the gateway as a stored run: the policy (``--policy``) decides with the
actor given here (``--actor``, ``--tenant``, ``--role``), never one a client names; calls needing
an approval answer with the run and request to approve (``ownloop approve``); receipts, the write
journal and the trace go to the store (``--db``, created if missing, or ``--dsn``). Needs the
``mcp`` extra, imported only when the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TYPE_CHECKING

from ownloop.cli._output import redact_logs_to_stderr
from ownloop.cli._runs import DATABASE_URL_VARIABLE, DEFAULT_DATABASE, named_store
from ownloop.contracts import Actor
from ownloop.exceptions import ConfigurationError
from ownloop.policy import Policy
from ownloop.store import PostgresRunStore, RunStore, SqliteRunStore
from ownloop.tools import ToolRegistry

if TYPE_CHECKING:
    from ownloop.mcp import RegistryServer as RegistryServerType

__all__ = ["build_server", "load_registry", "register", "serve"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``mcp`` command group (``mcp serve``).

    Args:
        commands: The top-level subcommands.
    """
    group = commands.add_parser("mcp", help="Model Context Protocol: serve tools to MCP clients")
    actions = group.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    serving = actions.add_parser("serve", help="serve MODULE:REGISTRY over stdio, guarded")
    serving.add_argument("target", metavar="MODULE:REGISTRY", help="a ToolRegistry (or factory)")
    serving.add_argument("--db", metavar="PATH", help=f"SQLite store (./{DEFAULT_DATABASE})")
    serving.add_argument("--dsn", help=f"PostgreSQL store (default: ${DATABASE_URL_VARIABLE})")
    serving.add_argument("--policy", metavar="FILE", help="a policy file (JSON or TOML)")
    serving.add_argument("--actor", default="mcp-client", help="the actor every call acts for")
    serving.add_argument("--tenant", help="the actor's tenant")
    serving.add_argument("--role", action="append", default=[], help="a role of the actor")
    serving.add_argument("--name", default="ownloop", help="the server name clients see")
    serving.set_defaults(handler=serve)


def load_registry(target: str) -> ToolRegistry:
    """Import ``MODULE:ATTRIBUTE``: a `ToolRegistry`, or a callable returning one.

    Raises:
        ConfigurationError: It cannot be imported or is not a registry.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"expected MODULE:REGISTRY, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: find the application's modules
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(f"cannot load {target}: {error}") from error
    registry = found if isinstance(found, ToolRegistry) else found() if callable(found) else None
    if not isinstance(registry, ToolRegistry):
        raise ConfigurationError(f"{target} is not a ToolRegistry (nor returns one)")
    return registry


def serve(arguments: argparse.Namespace) -> int:
    """Serve the registry over stdio until the client disconnects.

    Returns:
        0.
    """
    server = build_server(arguments)
    redact_logs_to_stderr()  # standard output carries the protocol; logs go to stderr, redacted
    server.run_stdio()
    return 0


def build_server(arguments: argparse.Namespace) -> RegistryServerType:
    """Build the server the command line describes.

    Raises:
        ConfigurationError: The registry, policy or store cannot be loaded, or the ``mcp``
            extra is not installed.
    """
    try:
        from ownloop.mcp import RegistryServer
    except ImportError as error:  # pragma: no cover - the dev environment has the extra
        raise ConfigurationError(
            f"`ownloop mcp` needs the mcp extra: pip install 'ownloop[mcp]' ({error})"
        ) from error
    registry = load_registry(arguments.target)
    policy = Policy.from_file(arguments.policy) if arguments.policy else None
    actor = Actor(id=arguments.actor, tenant=arguments.tenant, roles=tuple(arguments.role))
    return RegistryServer(
        registry, store=_store(arguments), actor=actor, policy=policy, name=arguments.name
    )


def _store(arguments: argparse.Namespace) -> RunStore:
    dsn, path = named_store(arguments)
    if dsn:
        return PostgresRunStore(dsn)
    return SqliteRunStore(path)
