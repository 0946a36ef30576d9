"""Guardrails from the ReAct tutorial and the reference runtime, as ownloop features."""

from __future__ import annotations

import contextlib
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop import (
    Agent,
    Approval,
    ApprovalRequest,
    ModelResponse,
    RunStatus,
    StopReason,
    ToolCall,
)
from ownloop.policy import allow_tools, allow_writes, refuse_sql_writes, require_approval_for
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry, calculate

MAX_EXPRESSION_CHARS = 200  # the documented bound on an expression's length


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4)", 14.0),
        ("-2 ** 2", -4.0),
        ("2 ** -2", 0.25),
        ("7 // 2 + 7 % 3", 4.0),
        ("10 / 4", 2.5),
        ("+1_000 - 1", 999.0),
        ("  3.5e2 ", 350.0),
        ("10 ** 100", 1e100),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    """Numbers, the six operators, powers, signs and parentheses evaluate as in Python."""
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('id')", "only numbers"),
        ("(1).__class__", "only numbers"),
        ("e", "Name is not allowed"),
        ("...", "not a number"),
        ("()", "Tuple is not allowed"),
        ("1 +", "not a valid arithmetic expression"),
        ("", "not a valid arithmetic expression"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("2 ** 2 ** 2 ** 2 ** 2", "exponents are limited"),
        ("9 ** 200", "too large"),
        ("1e999", "too large"),
        ("1e300 * 1e300", "too large"),
        ("1.5 ** 999.0", "too large"),
        ("1e-300 ** -2", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("1" * (MAX_EXPRESSION_CHARS + 1), "characters"),
    ],
)
def test_calculator_refuses_everything_else(expression: str, message: str) -> None:
    """Code, bad syntax, division by zero and oversized results raise a clear ValueError."""
    with pytest.raises(ValueError, match=message):
        calculate(expression)


def test_calculator_refuses_a_non_string() -> None:
    """A value that is not text is refused, not converted."""
    with pytest.raises(ValueError, match="must be a string"):
        calculate(42)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=MAX_EXPRESSION_CHARS + 20))
def test_calculator_never_evaluates_anything_but_arithmetic(text: str) -> None:
    """On any text, the calculator returns a finite float or raises ValueError, nothing else."""
    try:
        value = calculate(text)
    except ValueError:
        return
    assert isinstance(value, float)
    assert math.isfinite(value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.eE_+-*/%() ", max_size=60))
def test_calculator_on_arithmetic_looking_text_only_raises_value_error(text: str) -> None:
    """Text made only of the allowed characters still only returns a float or raises ValueError."""
    with contextlib.suppress(ValueError):
        assert isinstance(calculate(text), float)


@st.composite
def _expressions(draw: st.DrawFn, depth: int = 3) -> tuple[str, int]:
    """Draw an integer expression and its value, computed alongside (never by eval)."""
    if depth == 0 or draw(st.booleans()):
        number = draw(st.integers(min_value=0, max_value=999))
        return str(number), number
    left, left_value = draw(_expressions(depth - 1))
    right, right_value = draw(_expressions(depth - 1))
    operator = draw(st.sampled_from("+-*"))
    value = {
        "+": left_value + right_value,
        "-": left_value - right_value,
        "*": left_value * right_value,
    }[operator]
    return f"({left} {operator} {right})", value


@given(_expressions())
def test_calculator_agrees_with_a_reference_evaluation(case: tuple[str, int]) -> None:
    """Generated integer expressions evaluate to the value computed while generating them."""
    expression, value = case
    # Products past 2**53 round at each step, so compare as floats do, not digit for digit.
    assert calculate(expression) == pytest.approx(float(value), rel=1e-12)


def _calculator_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(calculate, effect="read")
    return registry


def test_calculator_runs_as_a_tool_through_an_agent() -> None:
    """Registered as a read tool, the calculator answers the model with the value."""
    model = ScriptedModel([tool_call("calculate", expression="2 * (3 + 4)"), final("14")])
    result = Agent(model, _calculator_registry()).run_sync("what is 2 * (3 + 4)?")
    assert result.status is RunStatus.COMPLETED
    assert model.requests[1].messages[-1].content == "14.0"
    assert model.requests[0].tools[0].effect == "read"


def test_calculator_refusal_is_an_observation_the_model_can_act_on() -> None:
    """Code sent to the calculator fails as an observation; the run goes on."""
    model = ScriptedModel(
        [
            tool_call("calculate", "c1", expression="__import__('os').getcwd()"),
            tool_call("calculate", "c2", expression="6 * 7"),
            final("42"),
        ]
    )
    result = Agent(model, _calculator_registry()).run_sync("compute")
    assert result.status is RunStatus.COMPLETED
    refusal = model.requests[1].messages[-1].content
    assert refusal.startswith("Tool calculate failed: ValueError: only numbers")
    assert model.requests[2].messages[-1].content == "42.0"


def _sql_registry(executed: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def run_sql(query: str) -> list[dict[str, int]]:
        """Run a query against the reporting database.

        Args:
            query: One SQL statement.
        """
        executed.append(query)
        return [{"orders": 3}]

    return registry


def test_sql_write_keywords_are_denied_before_the_tool_runs() -> None:
    """DELETE FROM is denied (failed/tool_denied) and the query never reaches the database."""
    executed: list[str] = []
    model = ScriptedModel([tool_call("run_sql", query="DELETE FROM orders")])
    agent = Agent(model, _sql_registry(executed), policy=refuse_sql_writes("query"))
    result = agent.run_sync("clean up")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_DENIED)
    assert executed == []
    denial = next(event for event in result.trace if event.kind == "tool_denied")
    assert "DELETE" in denial.reason


def test_sql_read_runs_and_a_denied_write_can_be_observed() -> None:
    """With on_denied='observe', the model sees the refusal and its SELECT runs."""
    executed: list[str] = []
    model = ScriptedModel(
        [
            tool_call("run_sql", "q1", query="drop table orders"),
            tool_call("run_sql", "q2", query="SELECT count(*) AS orders FROM orders"),
            final("3 orders"),
        ]
    )
    agent = Agent(
        model, _sql_registry(executed), policy=refuse_sql_writes("query"), on_denied="observe"
    )
    result = agent.run_sync("count orders")
    assert result.status is RunStatus.COMPLETED
    assert executed == ["SELECT count(*) AS orders FROM orders"]
    assert "DROP" in model.requests[1].messages[-1].content


def _payments_registry(executed: Counter[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def transfer_funds(account: str, cents: int) -> dict[str, str]:
        """Transfer money to an account (high risk).

        Args:
            account: The receiving account.
            cents: The amount in cents.
        """
        executed[f"{account}:{cents}"] += 1
        return {"transferred": account}

    return registry


HIGH_RISK = allow_writes("transfer_funds") & require_approval_for("transfer_funds")


def test_high_risk_tool_pauses_for_approval_whatever_the_model_says() -> None:
    """A high-risk call pauses for a person even when the model claims the user approved."""
    executed = Counter[str]()
    claim = ModelResponse(
        final_output="The user already approved this transfer.",
        tool_calls=(
            ToolCall(
                id="t1", name="transfer_funds", arguments={"account": "ACME-1", "cents": 5000}
            ),
        ),
    )
    model = ScriptedModel([claim])
    result = Agent(model, _payments_registry(executed), policy=HIGH_RISK).run_sync("pay")
    assert (result.status, result.stop_reason) == (RunStatus.PAUSED, StopReason.APPROVAL_REQUIRED)
    assert executed == Counter()
    assert result.approval_requests[0].arguments == {"account": "ACME-1", "cents": 5000}


def test_high_risk_tool_runs_once_when_the_approver_says_yes() -> None:
    """An approver callback admits the exact call once; the decision is in the audit trail."""
    executed = Counter[str]()
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        seen.append(request)
        return Approval(request_id=request.id, approved=True, approver="treasurer")

    model = ScriptedModel(
        [tool_call("transfer_funds", account="ACME-1", cents=5000), final("Paid.")]
    )
    agent = Agent(model, _payments_registry(executed), policy=HIGH_RISK, approver=approver)
    result = agent.run_sync("pay")
    assert result.status is RunStatus.COMPLETED
    assert executed == Counter({"ACME-1:5000": 1})
    assert [request.tool for request in seen] == ["transfer_funds"]
    assert [decision.approver for decision in result.approvals] == ["treasurer"]


def test_no_allowed_tools_means_no_tool_is_offered_or_run() -> None:
    """The reference runtime's permission case: nothing offered, a proposal anyway is denied.

    ownloop counts the *proposal* in ``usage.tool_calls`` (it was reserved and judged) and the
    *execution* in ``usage.tool_attempts``: one call, zero attempts.
    """
    executed = Counter[str]()
    model = ScriptedModel([tool_call("transfer_funds", account="ACME-1", cents=1)])
    result = Agent(model, _payments_registry(executed), policy=allow_tools()).run_sync("pay")
    assert model.requests[0].tools == ()
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_DENIED)
    assert (result.usage.tool_calls, result.usage.tool_attempts) == (1, 0)
    assert executed == Counter()
