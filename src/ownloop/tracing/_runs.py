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

__all__ = ["BudgetUse", "budget_use", "delegated_from", "nest_runs", "one_run", "split_runs"]

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


def delegated_from(run_id: str) -> str | None:
    """Return the run a delegated run's id names as its caller, or ``None`` for a top run.

    A delegated agent's run id is ``<caller run id>/<tool name>/<call key>``
    (`ownloop.delegation.child_run_id`); a run id without that shape names no caller.

    Args:
        run_id: The run.

    Returns:
        The caller's run id, or ``None``.
    """
    parts = run_id.rsplit("/", 2)
    return parts[0] if len(parts) == 3 and all(parts) else None


def nest_runs(runs: dict[str, list[EventBase]]) -> list[tuple[int, str]]:
    """Order runs so each delegated run follows its caller, with its depth under the top run.

    Args:
        runs: Run id -> events (`split_runs`).

    Returns:
        ``(depth, run id)`` pairs: top runs at depth 0 in their order, each followed by the runs
        it delegated to (depth 1), theirs (depth 2), and so on. A run whose caller is not among
        ``runs`` is a top run.
    """
    children: dict[str, list[str]] = {}
    tops: list[str] = []
    for run_id in runs:
        caller = delegated_from(run_id)
        if caller is not None and caller in runs:
            children.setdefault(caller, []).append(run_id)
        else:
            tops.append(run_id)
    ordered: list[tuple[int, str]] = []

    def visit(run_id: str, depth: int) -> None:
        ordered.append((depth, run_id))
        for child in children.get(run_id, ()):
            visit(child, depth + 1)

    for top in tops:
        visit(top, 0)
    return ordered


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
