"""Time, injectable: the loop reads every clock through a `Clock` so tests can control it.

A `Clock` gives a monotonic reading for budgets, a UTC wall-clock time for records, and an async
sleep for backoff. `SystemClock` is the real one; `FakeClock` advances only when told to, or when
something sleeps on it, so deadline and retry tests run instantly and deterministically.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """The three readings of time the runtime needs."""

    def monotonic(self) -> float:
        """Return seconds from an arbitrary origin that never go backwards."""
        ...

    def now(self) -> datetime:
        """Return the current wall-clock time in UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait for ``seconds``."""
        ...


class SystemClock:
    """The machine's clocks: `time.monotonic`, `datetime.now(UTC)` and `asyncio.sleep`."""

    def monotonic(self) -> float:
        """Return `time.monotonic()`."""
        return time.monotonic()

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        """Sleep with `asyncio.sleep`."""
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that moves only when advanced or slept on; sleeping returns at once.

    Args:
        start: The wall-clock time at monotonic reading 0 (default 2026-01-01 UTC).
        tick: Seconds every `monotonic()` reading advances the clock by, to simulate work.

    Attributes:
        slept: Every duration passed to `sleep`, in order.
    """

    def __init__(self, start: datetime | None = None, *, tick: float = 0.0) -> None:
        self._origin = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._elapsed = 0.0
        self._tick = tick
        self.slept: list[float] = []

    def monotonic(self) -> float:
        """Return the elapsed fake seconds, then advance by ``tick``."""
        reading = self._elapsed
        self._elapsed += self._tick
        return reading

    def now(self) -> datetime:
        """Return the start time plus the elapsed fake seconds."""
        return self._origin + timedelta(seconds=self._elapsed)

    def advance(self, seconds: float) -> None:
        """Move the clock forward.

        Args:
            seconds: How far; must not be negative.

        Raises:
            ValueError: If ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._elapsed += seconds

    async def sleep(self, seconds: float) -> None:
        """Record the sleep and advance the clock instead of waiting."""
        self.slept.append(seconds)
        self.advance(max(seconds, 0.0))

    def __repr__(self) -> str:
        return f"FakeClock(elapsed={self._elapsed:g}s)"
