"""The pieces behind fencing: dead-holder detection, the heartbeat, and journal lookups."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop import Agent, Receipt, RunResult
from ownloop.contracts import JournalEntry, Lease, Limits, ModelResponse, ToolCall, WriteIntent
from ownloop.exceptions import StoreError
from ownloop.loop import RecordIntent
from ownloop.policy import allow_writes
from ownloop.runtime import RunSession
from ownloop.store import MemoryRunStore
from ownloop.store._rules import holder_is_gone, this_host
from ownloop.testing import FakeClock, ScriptedModel, final
from ownloop.tools import ToolRegistry
from tests.durable_worker import SCRIPTS, Job, build_registry, ledger_rows


def test_only_an_ended_process_of_this_host_is_gone() -> None:
    """Another host, no pid, this process and a live process are not gone; an ended one is."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert holder_is_gone(this_host(), ended.pid)
    assert not holder_is_gone("elsewhere", ended.pid)
    assert not holder_is_gone(this_host(), None)
    assert not holder_is_gone(this_host(), os.getpid())
    assert not holder_is_gone(this_host(), os.getppid())


def test_a_killed_but_unreaped_process_is_gone() -> None:
    """A zombie (killed, its parent has not reaped it) still answers signal 0 but is gone."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while "Z" not in Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1][:3]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert holder_is_gone(this_host(), child.pid)
    child.wait()


def test_a_zombie_whose_name_holds_a_parenthesis_is_gone(tmp_path: Path) -> None:
    """The state is read after the name's last ")", so a name like "x) S (y" cannot hide it."""
    tricky = tmp_path / "x) S (y"
    tricky.symlink_to(sys.executable)
    child = subprocess.Popen([str(tricky), "-c", "pass"])
    deadline = time.monotonic() + 10
    while "Z" not in Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1][:3]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert "(x) S (y)" in Path(f"/proc/{child.pid}/stat").read_text()
    assert holder_is_gone(this_host(), child.pid)
    child.wait()


def test_a_holder_with_no_real_pid_is_never_gone() -> None:
    """A stored pid of zero or below names no process (kill would mean a group): never gone."""
    assert not holder_is_gone(this_host(), 0)
    assert not holder_is_gone(this_host(), -4_000_000)


def test_another_users_process_and_an_unreadable_one_are_not_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No permission to signal means alive; a process whose state cannot be read is alive."""

    def forbidden(pid: int, signal: int) -> None:
        raise PermissionError

    monkeypatch.setattr(os, "kill", forbidden)
    assert not holder_is_gone(this_host(), 4_000_000)
    monkeypatch.setattr(os, "kill", lambda pid, signal: None)
    assert not holder_is_gone(this_host(), 4_000_000)  # no /proc entry to read


class _Flaky(MemoryRunStore):
    def __init__(self, clock: FakeClock | None = None) -> None:
        super().__init__(clock=clock)
        self.failures = 1

    async def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        if self.failures:
            self.failures -= 1
            raise StoreError("the database blinked")
        return await super().renew_lease(lease, ttl_s)


async def _eventually(condition: Any, timeout_s: float = 30.0) -> bool:
    """Wait (on the event loop) until ``condition()`` holds; False if it never does in time."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def test_the_heartbeat_renews_retries_and_notices_a_loss() -> None:
    """Beats push the expiry on, a failed beat is retried, a lost lease stops the beating."""

    async def scenario() -> tuple[bool, bool, bool]:
        clock = FakeClock()  # the store's time: the lease cannot expire while we wait for a CPU
        store = _Flaky(clock)
        lease = await store.acquire_lease("run-1", "worker-a", 0.15)
        clock.advance(0.1)
        session = RunSession(store, lease, None, ttl_s=0.15)
        async with session.heartbeat():
            renewed = await _eventually(
                lambda: session.lease is not None and session.lease.expires_at > lease.expires_at
            )
            await store.acquire_lease("run-1", "worker-b", 60, take_over=True)
            lost = await _eventually(lambda: session.lost)
        async with RunSession(store, None, None).heartbeat():
            pass
        return renewed, lost, store.failures == 0

    assert asyncio.run(scenario()) == (True, True, True)


def test_a_segment_that_never_yields_renews_before_it_writes() -> None:
    """Without a chance to beat, the session renews inline once a third of the TTL passed."""

    async def scenario() -> tuple[Lease, Lease | None]:
        store = MemoryRunStore()
        lease = await store.acquire_lease("run-1", "worker-a", 0.3)
        session = RunSession(store, lease, None, ttl_s=0.3)
        time.sleep(0.12)  # blocks the event loop: no heartbeat
        intent = WriteIntent(
            run_id="run-1",
            call_id="call#1",
            tool="export",
            idempotency_key="k",
            arguments_digest="d",
        )

        await session.perform(RecordIntent(intent))
        return lease, session.lease

    before, after = asyncio.run(scenario())
    assert after is not None
    assert after.expires_at > before.expires_at


class _CrashAfterQueue(MemoryRunStore):
    """Stops the first worker right after the export was queued (its fourth save)."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    async def save(self, snapshot: Any, **options: Any) -> int:
        version = await super().save(snapshot, **options)
        self.saves += 1
        if self.saves == 4:
            raise KeyboardInterrupt
        return version


def _queued_export(tmp_path: Path) -> tuple[_CrashAfterQueue, Job, str]:
    job = Job(run_id="legacy", directory=str(tmp_path), database="-")
    store = _CrashAfterQueue()
    agent = _agent(job, store)
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync("export", run_id="legacy")
    call = ToolCall(id="c2", name="export", arguments={"name": "q3"})
    validated = agent.tools.validate(call)
    return store, job, getattr(validated, "digest", "")


def _agent(job: Job, store: MemoryRunStore, played: int = 0) -> Agent:
    return Agent(
        ScriptedModel(SCRIPTS["export"][played:]),
        build_registry(job),
        policy=allow_writes("export"),
        store=store,
    )


def _journal(store: MemoryRunStore, key: str, digest: str, receipt: Receipt | None) -> None:
    intent = WriteIntent(
        run_id="legacy", call_id=key, tool="export", idempotency_key="k", arguments_digest=digest
    )
    store._journal["legacy"] = [JournalEntry(intent=intent, receipt=receipt)]


def _resumed_after_journaling(
    tmp_path: Path, key: str, receipt_id: str
) -> tuple[RunResult, Receipt]:
    """Resume the queued export after its journal got a done receipt under ``key``."""
    store, job, digest = _queued_export(tmp_path)
    done = Receipt(call_id=receipt_id, tool="export", status="ok", effect="applied", data={"n": 1})
    _journal(store, key, digest, done)
    return _agent(job, store, 2).resume_sync("legacy"), done


def test_a_journal_keyed_by_provider_ids_is_still_replayed(tmp_path: Path) -> None:
    """A write journaled before keys existed (under the model's id, same digest) is not rerun."""
    result, _ = _resumed_after_journaling(tmp_path, "c2", "c2")
    assert result.status.value == "completed"
    assert ledger_rows(tmp_path) == []


def test_a_journal_entry_with_other_arguments_is_never_replayed_as_this_call(
    tmp_path: Path,
) -> None:
    """An entry under this call's key but another digest leaves the effect unknown."""
    store, job, _ = _queued_export(tmp_path)
    other = Receipt(call_id="c2", tool="export", status="ok", effect="applied", data={"x": 1})
    _journal(store, "call#2", "f" * 64, other)
    result = _agent(job, store, 2).resume_sync("legacy")
    assert (result.status.value, result.stop_reason.value) == ("unresolved", "unresolved_effect")
    assert "records other arguments" in (result.pending[0].reason or "")
    assert ledger_rows(tmp_path) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=st.lists(st.text(min_size=1, max_size=128), min_size=1, max_size=4))
def test_any_ids_a_model_sends_run_every_write_once(ids: list[str]) -> None:
    """Whatever ids the model sends (repeated, reused, odd), each proposed write runs once."""
    done: list[str] = []
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def mark(n: int) -> int:
        """Mark one.

        Args:
            n: Which.
        """
        done.append(str(n))
        return n

    turns = [
        ModelResponse(tool_calls=(ToolCall(id=call_id, name="mark", arguments={"n": index}),))
        for index, call_id in enumerate(ids)
    ]
    both = tuple(ToolCall(id=ids[0], name="mark", arguments={"n": 100 + i}) for i in range(2))
    script = [*turns, ModelResponse(tool_calls=both), final("done")]
    agent = Agent(
        ScriptedModel(script),
        registry,
        policy=allow_writes("mark"),
        store=MemoryRunStore(),
        limits=Limits(max_repeats=10),
    )
    result = agent.run_sync("mark them")
    assert result.status.value == "completed"
    assert done == [*(str(i) for i in range(len(ids))), "100", "101"]


def test_a_replayed_receipt_answers_under_the_id_the_model_gave_this_call(tmp_path: Path) -> None:
    """A journaled receipt recorded under another provider id is replayed with this call's id."""
    result, done = _resumed_after_journaling(tmp_path, "call#2", "c-old")
    assert result.status.value == "completed"
    replayed = [receipt for receipt in result.receipts if receipt.tool == "export"]
    assert replayed == [done.model_copy(update={"call_id": "c2"})]
    assert ledger_rows(tmp_path) == []
