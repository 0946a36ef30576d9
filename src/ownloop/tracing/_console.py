"""A human-readable console sink: one line an event, coloured only on a terminal."""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO

from ownloop.contracts import EventBase, TraceEvent
from ownloop.tracing._format import format_event

__all__ = ["ConsoleSink", "event_severity"]

_RESET = "\x1b[0m"
_COLOURS = {"error": "\x1b[31m", "warning": "\x1b[33m", "done": "\x1b[32m", "info": "\x1b[2m"}
_WARNING_KINDS = frozenset(
    {
        "retry_scheduled",
        "tool_rejected",
        "completion_rejected",
        "output_invalid",
        "output_truncated",
        "tool_denied",
    }
)
_ERROR_KINDS = frozenset({"model_failed", "budget_exhausted"})


def event_severity(event: EventBase) -> str:
    """Classify an event for colours and log levels.

    Args:
        event: Any event.

    Returns:
        ``error`` (a failure, an exhausted budget, a failed run), ``warning`` (a retry, a
        rejection, a truncation, a tool that did not succeed), ``done`` (a run that completed)
        or ``info``.
    """
    kind = getattr(event, "kind", "")
    status = str(getattr(event, "status", ""))
    if kind in _ERROR_KINDS or (kind == "run_finished" and status == "failed"):
        return "error"
    if kind == "run_finished":
        return "done" if status == "completed" else "warning"
    if kind in _WARNING_KINDS or (kind == "tool_finished" and status != "ok"):
        return "warning"
    return "info"


class ConsoleSink:
    """A trace sink that prints each event as one readable line.

    Args:
        stream: Where to print; the current ``sys.stderr`` at each event when omitted.
        color: ``True`` or ``False`` to force colours; by default only when the stream is a
            terminal and ``NO_COLOR`` is not set.
    """

    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        self._stream = stream
        self._color = color
        self._lock = threading.Lock()

    def __call__(self, event: TraceEvent) -> None:
        """Print one event.

        Args:
            event: The event (already redacted by the recorder).
        """
        stream = self._stream if self._stream is not None else sys.stderr
        line = format_event(event)
        if self._colours_on(stream):
            line = f"{_COLOURS[event_severity(event)]}{line}{_RESET}"
        with self._lock:
            stream.write(line + "\n")
            stream.flush()

    def _colours_on(self, stream: TextIO) -> bool:
        if self._color is not None:
            return self._color
        if os.environ.get("NO_COLOR"):
            return False
        isatty = getattr(stream, "isatty", None)
        try:
            return bool(isatty()) if callable(isatty) else False
        except ValueError:  # a closed stream
            return False

    def __repr__(self) -> str:
        target = "stderr" if self._stream is None else getattr(self._stream, "name", "stream")
        return f"ConsoleSink({target}, color={self._color})"
