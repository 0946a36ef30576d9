"""The trace recorder: builds each event with its run id, sequence number and time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ownloop.clock import Clock
from ownloop.contracts import EventBase, TraceEvent

__all__ = ["TraceRecorder", "TraceSink"]

TraceSink = Callable[[TraceEvent], None]
"""A callable that receives every event of a run, in order, as it is recorded."""

EventT = TypeVar("EventT", bound=EventBase)


class TraceRecorder:
    """Numbers and stores the events of one run, and hands each to the sinks.

    Args:
        run_id: The run the events belong to.
        clock: Where event timestamps come from.
        sinks: Receivers of every event, called in order after it is recorded.
        start_seq: The last sequence number already used (to continue a resumed run's trace).
    """

    def __init__(
        self, run_id: str, clock: Clock, sinks: Sequence[TraceSink] = (), *, start_seq: int = 0
    ) -> None:
        self.run_id = run_id
        self._clock = clock
        self._sinks = tuple(sinks)
        self._events: list[TraceEvent] = []
        self._seq = start_seq

    def emit(self, event_type: type[EventT], **fields: Any) -> EventT:
        """Record one event.

        Args:
            event_type: The event class.
            **fields: The event's own fields (not ``run_id``, ``seq`` or ``at``).

        Returns:
            The recorded event.
        """
        self._seq += 1
        event = event_type(run_id=self.run_id, seq=self._seq, at=self._clock.now(), **fields)
        self._events.append(event)  # type: ignore[arg-type]  # EventT is one of the union's members
        for sink in self._sinks:
            sink(event)  # type: ignore[arg-type]  # same
        return event

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        """Every event recorded so far, in order."""
        return tuple(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        return f"TraceRecorder(run_id={self.run_id!r}, events={len(self._events)})"
