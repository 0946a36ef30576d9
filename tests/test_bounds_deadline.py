"""The deadline bounds every awaited callable: tools, lookups, approvers, revision sources."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ownloop import Agent, Limits
from ownloop.contracts import ApprovalRequest, RunResult
from ownloop.exceptions import UnknownEffectError
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import StillUnknown, ToolContext, ToolRegistry

SLACK_S = 1.5
"""The documented slack: a run returns within ``deadline_s`` plus this (see budgets.md)."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of each test, so abandoned threads finish instead of lingering."""
    event = threading.Event()
    yield event
    event.set()


def timed(agent: Agent, task: str = "go") -> tuple[RunResult, float]:
    """Run synchronously; return the result and the wall time ``run_sync`` took."""
    started = time.perf_counter()
    result = agent.run_sync(task)
    return result, time.perf_counter() - started


def test_an_async_tool_that_never_returns_is_cancelled_at_the_deadline() -> None:
    """A hanging async handler is cancelled; the run stops at its deadline, not later."""
    registry = ToolRegistry()
    cancelled = threading.Event()

    @registry.tool(effect="read")
    async def hang() -> str:
        """Never answer."""
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return "never"  # pragma: no cover - the wait never ends

    model = ScriptedModel([tool_call("hang"), final("unreachable")])
    result, took = timed(Agent(model, registry, limits=Limits(deadline_s=1)))
    assert (result.status, result.stop_reason) == ("stopped", "deadline")
    assert cancelled.is_set()
    assert took < 1 + SLACK_S


@pytest.mark.parametrize("timeout_s", [None, 1.0])
def test_a_slow_sync_tool_is_abandoned_and_run_sync_does_not_wait_for_it(
    release: threading.Event, timeout_s: float | None
) -> None:
    """A sync handler sleeping past the deadline (or its own timeout) is abandoned at once."""
    registry = ToolRegistry()

    @registry.tool(effect="read", timeout_s=timeout_s)
    def crawl() -> str:
        """Take far too long."""
        release.wait(8)
        return "late"

    model = ScriptedModel([tool_call("crawl"), final("unreachable")])
    deadline = 1 if timeout_s is None else 3
    result, took = timed(Agent(model, registry, limits=Limits(deadline_s=deadline)))
    assert result.status == "stopped"
    assert result.stop_reason in {"deadline", "max_tool_attempts"}
    assert took < deadline + SLACK_S


def test_a_sync_write_abandoned_at_the_deadline_is_an_unknown_effect(
    release: threading.Event,
) -> None:
    """A write whose thread was abandoned may still happen: its receipt says unknown."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def transfer(amount: int) -> str:
        """Move money, slowly.

        Args:
            amount: Cents.
        """
        release.wait(8)
        return "moved"

    model = ScriptedModel([tool_call("transfer", amount=5), final("unreachable")])
    agent = Agent(model, registry, policy=allow_writes("transfer"), limits=Limits(deadline_s=1))
    result, took = timed(agent)
    assert [r.status for r in result.receipts] == ["unknown"]
    assert result.status in {"stopped", "unresolved"}
    assert took < 1 + SLACK_S


def test_a_slow_reconcile_lookup_is_abandoned_at_the_deadline(release: threading.Event) -> None:
    """The lookup that would settle an unknown write runs under the deadline too."""
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], context: ToolContext) -> StillUnknown:
        release.wait(8)
        return StillUnknown("late")

    @registry.tool(effect="write", reconcile=lookup)
    def send(to: str) -> str:
        """Send a message.

        Args:
            to: The recipient.
        """
        raise UnknownEffectError("connection dropped after sending")

    model = ScriptedModel([tool_call("send", to="x"), final("sent")])
    agent = Agent(model, registry, policy=allow_writes("send"), limits=Limits(deadline_s=1))
    result, took = timed(agent)
    assert result.status in {"unresolved", "stopped"}
    assert took < 1 + SLACK_S


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_slow_approver_is_treated_as_no_decision_at_the_deadline(
    release: threading.Event, asynchronous: bool
) -> None:
    """An approver still thinking at the deadline has not approved: the run pauses in time."""
    registry = ToolRegistry()
    ran: list[int] = []

    @registry.tool(effect="write", requires_approval=True)
    def publish() -> str:
        """Publish the page."""
        ran.append(1)
        return "published"

    def slow(request: ApprovalRequest) -> None:
        release.wait(8)

    async def slow_async(request: ApprovalRequest) -> None:
        await asyncio.sleep(8)

    model = ScriptedModel([tool_call("publish"), final("done")])
    agent = Agent(
        model,
        registry,
        policy=allow_writes("publish"),
        approver=slow_async if asynchronous else slow,
        limits=Limits(deadline_s=1),
    )
    result, took = timed(agent)
    assert result.status == "paused"
    assert ran == []
    assert took < 1 + SLACK_S


def test_a_slow_revision_source_stops_the_run_at_its_deadline(release: threading.Event) -> None:
    """A revision callable that never answers ends the run as a deadline stop, in time."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look() -> str:
        """Look."""
        return "seen"

    calls: list[int] = []

    def revision() -> str:
        calls.append(1)
        if len(calls) > 1:
            release.wait(8)
        return "rev-1"

    model = ScriptedModel([tool_call("look"), final("done")])
    agent = Agent(model, registry, revision=revision, limits=Limits(deadline_s=1))
    result, took = timed(agent)
    assert (result.status, result.stop_reason) == ("stopped", "deadline")
    assert took < 1 + SLACK_S


def test_a_tools_time_left_counts_on_the_runs_clock() -> None:
    """Under a FakeClock, `ctx.seconds_left()` is the run's fake time left, not about zero."""
    from ownloop.clock import FakeClock

    registry = ToolRegistry()
    seen: list[float | None] = []

    @registry.tool(effect="read")
    def look(ctx: ToolContext) -> str:
        """Report the time left, before and after ten seconds of work."""
        seen.append(ctx.seconds_left())
        clock.advance(10)
        seen.append(ctx.seconds_left())
        return "ok"

    clock = FakeClock()
    model = ScriptedModel([tool_call("look"), final("done")])
    result = Agent(model, registry, limits=Limits(deadline_s=90), clock=clock).run_sync("go")
    assert result.status == "completed"
    assert seen == [90.0, 80.0]
