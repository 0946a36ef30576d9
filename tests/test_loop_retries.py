"""Retries: transient failures retried with backoff, within shared budgets and the deadline."""

from __future__ import annotations

from collections import Counter

from tenacity import wait_fixed

from ownloop import (
    Agent,
    Limits,
    PermanentModelError,
    RunStatus,
    StopReason,
    TransientModelError,
    TransientToolError,
)
from ownloop.retry import GiveUp, RetryPolicy, Wait
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry

from .helpers import research_registry


def test_retry_after_hint_is_honoured() -> None:
    """A provider's retry-after hint is the wait used before the next attempt."""
    clock = FakeClock()
    model = ScriptedModel(
        [TransientModelError("slow down", category="rate_limit", retry_after=2.5), final("ok")]
    )
    result = Agent(model, research_registry(), clock=clock).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert clock.slept == [2.5]
    retry = next(event for event in result.trace if event.kind == "retry_scheduled")
    assert (retry.delay_s, retry.next_attempt) == (2.5, 2)


def test_retry_after_longer_than_the_policy_fails_fast() -> None:
    """A retry-after hint beyond the policy's maximum is not waited for; the value is exposed."""
    clock = FakeClock()
    model = ScriptedModel(
        [TransientModelError("quota window", category="rate_limit", retry_after=3600)]
    )
    agent = Agent(model, research_registry(), clock=clock, retry=RetryPolicy(max_retry_after_s=30))
    result = agent.run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert "3600" in result.detail
    assert clock.slept == []


def test_permanent_model_error_is_not_retried() -> None:
    """A permanent provider error fails the run at once, with its category in the trace."""
    model = ScriptedModel([PermanentModelError("bad key", category="authentication", status=401)])
    result = Agent(model, research_registry()).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert result.usage.model_attempts == 1
    failed = next(event for event in result.trace if event.kind == "model_failed")
    assert failed.error["category"] == "authentication"
    assert failed.error["status"] == 401
    assert not failed.retryable


def test_retries_per_call_are_capped() -> None:
    """One call gives up after max_retries_per_call retries even when the budget remains."""
    clock = FakeClock()
    model = ScriptedModel([TransientModelError("500")] * 3)
    result = Agent(
        model, research_registry(), clock=clock, limits=Limits(max_retries_per_call=2)
    ).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert "after 3 attempts" in result.detail
    assert result.usage.model_attempts == 3
    model.assert_complete()


def test_model_attempts_draw_from_the_shared_budget() -> None:
    """Retries of different steps all count against max_model_attempts."""
    clock = FakeClock()
    model = ScriptedModel(
        [
            TransientModelError("500"),
            tool_call("search_documents", query="agent"),
            TransientModelError("500"),
        ]
    )
    result = Agent(
        model, research_registry(), clock=clock, limits=Limits(max_model_attempts=3)
    ).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_MODEL_ATTEMPTS)
    assert result.usage.model_attempts == 3
    exhausted = next(event for event in result.trace if event.kind == "budget_exhausted")
    assert exhausted.checkpoint == "before_retry"


def test_no_backoff_sleeps_past_the_deadline() -> None:
    """A retry whose wait would cross the deadline is not slept; the run stops at the deadline."""
    clock = FakeClock()
    model = ScriptedModel([TransientModelError("busy", retry_after=20)])
    result = Agent(model, research_registry(), clock=clock, limits=Limits(deadline_s=10)).run_sync(
        "q"
    )
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert clock.slept == []


def test_transient_tool_error_is_retried_under_the_shared_budget() -> None:
    """A TransientToolError is retried, each retry traced with attempt and delay."""
    clock = FakeClock()
    registry = ToolRegistry()
    attempts = Counter[str]()

    @registry.tool(effect="read")
    def flaky(value: int) -> dict[str, int]:
        """Fail twice, then succeed.

        Args:
            value: Echoed back.
        """
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise TransientToolError("try again", retry_after=0.5)
        return {"value": value}

    model = ScriptedModel([tool_call("flaky", value=7), final("done")])
    result = Agent(model, registry, clock=clock).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert (result.usage.tool_calls, result.usage.tool_attempts) == (1, 3)
    retries = [event for event in result.trace if event.kind == "retry_scheduled"]
    assert [(event.target, event.next_attempt, event.delay_s) for event in retries] == [
        ("tool", 2, 0.5),
        ("tool", 3, 0.5),
    ]
    assert [r.status for r in result.receipts] == ["ok"]
    assert model.requests[1].messages[-1].content == '{"value":7}'


def test_read_tool_exception_is_an_observation_the_model_can_act_on() -> None:
    """An ordinary exception from a read tool becomes an error observation, not a crash."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        raise KeyError(key)

    model = ScriptedModel([tool_call("lookup", key="nope"), final("not found")])
    result = Agent(model, registry).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert "KeyError" in model.requests[1].messages[-1].content
    assert [(r.status, r.effect) for r in result.receipts] == [("error", "none")]


def test_retry_policy_uses_tenacity_waits() -> None:
    """RetryPolicy delays come from the tenacity wait strategy it is given."""
    policy = RetryPolicy(wait=wait_fixed(1.5))
    assert policy.next_wait(1) == Wait(1.5)
    assert policy.next_wait(3, retry_after=4) == Wait(4, honoured_retry_after=True)
    assert isinstance(RetryPolicy(max_retry_after_s=1).next_wait(1, retry_after=2), GiveUp)
    default = RetryPolicy()
    first, fourth = default.next_wait(1), default.next_wait(4)
    assert isinstance(first, Wait)
    assert isinstance(fourth, Wait)
    assert 0.5 <= first.seconds <= 0.75
    assert 4.0 <= fourth.seconds <= 4.25
