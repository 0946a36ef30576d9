"""Each defect of issue 13, reproduced through the public API: every test failed before the fix.

1 double resume in one process, 2 a stalled worker writing after a take-over, 3 no lease
renewal, 4 no prompt take-over of a dead worker's run, 5 reused call ids, 6 re-approval of a
journaled write after a crash, 7 a misaddressed approval blocking a run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ownloop import Agent, Approval, Receipt, RunResult
from ownloop.contracts import (
    ApprovalRequest,
    Lease,
    ModelResponse,
    RunResumed,
    ToolCall,
)
from ownloop.exceptions import RunLeased, UnknownApprovalRequest
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from tests.durable_support import fresh_schema, postgres_dsn
from tests.durable_worker import SCRIPTS, Job, build_registry, ledger_rows


def _store(backend: str, tmp_path: Path) -> RunStore:
    if backend == "memory":
        return MemoryRunStore()
    if backend == "sqlite":
        return SqliteRunStore(tmp_path / "runs.db")
    return PostgresRunStore(postgres_dsn(), schema=fresh_schema())


async def _revision() -> str:
    await asyncio.sleep(0)  # yields, as a real revision source reading a database does
    return "rev-1"


def _agent(tmp_path: Path, store: RunStore, played: int = 0, **options: Any) -> Agent:
    job = Job(run_id="refund", directory=str(tmp_path), database="-", scenario="refund")
    script = options.pop("script", SCRIPTS["refund"][played:])
    return Agent(
        ScriptedModel(script),
        build_registry(job),
        policy=allow_writes("export", "refund"),
        store=store,
        **options,
    )


def _approve(result: RunResult) -> Approval:
    return Approval(request_id=result.approval_requests[0].id, approved=True, approver="alice")


async def _close(store: RunStore) -> None:
    if not isinstance(store, MemoryRunStore):
        await store.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_1_double_resume_in_one_process_executes_once(tmp_path: Path, backend: str) -> None:
    """Two resumes of one paused run at once, same default worker id: one runs, one RunLeased."""
    store = _store(backend, tmp_path)

    async def scenario() -> list[Any]:
        paused = await _agent(tmp_path, store, revision=_revision).run("refund", run_id="r1")
        approval = _approve(paused)
        clicks = [_agent(tmp_path, store, 1, revision=_revision) for _ in range(2)]
        try:
            return await asyncio.gather(
                *(agent.resume("r1", approvals=[approval]) for agent in clicks),
                return_exceptions=True,
            )
        finally:
            await _close(store)

    outcomes = asyncio.run(scenario())
    assert sorted(type(item).__name__ for item in outcomes) == ["RunLeased", "RunResult"]
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]


def test_2_a_stalled_worker_cannot_write_after_a_take_over(tmp_path: Path) -> None:
    """A worker stalled past its lease while another finished the run records no intent."""
    store = SqliteRunStore(tmp_path / "runs.db")
    paused = asyncio.run(_agent(tmp_path, store).run("refund", run_id="r2"))
    other_done = threading.Event()

    def other_worker() -> None:
        other = _agent(tmp_path, SqliteRunStore(tmp_path / "runs.db"), 1, approver=_yes)
        deadline = time.monotonic() + 10
        while True:
            try:
                other.resume_sync("r2")
                break
            except RunLeased:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        other_done.set()

    async def stalled_approver(request: ApprovalRequest) -> Approval:
        threading.Thread(target=other_worker).start()
        # A stall that blocks the worker's event loop (a sync call inside a coroutine): not even
        # the heartbeat runs, so the lease expires and the other worker takes the run over.
        assert other_done.wait(20)
        return _yes(request)

    stalled = _agent(tmp_path, store, 1, approver=stalled_approver, lease_ttl_s=0.3)
    assert paused.approval_requests
    with pytest.raises(RunLeased, match="was lost"):
        stalled.resume_sync("r2")
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]
    asyncio.run(store.close())


def _yes(request: ApprovalRequest) -> Approval:
    return Approval(request_id=request.id, approved=True, approver="bob")


def test_3_a_healthy_run_longer_than_its_ttl_is_not_taken_over(tmp_path: Path) -> None:
    """The heartbeat renews the lease: a resume during a long write gets RunLeased."""
    slow_started = asyncio.Event()
    registry_job = Job(run_id="slow", directory=str(tmp_path), database="-")
    registry = build_registry(registry_job)

    @registry.tool(effect="write")
    async def slow_export(name: str) -> dict[str, str]:
        """Export slowly.

        Args:
            name: The report.
        """
        slow_started.set()
        await asyncio.sleep(1.0)  # three TTLs
        return {"done": name}

    def agent(store: RunStore, played: int) -> Agent:
        script = [tool_call("slow_export", "c1", name="q3"), final("done")][played:]
        return Agent(
            ScriptedModel(script),
            registry,
            policy=allow_writes("slow_export"),
            store=store,
            lease_ttl_s=0.3,
        )

    async def scenario() -> tuple[RunResult, BaseException | RunResult]:
        store = SqliteRunStore(tmp_path / "runs.db")
        running = asyncio.create_task(agent(store, 0).run("export", run_id="slow"))
        await slow_started.wait()
        await asyncio.sleep(0.6)  # twice the TTL: without renewal the lease has expired

        def intruder() -> RunResult:
            return agent(SqliteRunStore(tmp_path / "runs.db"), 1).resume_sync("slow")

        try:
            intrusion: BaseException | RunResult = await asyncio.to_thread(intruder)
        except RunLeased as error:
            intrusion = error
        result = await running
        await store.close()
        return result, intrusion

    result, intrusion = asyncio.run(scenario())
    assert isinstance(intrusion, RunLeased), intrusion
    assert result.status.value == "completed"


def test_4_take_over_resumes_a_run_held_by_a_stuck_worker(tmp_path: Path) -> None:
    """resume(take_over=True) takes an unexpired lease, says so in the trace; the old is fenced."""
    store = SqliteRunStore(tmp_path / "runs.db")
    paused = asyncio.run(_agent(tmp_path, store).run("refund", run_id="r4"))

    async def hold() -> Lease:
        return await store.acquire_lease("r4", "stuck-worker", 3600)

    stuck = asyncio.run(hold())
    resumer = _agent(tmp_path, store, 1)
    with pytest.raises(RunLeased, match="stuck-worker"):
        resumer.resume_sync("r4", approvals=[_approve(paused)])
    result = _agent(tmp_path, store, 1).resume_sync(
        "r4", approvals=[_approve(paused)], take_over=True
    )
    assert result.status.value == "completed"
    resumed = [e for e in result.trace if isinstance(e, RunResumed)]
    assert resumed[-1].taken_over_from == "stuck-worker"
    with pytest.raises(RunLeased):
        asyncio.run(
            store.record_receipt("r4", "call#1", Receipt(call_id="c1", tool="refund"), lease=stuck)
        )
    asyncio.run(store.close())


def test_5_reused_call_ids_are_distinct_calls(tmp_path: Path) -> None:
    """A model reusing one call id across turns and within a response gets every write done."""
    store = SqliteRunStore(tmp_path / "runs.db")
    twice = ModelResponse(
        tool_calls=(
            ToolCall(id="c1", name="export", arguments={"name": "c"}),
            ToolCall(id="c1", name="export", arguments={"name": "d"}),
        )
    )
    script = [
        tool_call("export", "c1", name="a"),
        tool_call("export", "c1", name="b"),
        twice,
        final("done"),
    ]
    result = _agent(tmp_path, store, script=script).run_sync("export", run_id="r5")
    assert result.status.value == "completed"
    assert [what for _, what in ledger_rows(tmp_path)] == [f"export:{n}" for n in "abcd"]
    journal = asyncio.run(store.journal("r5"))
    assert [e.intent.call_id for e in journal] == ["call#1", "call#2", "call#3", "call#4"]
    assert {e.intent.provider_call_id for e in journal} == {"c1"}
    assert [e.receipt.data for e in journal if e.receipt] == [
        {"done": f"export:{n}"} for n in "abcd"
    ]
    asyncio.run(store.close())


class _Killed(BaseException):
    """The process dies right after the receipt was journaled."""


class _DiesAfterReceipt(SqliteRunStore):
    async def record_receipt(self, *args: Any, **kwargs: Any) -> None:
        await super().record_receipt(*args, **kwargs)
        raise _Killed


def test_6_a_journaled_write_is_not_approved_again_after_a_crash(tmp_path: Path) -> None:
    """After a crash right after the receipt, resume replays it: no approver, no denial."""
    dying = _DiesAfterReceipt(tmp_path / "runs.db")
    with pytest.raises(_Killed):
        _agent(tmp_path, dying, approver=_yes).run_sync("refund", run_id="r6")
    asked: list[str] = []

    def deny(request: ApprovalRequest) -> Approval:
        asked.append(request.id)
        return Approval(request_id=request.id, approved=False, approver="mallory")

    store = SqliteRunStore(tmp_path / "runs.db")
    result = _agent(tmp_path, store, 1, approver=deny).resume_sync("r6")
    assert (result.status.value, asked) == ("completed", [])
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]
    asyncio.run(store.close())
    asyncio.run(dying.close())


def test_7_a_misaddressed_approval_is_refused_and_never_blocks(tmp_path: Path) -> None:
    """A typo'd request id is refused at submission; the right one then resumes the run."""
    store = SqliteRunStore(tmp_path / "runs.db")
    paused = _agent(tmp_path, store).run_sync("refund", run_id="r7")
    typo = Approval(request_id="req-typo", approved=True, approver="alice")
    with pytest.raises(UnknownApprovalRequest, match="not waiting for request 'req-typo'"):
        asyncio.run(store.submit_approval("r7", typo))
    asyncio.run(store.submit_approval("r7", _approve(paused)))
    result = _agent(tmp_path, store, 1).resume_sync("r7")
    assert result.status.value == "completed"
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]
    asyncio.run(store.close())
