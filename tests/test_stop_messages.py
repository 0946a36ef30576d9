"""Stop messages that say exactly what happened: tokens used or estimated, wall time, error type."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ownloop import Agent, Limits, ModelResponse, RunStatus, StopReason, TokenUsage
from ownloop.budgets import BudgetBreach, check_cost, check_deadline, check_tokens
from ownloop.contracts import ModelRequest, Usage
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call

from .helpers import research_registry


@given(used=st.integers(0, 10_000), upcoming=st.integers(1, 10_000))
def test_a_token_stop_before_a_request_separates_used_from_estimated(
    used: int, upcoming: int
) -> None:
    """Refused before sending: the message shows tokens used and the next request's estimate."""
    limits = Limits(max_total_tokens=max(used + upcoming - 1, 1))
    breach = check_tokens(limits, Usage(input_tokens=used), "before_model_call", upcoming)
    if used + upcoming <= limits.max_total_tokens:  # only when used is 0 and upcoming 1
        assert breach is None
        return
    assert breach is not None
    assert breach.describe().endswith(
        f"observed {used + upcoming} = {used} tokens used + about {upcoming} estimated for the "
        "next request"
    )


def test_a_token_stop_after_a_response_counts_tokens_used() -> None:
    """Stopped after usage arrives: the figure is the tokens the run really used."""
    model = ScriptedModel(
        [
            tool_call("search_documents", query="a").model_copy(
                update={"usage": TokenUsage(input_tokens=200, output_tokens=26)}
            ),
            final("never"),
        ]
    )
    result = Agent(model, research_registry(), limits=Limits(max_total_tokens=226)).run_sync("q")
    assert result.stop_reason is StopReason.MAX_TOTAL_TOKENS
    assert result.usage.total_tokens == 226
    assert result.detail.endswith("limit 226, observed 226 tokens used")


def test_a_money_stop_separates_spent_from_estimated() -> None:
    """The money budget's message says what was spent and what the next request would cost."""
    breach = check_cost(Limits(max_cost=0.02), Usage(cost=0.015), 0.01)
    assert breach is not None
    assert breach.describe().endswith(
        "observed 0.025 = 0.015 spent + about 0.01 estimated for the next request"
    )


def test_a_deadline_stop_reports_elapsed_wall_time_in_seconds() -> None:
    """The deadline's figure is wall time in seconds, rounded, and says when it counts a wait."""
    clock = FakeClock(tick=2.0)
    result = Agent(
        ScriptedModel([tool_call("search_documents", query=str(i)) for i in range(9)]),
        research_registry(),
        limits=Limits(deadline_s=5),
        clock=clock,
    ).run_sync("q")
    assert result.stop_reason is StopReason.DEADLINE
    assert re.search(r"limit 5, observed \d+\.\d\ds of wall time elapsed$", result.detail)
    waiting = check_deadline(Limits(deadline_s=5), 6.123456, "before_retry")
    assert waiting is not None
    assert waiting.describe().endswith(
        "observed 6.12s of wall time counting the retry wait about to begin"
    )


def test_other_budgets_keep_their_plain_counts() -> None:
    """Counts such as steps read as whole numbers, as before."""
    breach = BudgetBreach("max_steps", 3, 3, "before_model_call", StopReason.MAX_STEPS)
    assert breach.describe() == "budget max_steps exhausted before model call: limit 3, observed 3"


def test_a_model_failure_without_a_message_names_the_exception_type() -> None:
    """An exception with an empty message still says what failed, in the trace and the detail."""

    def silent(_request: ModelRequest) -> ModelResponse:
        raise LookupError

    result = Agent(FunctionModel(silent)).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert result.detail == "model call failed: LookupError"
    (failed,) = [event for event in result.trace if event.kind == "model_failed"]
    assert failed.error == {
        "type": "LookupError",
        "message": "LookupError raised without a message",
    }
