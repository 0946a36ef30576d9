"""The course chapter's offline loop, and the changes it asks to make one at a time."""

from __future__ import annotations

from collections import Counter

from ownloop import (
    Agent,
    Limits,
    ModelResponse,
    RunStatus,
    StopReason,
    ToolCall,
    TransientModelError,
)
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call

from .helpers import research_registry


def _search_read_finish(
    answer: str = "Evaluation should precede autonomy [R-02].",
) -> list[ModelResponse]:
    return [
        tool_call("search_documents", "search-1", query="evaluation autonomy", max_results=2),
        tool_call("read_document", "read-1", document_id="R-02"),
        final(answer),
    ]


def test_search_read_finish_counters() -> None:
    """The offline search -> read -> finish run completes with 3 steps, 2 calls and 2 attempts."""
    limits = Limits(max_steps=4, max_tool_calls=3, max_tool_attempts=3)
    result = Agent(
        ScriptedModel(_search_read_finish()), research_registry(), limits=limits
    ).run_sync("Explain evaluation before autonomy", run_id="offline-core")
    assert result.status is RunStatus.COMPLETED
    assert (result.usage.steps, result.usage.tool_calls, result.usage.tool_attempts) == (3, 2, 2)
    assert "[R-02]" in (result.output or "")
    kinds = [event.kind for event in result.trace]
    assert kinds.count("tool_started") == 2
    assert kinds.count("observation_added") == 2


def test_undeclared_argument_is_rejected_and_handler_never_runs() -> None:
    """An undeclared 'admin' argument is rejected: counted as a call, not an attempt."""
    executed = Counter[str]()
    bad = ModelResponse(
        tool_calls=(
            ToolCall(
                id="bad-call",
                name="search_documents",
                arguments={"query": "agent safety", "max_results": 2, "admin": True},
            ),
        )
    )
    model = ScriptedModel([bad, final("The invalid call was rejected; no search executed.")])
    result = Agent(model, research_registry(executed)).run_sync("Search safely")
    assert result.status is RunStatus.COMPLETED
    assert executed["search_documents"] == 0
    assert (result.usage.tool_calls, result.usage.tool_attempts) == (1, 0)
    rejected = [event for event in result.trace if event.kind == "tool_rejected"]
    assert len(rejected) == 1
    assert rejected[0].call_id == "bad-call"
    assert "admin" in rejected[0].reason
    observation = model.requests[1].messages[-1]
    assert observation.role == "tool"
    assert "admin" in observation.content


def test_unknown_tool_becomes_an_observation() -> None:
    """A call to an unknown tool runs no handler and tells the model which tools exist."""
    executed = Counter[str]()
    model = ScriptedModel([tool_call("delete_everything", confirm=True), final("ok")])
    result = Agent(model, research_registry(executed)).run_sync("agent")
    assert result.status is RunStatus.COMPLETED
    assert sum(executed.values()) == 0
    assert (result.usage.tool_calls, result.usage.tool_attempts) == (1, 0)
    observation = model.requests[1].messages[-1].content
    assert "search_documents" in observation
    assert "read_document" in observation


def test_one_tool_call_budget_stops_before_the_read() -> None:
    """With max_tool_calls=1 the run stops before the read executes."""
    executed = Counter[str]()
    model = ScriptedModel(_search_read_finish()[:2])
    result = Agent(model, research_registry(executed), limits=Limits(max_tool_calls=1)).run_sync(
        "q"
    )
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOOL_CALLS)
    assert executed == Counter({"search_documents": 1})
    assert result.usage.tool_calls == 1
    model.assert_complete()


def test_one_transient_model_error_is_retried_and_visible() -> None:
    """A transient model error is retried once and the retry shows in the trace."""
    clock = FakeClock()
    steps = _search_read_finish()
    model = ScriptedModel(
        [steps[0], TransientModelError("overloaded", category="overloaded"), *steps[1:]]
    )
    result = Agent(model, research_registry(), clock=clock).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.model_attempts == 4
    assert result.usage.model_requests == 3
    failed = [event for event in result.trace if event.kind == "model_failed"]
    retries = [event for event in result.trace if event.kind == "retry_scheduled"]
    assert len(failed) == 1
    assert failed[0].retryable
    assert [(event.target, event.next_attempt) for event in retries] == [("model", 2)]
    assert clock.slept == [retries[0].delay_s]


def test_overlong_final_answer_is_truncated_with_a_marker() -> None:
    """A final answer longer than max_output_chars is cut, marked and traced."""
    model = ScriptedModel([final("x" * 500)])
    result = Agent(model, research_registry(), limits=Limits(max_output_chars=100)).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert result.output is not None
    assert len(result.output) == 100
    assert "truncated" in result.output
    truncated = [event for event in result.trace if event.kind == "output_truncated"]
    assert [(event.original_chars, event.chars) for event in truncated] == [(500, 100)]
