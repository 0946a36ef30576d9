"""Concurrency: two workers racing to resume one run, a dead worker's lease, stale views."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import Approval, Lease
from ownloop.exceptions import ConfigurationError
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
from tests.durable_support import fresh_schema, postgres_dsn
from tests.durable_worker import Job, ledger_rows, make_agent, start
from tests.test_durable_crash import finish, kill, wait_for_halt


def _job(backend: str, tmp_path: Path, **fields: Any) -> Job:
    job = Job(run_id="race", directory=str(tmp_path), database=str(tmp_path / "runs.db"))
    if backend == "postgres":
        job = replace(job, database=postgres_dsn(), schema=fresh_schema())
    return replace(job, **fields)


def _crashed(job: Job) -> None:
    """Leave the run as a worker killed after the model proposed the export."""
    worker = start(replace(job, kill_at="save:4"))
    wait_for_halt(replace(job, kill_at="save:4"), worker)
    kill(worker)
    job.path("halted").unlink()


@pytest.mark.parametrize("same_id", [False, True], ids=["two-ids", "one-id"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_workers_race_to_resume_and_exactly_one_proceeds(
    tmp_path: Path, backend: str, same_id: bool
) -> None:
    """Of two worker processes resuming one run at once (even under one worker id), one runs it."""
    # The crashed worker's lease must outlive its own heartbeat on a loaded machine (at 0.1 s a
    # starved heartbeat lost it, and the worker stopped before its kill point), and expire
    # before the racers start.
    job = _job(backend, tmp_path, lease_ttl_s=1.0)
    _crashed(job)
    time.sleep(job.lease_ttl_s)
    racer = replace(
        job, mode="resume", kill_at="write:hold", lease_ttl_s=30, start_file=str(tmp_path / "go")
    )
    racers = {
        name: replace(racer, worker_id="worker-x" if same_id else name, label=name)
        for name in ("worker-a", "worker-b")
    }
    processes = {name: start(each) for name, each in racers.items()}
    (tmp_path / "go").touch()
    deadline = time.monotonic() + 10
    while not all(each.path(f"{name}.resume.json").exists() for name, each in racers.items()):
        if job.path("halted").exists():  # the winner holds the write: let it go once the loser
            losers = [n for n, each in racers.items() if each.path(f"{n}.resume.json").exists()]
            if losers:
                (tmp_path / "release").touch()
        assert time.monotonic() < deadline, "the race never settled"
        time.sleep(0.005)
    outcomes = {name: finish(each, processes[name]) for name, each in racers.items()}
    winners = [name for name, outcome in outcomes.items() if outcome.get("status") == "completed"]
    losers = [name for name, outcome in outcomes.items() if outcome.get("error") == "RunLeased"]
    assert len(winners) == 1, outcomes
    assert len(losers) == 1, outcomes
    holder = racers[winners[0]].worker_id
    assert f"run race is being executed by {holder} until" in outcomes[losers[0]]["message"]
    assert [what for _, what in ledger_rows(tmp_path)] == ["export:q3"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_dead_workers_run_is_resumed_at_once_on_its_host(tmp_path: Path, backend: str) -> None:
    """Right after a SIGKILL the dead worker's unexpired lease does not block a resume here."""
    job = _job(backend, tmp_path, lease_ttl_s=300.0)
    _crashed(job)
    started = time.monotonic()
    early = replace(job, mode="resume", worker_id="worker-2")
    outcome = finish(early, start(early))
    assert outcome["status"] == "completed", outcome
    assert time.monotonic() - started < 30  # not the 300 s lease
    assert [what for _, what in ledger_rows(tmp_path)] == ["export:q3"]


class _Interleaving:
    """Delegates to a store; before the late worker takes the lease, another worker runs first."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.first: Callable[[], Awaitable[Any]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def acquire_lease(
        self, run_id: str, owner: str, ttl_s: float, *, take_over: bool = False
    ) -> Lease:
        """Let the other worker resume and finish the run, then take the lease."""
        if self.first is not None:
            first, self.first = self.first, None
            await first()
        return await self.store.acquire_lease(run_id, owner, ttl_s, take_over=take_over)


def _store(backend: str, tmp_path: Path) -> RunStore:
    if backend == "memory":
        return MemoryRunStore()
    if backend == "sqlite":
        return SqliteRunStore(tmp_path / "runs.db")
    return PostgresRunStore(postgres_dsn(), schema=fresh_schema())


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_worker_with_a_stale_view_never_repeats_a_finished_write(
    tmp_path: Path, backend: str
) -> None:
    """A worker resuming just after another finished the run loads it under its lease: no rerun."""
    job = Job(run_id="stale", directory=str(tmp_path), database="-", scenario="refund")
    store = _store(backend, tmp_path)

    async def scenario() -> None:
        paused = await make_agent(job, store).run("refund", run_id="stale")
        request = paused.approval_requests[0].id
        await store.submit_approval(
            "stale", Approval(request_id=request, approved=True, approver="alice")
        )
        interleaving = _Interleaving(store)
        early, late = make_agent(job, store, 1), make_agent(job, interleaving, 1)  # type: ignore[arg-type]
        early.worker_id, late.worker_id = "early", "late"
        interleaving.first = lambda: early.resume("stale")
        try:
            with pytest.raises(ConfigurationError, match="completed, not paused"):
                await late.resume("stale")
        finally:
            if not isinstance(store, MemoryRunStore):
                await store.close()

    asyncio.run(scenario())
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_stalled_worker_process_writes_nothing_after_its_lease_ran_out(
    tmp_path: Path, backend: str
) -> None:
    """A worker blocked past its lease wakes after another finished the run: it is fenced off."""
    job = _job(backend, tmp_path, lease_ttl_s=0.5, stall_at="save:4")
    stalled = start(job)
    assert wait_for_halt(job, stalled) == "save:4"  # the export was proposed, not journaled
    time.sleep(job.lease_ttl_s + 0.1)  # its lease was last renewed before it halted: expired now
    # The resumer's own lease is long: a busy machine may starve it of CPU for more than 0.5 s.
    other = replace(job, mode="resume", worker_id="worker-2", stall_at=None, lease_ttl_s=30)
    outcome = finish(other, start(other))
    assert outcome.get("status") == "completed", outcome
    (tmp_path / "release").touch()
    woke = finish(job, stalled)
    assert woke["error"] == "RunLeased", woke
    assert [what for _, what in ledger_rows(tmp_path)] == ["export:q3"]
