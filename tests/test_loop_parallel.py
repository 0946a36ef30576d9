"""Parallel tool calls: a turn's reads overlap, writes stay alone and in order, order is kept.

Overlap is proven with concurrency counters and barriers, never with wall-clock assertions (the
timing belongs to ``benchmarks/bench_parallel.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop import Agent, Approval, Limits, RunResult, RunStatus, StopReason, ToolCall
from ownloop.contracts import ModelRequest, ModelResponse, RunSnapshot
from ownloop.exceptions import ToolDefinitionError
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final
from ownloop.tools import ToolRegistry


class Gauge:
    """Counts the handlers running right now and remembers the peak, with a start/end log."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.log: list[str] = []
        self.cancelled: list[str] = []
        self._lock = threading.Lock()

    def enter(self, name: str) -> None:
        """Note that ``name`` started."""
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.log.append(f"start {name}")

    def leave(self, name: str) -> None:
        """Note that ``name`` ended."""
        with self._lock:
            self.running -= 1
            self.log.append(f"end {name}")


def turn(*calls: tuple[str, str]) -> ModelResponse:
    """Return one response proposing ``(tool, key)`` calls with ids c1, c2, ... in that order."""
    return ModelResponse(
        tool_calls=tuple(
            ToolCall(id=f"c{index}", name=name, arguments={"key": key})
            for index, (name, key) in enumerate(calls, start=1)
        )
    )


def reads(count: int, tool: str = "fetch") -> ModelResponse:
    """Return one response proposing ``count`` calls of ``tool`` with keys k1, k2, ..."""
    return turn(*((tool, f"k{index}") for index in range(1, count + 1)))


def run(registry: ToolRegistry, *responses: ModelResponse, **options: Any) -> RunResult:
    """Run the scripted turns, then a final answer."""
    model = ScriptedModel([*responses, final("done")])
    return Agent(model, registry, **options).run_sync("go")


def observed(result: RunResult) -> list[str]:
    """Return the call ids of the tool observations, in conversation order."""
    return [m.call_id for m in result.messages if m.role == "tool"]


def events_of(result: RunResult, *kinds: str) -> list[tuple[str, str | None]]:
    """Return ``(kind, call_id)`` of the trace events of the given kinds, in trace order."""
    return [(e.kind, getattr(e, "call_id", None)) for e in result.trace if e.kind in kinds]


def barrier_registry(gauge: Gauge, together: int) -> ToolRegistry:
    """Return an async read ``fetch`` whose calls wait until ``together`` of them run at once."""
    registry = ToolRegistry()
    everyone = asyncio.Event()

    @registry.tool(effect="read")
    async def fetch(key: str) -> str:
        """Fetch a key.

        Args:
            key: Which.
        """
        gauge.enter(key)
        if gauge.running >= together:
            everyone.set()
        try:
            await asyncio.wait_for(everyone.wait(), timeout=10)
        except asyncio.CancelledError:
            gauge.cancelled.append(key)
            raise
        finally:
            gauge.leave(key)
        return key

    return registry


def test_async_reads_of_one_turn_run_at_the_same_time() -> None:
    """Five async reads proposed together all run at once (each waits for the other four)."""
    gauge = Gauge()
    result = run(barrier_registry(gauge, together=5), reads(5))
    assert result.status is RunStatus.COMPLETED
    assert gauge.peak == 5
    assert [r.status for r in result.receipts] == ["ok"] * 5
    assert result.usage.tool_calls == result.usage.tool_attempts == 5


def test_sync_reads_overlap_in_threads() -> None:
    """Sync read handlers of one turn run in threads at the same time (a barrier of five)."""
    gauge = Gauge()
    barrier = threading.Barrier(5, timeout=10)
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def fetch(key: str) -> str:
        """Fetch a key.

        Args:
            key: Which.
        """
        gauge.enter(key)
        try:
            barrier.wait()  # broken (an error receipt) unless all five run at once
        finally:
            gauge.leave(key)
        return key

    result = run(registry, reads(5))
    assert [r.status for r in result.receipts] == ["ok"] * 5
    assert gauge.peak == 5


def test_the_limit_bounds_how_many_run_at_once() -> None:
    """With max_parallel_tools=2, five reads never run more than two at a time, and do run two."""
    gauge = Gauge()
    registry = barrier_registry(gauge, together=2)
    result = run(registry, reads(5), limits=Limits(max_parallel_tools=2))
    assert result.status is RunStatus.COMPLETED
    assert gauge.peak == 2
    assert observed(result) == ["c1", "c2", "c3", "c4", "c5"]


def test_observations_and_trace_keep_proposal_order_when_later_calls_finish_first() -> None:
    """Calls finishing in reverse order still answer the model, and trace, in proposal order."""
    finished: list[str] = []
    done = {f"k{index}": asyncio.Event() for index in range(1, 5)}
    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def fetch(key: str) -> str:
        """Fetch a key; k1 waits for k2, k2 for k3, k3 for k4.

        Args:
            key: Which.
        """
        following = f"k{int(key[1:]) + 1}"
        if following in done:
            await asyncio.wait_for(done[following].wait(), timeout=10)
        finished.append(key)
        done[key].set()
        return key

    result = run(registry, reads(4))
    assert finished == ["k4", "k3", "k2", "k1"]
    assert observed(result) == ["c1", "c2", "c3", "c4"]
    assert [r.call_id for r in result.receipts] == ["c1", "c2", "c3", "c4"]
    assert events_of(result, "tool_proposed", "tool_started", "tool_finished") == [
        *[(kind, f"c{i}") for i in range(1, 5) for kind in ("tool_proposed", "tool_started")],
        *[("tool_finished", f"c{i}") for i in range(1, 5)],
    ]
    assert [e.seq for e in result.trace] == list(range(1, len(result.trace) + 1))


def mixed_registry(
    gauge: Gauge, effects: list[str], *, parallel: bool | None = None
) -> ToolRegistry:
    """Return an async read ``fetch`` and an async write ``store`` that log their lifetimes.

    A key ``<name>:<ms>`` waits that many milliseconds (others 5); ``store`` adds its key to
    ``effects``, marked ``(not alone)`` when another call ran beside it.
    """
    registry = ToolRegistry()

    def pause(key: str) -> float:
        return int(key.split(":")[1]) / 1000 if ":" in key else 0.005

    @registry.tool(effect="read", parallel=parallel)
    async def fetch(key: str) -> str:
        """Fetch a key.

        Args:
            key: Which.
        """
        gauge.enter(key)
        await asyncio.sleep(pause(key))
        gauge.leave(key)
        return key

    @registry.tool(effect="write")
    async def store(key: str) -> str:
        """Store a key.

        Args:
            key: Which.
        """
        gauge.enter(key)
        alone = gauge.running == 1
        await asyncio.sleep(pause(key))
        gauge.leave(key)
        effects.append(key if alone else f"{key} (not alone)")
        return key

    return registry


def test_writes_run_alone_and_in_proposal_order_between_reads() -> None:
    """Reads before and after a write overlap each other, never the write; writes keep order."""
    gauge, effects = Gauge(), list[str]()
    response = turn(
        ("fetch", "r1"),
        ("fetch", "r2"),
        ("store", "w1"),
        ("store", "w2"),
        ("fetch", "r3"),
        ("fetch", "r4"),
    )
    result = run(mixed_registry(gauge, effects), response, policy=allow_writes("store"))
    assert result.status is RunStatus.COMPLETED
    assert effects == ["w1", "w2"]  # in order, and neither ran beside another call
    assert gauge.log[:2] == ["start r1", "start r2"]  # the reads before the writes overlap
    assert gauge.log[4:8] == ["start w1", "end w1", "start w2", "end w2"]
    assert gauge.log[8:10] == ["start r3", "start r4"]  # so do the reads after them
    assert observed(result) == ["c1", "c2", "c3", "c4", "c5", "c6"]


def test_a_member_past_the_deadline_is_cancelled_and_the_others_are_kept() -> None:
    """A read overrunning the deadline is cancelled and reported; its peers' results stay."""
    cancelled: list[str] = []
    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def fetch(key: str) -> str:
        """Fetch a key; k2 never answers.

        Args:
            key: Which.
        """
        if key == "k2":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(key)
                raise
        return key

    model = ScriptedModel([reads(3)])
    result = Agent(model, registry, limits=Limits(deadline_s=0.5)).run_sync("go")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert cancelled == ["k2"]
    assert [(r.call_id, r.status) for r in result.receipts] == [("c1", "ok"), ("c3", "ok")]
    assert observed(result) == ["c1", "c3"]
    late = [e for e in result.trace if e.kind == "tool_finished" and e.call_id == "c2"]
    assert [(e.status, "deadline" in (e.message or "")) for e in late] == [("transient", True)]


def test_cancelling_the_run_cancels_every_running_member() -> None:
    """Cancelling the task driving a run cancels each of the group's running calls."""
    gauge = Gauge()
    registry = barrier_registry(gauge, together=4)  # three calls: they wait until cancelled

    async def scenario() -> None:
        running = asyncio.create_task(Agent(ScriptedModel([reads(3)]), registry).run("go"))
        async with asyncio.timeout(10):
            while gauge.running < 3:
                await asyncio.sleep(0.001)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(scenario())
    assert sorted(gauge.cancelled) == ["k1", "k2", "k3"]


def test_a_group_never_crosses_the_tool_call_budget() -> None:
    """max_tool_calls hit mid-group: the calls within it run, the next one stops the run."""
    outcomes = []
    for parallel in (8, 1):
        gauge = Gauge()
        registry = (
            barrier_registry(gauge, together=3) if parallel > 1 else mixed_registry(gauge, [])
        )
        model = ScriptedModel([reads(5)])
        limits = Limits(max_tool_calls=3, max_parallel_tools=parallel)
        result = Agent(model, registry, limits=limits).run_sync("go")
        outcomes.append((result.status, result.stop_reason, result.detail, result.usage, gauge))
    grouped, alone = outcomes
    assert grouped[:4] == alone[:4]
    assert grouped[1] is StopReason.MAX_TOOL_CALLS
    assert grouped[3].tool_attempts == 3
    assert (grouped[4].peak, alone[4].peak) == (3, 1)


def test_the_attempt_budget_cuts_a_group_where_it_would_run_out() -> None:
    """max_tool_attempts below the group's size: the group stops short, the run stops as alone."""
    gauge = Gauge()
    registry = barrier_registry(gauge, together=2)
    model = ScriptedModel([reads(4)])
    result = Agent(model, registry, limits=Limits(max_tool_attempts=2)).run_sync("go")
    assert result.stop_reason is StopReason.MAX_TOOL_ATTEMPTS
    assert result.usage.tool_attempts == 2
    assert gauge.peak == 2
    assert observed(result) == ["c1", "c2"]


def test_one_at_a_time_restores_the_sequential_trace() -> None:
    """max_parallel_tools=1 runs each call to its observation before the next is proposed."""
    gauge = Gauge()
    registry = mixed_registry(gauge, [])
    result = run(registry, reads(3), limits=Limits(max_parallel_tools=1))
    assert gauge.peak == 1
    per_call = ("tool_proposed", "tool_started", "tool_finished", "observation_added")
    assert events_of(result, *per_call) == [
        (kind, f"c{i}") for i in range(1, 4) for kind in per_call
    ]


def test_reads_declared_not_parallel_run_alone() -> None:
    """Reads declared parallel=False keep the one-at-a-time path."""
    gauge = Gauge()
    result = run(mixed_registry(gauge, [], parallel=False), reads(3))
    assert result.status is RunStatus.COMPLETED
    assert gauge.peak == 1


def test_a_write_cannot_be_declared_parallel() -> None:
    """Declaring a write tool parallel is refused when it is registered."""
    registry = ToolRegistry()
    with pytest.raises(ToolDefinitionError, match="cannot be parallel"):

        @registry.tool(effect="write", parallel=True)
        def store(key: str) -> str:  # pragma: no cover - never registered
            """Store a key.

            Args:
                key: Which.
            """
            return key


class Crash(BaseException):
    """Stands in for the process dying: nothing in ownloop catches it."""


class CrashingStore(MemoryRunStore):
    """A memory store that dies on a chosen save."""

    def __init__(self, crash_on_save: int | None) -> None:
        super().__init__()
        self.saves = 0
        self.crash_on_save = crash_on_save

    async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
        """Save, or die on the configured save number."""
        self.saves += 1
        if self.saves == self.crash_on_save:
            raise Crash
        return await super().save(snapshot, **options)


def counting_registry(ran: Counter[str]) -> ToolRegistry:
    """Return a read ``fetch`` and a write ``store`` that count every execution by key."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def fetch(key: str) -> str:
        """Fetch a key.

        Args:
            key: Which.
        """
        ran[key] += 1
        return key

    @registry.tool(effect="write")
    def store(key: str) -> str:
        """Store a key.

        Args:
            key: Which.
        """
        ran[key] += 1
        return key

    return registry


@pytest.mark.parametrize(
    ("crash_on_save", "reads_run"),
    [
        (4, 2),  # dies saving the group's checkpoint: its reads run again, the write before not
        (5, 1),  # dies saving after the last write: nothing runs again
    ],
)
def test_a_crash_around_a_group_never_runs_a_write_twice(
    crash_on_save: int, reads_run: int
) -> None:
    """A run killed after a group resumes without executing any completed write again."""
    ran = Counter[str]()
    store = CrashingStore(crash_on_save)
    response = turn(("store", "w1"), ("fetch", "r1"), ("fetch", "r2"), ("store", "w2"))

    def agent(*steps: ModelResponse) -> Agent:
        return Agent(
            ScriptedModel(list(steps)),
            counting_registry(ran),
            policy=allow_writes("store"),
            store=store,
            worker_id="worker-1",
        )

    with pytest.raises(Crash):
        agent(response).run_sync("go", run_id="crashed")
    store.crash_on_save = None
    result = agent(final("done")).resume_sync("crashed")
    assert result.status is RunStatus.COMPLETED
    assert ran == Counter({"w1": 1, "w2": 1, "r1": reads_run, "r2": reads_run})
    assert observed(result) == ["c1", "c2", "c3", "c4"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["fetch", "store"]), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=7,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_any_mix_keeps_writes_in_order_and_observations_in_proposal_order(
    mix: list[tuple[str, int]], limit: int
) -> None:
    """Random mixes of reads and writes: writes run alone in order, observations keep order."""
    gauge, effects = Gauge(), list[str]()
    registry = mixed_registry(gauge, effects)
    response = turn(*((name, f"{index}:{ms}") for index, (name, ms) in enumerate(mix)))
    result = run(
        registry, response, policy=allow_writes("store"), limits=Limits(max_parallel_tools=limit)
    )
    assert result.status is RunStatus.COMPLETED
    writes = [f"{index}:{ms}" for index, (name, ms) in enumerate(mix) if name == "store"]
    assert effects == writes
    assert gauge.peak <= limit
    assert observed(result) == [f"c{index}" for index in range(1, len(mix) + 1)]


def test_a_read_needing_approval_ends_the_group_and_resumes_alone() -> None:
    """Reads before an approval-gated read run together; after approval it runs alone, then on."""
    gauge = Gauge()
    registry = mixed_registry(gauge, [])

    @registry.tool(effect="read", requires_approval=True)
    async def audit(key: str) -> str:
        """Read the audit log.

        Args:
            key: Which.
        """
        gauge.enter(key)
        gauge.leave(key)
        return key

    response = turn(("fetch", "k1"), ("fetch", "k2"), ("audit", "k3"), ("fetch", "k4"))
    store = MemoryRunStore()

    def agent(*steps: ModelResponse) -> Agent:
        return Agent(ScriptedModel(list(steps)), registry, store=store, worker_id="worker-1")

    paused = agent(response).run_sync("go", run_id="gated")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    assert gauge.peak == 2
    assert gauge.log[:2] == ["start k1", "start k2"]
    assert len(gauge.log) == 4  # k1 and k2 ran together; neither k3 nor k4 started
    assert observed(paused) == ["c1", "c2"]
    (request,) = paused.approval_requests
    approval = Approval(request_id=request.id, approved=True, approver="ops")
    done = agent(final("done")).resume_sync("gated", approvals=[approval])
    assert done.status is RunStatus.COMPLETED
    assert gauge.log[4:] == ["start k3", "end k3", "start k4", "end k4"]
    assert observed(done) == ["c1", "c2", "c3", "c4"]
    assert done.usage.tool_calls == done.usage.tool_attempts == 4


def test_an_invalid_call_ends_the_group_and_is_answered_in_its_place() -> None:
    """A call with invalid arguments is rejected alone; the reads around it still overlap."""
    gauge = Gauge()
    registry = barrier_registry(gauge, together=2)
    bad = ToolCall(id="bad", name="fetch", arguments={"wrong": 1})
    good = reads(4).tool_calls
    response = ModelResponse(tool_calls=(good[0], good[1], bad, good[2], good[3]))
    result = run(registry, response)
    assert result.status is RunStatus.COMPLETED
    assert gauge.peak == 2
    assert observed(result) == ["c1", "c2", "bad", "c3", "c4"]


def test_reads_proposed_after_the_deadline_passed_never_start() -> None:
    """A model answer that arrives past the deadline starts none of its reads; the run stops."""
    clock = FakeClock()
    gauge = Gauge()

    def slow_model(request: ModelRequest) -> ModelResponse:
        clock.advance(11)
        return reads(3)

    agent = Agent(
        FunctionModel(slow_model),
        mixed_registry(gauge, []),
        clock=clock,
        limits=Limits(deadline_s=10),
    )
    result = agent.run_sync("go")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert "before tool attempt" in result.detail
    assert (gauge.log, result.usage.tool_attempts) == ([], 0)
