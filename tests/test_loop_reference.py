"""The reference runtime's cases, reproduced with ownloop's loop."""

from __future__ import annotations

from collections import Counter

import pytest

from ownloop import (
    Agent,
    ConfigurationError,
    InputRejected,
    Limits,
    ModelResponse,
    RunStatus,
    StopReason,
)
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from ownloop.validators import citations_observed

from .helpers import research_registry


def test_success_in_one_tool_call() -> None:
    """One search then a cited answer completes with exactly one tool call."""
    model = ScriptedModel(
        [tool_call("search_documents", query="agent"), final("Agents act [doc-agent-1].")]
    )
    agent = Agent(model, research_registry(), validators=[citations_observed()])
    result = agent.run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.COMPLETED, StopReason.FINAL_OUTPUT)
    assert result.usage.tool_calls == 1
    assert result.output == "Agents act [doc-agent-1]."
    assert [item.id for item in result.evidence] == ["doc-agent-1"]
    model.assert_complete()


def test_event_numbers_are_ordered_without_gaps() -> None:
    """Trace events are numbered 1, 2, 3... and all carry the run id."""
    model = ScriptedModel([tool_call("search_documents", query="agent"), final("done")])
    result = Agent(model, research_registry()).run_sync("agent", run_id="ordered")
    assert [event.seq for event in result.trace] == list(range(1, len(result.trace) + 1))
    assert {event.run_id for event in result.trace} == {"ordered"}
    assert result.trace[0].kind == "run_started"
    assert result.trace[-1].kind == "run_finished"


def test_unverified_citation_is_rejected() -> None:
    """A final answer citing evidence no tool returned never completes."""
    model = FunctionModel(lambda request: final("Unsupported [fake-1]."))
    agent = Agent(model, research_registry(), validators=[citations_observed()])
    result = agent.run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.COMPLETION_REJECTED)
    assert "fake-1" in result.detail
    assert result.output is None


def test_invalid_decision_format_fails_the_run() -> None:
    """A response with no answer, no tool call and no stop fails as a model error."""
    result = Agent(ScriptedModel([ModelResponse()]), research_registry()).run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert "neither" in result.detail


def test_tool_budget_stops_the_run() -> None:
    """With max_tool_calls=2 a model that keeps calling tools stops after two calls."""
    queries = iter(["a", "b", "c", "d"])
    model = FunctionModel(lambda request: tool_call("search_documents", query=next(queries)))
    result = Agent(model, research_registry(), limits=Limits(max_tool_calls=2)).run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOOL_CALLS)
    assert result.usage.tool_calls == 2
    exhausted = [event for event in result.trace if event.kind == "budget_exhausted"]
    assert len(exhausted) == 1
    assert (exhausted[0].budget, exhausted[0].limit, exhausted[0].observed) == (
        "max_tool_calls",
        2,
        2,
    )


def test_step_budget_stops_the_run() -> None:
    """With max_steps=2 a model that never answers stops before a third model call."""
    counter = iter(range(100))
    model = FunctionModel(lambda request: tool_call("search_documents", query=f"q{next(counter)}"))
    result = Agent(model, research_registry(), limits=Limits(max_steps=2)).run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_STEPS)
    assert result.usage.steps == 2
    assert len(model.requests) == 2


def test_tool_failure_fails_the_run() -> None:
    """A read tool that keeps timing out is retried within its cap, then fails the run."""
    registry = ToolRegistry()
    attempts = Counter[str]()

    @registry.tool(effect="read")
    def search_documents(query: str) -> str:
        """Search.

        Args:
            query: Keywords.
        """
        attempts["search"] += 1
        raise TimeoutError("injected")

    clock = FakeClock()
    limits = Limits(max_retries_per_call=2)
    model = ScriptedModel([tool_call("search_documents", query="agent")])
    result = Agent(model, registry, limits=limits, clock=clock).run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_ERROR)
    assert attempts["search"] == 3
    assert result.usage.tool_attempts == 3
    assert len(clock.slept) == 2


def test_explicit_stop_is_recorded() -> None:
    """The model's explicit stop ends the run as stopped with its reason in the detail."""
    model = ScriptedModel([ModelResponse(stop_reason="INSUFFICIENT_EVIDENCE")])
    result = Agent(model, research_registry()).run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.EXPLICIT_STOP)
    assert "INSUFFICIENT_EVIDENCE" in result.detail
    responded = [event for event in result.trace if event.kind == "model_responded"]
    assert responded[0].stop_reason == "INSUFFICIENT_EVIDENCE"


def test_bad_configuration_is_refused() -> None:
    """Impossible limits raise ConfigurationError naming the field."""
    with pytest.raises(ConfigurationError, match="max_steps"):
        Limits(max_steps=0)
    with pytest.raises(ConfigurationError, match="deadline_s"):
        Limits(deadline_s=-1)


@pytest.mark.parametrize("task", ["", "   \n"])
def test_empty_question_is_refused_before_any_model_call(task: str) -> None:
    """An empty task raises InputRejected and the model is never called."""
    model = ScriptedModel([])
    with pytest.raises(InputRejected, match="empty"):
        Agent(model, research_registry()).run_sync(task)
    assert model.requests == []


def test_deadline_with_a_fake_clock() -> None:
    """A run whose fake clock passes the deadline stops with the deadline reason."""
    clock = FakeClock(tick=0.3)
    counter = iter(range(100))
    model = FunctionModel(lambda request: tool_call("search_documents", query=f"q{next(counter)}"))
    agent = Agent(model, research_registry(), limits=Limits(deadline_s=1.0), clock=clock)
    result = agent.run_sync("agent")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert "deadline_s" in result.detail
