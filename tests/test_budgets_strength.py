"""Budget checks at their exact edges, with the labels a breach reports (mutation-tested)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ownloop.budgets import (
    BudgetBreach,
    ask_send_budget,
    check_after_usage,
    check_before_model_attempt,
    check_before_model_call,
    check_before_tool_attempt,
    check_before_tool_call,
    check_cost,
    check_deadline,
    check_tokens,
    send_budget,
)
from ownloop.contracts import Limits, StopReason, TokenUsage, Usage


def _breach(  # noqa: PLR0917 - mirrors BudgetBreach's positional fields
    budget: str,
    limit: float,
    observed: float,
    checkpoint: str,
    reason: StopReason,
    upcoming: float = 0.0,
) -> BudgetBreach:
    return BudgetBreach(budget, limit, observed, checkpoint, reason, upcoming)  # type: ignore[arg-type]


def test_a_request_landing_exactly_on_the_token_limit_may_be_sent() -> None:
    """Used plus upcoming tokens equal to max_total_tokens is allowed; one more is a breach."""
    limits = Limits(max_total_tokens=100)
    usage = Usage(input_tokens=60)
    assert check_tokens(limits, usage, "before_model_call", upcoming=40) is None
    assert check_tokens(limits, usage, "before_model_call", upcoming=41) == _breach(
        "max_total_tokens", 100, 101, "before_model_call", StopReason.MAX_TOTAL_TOKENS, 41
    )


def test_tokens_used_reaching_the_limit_is_a_breach_without_an_upcoming_request() -> None:
    """With no upcoming estimate, used tokens equal to the limit end the run; one fewer does not."""
    limits = Limits(max_total_tokens=100)
    assert check_tokens(limits, Usage(input_tokens=99), "after_usage") is None
    assert check_tokens(limits, Usage(input_tokens=60, output_tokens=40), "after_usage") == _breach(
        "max_total_tokens", 100, 100, "after_usage", StopReason.MAX_TOTAL_TOKENS
    )


def test_spending_exactly_max_cost_is_allowed() -> None:
    """Spent plus upcoming cost equal to max_cost may go on; anything above is a max_cost breach."""
    limits = Limits(max_cost=1.0)
    assert check_cost(limits, Usage(cost=0.75), upcoming=0.25) is None
    assert check_cost(limits, Usage(cost=0.75), upcoming=0.5) == _breach(
        "max_cost", 1.0, 1.25, "before_model_call", StopReason.MAX_COST, 0.5
    )
    assert check_cost(Limits(), Usage(cost=1e9), upcoming=1e9) is None


def test_the_step_budget_breach_names_steps_before_the_model_call() -> None:
    """Running out of steps names max_steps at before_model_call, ahead of tokens."""
    limits = Limits(max_steps=2, max_total_tokens=10)
    usage = Usage(steps=2, input_tokens=10)
    assert check_before_model_call(limits, usage) == _breach(
        "max_steps", 2, 2, "before_model_call", StopReason.MAX_STEPS
    )
    assert check_before_model_call(limits, Usage(steps=1, input_tokens=9)) is None


def test_the_token_breach_before_a_model_call_is_labelled_before_model_call() -> None:
    """With steps left but tokens spent, the breach is max_total_tokens at before_model_call."""
    limits = Limits(max_steps=5, max_total_tokens=10)
    assert check_before_model_call(limits, Usage(steps=1, output_tokens=10)) == _breach(
        "max_total_tokens", 10, 10, "before_model_call", StopReason.MAX_TOTAL_TOKENS
    )


@pytest.mark.parametrize("checkpoint", [None, "before_retry"])
def test_the_model_attempt_breach_names_its_budget_and_checkpoint(checkpoint: str | None) -> None:
    """max_model_attempts breaches at before_model_attempt by default, or the checkpoint given."""
    limits = Limits(max_model_attempts=3)
    usage = Usage(model_attempts=3)
    if checkpoint is None:
        breach = check_before_model_attempt(limits, usage)
    else:
        breach = check_before_model_attempt(limits, usage, "before_retry")
    assert breach == _breach(
        "max_model_attempts",
        3,
        3,
        checkpoint or "before_model_attempt",
        StopReason.MAX_MODEL_ATTEMPTS,
    )
    assert check_before_model_attempt(limits, Usage(model_attempts=2)) is None


def test_the_tool_call_breach_names_its_budget_checkpoint_and_reason() -> None:
    """max_tool_calls breaches at before_tool_call with the max_tool_calls stop reason."""
    limits = Limits(max_tool_calls=2)
    assert check_before_tool_call(limits, Usage(tool_calls=2)) == _breach(
        "max_tool_calls", 2, 2, "before_tool_call", StopReason.MAX_TOOL_CALLS
    )
    assert check_before_tool_call(limits, Usage(tool_calls=1)) is None


@pytest.mark.parametrize("checkpoint", [None, "before_retry"])
def test_the_tool_attempt_breach_names_its_budget_and_checkpoint(checkpoint: str | None) -> None:
    """max_tool_attempts breaches at before_tool_attempt by default, or the checkpoint given."""
    limits = Limits(max_tool_attempts=4)
    usage = Usage(tool_attempts=4)
    if checkpoint is None:
        breach = check_before_tool_attempt(limits, usage)
    else:
        breach = check_before_tool_attempt(limits, usage, "before_retry")
    assert breach == _breach(
        "max_tool_attempts",
        4,
        4,
        checkpoint or "before_tool_attempt",
        StopReason.MAX_TOOL_ATTEMPTS,
    )
    assert check_before_tool_attempt(limits, Usage(tool_attempts=3)) is None


def test_the_deadline_breach_is_reached_at_the_deadline_itself() -> None:
    """Elapsed time equal to deadline_s is a deadline breach at the checkpoint given."""
    limits = Limits(deadline_s=5)
    assert check_deadline(limits, 4.999, "before_retry") is None
    assert check_deadline(limits, 5.0, "before_retry") == _breach(
        "deadline_s", 5, 5.0, "before_retry", StopReason.DEADLINE
    )


def test_a_breach_describes_budget_checkpoint_limit_and_observed() -> None:
    """describe() reads as a sentence: the budget, the checkpoint in words, limit and observed."""
    breach = _breach("max_tool_attempts", 4, 4, "before_tool_attempt", StopReason.MAX_TOOL_ATTEMPTS)
    assert breach.describe() == (
        "budget max_tool_attempts exhausted before tool attempt: limit 4, observed 4"
    )


@given(
    used=st.integers(min_value=0, max_value=1_000),
    upcoming=st.integers(min_value=0, max_value=1_000),
    limit=st.integers(min_value=1, max_value=1_000),
)
def test_tokens_breach_exactly_when_the_budget_is_crossed(
    used: int, upcoming: int, limit: int
) -> None:
    """A request is refused iff it would cross the limit, or the limit is already reached."""
    breach = check_tokens(
        Limits(max_total_tokens=limit), Usage(input_tokens=used), "after_usage", upcoming
    )
    crossed = (upcoming > 0 and used + upcoming > limit) or used >= limit
    assert (breach is not None) is crossed
    if breach is not None:
        assert breach.observed == (used + upcoming if used + upcoming > limit else used)


def test_large_whole_numbers_are_written_out_in_a_breach() -> None:
    """A limit of a million tokens reads 1000000 in the sentence, not 1e+06."""
    breach = check_tokens(
        Limits(max_total_tokens=1_000_000), Usage(input_tokens=1_000_000), "after_usage"
    )
    assert breach is not None
    assert breach.describe() == (
        "budget max_total_tokens exhausted after usage: limit 1000000, observed 1000000 tokens used"
    )


def test_only_an_attempts_further_requests_ask_the_send_budget() -> None:
    """An attempt's first request (sent 0) was admitted by the loop and is not asked again."""
    asked: list[int] = []

    class Recording:
        def admit(self, text: str, spent: TokenUsage, sent: int) -> None:
            asked.append(sent)

    with send_budget(Recording()):
        ask_send_budget("x", TokenUsage(), 0)
        ask_send_budget("x", TokenUsage(), 1)
        ask_send_budget("x", TokenUsage(), 2)
    ask_send_budget("x", TokenUsage(), 1)  # outside a run there is no budget to ask
    assert asked == [1, 2]


def test_a_response_crossing_tokens_or_money_is_labelled_after_usage() -> None:
    """check_after_usage names the token or money budget a counted response reached."""
    assert check_after_usage(Limits(max_total_tokens=10), Usage(input_tokens=10)) == _breach(
        "max_total_tokens", 10, 10, "after_usage", StopReason.MAX_TOTAL_TOKENS
    )
    assert check_after_usage(Limits(max_cost=1.0), Usage(cost=1.0)) == _breach(
        "max_cost", 1.0, 1.0, "after_usage", StopReason.MAX_COST
    )
    assert check_after_usage(Limits(max_cost=1.0), Usage(cost=0.5)) is None
