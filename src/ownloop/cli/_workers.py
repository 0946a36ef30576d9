"""``ownloop workers recover``: hand a dead DBOS worker's runs to this process.

The application factory (``--app MODULE:FACTORY``) returns the configured `ownloop.dbos.DbosRunner`
and the DBOS configuration this process launches with (``ownloop.dbos.worker_config``). The
command launches DBOS, re-enqueues every pending workflow of the dead executor that belongs to this
application version, waits for them to finish and prints one JSON line per workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, cast

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
    return made[0], dict(made[1])


def recover(arguments: argparse.Namespace) -> int:
    """Launch DBOS here, recover the executor's pending runs and wait for them.

    Args:
        arguments: ``executor``, ``app`` and ``dsn``.

    Returns:
        0 when every recovered workflow finished.
    """
    from dbos import DBOS, DBOSConfig

    runner, config = _load_app(arguments.app)
    if arguments.dsn:
        config["system_database_url"] = arguments.dsn
    DBOS(config=cast(DBOSConfig, config))
    try:
        runner.register()
        DBOS.launch()
        runner.start()
        handles = DBOS._recover_pending_workflows([arguments.executor])
        print(f"recovering {len(handles)} workflow(s) of executor {arguments.executor}")
        for handle in handles:
            outcome = handle.get_result(polling_interval_sec=0.1)
            print(json.dumps({"workflow_id": handle.get_workflow_id(), "result": outcome}))
    finally:
        DBOS.destroy(destroy_registry=True)
        runner.close()
        asyncio.run(runner.store.close())
    return 0
