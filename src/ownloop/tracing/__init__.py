"""Trace recording: typed events, numbered without gaps, delivered to sinks in order.

Later layers add structured-logging processors and more sinks; the recorder is the one place a run
emits events, so sequence numbers can never skip or repeat.
"""

from ownloop.tracing._format import format_event, format_trace
from ownloop.tracing._recorder import TraceRecorder, TraceSink

__all__ = ["TraceRecorder", "TraceSink", "format_event", "format_trace"]
