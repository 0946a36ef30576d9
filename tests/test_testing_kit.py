"""The public test kit: strict scripted models, function models, fake clocks, request switch."""

from __future__ import annotations

import asyncio

import pytest

from ownloop import Agent, ConfigurationError, ModelRequest, RunStatus, UnexpectedModelCall
from ownloop.models import check_model_requests_allowed, model_requests_allowed
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, block_model_requests, final

from .helpers import research_registry


def test_scripted_model_fails_on_a_call_beyond_its_script() -> None:
    """A call past the end of the script raises UnexpectedModelCall out of the run."""
    model = ScriptedModel([])
    with pytest.raises(UnexpectedModelCall, match="0 step"):
        Agent(model, research_registry()).run_sync("q")


def test_assert_complete_reports_unconsumed_steps() -> None:
    """assert_complete fails while steps remain and passes once all are played."""
    model = ScriptedModel([final("a"), final("b")])
    Agent(model, research_registry()).run_sync("q")
    assert model.remaining == 1
    with pytest.raises(AssertionError, match="1 unconsumed"):
        model.assert_complete()


def test_function_model_accepts_sync_and_async_functions() -> None:
    """FunctionModel answers with sync or async functions of the request."""

    async def answer(request: ModelRequest):
        return final(f"step {request.step}")

    for function in (lambda request: final(f"step {request.step}"), answer):
        model = FunctionModel(function)
        result = Agent(model, research_registry()).run_sync("q")
        assert result.output == "step 1"
        assert len(model.requests) == 1


def test_fake_clock_advances_only_when_told() -> None:
    """FakeClock stands still, advances on demand and on sleep, and refuses to go back."""
    clock = FakeClock(tick=0.5)
    assert clock.monotonic() == 0.0
    assert clock.monotonic() == 0.5
    asyncio.run(clock.sleep(2))
    assert clock.slept == [2]
    assert clock.monotonic() == 3.0
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


def test_model_requests_can_be_switched_off() -> None:
    """Inside block_model_requests a real adapter's request check raises ConfigurationError."""
    with block_model_requests():
        assert not model_requests_allowed()
        with pytest.raises(ConfigurationError, match="OWNLOOP_ALLOW_MODEL_REQUESTS"):
            check_model_requests_allowed("OpenAIChatModel")


def test_environment_switch_blocks_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """OWNLOOP_ALLOW_MODEL_REQUESTS=0 in the environment switches real requests off."""
    monkeypatch.setenv("OWNLOOP_ALLOW_MODEL_REQUESTS", "0")
    assert not model_requests_allowed()
    monkeypatch.setenv("OWNLOOP_ALLOW_MODEL_REQUESTS", "1")
    assert model_requests_allowed()
    check_model_requests_allowed("OpenAIChatModel")


def test_run_sync_refuses_a_running_event_loop() -> None:
    """run_sync inside a running loop raises ConfigurationError pointing at await run()."""
    agent = Agent(ScriptedModel([final("x")]), research_registry())

    async def inside() -> None:
        with pytest.raises(ConfigurationError, match=r"await agent\.run"):
            agent.run_sync("q")
        result = await agent.run("q")
        assert result.status is RunStatus.COMPLETED

    asyncio.run(inside())


def test_agent_rejects_an_object_without_respond() -> None:
    """An object that is not a model port is refused when the agent is built."""
    with pytest.raises(ConfigurationError, match="respond"):
        Agent(object(), research_registry())  # type: ignore[arg-type]
