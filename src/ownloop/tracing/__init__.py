"""Tracing: typed events, redacted by a structlog processor chain, delivered to sinks.

The recorder is the one place a run emits events, so sequence numbers never skip or repeat. Each
event runs through a processor chain ownloop owns (bind run context -> redact -> bound -> render)
before it is stored on the result or handed to a sink, so no sink ever sees unredacted data.
Sinks: the in-memory trace on `RunResult`, `JsonlSink`, `ConsoleSink`, forwarding into the
application's structlog or logging, and OpenTelemetry (`ownloop.tracing.otel`, an optional extra,
imported only when used). `read_trace`, `timeline` and `diagnose` inspect stored traces.
"""

from ownloop.redaction import Bounds, Redactor, SecretPattern
from ownloop.tracing._console import ConsoleSink, event_severity
from ownloop.tracing._diagnose import Diagnosis, Finding, diagnose
from ownloop.tracing._format import describe_event, format_event, format_trace
from ownloop.tracing._forward import forward_to_logging, forward_to_structlog
from ownloop.tracing._jsonl import JsonlSink, UnknownEvent, read_trace
from ownloop.tracing._pipeline import TracePipeline, free_fields
from ownloop.tracing._recorder import TraceRecorder, TraceSink
from ownloop.tracing._runs import BudgetUse, budget_use, delegated_from, nest_runs, split_runs
from ownloop.tracing._show import Timeline, TimelineEntry, timeline

__all__ = [
    "Bounds",
    "BudgetUse",
    "ConsoleSink",
    "Diagnosis",
    "Finding",
    "JsonlSink",
    "Redactor",
    "SecretPattern",
    "Timeline",
    "TimelineEntry",
    "TracePipeline",
    "TraceRecorder",
    "TraceSink",
    "UnknownEvent",
    "budget_use",
    "delegated_from",
    "describe_event",
    "diagnose",
    "event_severity",
    "format_event",
    "format_trace",
    "forward_to_logging",
    "forward_to_structlog",
    "free_fields",
    "nest_runs",
    "read_trace",
    "split_runs",
    "timeline",
]
