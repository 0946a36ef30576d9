"""Compaction with a summarizer: its calls count against the run's budgets, and it may fail."""

from __future__ import annotations

import pytest

from ownloop import (
    Agent,
    ContextPolicy,
    Limits,
    Price,
    PriceTable,
    RunStatus,
    StopReason,
    TokenUsage,
    TransientModelError,
)
from ownloop.contracts import ContextCompacted, ModelRequest, ModelResponse, SystemMessage
from ownloop.cost import cost_of
from ownloop.testing import FunctionModel, ScriptedModel

from .context_kit import INSTRUCTIONS, TASK, page_registry, paging_script

POLICY = ContextPolicy(max_request_tokens=1_500, keep_last_turns=2)
SUMMARY_USAGE = TokenUsage(input_tokens=700, output_tokens=30)


def _summarizer(text="Pages were read; nothing unusual.", usage=SUMMARY_USAGE):
    return FunctionModel(
        lambda request: ModelResponse(final_output=text, usage=usage, model="summarizer"),
        model_name="summarizer",
    )


def _run(summarizer, pages=5, limits=None, **options):
    model = ScriptedModel(paging_script(pages))
    agent = Agent(
        model,
        page_registry(),
        instructions=INSTRUCTIONS,
        context=POLICY,
        summarizer=summarizer,
        limits=limits or Limits(max_steps=20),
        **options,
    )
    return agent.run_sync(TASK), model


def _compactions(result):
    return [event for event in result.trace if isinstance(event, ContextCompacted)]


def test_summary_stands_for_the_removed_turns() -> None:
    """The summarizer sees the removed turns and its summary follows the placeholder's facts."""
    summarizer = _summarizer()
    result, model = _run(summarizer)
    assert result.status is RunStatus.COMPLETED
    assert len(summarizer.requests) == result.usage.compactions > 0
    asked: ModelRequest = summarizer.requests[0]
    assert isinstance(asked.messages[0], SystemMessage)
    assert "Summarize" in asked.messages[0].content
    assert 'tool: {"id":"page-1"' in asked.messages[1].content
    assert "read_page" in asked.messages[1].content  # the dropped call is named
    placeholder = model.requests[-1].messages[2].content
    assert "Evidence observed so far" in placeholder
    assert placeholder.endswith("Summary of the removed turns:\nPages were read; nothing unusual.")
    assert all(event.summarized for event in _compactions(result))


def test_summarizer_calls_count_as_model_attempts_requests_and_tokens() -> None:
    """Each summary is a model attempt and request, and its tokens are the run's tokens."""
    summarizer = _summarizer()
    result, model = _run(summarizer)
    calls = len(summarizer.requests)
    assert result.usage.model_attempts == len(model.requests) + calls
    assert result.usage.model_requests == len(model.requests) + calls
    assert result.usage.input_tokens == calls * SUMMARY_USAGE.input_tokens
    assert result.usage.output_tokens == calls * SUMMARY_USAGE.output_tokens


def test_summarizer_tokens_can_exhaust_the_token_budget_before_the_next_request() -> None:
    """A summary's tokens plus the next request's estimate crossing the budget stops the run."""
    summarizer = _summarizer(usage=TokenUsage(input_tokens=9_000, output_tokens=500))
    result, model = _run(summarizer, limits=Limits(max_steps=20, max_total_tokens=10_000))
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOTAL_TOKENS)
    assert len(summarizer.requests) == 1
    assert len(model.requests) == 3  # the request after the summary was never sent


def test_summarizer_cost_is_charged_to_the_run() -> None:
    """With prices, the summary's cost is part of usage.cost."""
    prices = PriceTable(
        {"summarizer": Price(input=1.0, output=2.0)}, default=Price(input=0.0, output=0.0)
    )
    summarizer = _summarizer()
    result, _ = _run(summarizer, prices=prices)
    expected = len(summarizer.requests) * cost_of(SUMMARY_USAGE, Price(input=1.0, output=2.0))
    assert result.usage.cost == pytest.approx(expected)


@pytest.mark.parametrize(
    "failure",
    [TransientModelError("overloaded"), RuntimeError("summarizer bug")],
    ids=["provider-error", "crash"],
)
def test_a_failing_summarizer_falls_back_to_the_placeholder(failure) -> None:
    """When the summary call fails, the placeholder alone stands for the turns; the run goes on."""
    summarizer = ScriptedModel([failure] * 10)
    result, model = _run(summarizer)
    assert result.status is RunStatus.COMPLETED
    compactions = _compactions(result)
    assert compactions
    assert not any(event.summarized for event in compactions)
    assert "Summary" not in model.requests[-1].messages[2].content
    assert result.usage.model_attempts == len(model.requests) + len(summarizer.requests)
    assert result.usage.model_requests == len(model.requests)


def test_an_empty_summary_falls_back_to_the_placeholder() -> None:
    """A summary with no text is not used."""
    result, model = _run(_summarizer(text=""))
    assert not any(event.summarized for event in _compactions(result))
    assert model.requests[-1].messages[2].content.endswith("]")


def test_no_summary_is_asked_when_no_model_attempt_is_left() -> None:
    """Without an attempt to spare, compaction uses the placeholder and the budget stops the run."""
    summarizer = _summarizer()
    result, model = _run(summarizer, limits=Limits(max_steps=20, max_model_attempts=3))
    assert summarizer.requests == []
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_MODEL_ATTEMPTS)
    assert [event.summarized for event in _compactions(result)] == [False]
    assert len(model.requests) == 3


def test_a_long_summary_is_bounded_like_an_observation() -> None:
    """The summary is cut to max_observation_chars."""
    limits = Limits(max_steps=20, max_observation_chars=1_200)
    result, model = _run(_summarizer(text="s" * 5_000), limits=limits)
    assert result.status is RunStatus.COMPLETED
    placeholder = model.requests[-1].messages[2].content
    assert placeholder.endswith(":\n" + "s" * 1_200)


def test_a_summary_that_would_enlarge_the_request_is_dropped() -> None:
    """A compacted request is never larger than the one it replaces: a big summary is left out."""
    limits = Limits(max_steps=20, max_observation_chars=2_100)
    result, model = _run(_summarizer(text="s" * 5_000), limits=limits)
    assert result.status is RunStatus.COMPLETED
    placeholder = model.requests[-1].messages[2].content
    assert "Summary of the removed turns" not in placeholder
    compactions = [event for event in result.trace if isinstance(event, ContextCompacted)]
    assert compactions
    for event in compactions:
        assert event.after_tokens < event.before_tokens
        assert not event.summarized
