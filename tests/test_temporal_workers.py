"""Runs on Temporal with real worker processes: sharing, SIGKILL mid-write, approvals, versions.

Workers are real processes (``tests/temporal_worker.py``) on the session's dev server; effects
are counted in an external SQLite ledger. Each test has its own task queue, store and ledger. A
killed worker's run moves when its workflow task times out: 3 s in the tests that kill one (10 s,
the default, elsewhere, so a worker slowed by a busy machine never loses a task it is running).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import Approval
from ownloop.store import SqliteRunStore
from tests.durable_worker import ledger_rows
from tests.temporal_worker import (
    Spec,
    approve_twice,
    connect,
    enqueue,
    results,
    run_in_process,
    start,
    stop,
)


@pytest.fixture
def spec(tmp_path: Path, temporal_address: str) -> Iterator[Spec]:
    """A spec with its own task queue, store and ledger; stops its workers at the end."""
    made = Spec(str(tmp_path), temporal_address, f"q-{uuid.uuid4().hex[:8]}")
    yield made
    made.path("stop").write_text("stop")


def waiting(spec: Spec, run_id: str) -> None:
    """Wait until the run's workflow continued as new and waits for a signal (no step ran)."""
    deadline = time.monotonic() + 30
    while True:
        events = history(spec, run_id).events
        started = events[0].workflow_execution_started_event_attributes
        if started.continued_execution_run_id and any(
            event.HasField("workflow_task_completed_event_attributes") for event in events
        ):
            return
        assert time.monotonic() < deadline, "the run never waited for a signal"
        time.sleep(0.05)


def paused_request(spec: Spec, run_id: str) -> str:
    """Wait until the run is stored paused; return the id of the request it waits for."""

    async def poll() -> str:
        store = SqliteRunStore(spec.path("runs.db"))
        try:
            async with asyncio.timeout(30):
                while True:
                    stored = await store.get(run_id)
                    if stored is not None and stored.snapshot.state == "paused":
                        return stored.snapshot.approval_requests[0].id
                    await asyncio.sleep(0.02)
        finally:
            await store.close()

    return asyncio.run(poll())


def kill_when_halted(spec: Spec, worker: Any) -> str:
    """Wait until the worker halts at its kill point, SIGKILL it; return the point."""
    deadline = time.monotonic() + 30
    while not spec.path("halted").exists():
        assert worker.is_alive(), f"the worker exited with {worker.exitcode}"
        assert time.monotonic() < deadline, "the worker never halted"
        time.sleep(0.005)
    os.kill(worker.pid or 0, signal.SIGKILL)
    worker.join(5)
    assert worker.exitcode == -signal.SIGKILL
    return spec.path("halted").read_text()


def history(spec: Spec, run_id: str) -> Any:
    """The history of the run's latest workflow execution."""

    async def fetch() -> Any:
        client = await connect(spec)
        return await client.get_workflow_handle(f"ownloop:{run_id}").fetch_history()

    return asyncio.run(fetch())


def task_failures(spec: Spec, run_id: str) -> list[str]:
    """The messages of the run's failed workflow tasks."""
    return [
        event.workflow_task_failed_event_attributes.failure.message
        for event in history(spec, run_id).events
        if event.HasField("workflow_task_failed_event_attributes")
    ]


def patches(spec: Spec, run_id: str) -> list[str]:
    """The patch markers (workflow-code versions) the run's latest execution recorded."""
    return [
        event.marker_recorded_event_attributes.details["patch-data"].payloads[0].data.decode()
        for event in history(spec, run_id).events
        if event.HasField("marker_recorded_event_attributes")
        and event.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def test_two_workers_share_runs_and_write_each_once(spec: Spec) -> None:
    """Two worker processes share runs: every run completes and writes exactly once."""
    workers = [start(replace(spec, name=f"w{index}")) for index in (1, 2)]
    run_ids: list[str] = []
    pids: set[int] = set()
    for _ in range(5):  # which worker takes a run is Temporal's choice: start more until both did
        batch = enqueue(spec, "export", 4)
        summaries = results(spec, batch)
        assert {(s["status"], s["stop_reason"]) for s in summaries} == {
            ("completed", "final_output")
        }
        run_ids += batch
        with contextlib.closing(sqlite3.connect(spec.path("ledger.db"))) as ledger:
            pids = {pid for (pid,) in ledger.execute("SELECT pid FROM effects")}
        if len(pids) == 2:
            break
    stop(spec, *workers)
    assert len(pids) == 2, "both workers took runs"
    rows = ledger_rows(spec.directory)
    assert sorted(what for _, what in rows) == sorted(f"{r}:export:q3" for r in run_ids)
    assert len({key for key, _ in rows}) == len(run_ids)


FAST: dict[str, Any] = {"task_timeout_s": 3.0}  # a killed worker's run moves after 3 s

# kill point, reconcile -> (status after the take-over, effects in the ledger)
KILLS = [
    ("write:after_commit", False, ("unresolved", 1)),  # committed, outcome never recorded
    ("write:after_commit", True, ("completed", 1)),  # a lookup confirms the write
]


@pytest.mark.parametrize(("kill_at", "reconcile", "expected"), KILLS)
def test_worker_killed_mid_run_another_finishes_every_run_writing_each_once(
    spec: Spec, kill_at: str, reconcile: bool, expected: tuple[str, int]
) -> None:
    """A worker SIGKILLed mid-run: another finishes its runs; no write runs twice."""
    doomed_run = f"crash-{uuid.uuid4().hex[:8]}"
    doomed = replace(
        spec, name="doomed", kill_run=doomed_run, kill_at=kill_at, reconcile=reconcile, **FAST
    )
    worker = start(doomed)
    others = [f"other-{uuid.uuid4().hex[:8]}"]
    run_ids = enqueue(doomed, "export", 2, run_ids=[doomed_run, *others])
    assert kill_when_halted(spec, worker) == kill_at
    survivor = start(replace(spec, name="survivor", reconcile=reconcile, **FAST))
    summaries = dict(zip(run_ids, results(spec, run_ids), strict=True))
    stop(spec, survivor)
    status, effects = expected
    assert summaries[doomed_run]["status"] == status
    if status == "unresolved":
        assert summaries[doomed_run]["stop_reason"] == "unresolved_effect"
    rows = ledger_rows(spec.directory)
    assert len({key for key, _ in rows}) == len(rows), f"a write happened twice: {rows}"
    done = [what for _, what in rows]
    assert done.count(f"{doomed_run}:export:q3") == effects
    for other in others:  # it ran beside the doomed run: its write may have been cut too
        assert summaries[other]["status"] in ("completed", "unresolved")
        wrote = done.count(f"{other}:export:q3")
        assert wrote == 1 if summaries[other]["status"] == "completed" else wrote <= 1


def test_approval_from_another_process_resumes_the_run_once(spec: Spec) -> None:
    """A process with no worker approves twice: the paused run resumes once, refunds once."""
    worker = start(spec)
    (run_id,) = enqueue(spec, "refund", 1)
    request_id = paused_request(spec, run_id)
    run_in_process(approve_twice, spec, run_id, request_id)
    (summary,) = results(spec, [run_id])
    stop(spec, worker)
    assert (summary["status"], summary["stop_reason"]) == ("completed", "final_output")
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:refund:o-1:500"]


def test_run_paused_under_one_version_resumes_under_the_next(spec: Spec) -> None:
    """A run paused on version v1 workers resumes on a v2 worker and writes once."""
    old = start(replace(spec, name="old", version="v1"))
    (run_id,) = enqueue(spec, "refund", 1)
    request_id = paused_request(spec, run_id)
    waiting(spec, run_id)  # the v1 segment ended: the run waits between segments
    stop(spec, old)
    new = start(replace(spec, name="new", version="v2"))

    async def approve() -> None:
        from tests.temporal_worker import make_runner

        runner = make_runner(spec, await connect(spec))
        decision = Approval(request_id=request_id, approved=True, approver="ops")
        await runner.approve(run_id, decision)
        await runner.store.close()

    asyncio.run(approve())
    (summary,) = results(spec, [run_id])
    stop(spec, new)
    assert summary["status"] == "completed"
    assert patches(spec, run_id) == ['{"id":"v2","deprecated":false}']
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:refund:o-1:500"]


def test_worker_of_another_version_refuses_a_segment_it_did_not_start(spec: Spec) -> None:
    """A v2 worker refuses, by name, to replay a v1 segment; a v1 worker finishes it, no rewrite."""
    run_id = f"crash-{uuid.uuid4().hex[:8]}"
    doomed = replace(spec, name="doomed", kill_run=run_id, kill_at="write:after_commit", **FAST)
    worker = start(doomed)
    enqueue(doomed, "export", 1, run_ids=[run_id])
    kill_when_halted(spec, worker)
    newer = start(replace(spec, name="newer", version="v2", **FAST))
    deadline = time.monotonic() + 30
    while not any("another version" in message for message in task_failures(spec, run_id)):
        assert time.monotonic() < deadline, f"never refused: {task_failures(spec, run_id)}"
        time.sleep(0.1)
    stop(spec, newer)
    older = start(replace(spec, name="older", version="v1", **FAST))
    (summary,) = results(spec, [run_id])
    stop(spec, older)
    assert (summary["status"], summary["stop_reason"]) == ("unresolved", "unresolved_effect")
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:export:q3"]
