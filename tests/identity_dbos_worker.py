"""One DBOS segment of the identity state machine's run, in a fresh interpreter.

``python -m tests.identity_dbos_worker JOB_JSON`` (under the ``PYTHONHASHSEED`` the machine drew)
launches DBOS as a worker of the job's executor id on the throwaway PostgreSQL, with a
`ownloop.dbos.DbosRunner` whose one agent plays the job's script with the generated ``ship`` tool
of `tests.identity_model_worker` (its ledger, its crash points). Launching recovers the segment a
dead worker of that executor id left pending; a new run is enqueued; a decision's segment was
enqueued by the machine (``DbosRunner.approve``). The worker serves the queue until no segment of
the run is waiting or running, then shuts down and prints one JSON line: the stored run's state and
status, and any segment that ended in an error. A tool may kill the process mid-write (exit 17
after the effect, 18 after the receipt): DBOS then holds the segment pending for the next worker.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from ownloop import Agent
from ownloop.contracts import AssistantMessage, ModelRequest, ModelResponse
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore
from ownloop.testing import FunctionModel, final, tool_call
from tests.identity_model_worker import _registry
from tests.identity_worker import open_store

APP_NAME = "ownloop-identity"
_WAITING = {"PENDING", "ENQUEUED"}


def _agent(job: dict[str, Any]) -> Agent:
    script = [tool_call("ship", call_id, **job["arguments"]) for call_id in job["calls"]]
    script.append(final("Shipped."))

    def respond(request: ModelRequest) -> ModelResponse:
        return script[sum(isinstance(m, AssistantMessage) for m in request.messages)]

    return Agent(
        FunctionModel(respond, model_name="scripted"), _registry(job), policy=allow_writes("ship")
    )


def make_runner(job: dict[str, Any], *, crashing: bool = False) -> Any:
    """Return the job's runner; ``crashing``: its store may kill the process after a receipt."""
    from ownloop.dbos import DbosRunner

    store, through = open_store(job if crashing else {**job, "crash": None})
    assert isinstance(store, PostgresRunStore)
    return DbosRunner(
        through,
        {"ship": lambda: _agent(job)},
        queue=job["queue"],
        system_database_url=job["system_url"],
        polling_interval_s=0.05,
    )


def _segments(client: Any, run_id: str) -> list[tuple[str, str, Any]]:
    found = client.list_workflows(workflow_id_prefix=f"ownloop:{run_id}:", load_output=False)
    return sorted((s.workflow_id, s.status, s.error) for s in found)


async def _settled(runner: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Wait until no segment of the run waits or runs; return the stored run's state."""
    client = runner._sync_client()
    deadline = time.monotonic() + 90
    while True:
        found = _segments(client, job["run_id"])
        if found and not any(status in _WAITING for _, status, _ in found):
            break
        assert time.monotonic() < deadline, f"segments never settled: {found}"
        await asyncio.sleep(0.05)
    store = PostgresRunStore(job["dsn"], schema=job["schema"])  # the runner's lives in DBOS's loop
    try:
        stored = await store.get(job["run_id"])
    finally:
        await store.close()
    snapshot = stored.snapshot if stored is not None else None
    outcome: dict[str, Any] = {
        "state": None if snapshot is None else snapshot.state,
        "status": "paused" if snapshot is None or snapshot.result is None else None,
        "segments": [[wid, status] for wid, status, _ in found],
    }
    if snapshot is not None and snapshot.result is not None:
        outcome["status"] = snapshot.result.status.value
    failed = [f"{wid}: {error!r}" for wid, status, error in found if status != "SUCCESS"]
    if failed:
        outcome["error"] = "segment failed"
        outcome["message"] = "; ".join(failed)
    return outcome


def serve(job: dict[str, Any]) -> dict[str, Any]:
    """Launch a DBOS worker, enqueue the run if it is new, serve until it settles, shut down."""
    from dbos import DBOS

    from ownloop.dbos import worker_config

    DBOS(config=worker_config(APP_NAME, job["system_url"], job["executor"], log_level="WARNING"))
    runner = make_runner(job, crashing=True)
    runner.register(worker=True)
    DBOS.launch()  # recovers the segment a dead worker of this executor id left pending
    runner.start()

    async def go() -> dict[str, Any]:
        await runner.enqueue("ship", "Ship it.", run_id=job["run_id"])  # once per run id
        return await _settled(runner, job)

    try:
        return asyncio.run(go())
    finally:
        runner.shutdown(drain_s=10, destroy_registry=True)
        runner.close()
        asyncio.run(runner.store.close())


def main() -> None:
    """Run the job given as the first argument and print its outcome as one JSON line."""
    print(json.dumps(serve(json.loads(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
