"""Which DBOS process takes which run: only workers dequeue, and no run is stranded on the way out.

Real worker processes on the test PostgreSQL server (``tests/dbos_worker.py``), SIGKILL, and the
runbook's ``ownloop workers recover``. After each scenario a fresh worker must finish every run,
and the external ledger must hold each write exactly once.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ownloop.exceptions import ConfigurationError
from tests.dbos_support import (
    kill_when_halted,
    new_spec,
    stop,
    stored,
    wait_for_segments,
    wait_halted,
    workflows,
)
from tests.dbos_worker import (
    SPEC_VARIABLE,
    Spec,
    cli_main,
    enqueue_many,
    host,
    run_in_process,
    start,
    start_rescuer,
)
from tests.durable_worker import ledger_rows


@pytest.fixture(autouse=True)
def _fresh_dbos_logger() -> Iterator[None]:
    """Drop DBOS's console handler after each test: it holds the stderr pytest captured then."""
    yield
    logger = logging.getLogger("dbos")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[Spec]:
    """A spec with its own store schema, queue and executor id; stops its workers at the end."""
    made = new_spec(tmp_path)
    yield made
    made.path("stop").write_text("stop")


def pending_under(spec: Spec, *executors: str) -> list[str]:
    """Return the workflows PENDING under any of the executors (runs nobody else will take)."""
    return [wid for wid, _, _ in workflows(spec, status="PENDING", executor_id=list(executors))]


def finish_on_a_fresh_worker(spec: Spec, run_ids: list[str], expected: list[str]) -> None:
    """Start a worker with a new executor id; every run completes and each write ran once."""
    fresh = start(replace(spec, name="fresh", executor_id=f"fresh-{uuid.uuid4().hex[:6]}"))
    snapshots = stored(spec, run_ids, until="finished")
    stop(spec, fresh)
    assert {s.result.status.value for s in snapshots} == {"completed"}
    rows = ledger_rows(spec.directory)
    assert len({key for key, _ in rows}) == len(rows), f"a write happened twice: {rows}"
    assert sorted(what for _, what in rows) == sorted(expected)


def test_recover_runs_what_it_recovered_and_takes_no_fresh_run(
    spec: Spec, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runbook's recover finishes the dead worker's run and leaves queued fresh runs queued."""
    run_id = f"dead-{uuid.uuid4().hex[:8]}"
    doomed = replace(spec, name="doomed", kill_run=run_id, kill_at="read")
    worker = start(doomed)
    enqueue_many(doomed, "export", 1, run_ids=[run_id])
    kill_when_halted(spec, worker)
    fresh = enqueue_many(spec, "slow", 4)  # no worker is alive: they wait on the shared queue
    monkeypatch.setenv(SPEC_VARIABLE, json.dumps(spec.__dict__))
    argv = ["workers", "recover", "--executor", spec.executor_id, "--app"]
    assert cli_main([*argv, "tests.dbos_worker:cli_app", "--dsn", spec.system_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("recovering 1 workflow(s)")
    assert json.loads(lines[1]) == {
        "workflow_id": f"ownloop:{run_id}:start",
        "result": {
            "run_id": run_id,
            "status": "completed",
            "stop_reason": "final_output",
            "requests": [],
        },
    }
    (snapshot,) = stored(spec, [run_id], until="finished")
    assert snapshot.result.output == "Exported q3."
    rescuer = f"{spec.executor_id}:recover"
    assert pending_under(spec, rescuer, "operator") == []  # the old code stranded fresh runs here
    wait_for_segments(spec, fresh, "ENQUEUED")
    assert workflows(spec, queue_name=f"{spec.queue}:recover:{spec.executor_id}") == [
        (f"ownloop:{run_id}:start", "SUCCESS", rescuer)
    ]
    finish_on_a_fresh_worker(spec, [run_id, *fresh], [f"{r}:export:q3" for r in [run_id, *fresh]])


def test_a_killed_rescuer_is_finished_by_running_recover_again(
    spec: Spec, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second rescue waits its turn; SIGKILL the first: running it again finishes the run once."""
    run_id = f"dead-{uuid.uuid4().hex[:8]}"
    spec = replace(spec, reconcile=True)  # a write cut mid-flight is confirmed from the ledger
    doomed = replace(spec, name="doomed", kill_run=run_id, kill_at="read")
    worker = start(doomed)
    enqueue_many(doomed, "export", 1, run_ids=[run_id])
    kill_when_halted(spec, worker)
    spec.path("halted").unlink()
    rescuer = start_rescuer(replace(doomed, kill_at="write:after_commit"))  # mid-write
    wait_halted(spec, rescuer)
    monkeypatch.setenv(SPEC_VARIABLE, json.dumps(spec.__dict__))
    argv = ["workers", "recover", "--executor", spec.executor_id, "--app"]
    with pytest.raises(ConfigurationError, match="another rescue of executor"):
        cli_main([*argv, "tests.dbos_worker:cli_app", "--dsn", spec.system_url])
    kill_when_halted(spec, rescuer)  # its lock dies with it
    assert pending_under(spec, f"{spec.executor_id}:recover") == [f"ownloop:{run_id}:start"]
    fresh = enqueue_many(spec, "slow", 2)
    assert cli_main([*argv, "tests.dbos_worker:cli_app", "--dsn", spec.system_url]) == 0
    assert capsys.readouterr().out.startswith("recovering 1 workflow(s)")
    (snapshot,) = stored(spec, [run_id], until="finished")
    assert (snapshot.result.status.value, snapshot.result.output) == ("completed", "Exported q3.")
    wait_for_segments(spec, fresh, "ENQUEUED")
    finish_on_a_fresh_worker(spec, [run_id, *fresh], [f"{r}:export:q3" for r in [run_id, *fresh]])


def test_a_process_that_enqueues_and_approves_takes_no_run(spec: Spec) -> None:
    """A host that launched DBOS as no worker enqueues and approves; only workers run them."""
    worker = start(replace(spec, name="first"))  # registers the queue, pauses a refund
    (refund,) = enqueue_many(spec, "refund", 1)
    (paused,) = stored(spec, [refund], until="paused")
    stop(spec, worker)
    (request,) = paused.approval_requests
    fresh = [f"host-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    visitor = replace(spec, executor_id=f"host-{uuid.uuid4().hex[:6]}")
    run_in_process(host, visitor, fresh, (refund, request.id), 2.5)
    assert pending_under(spec, visitor.executor_id) == []
    assert workflows(spec, executor_id=visitor.executor_id) == []
    wait_for_segments(spec, fresh, "ENQUEUED")
    assert ledger_rows(spec.directory) == []
    finish_on_a_fresh_worker(
        spec,
        [refund, *fresh],
        [f"{refund}:refund:o-1:500", *(f"{r}:export:q3" for r in fresh)],
    )


def test_a_stopped_worker_hands_every_run_it_took_to_another(spec: Spec) -> None:
    """SIGTERM a busy worker: it drains, then hands its running segments back to the queue."""
    busy = replace(spec, name="busy", drain_s=1, reconcile=True, slow_latency_s=1.0)
    worker = start(busy)
    run_ids = enqueue_many(spec, "slow", 6)
    wait_for_segments(spec, run_ids, "PENDING", executor=spec.executor_id)
    os.kill(worker.pid or 0, signal.SIGTERM)
    worker.join(30)
    assert worker.exitcode == 0
    handed = json.loads(spec.path("handed-busy").read_text())
    assert handed, "the drain was long enough to finish every run: the test proves nothing"
    assert pending_under(spec, spec.executor_id) == []
    finish_on_a_fresh_worker(spec, run_ids, [f"{r}:export:q3" for r in run_ids])


def test_a_stopped_worker_first_lets_its_running_segments_finish(spec: Spec) -> None:
    """SIGTERM a busy worker with a long enough drain: it finishes what it took, then exits."""
    busy = replace(spec, name="busy", drain_s=20)
    worker = start(busy)
    run_ids = enqueue_many(spec, "slow", 4)
    wait_for_segments(spec, run_ids, "PENDING", executor=spec.executor_id)
    os.kill(worker.pid or 0, signal.SIGTERM)
    worker.join(30)
    assert worker.exitcode == 0
    assert json.loads(spec.path("handed-busy").read_text()) == []
    wait_for_segments(spec, run_ids, "SUCCESS", executor=spec.executor_id)
    rows = ledger_rows(spec.directory)
    assert sorted(what for _, what in rows) == sorted(f"{r}:export:q3" for r in run_ids)
