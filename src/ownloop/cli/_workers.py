"""``ownloop workers recover``: hand a dead DBOS worker's runs to this process.

The application factory (``--app MODULE:FACTORY``) returns the configured `ownloop.dbos.DbosRunner`
and the DBOS configuration this process launches with (``ownloop.dbos.worker_config``). The
command moves every ownloop segment pending under the dead executor (of this application version)
to a private queue, launches DBOS listening to that queue only, runs exactly those segments,
prints one JSON line per segment and exits: it never takes a fresh run from the shared queue.

It launches under the executor id ``<dead>:recover`` (not the config's): if the command itself
dies, running it again recovers what it held. Anything it could not finish when it stops is handed
back to the shared queue.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Mapping
from typing import Any

from ownloop.cli._output import say_json
from ownloop.exceptions import ConfigurationError

__all__ = ["recover", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``workers`` command.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    workers = commands.add_parser("workers", help="operate DBOS workers (ownloop[dbos])")
    actions = workers.add_subparsers(dest="workers_command", metavar="ACTION", required=True)
    take = actions.add_parser(
        "recover", help="run a dead worker's pending runs in this process, then exit"
    )
    take.add_argument("--executor", required=True, help="the dead worker's DBOS executor id")
    take.add_argument(
        "--app",
        required=True,
        metavar="MODULE:FACTORY",
        help="returns (DbosRunner, DBOS config) for this application",
    )
    take.add_argument("--dsn", help="the DBOS system database URL (default: the app's config)")
    take.set_defaults(handler=recover)


def _load_app(spec: str) -> tuple[Any, dict[str, Any]]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"--app must be MODULE:FACTORY, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(f"cannot load the application factory {spec}: {error}") from error
    from ownloop.dbos import DbosRunner

    made = factory()
    if (
        not isinstance(made, tuple)
        or len(made) != 2
        or not isinstance(made[0], DbosRunner)
        or not isinstance(made[1], Mapping)
    ):
        raise ConfigurationError(f"{spec} must return (DbosRunner, DBOS config), got {made!r}")
    version = made[1].get("application_version")
    if version is not None and version != made[0].application_version:
        # segments are enqueued with the runner's version; a rescuer on another never runs them
        raise ConfigurationError(
            f"{spec}: the DBOS config's application_version {version!r} is not the runner's "
            f"{made[0].application_version!r}"
        )
    return made[0], dict(made[1])


def recover(arguments: argparse.Namespace) -> int:
    """Run the dead executor's pending segments in this process, and nothing else.

    Args:
        arguments: ``executor``, ``app`` and ``dsn``.

    Returns:
        0 when every recovered segment finished.
    """
    from ownloop.dbos import recover_executor, recovery_executor_id

    runner, config = _load_app(arguments.app)
    if arguments.dsn:
        config["system_database_url"] = arguments.dsn
    dead = arguments.executor

    def announce(workflow_ids: list[str]) -> None:
        rescuer = recovery_executor_id(dead)
        print(f"recovering {len(workflow_ids)} workflow(s) of executor {dead} as {rescuer}")

    try:
        for workflow_id, outcome in recover_executor(runner, config, dead, announce=announce):
            say_json({"workflow_id": workflow_id, "result": outcome}, indent=None)
    finally:
        runner.close()
        asyncio.run(runner.store.close())
    return 0
