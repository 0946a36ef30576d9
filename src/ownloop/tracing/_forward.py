"""Sinks that forward redacted events into the application's own logging.

ownloop never configures structlog or the standard library's logging: these sinks hand each event
(already redacted and bounded) to a logger the application owns and configured itself. Failures
log at ``error``, retries, rejections and tool failures at ``warning``, everything else at
``info``.
"""

from __future__ import annotations

import logging
from typing import Any

from ownloop.contracts import TraceEvent
from ownloop.tracing._console import event_severity
from ownloop.tracing._format import format_event
from ownloop.tracing._recorder import TraceSink

__all__ = ["forward_to_logging", "forward_to_structlog"]

_STRUCTLOG_METHODS = {"error": "error", "warning": "warning", "done": "info", "info": "info"}
_LOGGING_LEVELS = {
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "done": logging.INFO,
    "info": logging.INFO,
}


def forward_to_structlog(logger: Any) -> TraceSink:
    """Return a sink that logs every event to an application's structlog logger.

    Each event is logged with its kind as the message and its fields as key-value pairs
    (``logger.info("tool_finished", run_id=..., seq=..., tool=..., ...)``), so the application's
    own processors and renderers handle it.

    Args:
        logger: A structlog logger, e.g. ``structlog.get_logger("agents")``.

    Returns:
        The sink, for ``Agent(..., trace_sinks=[...])``.
    """

    def forward(event: TraceEvent) -> None:
        fields = event.model_dump(mode="json", exclude={"kind"})
        method = getattr(logger, _STRUCTLOG_METHODS[event_severity(event)])
        method(event.kind, **fields)

    forward.__qualname__ = f"forward_to_structlog({logger!r})"
    return forward


def forward_to_logging(logger: logging.Logger | str = "ownloop.trace") -> TraceSink:
    """Return a sink that logs every event to a standard library logger.

    The message is the event's readable line; the event itself is attached to the record as
    ``record.ownloop_event`` (a JSON-ready dict) for structured handlers.

    Args:
        logger: A logger or a logger name; ``"ownloop.trace"`` by default. Its handlers, levels
            and propagation are the application's to configure.

    Returns:
        The sink, for ``Agent(..., trace_sinks=[...])``.
    """
    target = logging.getLogger(logger) if isinstance(logger, str) else logger

    def forward(event: TraceEvent) -> None:
        level = _LOGGING_LEVELS[event_severity(event)]
        if target.isEnabledFor(level):
            payload = event.model_dump(mode="json")
            target.log(level, "%s", format_event(event), extra={"ownloop_event": payload})

    forward.__qualname__ = f"forward_to_logging({target.name!r})"
    return forward
