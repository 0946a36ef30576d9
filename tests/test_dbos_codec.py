"""Step outcomes survive the JSON checkpoint: every outcome and failure the core reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ownloop.budgets import BudgetBreach
from ownloop.contracts import Approval, Receipt, StopReason, TokenUsage
from ownloop.dbos import StepClock, StepError
from ownloop.engines import decode_outcome, encode_outcome
from ownloop.exceptions import (
    PermanentModelError,
    ProviderError,
    SendRefused,
    TransientModelError,
    TransientToolError,
    UnknownEffectError,
)
from ownloop.loop import Decided, Failure, Outcome, Revision, ToolResults, ToolReturn
from ownloop.testing import final, tool_call
from ownloop.tools import Confirmed, NotApplied, StillUnknown


def roundtrip(outcome: Outcome) -> Outcome:
    """Encode, pass through JSON text, decode."""
    return decode_outcome(json.loads(json.dumps(encode_outcome(outcome))))


@pytest.mark.parametrize(
    "outcome",
    [
        None,
        final("done"),
        tool_call("search", "c1", query="q"),
        Revision("r1"),
        Revision(None),
        Decided(None),
        Decided(Approval(request_id="req-1", approved=True, approver="ops", reason="fine")),
        ToolReturn({"a": [1, 2.5, None, "x"]}),
        ToolReturn(Receipt(call_id="c1", tool="t", status="ok", effect="applied", data={"k": 1})),
        ToolReturn(Confirmed({"found": True})),
        ToolReturn(NotApplied()),
        ToolReturn(StillUnknown("maybe")),
        ToolResults(outcomes=(ToolReturn({"id": "o-1"}), ToolReturn(None)), durations_s=(0.1, 0.0)),
    ],
)
def test_outcomes_roundtrip(outcome: Outcome) -> None:
    """Every non-failure outcome decodes to an equal outcome."""
    assert roundtrip(outcome) == outcome


def test_tool_values_become_json() -> None:
    """A tool's non-JSON return value is checkpointed as its JSON form, as the core records it."""
    assert roundtrip(ToolReturn((1, 2))) == ToolReturn([1, 2])


@pytest.mark.parametrize(
    "error",
    [
        TransientModelError("slow down", category="rate_limit", retry_after=2.0, status=429),
        PermanentModelError("bad key", category="authentication", status=401, request_id="r"),
        ProviderError("odd", category="invalid_response", retryable=True, parameter="tools"),
        TransientToolError("busy", retry_after=1.5),
        UnknownEffectError("maybe happened"),
        TimeoutError("too slow"),
        ConnectionError("reset"),
    ],
)
def test_failures_rebuild_equivalent_exceptions(error: Exception) -> None:
    """A failure comes back as the same exception type with the fields the core reads."""
    outcome = roundtrip(Failure(error))
    assert isinstance(outcome, Failure)
    rebuilt = outcome.error
    assert type(rebuilt) is type(error)
    assert str(rebuilt) == str(error)
    if isinstance(error, ProviderError):
        assert isinstance(rebuilt, ProviderError)
        assert rebuilt.describe() == error.describe()
    if isinstance(error, TransientToolError):
        assert isinstance(rebuilt, TransientToolError)
        assert rebuilt.retry_after == error.retry_after


def test_a_refused_send_comes_back_with_its_breach_usage_and_count() -> None:
    """A budget's refusal of a re-ask survives the step: the run ends for the budget, not error."""
    breach = BudgetBreach(
        budget="max_total_tokens",
        limit=100,
        observed=140,
        checkpoint="before_reask",
        stop_reason=StopReason.MAX_TOTAL_TOKENS,
        upcoming=40,
    )
    usage = TokenUsage(input_tokens=60, output_tokens=40)
    error = SendRefused(breach.describe(), breach=breach, usage=usage, sent=2)
    outcome = roundtrip(Failure(error))
    assert isinstance(outcome, Failure)
    rebuilt = outcome.error
    assert isinstance(rebuilt, SendRefused)
    assert (rebuilt.breach, rebuilt.usage, rebuilt.sent) == (breach, usage, 2)
    assert str(rebuilt) == str(error)


def test_unknown_failures_keep_type_name_and_message() -> None:
    """An exception ownloop does not know comes back as a StepError naming the original type."""
    outcome = roundtrip(Failure(KeyError("missing")))
    assert isinstance(outcome, Failure)
    assert isinstance(outcome.error, StepError)
    assert outcome.error.type_name == "KeyError"
    assert str(outcome.error) == "KeyError: 'missing'"
    again = roundtrip(outcome)
    assert isinstance(again, Failure)
    assert str(again.error) == "KeyError: 'missing'"


def test_step_clock_moves_only_when_a_step_completes() -> None:
    """The step clock reads what the last step measured and never goes backwards."""
    clock = StepClock()
    first = datetime(2026, 1, 1, tzinfo=UTC)
    clock.adopt({"mono": 100.0, "wall": first.isoformat()})
    assert (clock.monotonic(), clock.now()) == (100.0, first)
    assert (clock.monotonic(), clock.now()) == (100.0, first)
    clock.adopt({"mono": 99.0, "wall": datetime(2025, 1, 1, tzinfo=UTC).isoformat()})
    assert (clock.monotonic(), clock.now()) == (100.0, first)
    assert "2026-01-01" in repr(clock)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (final("x\ud83d"), "x\ufffd"),
        (Failure(ValueError("bad \ud83d")), "bad \ufffd"),
        (Failure(PermanentModelError("body \udc80", category="invalid_request")), "body \ufffd"),
        (Failure(_Unprintable()), "<unprintable _Unprintable>"),
        (ToolReturn({"k\ud83d": "v"}), "k\ufffd"),
    ],
)
def test_step_values_hold_only_encodable_text(outcome: Outcome, expected: str) -> None:
    """What a step checkpoints encodes as UTF-8 JSON: surrogates replaced, broken __str__ named."""
    text = json.dumps(encode_outcome(outcome), ensure_ascii=False)
    text.encode("utf-8")
    assert expected in text


def test_a_group_keeps_each_member_failure_in_its_place() -> None:
    """A group's failed member decodes as a failure of the same kind, in proposal order."""
    group = ToolResults(
        outcomes=(ToolReturn(1), Failure(TimeoutError("deadline")), ToolReturn(3)),
        durations_s=(0.5, 1.0, 0.25),
    )
    decoded = roundtrip(group)
    assert isinstance(decoded, ToolResults)
    first, failed, last = decoded.outcomes
    assert (first, last, decoded.durations_s) == (ToolReturn(1), ToolReturn(3), (0.5, 1.0, 0.25))
    assert isinstance(failed, Failure)
    assert isinstance(failed.error, TimeoutError)
