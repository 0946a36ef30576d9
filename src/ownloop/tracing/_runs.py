"""Reading a trace as runs: grouping events by run and measuring budget use against the limits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from ownloop.contracts import (
    EventBase,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolProposed,
    ToolStarted,
)
from ownloop.exceptions import InputRejected

__all__ = ["BudgetUse", "budget_use", "one_run", "split_runs"]

# (counter in Usage, limit in Limits, readable name)
_COUNTERS = (
    ("steps", "max_steps", "steps"),
    ("model_attempts", "max_model_attempts", "model attempts"),
    ("tool_calls", "max_tool_calls", "tool calls"),
    ("tool_attempts", "max_tool_attempts", "tool attempts"),
    ("total_tokens", "max_total_tokens", "tokens"),
)


class BudgetUse(BaseModel):
    """How much of one budget a run used.

    Attributes:
        budget: The `Limits` field (``max_steps``, ``deadline_s``…).
        name: A readable name.
        used: What the run used.
        limit: The limit.
        ratio: ``used / limit``.
    """

    model_config = ConfigDict(frozen=True)

    budget: str
    name: str
    used: float
    limit: float
    ratio: float


def split_runs(events: Iterable[EventBase]) -> dict[str, list[EventBase]]:
    """Group events by run id, runs in order of first appearance, events in order.

    Args:
        events: Events of one or more runs (a JSON lines file may hold many).

    Returns:
        Run id -> that run's events.
    """
    runs: dict[str, list[EventBase]] = {}
    for event in events:
        runs.setdefault(event.run_id, []).append(event)
    return runs


def one_run(events: Iterable[EventBase]) -> list[EventBase]:
    """Return the events as a list, checking that they belong to a single run.

    Args:
        events: The events.

    Returns:
        Them, in order.

    Raises:
        InputRejected: If there are none, or they come from several runs.
    """
    runs = split_runs(events)
    if len(runs) != 1:
        count = "no events" if not runs else f"events of {len(runs)} runs"
        raise InputRejected(f"expected the events of one run, got {count}; use split_runs()")
    return next(iter(runs.values()))


def budget_use(events: Sequence[EventBase]) -> list[BudgetUse]:
    """Measure a run's use of each budget against the limits it started with.

    The final counters of ``run_finished`` are used when present; otherwise they are counted
    from the events (for a trace cut short). The deadline's use is the time between the first
    and the last event, reported only for runs that were never paused and resumed.

    Args:
        events: One run's events.

    Returns:
        One entry per budget; empty when the trace has no ``run_started`` (no limits known).
    """
    started = next((event for event in events if isinstance(event, RunStarted)), None)
    if started is None:
        return []
    limits = started.limits
    used = _counters(events)
    uses = [
        _use(limit, name, used[counter], getattr(limits, limit))
        for counter, limit, name in _COUNTERS
    ]
    if not any(isinstance(event, RunResumed) for event in events):
        elapsed = (events[-1].at - events[0].at).total_seconds()
        uses.append(_use("deadline_s", "deadline (s)", max(elapsed, 0.0), limits.deadline_s))
    return uses


def _use(budget: str, name: str, used: float, limit: float) -> BudgetUse:
    ratio = used / limit if limit else 0.0
    return BudgetUse(budget=budget, name=name, used=used, limit=limit, ratio=round(ratio, 4))


def _counters(events: Sequence[EventBase]) -> dict[str, int]:
    finished = next((event for event in reversed(events) if isinstance(event, RunFinished)), None)
    if finished is not None:
        usage = finished.usage
        return {
            "steps": usage.steps,
            "model_attempts": usage.model_attempts,
            "tool_calls": usage.tool_calls,
            "tool_attempts": usage.tool_attempts,
            "total_tokens": usage.total_tokens,
        }
    responses = [event for event in events if isinstance(event, ModelResponded)]
    return {
        "steps": max((e.step for e in events if isinstance(e, ModelRequested)), default=0),
        "model_attempts": sum(isinstance(event, ModelRequested) for event in events),
        "tool_calls": sum(isinstance(event, ToolProposed) for event in events),
        "tool_attempts": sum(isinstance(event, ToolStarted) for event in events),
        "total_tokens": sum(event.usage.total_tokens for event in responses),
    }
