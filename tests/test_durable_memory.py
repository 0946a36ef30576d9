"""Durable runs through the Agent with the in-memory store: checkpoints, journal, resume."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from ownloop import (
    Agent,
    Approval,
    ConfigurationError,
    RunStatus,
    StopReason,
)
from ownloop.contracts import RunSnapshot
from ownloop.exceptions import RunLeased, RunNotFound
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry


class Crash(BaseException):
    """Stands in for the process dying: nothing in ownloop catches it."""


class RecordingStore(MemoryRunStore):
    """A memory store that remembers every snapshot it saved and can die on a chosen save."""

    def __init__(self, crash_on_save: int | None = None) -> None:
        super().__init__()
        self.saved: list[RunSnapshot] = []
        self.crash_on_save = crash_on_save

    async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
        """Save, or die on the configured save number."""
        if self.crash_on_save is not None and len(self.saved) + 1 == self.crash_on_save:
            raise Crash
        self.saved.append(snapshot)
        return await super().save(snapshot, **options)


def _world(
    effects: Counter[str], approval: bool = False, crash_in_write: list[bool] | None = None
) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(key: str) -> dict[str, str]:
        """Look a key up.

        Args:
            key: The key.
        """
        return {"id": key}

    @registry.tool(effect="write", requires_approval=approval)
    def export(name: str) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
        """
        effects[name] += 1
        if crash_in_write and crash_in_write[0]:
            crash_in_write[0] = False
            raise Crash
        return {"exported": name}

    return registry


SCRIPT = [
    tool_call("lookup", "l1", key="a"),
    tool_call("export", "e1", name="q3"),
    final("Exported."),
]


def _agent(
    store: MemoryRunStore, registry: ToolRegistry, steps: list[Any] | None = None, **options: Any
) -> Agent:
    return Agent(
        ScriptedModel(steps if steps is not None else SCRIPT),
        registry,
        policy=allow_writes("export"),
        store=store,
        worker_id="worker-1",
        **options,
    )


def test_checkpoints_after_every_step_and_at_the_end() -> None:
    """A durable run saves at start, after each response and tool call, and when it ends."""
    store = RecordingStore()
    effects = Counter[str]()
    result = _agent(store, _world(effects)).run_sync("export", run_id="r1")
    assert result.status is RunStatus.COMPLETED
    assert [snapshot.state for snapshot in store.saved] == ["running"] * 5 + ["finished"]
    assert store.saved[-1].result == result
    journal = asyncio.run(store.journal("r1"))
    assert [(e.intent.provider_call_id, e.receipt.status) for e in journal] == [("e1", "ok")]


def test_pause_then_resume_by_run_id_with_a_submitted_approval() -> None:
    """A run paused for approval resumes by id with a decision submitted to the store."""
    store = MemoryRunStore()
    effects = Counter[str]()
    paused = _agent(store, _world(effects, approval=True)).run_sync("export", run_id="r2")
    assert paused.status is RunStatus.PAUSED
    request = paused.approval_requests[0]
    asyncio.run(
        store.submit_approval(
            "r2", Approval(request_id=request.id, approved=True, approver="alice")
        )
    )
    fresh = _agent(store, _world(effects, approval=True), steps=SCRIPT[2:])
    done = fresh.resume_sync("r2")
    assert done.status is RunStatus.COMPLETED
    assert effects == Counter({"q3": 1})
    assert [(a.approver, a.approved) for a in done.approvals] == [("alice", True)]
    stored = asyncio.run(store.get("r2"))
    assert stored is not None
    assert stored.snapshot.state == "finished"


def test_crash_after_the_write_is_journaled_does_not_repeat_it() -> None:
    """A worker dying after a write was journaled: the resume answers it from the journal."""
    effects = Counter[str]()
    store = RecordingStore(crash_on_save=5)  # the checkpoint right after the export call
    with pytest.raises(Crash):
        _agent(store, _world(effects)).run_sync(
            "export",
            run_id="r3",
        )
    store.crash_on_save = None
    other = asyncio.run(store.acquire_lease("r3", "worker-2", ttl_s=60))
    blocked = _agent(store, _world(effects), steps=SCRIPT[2:])
    with pytest.raises(RunLeased, match="worker-2"):
        blocked.resume_sync("r3")
    asyncio.run(store.release_lease(other))
    done = _agent(store, _world(effects), steps=SCRIPT[2:]).resume_sync("r3")
    assert done.status is RunStatus.COMPLETED
    assert effects == Counter({"q3": 1})
    replayed = [event for event in done.trace if event.kind == "tool_finished" and event.message]
    assert any("write journal" in (event.message or "") for event in replayed)


def test_crash_in_the_middle_of_the_write_leaves_it_unknown() -> None:
    """A worker that dies during a write: on resume the write is unknown, never run again."""
    effects = Counter[str]()
    store = MemoryRunStore()
    with pytest.raises(Crash):
        _agent(store, _world(effects, crash_in_write=[True])).run_sync("export", run_id="r4")
    done = _agent(store, _world(effects), steps=SCRIPT[2:]).resume_sync("r4")
    assert (done.status, done.stop_reason) == (RunStatus.UNRESOLVED, StopReason.UNRESOLVED_EFFECT)
    assert effects == Counter({"q3": 1})
    assert [p.call_id for p in done.pending] == ["e1"]


def test_resume_errors_are_clear() -> None:
    """Unknown runs, finished runs and id resumes without a store are refused clearly."""
    store = MemoryRunStore()
    effects = Counter[str]()
    agent = _agent(store, _world(effects))
    with pytest.raises(RunNotFound):
        agent.resume_sync("nope")
    agent.run_sync("export", run_id="r5")
    with pytest.raises(ConfigurationError, match="completed, not paused"):
        agent.resume_sync("r5")
    plain = Agent(FunctionModel(lambda request: final("x")))
    with pytest.raises(ConfigurationError, match="needs Agent"):
        plain.resume_sync("r5")
    with pytest.raises(ConfigurationError, match="lease_ttl_s"):
        Agent(FunctionModel(lambda request: final("x")), lease_ttl_s=0)
