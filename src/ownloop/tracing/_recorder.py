"""The trace recorder: builds each event with its run id, sequence number and time.

Sinks are the application's code and are isolated from the run: a sink that raises is reported
once (a `RuntimeWarning` and a `SinkFailed` event), then keeps receiving events, and its failures
never reach the loop, so a write that executed keeps its receipt.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ownloop._text import clean_text, describe_error
from ownloop.clock import Clock
from ownloop.contracts import EventBase, SinkFailed, TraceEvent
from ownloop.redaction import Redactor
from ownloop.tracing._pipeline import TracePipeline

__all__ = ["TraceRecorder", "TraceSink"]

TraceSink = Callable[[TraceEvent], None]
"""A callable that receives every event of a run, in order, as it is recorded."""

EventT = TypeVar("EventT", bound=EventBase)

# Shared so that its caches (clean strings, key decisions) stay warm from one run to the next.
_DEFAULT_REDACTOR = Redactor()


class TraceRecorder:
    """Numbers the events of one run, redacts and bounds them, stores them, and hands them on.

    Every event goes through the run's `TracePipeline` (redact, bound, render) before it is
    stored or given to a sink, so the stored trace and every sink hold the same redacted event.

    Args:
        run_id: The run the events belong to.
        clock: Where event timestamps come from.
        sinks: Receivers of every event, called in order after it is recorded.
        start_seq: The last sequence number already used (to continue a resumed run's trace).
        redactor: The redaction rules and bounds; the built-in rules when omitted.
    """

    def __init__(
        self,
        run_id: str,
        clock: Clock,
        sinks: Sequence[TraceSink] = (),
        *,
        start_seq: int = 0,
        redactor: Redactor | None = None,
    ) -> None:
        self.run_id = run_id
        self._clock = clock
        self._sinks = tuple(sinks)
        self._events: list[TraceEvent] = []
        self._seq = start_seq
        self._failed_sinks: set[int] = set()  # by index: a sink's failure is reported once
        self._pipeline = TracePipeline(
            run_id, redactor if redactor is not None else _DEFAULT_REDACTOR
        )

    @property
    def sinks(self) -> tuple[TraceSink, ...]:
        """The receivers of every event (a delegated agent's run is given them too)."""
        return self._sinks

    @property
    def redactor(self) -> Redactor:
        """The redaction rules applied to every event."""
        return self._pipeline.redactor

    def protect(self, *values: str) -> None:
        """Remove these literal secrets from every later event of the run.

        For secrets learnt during the run (a sensitive argument's value, a token a tool
        obtained), so that an error message quoting one is redacted too. Values shorter than 4
        characters are ignored (they would shred ordinary text).

        Args:
            *values: The secrets.
        """
        kept = [value for value in values if isinstance(value, str) and len(value) >= 4]
        if kept:
            self._pipeline.redactor = self._pipeline.redactor.with_values(*kept)

    def add_sink(self, sink: TraceSink) -> None:
        """Also hand every later event to this sink (a live view joining the run).

        Args:
            sink: Called with each event after it is recorded, after the existing sinks.
        """
        self._sinks = (*self._sinks, sink)

    def emit(self, event_type: type[EventT], **fields: Any) -> EventT:
        """Record one event.

        Args:
            event_type: The event class.
            **fields: The event's own fields (not ``run_id``, ``seq`` or ``at``).

        Returns:
            The recorded event, redacted and bounded.
        """
        self._seq += 1
        built = event_type(run_id=self.run_id, seq=self._seq, at=self._clock.now(), **fields)
        event = self._pipeline.process(built)
        self._events.append(event)  # type: ignore[arg-type]  # EventT is one of the union's members
        for index, sink in enumerate(self._sinks):
            try:
                sink(event)  # type: ignore[arg-type]  # same
            except Exception as error:  # a sink's failure must never touch the run
                self._sink_failed(index, error, event.seq)
        return event

    def _sink_failed(self, index: int, error: Exception, seq: int) -> None:
        """Report a sink's first failure (a warning and an event); later ones pass silently."""
        if index in self._failed_sinks:
            return
        self._failed_sinks.add(index)
        sink = _describe_sink(self._sinks[index])
        message = describe_error(error)
        warnings.warn(
            f"trace sink {sink} raised {message}; the run goes on, this sink's later failures "
            "are not reported",
            RuntimeWarning,
            stacklevel=4,
        )
        self.emit(SinkFailed, sink=sink, error=message, failed_seq=seq)

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        """Every event recorded so far, in order."""
        return tuple(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        return f"TraceRecorder(run_id={self.run_id!r}, events={len(self._events)})"


def _describe_sink(sink: object) -> str:
    try:
        text = repr(sink)
    except Exception:  # a broken __repr__ still names the sink's type
        text = f"<{type(sink).__name__}>"
    return clean_text(text)[:200]
