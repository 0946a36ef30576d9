"""The run's deadline, as the driver reads it: the instant every awaited callable must end by.

The core sets it when a run (or a resumed segment) starts, in the context of the task driving the
run; the driver reads it before each effect it awaits. A context variable keeps concurrent runs
(each in its own task) apart. The instant is on the run's clock (``Clock.monotonic``).
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["run_deadline", "set_run_deadline"]

_DEADLINE: ContextVar[float | None] = ContextVar("ownloop_run_deadline", default=None)


def set_run_deadline(at: float) -> None:
    """Set the instant (on the run's clock) by which the current run must end.

    Args:
        at: ``started_at + Limits.deadline_s``, on ``Clock.monotonic``'s scale.
    """
    _DEADLINE.set(at)


def run_deadline() -> float | None:
    """Return the current run's deadline instant, or ``None`` outside a run."""
    return _DEADLINE.get()
