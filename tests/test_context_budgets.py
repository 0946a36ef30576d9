"""Budgets before sending: oversize requests refused, money capped, tokens estimated."""

from __future__ import annotations

import sys
import types

import pytest

from ownloop import (
    Agent,
    ConfigurationError,
    ContextPolicy,
    Limits,
    ModelResponse,
    Price,
    PriceTable,
    RunStatus,
    StopReason,
    TokenUsage,
)
from ownloop.contracts import AssistantMessage, BudgetExhausted, ToolCall, UserMessage
from ownloop.cost import cost_of
from ownloop.testing import FunctionModel, ScriptedModel, final
from ownloop.tokens import (
    estimate_message_tokens,
    estimate_request_tokens,
    heuristic_tokens,
    token_counter,
)

from .context_kit import page_registry, paging_script, read


def _breach(result) -> BudgetExhausted:
    (event,) = [e for e in result.trace if isinstance(e, BudgetExhausted)]
    return event


def test_an_oversize_first_request_is_refused_before_it_is_sent() -> None:
    """A request whose estimate alone crosses max_total_tokens never reaches the model."""
    model = ScriptedModel([])
    registry = page_registry()
    task = "t" * 4_000
    result = Agent(model, registry, limits=Limits(max_total_tokens=500)).run_sync(task)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOTAL_TOKENS)
    assert model.requests == []
    event = _breach(result)
    expected = estimate_request_tokens([UserMessage(content=task)], registry.specs())
    assert (event.budget, event.limit, event.checkpoint) == (
        "max_total_tokens",
        500,
        "before_model_call",
    )
    assert event.observed == expected
    assert result.usage.steps == 0


def test_a_request_that_would_cross_the_budget_mid_run_is_refused() -> None:
    """Tokens used so far plus the next request's estimate crossing the budget stop the run."""

    def spend(request):
        response = read(request.step)
        return response.model_copy(update={"usage": TokenUsage(input_tokens=600, output_tokens=50)})

    model = FunctionModel(spend)
    result = Agent(model, page_registry(), limits=Limits(max_total_tokens=2_000)).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOTAL_TOKENS)
    assert len(model.requests) == 2
    upcoming = estimate_request_tokens(result.messages, page_registry().specs())
    assert _breach(result).observed == 1_300 + upcoming > 2_000
    assert result.usage.total_tokens == 1_300  # the refused request spent nothing


def test_the_refusal_uses_the_policy_counter() -> None:
    """A context policy's counter is the one that estimates requests for the budget."""
    model = ScriptedModel([final("ok")])
    policy = ContextPolicy(counter=len)  # one token per character: far above the heuristic
    agent = Agent(model, limits=Limits(max_total_tokens=150), context=policy)
    assert agent.run_sync("q" * 200).status is RunStatus.STOPPED
    assert model.requests == []
    default = Agent(ScriptedModel([final("ok")]), limits=Limits(max_total_tokens=150))
    assert default.run_sync("q" * 200).status is RunStatus.COMPLETED


PRICE = Price(input=1_000.0, output=0.0)  # 0.001 per input token: estimates matter
RESPONSE_USAGE = TokenUsage(input_tokens=100)


def _priced_agent(limits: Limits, steps: int = 6):
    model = ScriptedModel(
        [
            r.model_copy(update={"usage": RESPONSE_USAGE, "model": "m-1"})
            for r in paging_script(steps)
        ],
        model_name="m-1",
    )
    registry = page_registry(chars=40)
    agent = Agent(model, registry, limits=limits, prices=PriceTable({"m-1": PRICE}))
    return agent, model, registry


def test_usage_cost_accumulates_the_cost_of_every_response() -> None:
    """Each response's tokens are priced and added to usage.cost."""
    agent, model, _ = _priced_agent(Limits(max_steps=10))
    result = agent.run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.cost == pytest.approx(len(model.requests) * cost_of(RESPONSE_USAGE, PRICE))


def test_max_cost_stops_before_the_request_that_would_cross_it() -> None:
    """Spent plus the next request's estimated input cost crossing max_cost stops the run first."""
    agent, model, registry = _priced_agent(Limits(max_steps=10, max_cost=0.25))
    result = agent.run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_COST)
    assert len(model.requests) == 2
    assert result.usage.cost == pytest.approx(0.2)
    upcoming = estimate_request_tokens(result.messages, registry.specs()) * PRICE.input / 1e6
    event = _breach(result)
    assert (event.budget, event.limit) == ("max_cost", 0.25)
    assert event.observed == pytest.approx(0.2 + upcoming)
    assert "max_cost" in result.detail


def test_max_cost_without_prices_is_a_configuration_error() -> None:
    """A money budget needs a price table to mean anything."""
    with pytest.raises(ConfigurationError, match="price table"):
        Agent(ScriptedModel([]), limits=Limits(max_cost=1.0))
    Agent(ScriptedModel([]), limits=Limits(max_cost=1.0), prices=PriceTable({}, default=PRICE))


def test_price_table_lookup_rules() -> None:
    """Exact names win, dated snapshots fall back to their base name, then the default."""
    base, dated, default = (
        Price(input=1, output=2),
        Price(input=3, output=4),
        Price(input=9, output=9),
    )
    table = PriceTable({"gpt-4o": base, "gpt-4o-2024-05-13": dated}, default=default)
    assert table.price("gpt-4o") is base
    assert table.price("gpt-4o-2024-05-13") is dated
    assert table.price("gpt-4o-2024-08-06") is base
    assert table.price("claude-x-20240620") is default
    assert PriceTable({"claude-x": base}).price("claude-x-20240620") is base
    assert PriceTable({"gpt-4": base}).price("gpt-4-0613") is base
    assert table.price(None) is default
    with pytest.raises(ConfigurationError, match=r"no price for model 'other' \(priced: a, b\)"):
        PriceTable({"b": base, "a": base}).price("other")
    with pytest.raises(ConfigurationError, match="invalid price table"):
        PriceTable({"m": {"input": -1, "output": 0}})
    assert (
        repr(PriceTable({"m": {"input": 1, "output": 1}}))
        == "PriceTable(models=['m'], default=False)"
    )


def test_cached_input_tokens_are_priced_at_the_cached_price() -> None:
    """Cached input costs its own price, or the input price when none is given."""
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000, cached_tokens=400_000)
    assert cost_of(usage, Price(input=2, output=8, cached_input=0.5)) == pytest.approx(
        1.2 + 0.2 + 8
    )
    assert cost_of(usage, Price(input=2, output=8)) == pytest.approx(2 + 8)


def test_a_response_from_an_unpriced_model_does_not_crash_the_run() -> None:
    """A provider naming a model the table lacks still yields a result (priced as configured)."""
    model = ScriptedModel([ModelResponse(final_output="hi", model="gpt-9")], model_name="m-1")
    agent = Agent(model, prices=PriceTable({"m-1": PRICE}))
    assert agent.run_sync("q").status is RunStatus.COMPLETED


def test_a_summary_that_would_cross_the_token_budget_is_not_requested() -> None:
    """Compaction falls back to the placeholder rather than send a summary over the budget."""

    def spend(request):
        return read(request.step).model_copy(update={"usage": TokenUsage(input_tokens=800)})

    summarizer = ScriptedModel([final("summary")] * 5)
    model = FunctionModel(spend)
    agent = Agent(
        model,
        page_registry(),
        context=ContextPolicy(max_request_tokens=1_000, keep_last_turns=1),
        summarizer=summarizer,
        limits=Limits(max_total_tokens=2_000),
    )
    result = agent.run_sync("q")
    assert (len(model.requests), result.stop_reason) == (2, StopReason.MAX_TOTAL_TOKENS)
    assert summarizer.requests == []


def test_heuristic_counts_four_characters_per_token_and_each_cjk_character() -> None:
    """English is estimated at four characters a token; CJK characters count one each."""
    assert heuristic_tokens("") == 0
    assert heuristic_tokens("abcd") == 1
    assert heuristic_tokens("abcde") == 2
    assert heuristic_tokens("杭州比南京多多少人口") == 10
    assert heuristic_tokens("Привет, мир") == 3  # Cyrillic is counted like Latin text
    assert heuristic_tokens("ab杭州") == 3


def test_message_estimates_include_framing_and_tool_calls() -> None:
    """A message costs its text, four tokens of framing, and each call's name and arguments."""
    assert estimate_message_tokens(UserMessage(content="abcd")) == 5
    as_dict = AssistantMessage(tool_calls=(ToolCall(id="c", name="read", arguments={"a": 1}),))
    as_text = AssistantMessage(tool_calls=(ToolCall(id="c", name="read", arguments='{"a": 1}'),))
    assert estimate_message_tokens(as_dict) == estimate_message_tokens(as_text) == 4 + 1 + 2 + 4
    specs = page_registry().specs()
    with_tools = estimate_request_tokens([UserMessage(content="abcd")], specs)
    assert with_tools > estimate_request_tokens([UserMessage(content="abcd")])


@pytest.fixture
def fresh_counter():
    """Forget the cached counter before and after the test."""
    token_counter.cache_clear()
    yield
    token_counter.cache_clear()


def test_token_counter_falls_back_to_the_heuristic_without_tiktoken(
    fresh_counter, monkeypatch
) -> None:
    """Without tiktoken installed (or its encoding), the heuristic counts."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import fails as if not installed
    assert token_counter() is heuristic_tokens


def test_token_counter_uses_tiktoken_when_its_encoding_loads(fresh_counter, monkeypatch) -> None:
    """With tiktoken and its o200k_base encoding available, tokens are counted exactly."""

    class Encoding:
        def encode(self, text, disallowed_special=()):
            assert disallowed_special == ()  # special-token text never raises
            return text.split()

    fake = types.ModuleType("tiktoken")
    fake.get_encoding = lambda name: Encoding() if name == "o200k_base" else None
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    count = token_counter()
    assert count("three little words") == 3
    assert ContextPolicy(counter=count).counter("a b") == 2


def test_token_counter_falls_back_when_the_encoding_cannot_load(fresh_counter, monkeypatch) -> None:
    """The tiktoken package downloads encodings on first use; offline the heuristic counts."""
    fake = types.ModuleType("tiktoken")

    def unavailable(name):
        raise OSError("cannot download the encoding")

    fake.get_encoding = unavailable
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    assert token_counter() is heuristic_tokens
