"""Runs on DBOS with real worker processes on one PostgreSQL server: sharing, crashes, approvals.

Workers are real DBOS executors (``tests/dbos_worker.py``); effects are counted in an external
SQLite ledger. Each test uses its own queue, store schema and executor ids, so tests never take
each other's runs; the DBOS system database is fresh per test session.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ownloop.dbos import segment_id
from tests.dbos_support import kill_when_halted, new_spec, segments, stop, stored
from tests.dbos_worker import (
    APP_NAME,
    SPEC_VARIABLE,
    Spec,
    approve_twice,
    cli_main,
    enqueue_many,
    flaky_agent,
    make_agent,
    make_runner,
    readers_agent,
    run_in_process,
    start,
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


def test_three_workers_share_thirty_runs_each_once(spec: Spec) -> None:
    """Three worker processes share 30 runs: every run completes and writes exactly once."""
    workers = [start(replace(spec, name=f"w{index}")) for index in range(3)]
    run_ids = enqueue_many(spec, "export", 30)
    snapshots = stored(spec, run_ids, until="finished")
    stop(spec, *workers)
    assert {(s.result.status.value, s.result.output) for s in snapshots} == {
        ("completed", "Exported q3.")
    }
    rows = ledger_rows(spec.directory)
    assert sorted(what for _, what in rows) == sorted(f"{r}:export:q3" for r in run_ids)
    assert len({key for key, _ in rows}) == 30
    assert all(segments(spec, r) == [(f"ownloop:{r}:start", "SUCCESS")] for r in run_ids[:3])


# kill point -> (status after recovery, effects in the ledger)
CRASHES = {
    "read": ("completed", 1),  # inside the search: the read step runs again
    "write:before_commit": ("unresolved", 0),  # the write step started; nothing committed
    "write:after_commit": ("unresolved", 1),  # the write committed; its step never finished
}


@pytest.mark.parametrize(
    ("kill_at", "reconcile", "expected"),
    [
        *((point, False, expected) for point, expected in CRASHES.items()),
        ("write:after_commit", True, ("completed", 1)),  # a lookup confirms the write
    ],
)
def test_killed_worker_is_recovered_without_repeating_a_write(
    spec: Spec, kill_at: str, reconcile: bool, expected: tuple[str, int]
) -> None:
    """A worker SIGKILLed mid-run is recovered under its executor id; no write runs twice."""
    run_id = f"crash-{uuid.uuid4().hex[:8]}"
    doomed = replace(spec, name="doomed", kill_run=run_id, kill_at=kill_at, reconcile=reconcile)
    worker = start(doomed)
    enqueue_many(doomed, "export", 1, run_ids=[run_id])
    deadline = time.monotonic() + 20
    while not spec.path("halted").exists():
        assert worker.is_alive(), f"the worker exited with {worker.exitcode}"
        assert time.monotonic() < deadline, "the worker never halted"
        time.sleep(0.005)
    assert spec.path("halted").read_text() == kill_at
    os.kill(worker.pid or 0, signal.SIGKILL)
    worker.join(5)
    assert worker.exitcode == -signal.SIGKILL
    rescuer = start(replace(spec, name="rescuer", reconcile=reconcile))  # same executor id
    (snapshot,) = stored(spec, [run_id], until="finished")
    stop(spec, rescuer)
    status, effects = expected
    assert snapshot.result.status.value == status
    if status == "unresolved":
        assert snapshot.result.stop_reason.value == "unresolved_effect"
    else:
        assert snapshot.result.output == "Exported q3."
    rows = ledger_rows(spec.directory)
    assert len({key for key, _ in rows}) == len(rows), f"a write happened twice: {rows}"
    assert [what for _, what in rows] == [f"{run_id}:export:q3"] * effects
    assert segments(spec, run_id) == [(f"ownloop:{run_id}:start", "SUCCESS")]


def test_approval_from_another_process_resumes_on_a_later_worker(spec: Spec) -> None:
    """A paused run is approved (twice) with no worker alive; a later worker finishes it once."""
    worker = start(replace(spec, name="first"))
    (run_id,) = enqueue_many(spec, "refund", 1)
    (paused,) = stored(spec, [run_id], until="paused")
    stop(spec, worker)
    (request,) = paused.approval_requests
    run_in_process(approve_twice, spec, run_id, request.id)
    after = segment_id(paused)
    assert after.startswith(f"ownloop:{run_id}:pause:")
    assert segments(spec, run_id) == [(after, "ENQUEUED"), (f"ownloop:{run_id}:start", "SUCCESS")]
    later = start(replace(spec, name="later"))
    (finished,) = stored(spec, [run_id], until="finished")
    time.sleep(0.3)  # a second segment, if one had been enqueued, would be taken by now
    stop(spec, later)
    assert (finished.result.status.value, finished.result.output) == ("completed", "Refunded o-1.")
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:refund:o-1:500"]
    assert segments(spec, run_id) == [(after, "SUCCESS"), (f"ownloop:{run_id}:start", "SUCCESS")]
    assert [a.reason for a in finished.result.approvals] == ["ok"]


def test_runner_refuses_unknown_agents_and_inputs(spec: Spec) -> None:
    """Enqueueing names a known agent and a valid task before anything is enqueued."""
    from ownloop.exceptions import ConfigurationError, InputRejected

    runner = make_runner(spec)

    async def go() -> None:
        with pytest.raises(ConfigurationError, match="no agent named 'nope'"):
            await runner.enqueue("nope", "task")
        with pytest.raises(InputRejected):
            await runner.enqueue("export", " ")

    try:
        asyncio.run(go())
    finally:
        runner.close()
        asyncio.run(runner.store.close())


def test_cli_recovers_a_dead_workers_runs(
    spec: Spec, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ownloop workers recover --executor ID`` runs a dead worker's pending run to completion."""
    run_id = f"cli-{uuid.uuid4().hex[:8]}"
    doomed = replace(spec, name="doomed", kill_run=run_id, kill_at="read")
    worker = start(doomed)
    enqueue_many(doomed, "export", 1, run_ids=[run_id])
    kill_when_halted(spec, worker)
    monkeypatch.setenv(SPEC_VARIABLE, json.dumps(spec.__dict__))
    argv = ["workers", "recover", "--executor", spec.executor_id, "--app"]
    assert cli_main([*argv, "tests.dbos_worker:cli_app", "--dsn", spec.system_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    rescuer = f"{spec.executor_id}:recover"
    assert lines[0] == f"recovering 1 workflow(s) of executor {spec.executor_id} as {rescuer}"
    assert json.loads(lines[1])["result"]["status"] == "completed"
    (snapshot,) = stored(spec, [run_id], until="finished")
    assert snapshot.result.output == "Exported q3."
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:export:q3"]


# --------------------------------------------------------------------------- in this process


@pytest.fixture
def launched(spec: Spec) -> Iterator[Any]:
    """DBOS launched in the test process with the runner registered; destroyed afterwards."""
    from dbos import DBOS

    from ownloop.dbos import worker_config

    DBOS(config=worker_config(APP_NAME, spec.system_url, spec.executor_id, log_level="WARNING"))
    runner = make_runner(spec)
    runner.agents["flaky"] = functools.partial(flaky_agent, spec)
    runner.agents["readers"] = functools.partial(readers_agent, spec)
    runner.register(worker=True)
    DBOS.launch()
    runner.start()
    try:
        yield runner
    finally:
        assert runner.shutdown(drain_s=10, destroy_registry=True) == []  # it lets them finish
        runner.close()
        asyncio.run(runner.store.close())


def test_in_process_pause_and_approval(spec: Spec, launched: Any) -> None:
    """A segment pauses for approval; approving enqueues the next one, which completes the run."""
    from ownloop.contracts import Approval

    (run_id,) = enqueue_many(spec, "refund", 1)
    (paused,) = stored(spec, [run_id], until="paused")
    (request,) = paused.approval_requests

    async def approve() -> str:
        approver = make_runner(spec)  # its own store: the worker's belongs to DBOS's event loop
        try:
            decision = Approval(request_id=request.id, approved=True, approver="ops")
            return str(await approver.approve(run_id, decision))
        finally:
            approver.close()
            await approver.store.close()

    assert asyncio.run(approve()) == segment_id(paused)
    (finished,) = stored(spec, [run_id], until="finished")
    assert finished.result.output == "Refunded o-1."
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:refund:o-1:500"]


def test_in_process_one_segment_per_pause_however_decisions_name_it(
    spec: Spec, launched: Any
) -> None:
    """Decisions by id and by digest continue a pause once; a later identical call's pause too."""
    from ownloop.contracts import Approval, RunSnapshot
    from ownloop.exceptions import UnknownApprovalRequest

    twins = functools.partial(make_agent, spec, "twin_refunds")
    launched.agents["twins"] = twins
    approver = make_runner(spec)  # its own store: the worker's belongs to DBOS's event loop
    approver.agents["twins"] = twins

    async def paused_after(run_id: str, seen: set[str]) -> RunSnapshot:
        deadline = time.monotonic() + 30
        while True:
            found = await approver.store.get(run_id)
            if found and found.snapshot.state == "paused":
                (request,) = found.snapshot.approval_requests
                if request.id not in seen:
                    return found.snapshot
            assert time.monotonic() < deadline, f"run {run_id} never paused anew: {found}"
            await asyncio.sleep(0.05)

    async def go() -> tuple[str, list[str]]:
        run_id = await approver.enqueue("twins", "refund o-1 twice")
        first = await paused_after(run_id, set())
        (request,) = first.approval_requests
        ops = Approval(request_id=request.id, approved=True, approver="ops", reason="ok")
        await approver.store.submit_approval(run_id, ops)  # stored, nothing enqueued yet
        denial = Approval(digest=request.digest, approved=False, approver="mallory")
        with pytest.raises(UnknownApprovalRequest, match="was already decided: approved by ops"):
            await approver.approve(run_id, denial)
        again = Approval(digest=request.digest, approved=True, approver="ops")  # a repeat
        ids = [await approver.approve(run_id, again)]
        second = await paused_after(run_id, {request.id})
        (twin,) = second.approval_requests
        assert (twin.digest, twin.id != request.id) == (request.digest, True)
        ids.append(
            await approver.approve(
                run_id, Approval(digest=twin.digest, approved=True, approver="ops")
            )
        )
        assert ids == [segment_id(first), segment_id(second)]
        return run_id, ids

    try:
        run_id, ids = asyncio.run(go())
    finally:
        approver.close()
        asyncio.run(approver.store.close())
    (finished,) = stored(spec, [run_id], until="finished")
    assert finished.result.output == "Refunded o-1 twice."
    assert [a.approver for a in finished.result.approvals] == ["ops", "ops"]
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:refund:o-1:500"] * 2
    expected = [*sorted((wid, "SUCCESS") for wid in ids), (f"ownloop:{run_id}:start", "SUCCESS")]
    deadline = time.monotonic() + 20
    while segments(spec, run_id) != expected:  # the last segment returns after its checkpoint
        assert time.monotonic() < deadline, segments(spec, run_id)
        time.sleep(0.05)


def test_in_process_retry_approver_and_revision(spec: Spec, launched: Any) -> None:
    """A write retried after a transient failure runs once per attempt, each with its own intent."""
    from dbos import DBOS, SetWorkflowID

    run_id = f"flaky-{uuid.uuid4().hex[:8]}"
    start = {"kind": "start", "task": "refund it", "actor": {"id": "ana"}}

    async def go() -> Any:
        with SetWorkflowID(f"ownloop:{run_id}:start"):
            handle = await DBOS.start_workflow_async(launched.workflow, "flaky", run_id, start)
        return await handle.get_result()

    summary = asyncio.run(go())
    assert (summary["status"], summary["stop_reason"]) == ("completed", "final_output")
    (finished,) = stored(spec, [run_id], until="finished")
    assert [r.status for r in finished.result.receipts] == ["ok"]
    assert finished.result.receipts[0].revision == "r1"
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:flaky:2"]
    # a late segment of a finished run, or of a run never stored, finds nothing to do
    other = make_runner(spec)
    other.agents["flaky"] = launched.agents["flaky"]

    async def late() -> list[Any]:
        try:
            return [
                await other.segment("flaky", run, {"kind": "resume"})
                for run in (run_id, "no-such-run")
            ]
        finally:
            await other.store.close()

    again, missing = asyncio.run(late())
    assert again["status"] == "completed"
    assert missing == {"run_id": "no-such-run", "status": None}


def test_in_process_reads_of_one_turn_are_one_step_and_the_write_its_own(
    spec: Spec, launched: Any
) -> None:
    """Two reads proposed together run as one ``ownloop.tools`` step; the write after them alone."""
    from dbos import DBOS, SetWorkflowID

    run_id = f"readers-{uuid.uuid4().hex[:8]}"
    start = {"kind": "start", "task": "export it", "actor": {"id": "ana"}}
    workflow_id = f"ownloop:{run_id}:start"

    async def go() -> Any:
        with SetWorkflowID(workflow_id):
            handle = await DBOS.start_workflow_async(launched.workflow, "readers", run_id, start)
        return await handle.get_result()

    summary = asyncio.run(go())
    assert (summary["status"], summary["stop_reason"]) == ("completed", "final_output")
    (finished,) = stored(spec, [run_id], until="finished")
    assert [(r.call_id, r.status) for r in finished.result.receipts] == [
        ("c1", "ok"),
        ("c2", "ok"),
        ("c3", "ok"),
    ]
    assert [m.call_id for m in finished.result.messages if m.role == "tool"] == ["c1", "c2", "c3"]
    steps = [step["function_name"] for step in DBOS.list_workflow_steps(workflow_id)]
    assert steps.count("ownloop.tools") == 1
    assert steps.count("ownloop.write") == 1
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{run_id}:export:q3"]


def test_persist_step_adopts_its_own_earlier_save(spec: Spec) -> None:
    """A checkpoint step re-executed after its save committed adopts the stored version."""
    from ownloop.dbos import DbosDriver, StepClock
    from ownloop.exceptions import StaleCheckpoint
    from ownloop.loop import Persist
    from tests.durable_support import snapshot

    runner = make_runner(spec)
    first = snapshot("persisted")
    driver = DbosDriver(make_agent(spec, "export").driver, runner.store, StepClock(), "persisted")

    async def go() -> None:
        try:
            assert await driver._persist(Persist(first)) == 1
            assert await driver._persist(Persist(first)) == 1  # the re-execution
            with pytest.raises(StaleCheckpoint):
                await driver._persist(Persist(snapshot("persisted", at=5)))
        finally:
            await runner.store.close()

    asyncio.run(go())


def test_cli_refuses_a_bad_application_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    """``workers recover`` needs a dead executor's own id and a factory of (runner, DBOS config)."""
    from ownloop.exceptions import ConfigurationError

    where = {"directory": ".", "dsn": "dbname=x", "schema": "x", "system_url": "postgresql://x"}
    monkeypatch.setenv(SPEC_VARIABLE, json.dumps(where))
    for app, message in (
        ("nocolon", "must be MODULE:FACTORY"),
        ("tests.dbos_worker:missing", "cannot load"),
        ("os:getcwd", "must return"),
        ("tests.dbos_worker:cli_app_other_version", "application_version 'other' is not the"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            cli_main(["workers", "recover", "--executor", "x", "--app", app])
    app_ok = "tests.dbos_worker:cli_app"
    with pytest.raises(ConfigurationError, match="executor 'local' is DBOS's default"):
        cli_main(["workers", "recover", "--executor", "local", "--app", app_ok])


def test_runner_needs_agents_a_system_database_and_a_known_run(spec: Spec, launched: Any) -> None:
    """The runner refuses no agents, a system database it lacks, unknown runs, and non-workers."""
    from ownloop.contracts import Approval
    from ownloop.dbos import DbosRunner
    from ownloop.exceptions import ConfigurationError

    runner = make_runner(spec)  # launched: the DBOS system database exists
    agents = "['export', 'refund', 'ship', 'ship_twice', 'slow']"
    assert repr(runner) == f"DbosRunner(queue={spec.queue!r}, agents={agents})"
    with pytest.raises(ConfigurationError, match="at least one agent"):
        DbosRunner(runner.store, {})
    bare = DbosRunner(runner.store, {"export": runner.agents["export"]})
    decision = Approval(request_id="r-1", approved=True, approver="ops")
    with pytest.raises(ConfigurationError, match="system_database_url"):
        bare.hand_back(["gone"])
    assert runner.hand_back(["nobody-ran-here"]) == []
    assert launched.register(worker=True) is launched.workflow  # registering twice is harmless
    asyncio.run(launched.start_async())  # so is registering the queue again, from async code
    with pytest.raises(ConfigurationError, match=r"register\(worker=True\)"):
        runner.start()  # this runner never registered as a worker

    async def go() -> None:
        with pytest.raises(ConfigurationError, match=r"register\(worker=True\)"):
            await runner.start_async()
        with pytest.raises(ConfigurationError, match="system_database_url"):
            await bare.approve("some-run", decision)
        with pytest.raises(ConfigurationError, match="no segment of run 'nobody'"):
            await runner.approve("nobody", decision)

    try:
        asyncio.run(go())
    finally:
        runner.close()
        asyncio.run(runner.store.close())


def test_shutdown_under_the_shared_default_executor_id_hands_nothing_back(
    spec: Spec, caplog: pytest.LogCaptureFixture
) -> None:
    """Under DBOS's default id ``local`` another process may run the segments: none move."""
    from dbos import DBOS

    from ownloop.dbos import worker_config

    DBOS(config=worker_config(APP_NAME, spec.system_url, "local", log_level="WARNING"))
    runner = make_runner(spec)
    with caplog.at_level(logging.WARNING, logger="ownloop.dbos"):
        assert runner.shutdown(drain_s=0, destroy_registry=True) == []
    assert "executor id 'local' is shared" in caplog.text
    asyncio.run(runner.store.close())
