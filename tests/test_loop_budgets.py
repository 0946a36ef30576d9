"""Budgets and brakes: steps, seconds, tokens, repeated actions, attempts and observations."""

from __future__ import annotations

from collections import Counter

import pytest

from ownloop import (
    Agent,
    InputRejected,
    Limits,
    ModelResponse,
    RunStatus,
    StopReason,
    TokenUsage,
    ToolCall,
)
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from ownloop.validators import citations_observed

from .helpers import research_registry


def _varied_searches() -> FunctionModel:
    counter = iter(range(1000))
    return FunctionModel(lambda request: tool_call("search_documents", query=f"q{next(counter)}"))


def test_token_budget_stops_the_run_and_keeps_the_work() -> None:
    """Tokens reported by the model count against max_total_tokens; the work so far is kept."""

    def spend(request):
        return ModelResponse(
            tool_calls=(
                ToolCall(
                    id=f"c{request.step}", name="search_documents", arguments={"query": "agent"}
                ),
            ),
            usage=TokenUsage(input_tokens=400, output_tokens=200),
        )

    result = Agent(
        FunctionModel(spend), research_registry(), limits=Limits(max_total_tokens=1000)
    ).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOTAL_TOKENS)
    assert result.usage.total_tokens == 1200
    assert result.usage.tool_calls == 1
    assert [item.id for item in result.evidence] == ["doc-agent-1"]


def test_repeated_action_is_stopped_before_it_runs_again() -> None:
    """The same call with the same arguments (any key order) stops at max_repeats in a row."""
    executed = Counter[str]()
    responses = iter(
        [
            ModelResponse(
                tool_calls=(
                    ToolCall(
                        id="a", name="search_documents", arguments='{"query":"x","max_results":2}'
                    ),
                )
            ),
            ModelResponse(
                tool_calls=(
                    ToolCall(
                        id="b", name="search_documents", arguments={"max_results": 2, "query": "x"}
                    ),
                )
            ),
            ModelResponse(
                tool_calls=(
                    ToolCall(
                        id="c",
                        name="search_documents",
                        arguments='{"max_results": 2, "query": "x"}',
                    ),
                )
            ),
        ]
    )
    model = FunctionModel(lambda request: next(responses))
    result = Agent(model, research_registry(executed), limits=Limits(max_repeats=3)).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.REPEATED_ACTION)
    assert executed["search_documents"] == 2
    assert "3 times in a row" in result.detail


def test_different_arguments_reset_the_repeat_count() -> None:
    """Alternating arguments never trip the repeat brake."""
    queries = iter(["x", "y", "x", "y", "x"])
    model = FunctionModel(lambda request: tool_call("search_documents", query=next(queries)))
    result = Agent(model, research_registry(), limits=Limits(max_steps=5, max_repeats=2)).run_sync(
        "q"
    )
    assert result.stop_reason is StopReason.MAX_STEPS


def test_seconds_brake_uses_the_injected_clock() -> None:
    """A run that uses up its seconds stops with the deadline and records the budget event."""
    clock = FakeClock(tick=2.0)
    result = Agent(
        _varied_searches(), research_registry(), limits=Limits(deadline_s=5), clock=clock
    ).run_sync("q")
    assert result.stop_reason is StopReason.DEADLINE
    exhausted = [event for event in result.trace if event.kind == "budget_exhausted"]
    assert exhausted[0].budget == "deadline_s"


def test_tool_attempt_budget_is_shared_across_calls() -> None:
    """max_tool_attempts counts every execution in the run, and stops the run when spent."""
    result = Agent(
        _varied_searches(), research_registry(), limits=Limits(max_tool_attempts=2)
    ).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOOL_ATTEMPTS)
    assert result.usage.tool_attempts == 2
    assert result.usage.tool_calls == 3


def test_observation_is_bounded_with_a_marker() -> None:
    """A tool result longer than max_observation_chars is truncated and flagged in the trace."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def dump() -> str:
        """Return a lot of text."""
        return "y" * 5000

    model = ScriptedModel([tool_call("dump"), final("done")])
    result = Agent(model, registry, limits=Limits(max_observation_chars=200)).run_sync("q")
    observation = model.requests[1].messages[-1].content
    assert len(observation) == 200
    assert "truncated" in observation
    added = next(event for event in result.trace if event.kind == "observation_added")
    assert (added.truncated, added.original_chars, added.chars) == (True, 5000, 200)


def test_completion_rejection_feeds_back_then_accepts() -> None:
    """A rejected answer is fed back to the model, which can then answer correctly."""
    model = ScriptedModel(
        [
            tool_call("search_documents", query="agent"),
            final("Made up [X-9]."),
            final("Real [doc-agent-1]."),
        ]
    )
    result = Agent(model, research_registry(), validators=[citations_observed()]).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.completion_rejections == 1
    feedback = model.requests[2].messages[-1]
    assert feedback.role == "user"
    assert "X-9" in feedback.content
    assert [event.kind for event in result.trace].count("completion_rejected") == 1


def test_oversized_task_is_refused_before_any_model_call() -> None:
    """A task longer than max_input_chars raises InputRejected naming the limit; no model call."""
    model = ScriptedModel([])
    agent = Agent(model, research_registry(), limits=Limits(max_input_chars=10))
    with pytest.raises(InputRejected, match="max_input_chars=10"):
        agent.run_sync("x" * 11)
    assert model.requests == []
    with pytest.raises(InputRejected, match="run_id"):
        agent.run_sync("short", run_id="r" * 129)


def test_evidence_ledger_merges_duplicates() -> None:
    """An id returned by several calls is one evidence item listing every call, in order."""
    model = ScriptedModel(
        [
            tool_call("search_documents", "s1", query="agent"),
            tool_call("read_document", "r1", document_id="doc-agent-1"),
            final("Agents act [doc-agent-1]."),
        ]
    )
    result = Agent(model, research_registry()).run_sync("q")
    assert len(result.evidence) == 1
    item = result.evidence[0]
    assert (item.id, item.tool, item.call_ids, item.title) == (
        "doc-agent-1",
        "search_documents",
        ("s1", "r1"),
        "doc-agent-1",
    )


def test_trace_sinks_receive_every_event_in_order() -> None:
    """A trace sink sees exactly the result's trace, event by event, as it is recorded."""
    seen: list[int] = []
    model = ScriptedModel([tool_call("search_documents", query="agent"), final("done")])
    agent = Agent(model, research_registry(), trace_sinks=[lambda event: seen.append(event.seq)])
    result = agent.run_sync("q")
    assert seen == [event.seq for event in result.trace]
    assert len(seen) >= 8


def test_an_adapters_re_asks_count_as_model_attempts() -> None:
    """A response that took three provider requests uses three model attempts."""
    model = ScriptedModel([ModelResponse(final_output="ok", provider_requests=3)])
    result = Agent(model, research_registry()).run_sync("q")
    assert (result.usage.model_attempts, result.usage.model_requests) == (3, 3)
    responded = next(event for event in result.trace if event.kind == "model_responded")
    assert responded.provider_requests == 3
