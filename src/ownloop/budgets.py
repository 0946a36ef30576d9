"""Budget checks as data: compare `Usage` with `Limits` at a named point, and say what ran out.

Each check returns ``None`` while the run may go on, or a `BudgetBreach` naming the budget, its
limit, the value observed, where it was checked and the stop reason it implies. The checks keep no
state and do no I/O; the loop decides what to do with a breach.

One more piece lets a model port ask before it sends a request of its own (a ReAct adapter's
re-ask): the driver installs the step's `SendBudget` with `send_budget` while the port runs, and
the port calls `ask_send_budget` before every request after the first. The first request of a
model attempt was admitted by the loop already.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, Protocol

from ownloop.contracts import Limits, StopReason, TokenUsage, Usage

__all__ = [
    "BudgetBreach",
    "Checkpoint",
    "SendBudget",
    "ask_send_budget",
    "check_after_usage",
    "check_before_model_attempt",
    "check_before_model_call",
    "check_before_tool_attempt",
    "check_before_tool_call",
    "check_cost",
    "check_deadline",
    "check_tokens",
    "send_budget",
]

Checkpoint = Literal[
    "before_model_call",
    "before_model_attempt",
    "before_retry",
    "before_tool_call",
    "before_tool_attempt",
    "before_reask",
    "after_usage",
]
"""The named points at which the loop checks its budgets."""


@dataclass(frozen=True, slots=True)
class BudgetBreach:
    """A budget that ran out.

    Attributes:
        budget: The `Limits` field that ran out.
        limit: Its value.
        observed: What the run had used when checked.
        checkpoint: Where the check was made.
        stop_reason: The stop reason this breach ends the run with.
        upcoming: The part of ``observed`` that is an estimate of the next request (tokens or
            money) rather than already used; 0 when ``observed`` was all used.
    """

    budget: str
    limit: float
    observed: float
    checkpoint: Checkpoint
    stop_reason: StopReason
    upcoming: float = 0.0

    def describe(self) -> str:
        """Return a sentence naming the budget, its limit and what the observed figure is."""
        return (
            f"budget {self.budget} exhausted {self.checkpoint.replace('_', ' ')}: "
            f"limit {_figure(self.limit)}, observed {self._observed()}"
        )

    def _observed(self) -> str:
        if self.budget == "deadline_s":
            waiting = self.checkpoint == "before_retry"
            how = "counting the retry wait about to begin" if waiting else "elapsed"
            return f"{self.observed:.2f}s of wall time {how}"
        if self.budget == "max_total_tokens":
            used = f"{_figure(self.observed - self.upcoming)} tokens used"
        elif self.budget == "max_cost":
            used = f"{_figure(self.observed - self.upcoming)} spent"
        else:
            return _figure(self.observed)
        if not self.upcoming:
            return used
        estimate = f"about {_figure(self.upcoming)} estimated for the next request"
        return f"{_figure(self.observed)} = {used} + {estimate}"


def _figure(value: float) -> str:
    """A count as a whole number, any other amount to six significant digits."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


def _reached(
    budget: str, limit: float, observed: float, checkpoint: Checkpoint, reason: StopReason
) -> BudgetBreach | None:
    """Return a breach when ``observed`` has reached ``limit``, else ``None``."""
    return BudgetBreach(budget, limit, observed, checkpoint, reason) if observed >= limit else None


def check_deadline(limits: Limits, elapsed_s: float, checkpoint: Checkpoint) -> BudgetBreach | None:
    """Check the run's wall-clock deadline.

    Args:
        limits: The run's budgets.
        elapsed_s: Seconds since the run started, including any wait about to begin.
        checkpoint: Where the check is made.

    Returns:
        A breach when the elapsed time has reached the deadline, else ``None``.
    """
    return _reached("deadline_s", limits.deadline_s, elapsed_s, checkpoint, StopReason.DEADLINE)


def check_tokens(
    limits: Limits, usage: Usage, checkpoint: Checkpoint, upcoming: int = 0
) -> BudgetBreach | None:
    """Check the run's token budget, including a request about to be sent.

    Args:
        limits: The run's budgets.
        usage: The run's counters.
        checkpoint: Where the check is made.
        upcoming: Estimated input tokens of the next request.

    Returns:
        A breach when the tokens used reach the limit, or the next request would cross it.
    """
    if upcoming and usage.total_tokens + upcoming > limits.max_total_tokens:
        return BudgetBreach(
            "max_total_tokens",
            limits.max_total_tokens,
            usage.total_tokens + upcoming,
            checkpoint,
            StopReason.MAX_TOTAL_TOKENS,
            upcoming=upcoming,
        )
    return _reached(
        "max_total_tokens",
        limits.max_total_tokens,
        usage.total_tokens,
        checkpoint,
        StopReason.MAX_TOTAL_TOKENS,
    )


def check_before_model_call(limits: Limits, usage: Usage) -> BudgetBreach | None:
    """Check that another model turn (step) may start.

    Args:
        limits: The run's budgets.
        usage: The run's counters.

    Returns:
        The first breach among steps and tokens, else ``None``.
    """
    steps = _reached(
        "max_steps", limits.max_steps, usage.steps, "before_model_call", StopReason.MAX_STEPS
    )
    return steps or check_tokens(limits, usage, "before_model_call")


def check_cost(limits: Limits, usage: Usage, upcoming: float) -> BudgetBreach | None:
    """Check the run's money budget before a request whose input is estimated to cost ``upcoming``.

    Args:
        limits: The run's budgets.
        usage: The run's counters.
        upcoming: The next request's estimated input cost.

    Returns:
        A breach when spent plus upcoming would cross ``max_cost``, else ``None``.
    """
    if limits.max_cost is None or usage.cost + upcoming <= limits.max_cost:
        return None
    return BudgetBreach(
        "max_cost",
        limits.max_cost,
        usage.cost + upcoming,
        "before_model_call",
        StopReason.MAX_COST,
        upcoming=upcoming,
    )


def check_before_model_attempt(
    limits: Limits, usage: Usage, checkpoint: Checkpoint = "before_model_attempt"
) -> BudgetBreach | None:
    """Check the shared model-attempt budget before a first attempt or a retry.

    Args:
        limits: The run's budgets.
        usage: The run's counters.
        checkpoint: ``before_model_attempt`` or ``before_retry``.

    Returns:
        A breach when no model attempt remains, else ``None``.
    """
    return _reached(
        "max_model_attempts",
        limits.max_model_attempts,
        usage.model_attempts,
        checkpoint,
        StopReason.MAX_MODEL_ATTEMPTS,
    )


def check_before_tool_call(limits: Limits, usage: Usage) -> BudgetBreach | None:
    """Check that another proposed tool call may be admitted.

    Args:
        limits: The run's budgets.
        usage: The run's counters.

    Returns:
        A breach when no tool call remains, else ``None``.
    """
    return _reached(
        "max_tool_calls",
        limits.max_tool_calls,
        usage.tool_calls,
        "before_tool_call",
        StopReason.MAX_TOOL_CALLS,
    )


def check_before_tool_attempt(
    limits: Limits, usage: Usage, checkpoint: Checkpoint = "before_tool_attempt"
) -> BudgetBreach | None:
    """Check the shared tool-attempt budget before a first attempt or a retry.

    Args:
        limits: The run's budgets.
        usage: The run's counters.
        checkpoint: ``before_tool_attempt`` or ``before_retry``.

    Returns:
        A breach when no tool attempt remains, else ``None``.
    """
    return _reached(
        "max_tool_attempts",
        limits.max_tool_attempts,
        usage.tool_attempts,
        checkpoint,
        StopReason.MAX_TOOL_ATTEMPTS,
    )


def check_after_usage(limits: Limits, usage: Usage) -> BudgetBreach | None:
    """Check the token and money budgets once a response's usage is counted.

    One rule for every budget a response can cross: the crossing response is counted, and none of
    its tool calls runs, nor any request after it.

    Args:
        limits: The run's budgets.
        usage: The run's counters, the response included.

    Returns:
        A breach when tokens or money reached their limit, else ``None``.
    """
    tokens = check_tokens(limits, usage, "after_usage")
    if tokens is not None or limits.max_cost is None:
        return tokens
    return _reached("max_cost", limits.max_cost, usage.cost, "after_usage", StopReason.MAX_COST)


class SendBudget(Protocol):
    """What a model port asks before sending another request within one model attempt."""

    def admit(self, text: str, spent: TokenUsage, sent: int) -> None:
        """Count the request as a model attempt, or raise `SendRefused` with the breach.

        Args:
            text: What the request sends (its messages, as JSON text): estimated, not trusted.
            spent: The usage of the attempt's requests answered so far.
            sent: How many requests the attempt already sent.
        """


_SEND_BUDGET: ContextVar[SendBudget | None] = ContextVar("ownloop_send_budget", default=None)


@contextmanager
def send_budget(budget: SendBudget | None) -> Iterator[None]:
    """Install ``budget`` for the model port called inside the block (the driver does this).

    Args:
        budget: The step's budget, or ``None`` for none.
    """
    token = _SEND_BUDGET.set(budget)
    try:
        yield
    finally:
        _SEND_BUDGET.reset(token)


def ask_send_budget(text: str, spent: TokenUsage, sent: int) -> None:
    """Ask the installed budget before a model port sends another request of the same attempt.

    A no-op for an attempt's first request (``sent == 0``, admitted by the loop) or outside a run.

    Args:
        text: What the request sends (its messages, as JSON text).
        spent: The usage of the attempt's requests answered so far.
        sent: How many requests the attempt already sent.

    Raises:
        SendRefused: The request would cross a budget; it must not be sent.
    """
    budget = _SEND_BUDGET.get()
    if budget is not None and sent > 0:
        budget.admit(text, spent, sent)
