"""A write this process stopped waiting for still runs: nothing may repeat it until it ends.

A take-over or the run's deadline makes a worker stop waiting for a write, but a sync handler's
thread cannot be stopped. These tests hold such a write inside its handler, then let another
worker (or another attempt) of the same process reach the same write, and prove it waits for the
first to end, asks the reconcile lookup only then, and never applies the write a second time.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ownloop import Agent, RunResult, RunStatus
from ownloop.contracts import ModelRequest, ModelResponse, ToolCall, ToolSpec
from ownloop.exceptions import RunLeased
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore
from ownloop.tools import (
    Confirmed,
    ExternalTool,
    NotApplied,
    ToolContext,
    ToolRegistry,
    _inflight,
    write_settled,
    write_started,
)


class World:
    """A payment backend: counts effects per idempotency key; a gate holds the handler."""

    def __init__(self) -> None:
        self.applied: dict[str, int] = {}
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.lookups: list[int] = []  # effects seen by each lookup, when it ran

    def registry(self) -> ToolRegistry:
        """Register ``pay`` (a sync write held at the gate) with its reconcile lookup."""
        registry = ToolRegistry()

        def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
            done = self.applied.get(str(ctx.idempotency_key), 0)
            self.lookups.append(done)
            return Confirmed({"paid": True}) if done else NotApplied()

        @registry.tool(effect="write", reconcile=lookup)
        def pay(amount: int, ctx: ToolContext) -> dict[str, bool]:
            """Pay.

            Args:
                amount: How much.
                ctx: Injected.
            """
            self.entered.set()
            self.gate.wait(10)
            key = str(ctx.idempotency_key)
            self.applied[key] = self.applied.get(key, 0) + 1
            return {"paid": True}

        return registry


class ByStep:
    """Step 1 proposes the payment (again, when a resumed worker asks again); then it is done."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer by step number."""
        if request.step == 1:
            call = ToolCall(id="c1", name="pay", arguments={"amount": 5})
            return ModelResponse(tool_calls=(call,))
        return ModelResponse(final_output="paid")


def _agent(world: World, store: MemoryRunStore, **options: Any) -> Agent:
    return Agent(ByStep(), world.registry(), policy=allow_writes("pay"), store=store, **options)


def test_a_take_over_waits_for_the_write_still_running_in_this_process() -> None:
    """Taken over mid-write, the old thread pays; the new worker waits, sees it, never repays."""
    world, store = World(), MemoryRunStore()

    async def scenario() -> tuple[Any, RunResult]:
        first = asyncio.create_task(_agent(world, store).run("pay 5", run_id="r1"))
        while not world.entered.is_set():  # the first worker is inside the handler
            await asyncio.sleep(0.01)
        second = asyncio.create_task(_agent(world, store).resume("r1", take_over=True))
        await asyncio.sleep(0.2)  # the new worker reaches the journaled write, and waits
        assert not world.lookups, "the lookup ran while the first attempt was in flight"
        world.gate.set()
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
        assert isinstance(outcomes[1], RunResult)
        return outcomes[0], outcomes[1]

    stale, result = asyncio.run(scenario())
    assert list(world.applied.values()) == [1]
    assert world.lookups == [1]
    assert result.status is RunStatus.COMPLETED, result.stop_message
    assert isinstance(stale, RunLeased | RunResult)  # fenced: its receipt was refused


def test_an_attempt_abandoned_at_its_timeout_ends_before_the_next_starts() -> None:
    """A sync write abandoned at its timeout keeps running; a new attempt of the key waits."""
    world = World()
    registry = ToolRegistry()
    order: list[str] = []

    @registry.tool(effect="write", timeout_s=0.05)
    def slow(ctx: ToolContext) -> str:
        """Write slowly.

        Args:
            ctx: Injected.
        """
        order.append(f"start {ctx.attempt}")
        world.gate.wait(10)
        order.append(f"end {ctx.attempt}")
        return "ok"

    tool = registry.get("slow")
    assert tool is not None

    def context(attempt: int) -> ToolContext:
        return ToolContext(
            run_id="r1", call_id="c1", tool="slow", attempt=attempt, idempotency_key="k1"
        )

    async def scenario() -> str:
        with pytest.raises(TimeoutError):
            await tool.invoke({}, context(1))
        retry = asyncio.create_task(tool.invoke({}, context(2)))
        await asyncio.sleep(0.1)
        assert order == ["start 1"], order  # the retry waits for the abandoned attempt
        world.gate.set()
        return str(await retry)

    assert asyncio.run(scenario()) == "ok"
    assert order == ["start 1", "end 1", "start 2", "end 2"]


def test_an_external_write_cancelled_mid_call_is_settled_once_it_unwinds() -> None:
    """A cancelled async write counts as in flight until its coroutine ends; reads never wait."""
    unwound = asyncio.Event()

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        try:
            await asyncio.sleep(10)
        finally:
            await asyncio.sleep(0.05)  # cleanup that still talks to the backend
            unwound.set()
        return "never"

    spec = ToolSpec(
        name="remote_write",
        description="Write remotely.",
        parameters={"type": "object", "properties": {}},
        effect="write",
    )
    tool = ExternalTool(spec, handler, check=lambda arguments: None)
    ctx = ToolContext(run_id="r1", call_id="c1", tool="remote_write", attempt=1)
    keyed = ToolContext(
        run_id="r1", call_id="c1", tool="remote_write", attempt=1, idempotency_key="k2"
    )

    async def scenario() -> None:
        await write_settled(None)  # a read: nothing to wait for
        write_started(None)()
        task = asyncio.create_task(tool.invoke({}, keyed))
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(write_settled("k2"))
        task.cancel()
        await write_settled("k3")  # another write: not held up
        await waiter
        assert unwound.is_set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ctx.idempotency_key is None

    asyncio.run(scenario())


def test_settling_waits_for_every_attempt_of_the_key_in_any_order() -> None:
    """Two attempts of one write in flight: ending one still leaves the other to wait for."""

    async def scenario() -> list[bool]:
        end_first, end_second = write_started("k-two"), write_started("k-two")
        other = write_started("k-other")
        seen = []
        end_first()
        settled = asyncio.ensure_future(write_settled("k-two"))
        await asyncio.sleep(0.01)
        seen.append(settled.done())  # the second attempt still runs
        end_second()
        await asyncio.wait_for(settled, 1)
        seen.append(settled.done())
        other()
        await asyncio.wait_for(write_settled("k-other"), 1)
        return seen

    assert asyncio.run(scenario()) == [False, True]


def test_ending_an_attempt_twice_does_nothing_more() -> None:
    """The end callback may be called again (from any thread) without effect or error."""
    end = write_started("k-twice")
    end()
    end()
    assert write_started(None) is write_started(None)  # a read tracks nothing
    asyncio.run(asyncio.wait_for(write_settled("k-twice"), 1))


def test_a_key_is_forgotten_once_its_last_attempt_ends() -> None:
    """Nothing stays tracked after every attempt of a write has ended: memory stays bounded."""
    first, second = write_started("k-forget"), write_started("k-forget")
    first()
    assert "k-forget" in _inflight._running
    second()
    assert "k-forget" not in _inflight._running
