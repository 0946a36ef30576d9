"""Runs on Temporal with a worker in the test process: steps, ids, approvals by signal, deadlines.

The server is the session's ``temporal server start-dev`` (``tests/temporal_support.py``); each
test has its own task queue, SQLite store and ledger. The processes tests (sharing, SIGKILL,
versions) are in ``tests/test_temporal_workers.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import Approval
from ownloop.exceptions import ConfigurationError, UnknownApprovalRequest
from ownloop.store import SqliteRunStore
from tests.durable_worker import ledger_rows
from tests.temporal_worker import Spec, connect, make_agent, make_runner


@pytest.fixture
def spec(tmp_path: Path, temporal_address: str) -> Iterator[Spec]:
    """A spec with its own task queue, store and ledger; forgets its runner at the end."""
    from ownloop.temporal import _driver

    yield Spec(str(tmp_path), temporal_address, f"q-{uuid.uuid4().hex[:8]}")
    _driver.RUNNERS.clear()


@asynccontextmanager
async def serving(spec: Spec) -> AsyncIterator[Any]:
    """A runner with a running worker in this process."""
    runner = make_runner(spec, await connect(spec))
    try:
        async with runner.worker():
            yield runner
    finally:
        await runner.store.close()


async def until(check: Callable[[], Awaitable[Any]], timeout_s: float = 30.0) -> Any:
    """Poll ``check`` until it returns something truthy; return it."""
    async with asyncio.timeout(timeout_s):
        while not (found := await check()):
            await asyncio.sleep(0.02)
    return found


async def paused(runner: Any, run_id: str) -> Any:
    """Wait until the run is stored paused; return its snapshot."""

    async def check() -> Any:
        stored = await runner.store.get(run_id)
        return stored.snapshot if stored and stored.snapshot.state == "paused" else None

    return await until(check)


def activity_ids(history: Any) -> list[str]:
    """Every activity id in a workflow history: local activities (markers) and activities."""
    found: list[str] = []
    for event in history.events:
        if event.HasField("marker_recorded_event_attributes"):
            details = event.marker_recorded_event_attributes.details
            if "data" in details:
                data = json.loads(details["data"].payloads[0].data)
                found.append(data["activity_id"])
        if event.HasField("activity_task_scheduled_event_attributes"):
            found.append(event.activity_task_scheduled_event_attributes.activity_id)
    return found


def test_run_completes_with_its_write_once_under_ids_naming_run_and_call(spec: Spec) -> None:
    """A run completes as one workflow ``ownloop:<run>``; its activities name the run and call."""

    async def go() -> tuple[dict[str, Any], list[str]]:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("export", "do the task", run_id="r-ids")
            again = await runner.enqueue("export", "do the task", run_id="r-ids")
            assert again == run_id
            summary = await runner.result(run_id)
            assert await runner.enqueue("export", "do the task", run_id="r-ids") == run_id
            history = await runner.client.get_workflow_handle("ownloop:r-ids").fetch_history()
            return summary, activity_ids(history)

    summary, ids = asyncio.run(go())
    assert summary == {
        "run_id": "r-ids",
        "status": "completed",
        "stop_reason": "final_output",
        "requests": [],
    }
    assert [what for _, what in ledger_rows(spec.directory)] == ["r-ids:export:q3"]
    assert "ownloop:r-ids:1:begin" in ids
    assert any(i.startswith("ownloop:r-ids:") and i.endswith(":model:step1") for i in ids)
    assert any(i.endswith(":tool:search_orders:c1:1") for i in ids)
    assert any(i.endswith(":write:export:c2:1") for i in ids)
    assert any(i.endswith(":flush") for i in ids)


def test_signal_resumes_a_paused_run_once_and_a_duplicate_writes_nothing(spec: Spec) -> None:
    """An approval signal resumes the paused run once; repeating it writes nothing twice."""

    async def go() -> tuple[dict[str, Any], Any]:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("refund", "refund o-1")
            snapshot = await paused(runner, run_id)
            (request,) = snapshot.approval_requests
            decision = Approval(request_id=request.id, approved=True, approver="ops")
            assert await runner.approve(run_id, decision) == f"ownloop:{run_id}"
            handle = runner.client.get_workflow_handle(f"ownloop:{run_id}")
            await handle.signal("approve", decision.model_dump(mode="json"))  # a duplicate
            summary = await runner.result(run_id)
            with pytest.raises(UnknownApprovalRequest):  # the finished run waits for nothing
                await runner.approve(run_id, decision)
            return summary, await runner.store.get(run_id)

    summary, stored = asyncio.run(go())
    assert summary["status"] == "completed"
    assert [what for _, what in ledger_rows(spec.directory)] == [
        f"{summary['run_id']}:refund:o-1:500"
    ]
    assert [a.approver for a in stored.snapshot.approvals] == ["ops"]


def test_signalled_decision_is_validated_by_the_store(spec: Spec) -> None:
    """A decision signalled directly is stored only if the store accepts it, then resumes."""

    async def go() -> tuple[Any, Any, dict[str, Any]]:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("refund", "refund o-1")
            snapshot = await paused(runner, run_id)
            (request,) = snapshot.approval_requests
            handle = runner.client.get_workflow_handle(f"ownloop:{run_id}")
            stranger = Approval(request_id="apr-unknown", approved=True, approver="ops")
            await handle.signal("approve", stranger.model_dump(mode="json"))
            described = await handle.describe()
            assert await runner.store.submitted_approvals(run_id) == []
            # the store has never seen this one: the workflow submits it, then resumes
            decision = Approval(request_id=request.id, approved=False, approver="lead")
            await handle.signal("approve", decision.model_dump(mode="json"))
            summary = await runner.result(run_id)
            return described.status, await runner.store.submitted_approvals(run_id), summary

    status, submitted, summary = asyncio.run(go())
    assert status is not None
    assert status.name == "RUNNING"
    assert [(a.approver, a.approved) for a in submitted] == [("lead", False)]
    assert (summary["status"], summary["stop_reason"]) == ("failed", "approval_denied")
    assert ledger_rows(spec.directory) == []  # denied: nothing refunded


def test_deadline_ends_a_run_whose_model_never_answers(spec: Spec) -> None:
    """The whole-run deadline holds: a model call past it ends the run with stop reason deadline."""

    async def go() -> dict[str, Any]:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("sleepy", "do the task")
            async with asyncio.timeout(20):
                summary: dict[str, Any] = await runner.result(run_id)
                return summary

    summary = asyncio.run(go())
    assert (summary["status"], summary["stop_reason"]) == ("stopped", "deadline")
    assert ledger_rows(spec.directory) == []


def test_runner_refuses_what_it_cannot_run(spec: Spec) -> None:
    """No agents, or an unknown agent name, is a configuration error, said before any run."""
    from ownloop.temporal import TemporalRunner

    async def go() -> None:
        client = await connect(spec)
        with pytest.raises(ConfigurationError, match="at least one agent"):
            TemporalRunner(make_runner(spec, client).store, {}, client)
        runner = make_runner(spec, client)
        agents = sorted(runner.agents)
        assert repr(runner) == f"TemporalRunner(queue={spec.queue!r}, agents={agents})"
        with pytest.raises(ConfigurationError, match="no agent named 'nope'"):
            await runner.enqueue("nope", "do the task")

    asyncio.run(go())


def test_a_step_no_worker_waits_for_fails_clearly() -> None:
    """The step activity refuses a key no workflow of this process registered; so does a queue."""
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    from ownloop.temporal import ownloop_step
    from ownloop.temporal._driver import runner_for

    with pytest.raises(ApplicationError, match="no pending ownloop step"):
        asyncio.run(ActivityEnvironment().run(ownloop_step, "nobody/none/1"))
    with pytest.raises(ConfigurationError, match="no ownloop runner serves task queue 'nope'"):
        runner_for("nope")


def test_steps_past_their_timeout_fail_and_a_cut_write_is_unknown(spec: Spec) -> None:
    """A read past its activity timeout fails (then is retried); a cut write is unknown, once."""

    async def go() -> dict[str, Any]:
        async with serving(replace(spec, step_timeout_s=0.5)) as runner:
            run_id = await runner.enqueue("hanging", "do the task")
            summary: dict[str, Any] = await runner.result(run_id)
            history = await runner.client.get_workflow_handle(f"ownloop:{run_id}").fetch_history()
            ids = activity_ids(history)
            assert any(i.endswith(":tool:search_orders:c1:2") for i in ids)
            assert len([i for i in ids if ":write:export:" in i and "flush" not in i]) == 1
            (entry,) = await runner.store.journal(run_id)
            assert entry.receipt is not None
            assert entry.receipt.status == "unknown"
            return summary

    summary = asyncio.run(go())
    assert (summary["status"], summary["stop_reason"]) == ("unresolved", "unresolved_effect")
    assert ledger_rows(spec.directory) == []


def test_transient_write_failure_is_retried_by_ownloop_after_a_durable_timer(spec: Spec) -> None:
    """Ownloop's attempt budget retries a transient write as a new activity: it lands once."""

    async def go() -> tuple[dict[str, Any], list[str]]:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("flaky", "do it", run_id=f"f-{uuid.uuid4().hex[:6]}")
            summary: dict[str, Any] = await runner.result(run_id)
            history = await runner.client.get_workflow_handle(f"ownloop:{run_id}").fetch_history()
            timers = [e for e in history.events if e.HasField("timer_started_event_attributes")]
            assert len(timers) == 1
            return summary, activity_ids(history)

    summary, ids = asyncio.run(go())
    assert summary["status"] == "completed"
    assert any(i.endswith(":write:flaky:c1:1") for i in ids)
    assert any(i.endswith(":write:flaky:c1:2") for i in ids)
    assert [what for _, what in ledger_rows(spec.directory)] == [f"{summary['run_id']}:flaky:2"]


def test_a_signalled_decision_contradicting_a_stored_one_is_refused(spec: Spec) -> None:
    """The first stored decision stands: a contradicting signal is refused by the store."""

    async def go() -> tuple[dict[str, Any], list[Approval]]:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("refund", "refund o-1")
            (request,) = (await paused(runner, run_id)).approval_requests
            first = Approval(request_id=request.id, approved=True, approver="ops")
            await runner.store.submit_approval(run_id, first)  # stored, never signalled
            other = Approval(request_id=request.id, approved=False, approver="mallory")
            handle = runner.client.get_workflow_handle(f"ownloop:{run_id}")
            await handle.signal("approve", other.model_dump(mode="json"))
            summary: dict[str, Any] = await runner.result(run_id)
            return summary, await runner.store.submitted_approvals(run_id)

    summary, submitted = asyncio.run(go())
    assert summary["status"] == "completed"
    assert [a.approver for a in submitted] == ["ops"]
    assert len(ledger_rows(spec.directory)) == 1


def test_trace_is_the_one_an_in_process_run_records(spec: Spec) -> None:
    """A run on Temporal records the same trace events, in order, as the same run in process."""

    async def go() -> tuple[list[str], list[str]]:
        store = SqliteRunStore(Path(spec.directory) / "plain.db")
        try:
            plain = await make_agent(spec, "export", store=store).run("do the task")
        finally:
            await store.close()
        async with serving(spec) as runner:
            run_id = await runner.enqueue("export", "do the task")
            await runner.result(run_id)
            stored = await runner.store.get(run_id)
        assert stored is not None
        return [e.kind for e in plain.trace], [e.kind for e in stored.snapshot.trace]

    plain, temporal = asyncio.run(go())
    assert temporal == plain
    assert "tool_finished" in temporal


def test_a_run_failing_in_workflow_code_fails_its_workflow_once(spec: Spec) -> None:
    """A failing revision source fails the run's workflow with its message (no retry loop)."""
    from temporalio.client import WorkflowFailureError

    async def go() -> BaseException:
        async with serving(spec) as runner:
            run_id = await runner.enqueue("broken", "do the task")
            with pytest.raises(WorkflowFailureError) as failed:
                await runner.result(run_id)
            assert failed.value.cause is not None
            return failed.value.cause

    cause = asyncio.run(go())
    assert "the revision source is down" in str(cause)
    assert ledger_rows(spec.directory) == []


class _BrokenDisk(SqliteRunStore):
    """A SQLite store whose checkpoints fail, as a full or broken disk would make them."""

    async def save(self, *args: Any, **kwargs: Any) -> int:
        raise OSError("disk I/O error")


def test_a_checkpoint_that_keeps_failing_fails_the_run_clearly(spec: Spec) -> None:
    """Temporal retries a failing checkpoint a few times, then the workflow fails, naming it."""
    from temporalio.client import WorkflowFailureError

    from ownloop.temporal import TemporalRunner

    async def go() -> BaseException:
        client = await connect(spec)
        base = make_runner(spec, client)
        store = _BrokenDisk(Path(spec.directory) / "broken.db")
        runner = TemporalRunner(store, base.agents, client, queue=spec.queue)
        try:
            async with runner.worker():
                run_id = await runner.enqueue("export", "do the task")
                with pytest.raises(WorkflowFailureError) as failed:
                    await runner.result(run_id)
        finally:
            await store.close()
            await base.store.close()
        assert failed.value.cause is not None
        return failed.value.cause

    cause = asyncio.run(go())
    assert "ownloop step persist of run" in str(cause)
    assert "disk I/O error" in str(cause)
    assert ledger_rows(spec.directory) == []
