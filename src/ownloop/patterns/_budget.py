"""One budget shared by many runs: what remains of a total `Limits` after the runs so far.

Each run of a pattern gets at most what remains. A run built from the remaining budget can never
overspend it; a ready-made `Agent`, whose limits are fixed, is admitted only when its limits fit
in what remains (its worst case is reserved). Either way the total is never crossed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ownloop.clock import Clock
from ownloop.contracts import Limits, StopReason, Usage

__all__ = ["Exhausted", "SharedBudget"]

# Limits field -> the Usage counter it bounds, and the stop reason when it runs out.
_COUNTERS: dict[str, tuple[str, StopReason]] = {
    "max_steps": ("steps", StopReason.MAX_STEPS),
    "max_model_attempts": ("model_attempts", StopReason.MAX_MODEL_ATTEMPTS),
    "max_tool_calls": ("tool_calls", StopReason.MAX_TOOL_CALLS),
    "max_tool_attempts": ("tool_attempts", StopReason.MAX_TOOL_ATTEMPTS),
    "max_total_tokens": ("total_tokens", StopReason.MAX_TOTAL_TOKENS),
}
# A run cannot start with less than this left of these budgets (tool calls may be zero).
_NEEDED = {"max_steps": 1, "max_model_attempts": 1, "max_total_tokens": 1}


@dataclass(frozen=True, slots=True)
class Exhausted:
    """A shared budget that cannot admit the next run.

    Attributes:
        reason: The stop reason of the budget concerned.
        detail: The budget, its limit and what was used or asked for.
    """

    reason: StopReason
    detail: str


class SharedBudget:
    """A total `Limits` drawn down by the usage of successive runs.

    Args:
        total: The budget of all the runs together.
        clock: Measures the shared deadline.
    """

    def __init__(self, total: Limits, clock: Clock) -> None:
        self.total = total
        self.usage = Usage()
        self._clock = clock
        self._started = clock.monotonic()

    def add(self, usage: Usage) -> None:
        """Count a finished run's usage.

        Args:
            usage: The run's counters.
        """
        self.usage = self.usage.add(**usage.model_dump())

    def remaining(self, before: str) -> Limits | Exhausted:
        """Return what remains as `Limits`, or why nothing can start.

        Args:
            before: What is about to start, named in the detail.

        Returns:
            The remaining budget (other fields as in the total), or the exhausted budget.
        """
        total, left = self.total, {}
        for field, (counter, reason) in _COUNTERS.items():
            limit, used = getattr(total, field), getattr(self.usage, counter)
            if limit - used < _NEEDED.get(field, 0):
                return _spent(reason, field, limit, used, before)
            left[field] = limit - used
        elapsed = self._clock.monotonic() - self._started
        if elapsed >= total.deadline_s:
            return _spent(StopReason.DEADLINE, "deadline_s", total.deadline_s, elapsed, before)
        updates: dict[str, float] = {**left, "deadline_s": total.deadline_s - elapsed}
        if total.max_cost is not None:
            if self.usage.cost >= total.max_cost:
                return _spent(
                    StopReason.MAX_COST, "max_cost", total.max_cost, self.usage.cost, before
                )
            updates["max_cost"] = total.max_cost - self.usage.cost
        return Limits(**{**total.model_dump(), **updates})

    def reserve(self, limits: Limits, before: str) -> Exhausted | None:
        """Admit a run with fixed ``limits`` only if its worst case fits in what remains.

        Args:
            limits: The run's own limits.
            before: What is about to start, named in the detail.

        Returns:
            ``None`` when it fits, else the first budget it would overrun.
        """
        remaining = self.remaining(before)
        if isinstance(remaining, Exhausted):
            return remaining
        return self.fits(limits, remaining, before)

    def fits(self, limits: Limits, granted: Limits, before: str) -> Exhausted | None:
        """Check a run's limits against what it was granted (a factory's agent, say).

        Args:
            limits: The run's own limits.
            granted: What remained when the run was built.
            before: What is about to start, named in the detail.

        Returns:
            ``None`` when every budget fits, else the first one it would overrun.
        """
        remaining = granted
        fields = {field: reason for field, (_, reason) in _COUNTERS.items()}
        fields["deadline_s"] = StopReason.DEADLINE
        if remaining.max_cost is not None:
            fields["max_cost"] = StopReason.MAX_COST
        for field, reason in fields.items():
            wanted, left = getattr(limits, field), getattr(remaining, field)
            if wanted is None or wanted > left:
                asked = "no limit" if wanted is None else f"{field}={wanted:g}"
                return Exhausted(
                    reason,
                    f"{before} could use {asked} (its agent's limits) but {left:g} remain(s) of "
                    f"the shared {field}; give that agent smaller limits, or pass a factory that "
                    "builds it from the remaining budget",
                )
        return None


def _spent(reason: StopReason, field: str, limit: float, used: float, before: str) -> Exhausted:
    return Exhausted(
        reason,
        f"the shared budget {field} is used up before {before}: limit {limit:g}, used {used:g}",
    )
