"""Run a dead executor's ownloop segments in this process, and nothing else (the recovery runbook).

The segments pending under the dead executor move to a private queue (`recovery_queue`) before
DBOS launches here, under the derived executor id `recovery_executor_id` and listening to that
queue only: this process never takes a fresh run from the shared queue. If it dies, running it
again takes over what it held (same id, same queue); if it stops on an error, it hands what it did
not finish back to the shared queue. An advisory lock keeps two rescues of one executor apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from dbos import DBOS, DBOSConfig

from ownloop.dbos._handoff import exclusively, recovery_executor_id, recovery_queue
from ownloop.dbos._runner import SHARED_EXECUTOR_ID, WORKFLOW_NAME, DbosRunner
from ownloop.exceptions import ConfigurationError

__all__ = ["recover_executor"]


def recover_executor(
    runner: DbosRunner,
    config: Mapping[str, Any],
    executor_id: str,
    *,
    announce: Callable[[list[str]], None] | None = None,
) -> Iterator[tuple[str, Any]]:
    """Launch DBOS here as the rescuer of a dead executor and run its pending segments.

    Args:
        runner: The application's runner (its queue, agents, store and application version).
        config: The DBOS configuration to launch with (its executor id is replaced).
        executor_id: The dead worker's executor id.
        announce: Called with the workflow ids being recovered, before any finishes.

    Yields:
        ``(workflow id, segment summary)`` as each recovered segment finishes.

    Raises:
        ConfigurationError: For DBOS's shared default executor id, or if another rescue of the
            same executor holds the lock.
    """
    if executor_id == SHARED_EXECUTOR_ID:
        raise ConfigurationError(
            "executor 'local' is DBOS's default, shared by every process without an id: "
            "recover needs the dead worker's own executor id"
        )
    settings = dict(config)
    runner.system_database_url = settings.get("system_database_url", runner.system_database_url)
    with exclusively(runner._sync_client(), f"ownloop-recover:{executor_id}") as mine:
        if not mine:
            raise ConfigurationError(f"another rescue of executor {executor_id!r} is running")
        yield from _rescue(runner, settings, executor_id, announce or (lambda _: None))


def _rescue(
    runner: DbosRunner,
    config: dict[str, Any],
    dead: str,
    announce: Callable[[list[str]], None],
) -> Iterator[tuple[str, Any]]:
    lane = recovery_queue(runner.queue, dead)
    config["executor_id"] = recovery_executor_id(dead)
    # Move them before launching: a live rescuer under this id must never see them move.
    runner.hand_back([dead, config["executor_id"]], lanes=[lane], to_queue=lane)
    DBOS(config=cast(DBOSConfig, config))
    try:
        runner.register(worker=False, listen=[lane])
        DBOS.launch()
        DBOS.register_queue(
            lane,
            polling_interval_sec=runner.polling_interval_s,
            worker_concurrency=runner.worker_concurrency,
        )
        found = DBOS.list_workflows(
            queue_name=lane, status=["ENQUEUED", "PENDING"], name=WORKFLOW_NAME, load_input=False
        )
        announce([status.workflow_id for status in found])
        for status in found:
            handle: Any = DBOS.retrieve_workflow(status.workflow_id)
            yield status.workflow_id, handle.get_result(polling_interval_sec=0.1)
        DBOS.delete_queue(lane)
    finally:  # hand back to the shared queue whatever it did not finish
        runner.shutdown(drain_s=0, destroy_registry=True)
        runner.hand_back([], lanes=[lane])
