"""OpenTelemetry export: spans for a run, its model calls and its tool calls (``ownloop[otel]``).

`OtelSink` derives spans from the (already redacted) event stream, following the GenAI semantic
conventions: ``invoke_agent`` for the run, ``chat`` for each model attempt, ``execute_tool`` for
each tool attempt, errors as span status. Other events become span events. `OtelMetrics` (a
sink too) and `StoreMetrics` (gauges of a store) give the metrics. Content — tool-call
arguments and free-text fields such as error messages, reasons and details — is attached only
with ``capture_content=True``, and is redacted even then, since the sink only ever sees events
that went through the redaction processors. Import this module only when you use it: it needs
``opentelemetry-api`` (``pip install 'ownloop[otel]'``).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
except ImportError as error:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "ownloop.tracing.otel needs OpenTelemetry: pip install 'ownloop[otel]'"
    ) from error

from ownloop._version import __version__
from ownloop.contracts import (
    EventBase,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolProposed,
    ToolStarted,
)
from ownloop.tracing._otel_metrics import OtelMetrics, StoreMetrics
from ownloop.tracing._pipeline import free_fields
from ownloop.tracing._runs import delegated_from

__all__ = ["OtelMetrics", "OtelSink", "StoreMetrics"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Identifiers and codes, not content: always exported.
_NAMES = frozenset(
    {"tool", "call_id", "code", "validator", "budget", "checkpoint", "source", "target", "rule"}
    | {"request_id", "outcome", "model", "provider_request_id", "decision", "status", "effect"}
)


def _ns(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass
class _RunSpans:
    run: trace.Span
    model_name: str | None = None
    model: trace.Span | None = None
    tools: dict[str, trace.Span] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)
    arguments: dict[str, str] = field(default_factory=dict)


class OtelSink:
    """A trace sink that turns each run's events into OpenTelemetry spans.

    Args:
        tracer_provider: Where spans go; the global tracer provider when omitted.
        capture_content: Attach tool-call arguments and free-text fields (redacted).
        agent_name: The ``gen_ai.agent.name`` of the run spans.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture_content: bool = False,
        agent_name: str = "ownloop",
    ) -> None:
        self._tracer = trace.get_tracer("ownloop", __version__, tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self.agent_name = agent_name
        self._runs: dict[str, _RunSpans] = {}
        self._lock = threading.Lock()

    def __call__(self, event: EventBase) -> None:
        """Open, annotate or end spans for one event.

        Args:
            event: The event (already redacted by the recorder).
        """
        with self._lock:
            if isinstance(event, RunStarted):
                self._start_run(event)
                return
            spans = self._runs.get(event.run_id) or self._start_run(event)
            match event:
                case ModelRequested():
                    self._start_model(spans, event)
                case ModelResponded() | ModelFailed():
                    self._end_model(spans, event)
                case ToolProposed():
                    if self.capture_content:
                        spans.arguments[event.call_id] = _json(event.arguments)
                    self._annotate(spans, event)
                case ToolStarted():
                    self._start_tool(spans, event)
                case ToolFinished():
                    self._end_tool(spans, event)
                case RunFinished():
                    self._end_run(spans, event)
                case _:
                    self._annotate(spans, event)

    def _start_run(self, event: EventBase) -> _RunSpans:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent_name,
            "ownloop.run_id": event.run_id,
        }
        model_name = None
        if isinstance(event, RunStarted):
            model_name = event.versions.model
            limits = event.limits
            attributes |= {
                "ownloop.version": event.versions.ownloop,
                "ownloop.policy_digest": event.versions.policy_digest or "",
                "ownloop.limits.max_steps": limits.max_steps,
                "ownloop.limits.max_tool_calls": limits.max_tool_calls,
                "ownloop.limits.max_total_tokens": limits.max_total_tokens,
                "ownloop.limits.deadline_s": limits.deadline_s,
            }
            if model_name:
                attributes["gen_ai.request.model"] = model_name
        span = self._tracer.start_span(
            f"invoke_agent {self.agent_name}",
            context=self._parent_context(event.run_id),
            attributes=attributes,
            start_time=_ns(event.at),
        )
        spans = self._runs[event.run_id] = _RunSpans(run=span, model_name=model_name)
        return spans

    def _parent_context(self, run_id: str) -> otel_context.Context:
        """A delegated run's span is a child of its caller's open ``execute_tool`` span."""
        caller = delegated_from(run_id)
        spans = self._runs.get(caller) if caller is not None else None
        if spans is not None:
            tool = run_id.rsplit("/", 2)[1]
            open_calls = [
                span for call, span in spans.tools.items() if spans.tool_names.get(call) == tool
            ]
            if open_calls:
                return trace.set_span_in_context(open_calls[-1])
        return otel_context.get_current()

    def _child(
        self, spans: _RunSpans, operation: str, name: str, event: EventBase, **attributes: Any
    ) -> trace.Span:
        return self._tracer.start_span(
            f"{operation} {name}".strip(),
            context=trace.set_span_in_context(spans.run),
            kind=trace.SpanKind.CLIENT if operation == "chat" else trace.SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": operation, **attributes},
            start_time=_ns(event.at),
        )

    def _start_model(self, spans: _RunSpans, event: ModelRequested) -> None:
        if spans.model is not None:  # a request without an answer: close it first
            spans.model.end(end_time=_ns(event.at))
        attributes: dict[str, Any] = {
            "ownloop.step": event.step,
            "ownloop.attempt": event.attempt,
            "ownloop.request.messages": event.messages,
        }
        if spans.model_name:
            attributes["gen_ai.request.model"] = spans.model_name
        spans.model = self._child(spans, "chat", spans.model_name or "", event, **attributes)

    def _end_model(self, spans: _RunSpans, event: ModelResponded | ModelFailed) -> None:
        span = spans.model or self._child(spans, "chat", spans.model_name or "", event)
        spans.model = None
        if isinstance(event, ModelResponded):
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": event.usage.input_tokens,
                    "gen_ai.usage.output_tokens": event.usage.output_tokens,
                    "ownloop.decision": event.decision,
                }
            )
            if event.model:
                span.set_attribute("gen_ai.response.model", event.model)
            if event.provider_request_id:
                span.set_attribute("gen_ai.response.id", event.provider_request_id)
        else:
            error_type = str(event.error.get("type") or "ModelError")
            span.set_attribute("error.type", error_type)
            message = f"{error_type}: {event.error.get('message')}"
            span.set_status(trace.StatusCode.ERROR, message if self.capture_content else error_type)
        span.end(end_time=_ns(event.at))

    def _start_tool(self, spans: _RunSpans, event: ToolStarted) -> None:
        span = self._child(spans, "execute_tool", event.tool, event, **_tool_attributes(event))
        span.set_attribute("ownloop.attempt", event.attempt)
        arguments = spans.arguments.get(event.call_id)
        if arguments is not None:
            span.set_attribute("gen_ai.tool.call.arguments", arguments)
        spans.tools[event.call_id] = span
        spans.tool_names[event.call_id] = event.tool

    def _end_tool(self, spans: _RunSpans, event: ToolFinished) -> None:
        span = spans.tools.pop(event.call_id, None)
        if span is None:
            span = self._child(spans, "execute_tool", event.tool, event, **_tool_attributes(event))
        span.set_attributes(
            {"ownloop.receipt.status": event.status, "ownloop.effect": event.effect}
        )
        if event.status != "ok":
            span.set_attribute("error.type", event.status)
            detail = f"{event.status}: {event.message}" if self.capture_content else event.status
            span.set_status(trace.StatusCode.ERROR, detail)
        span.end(end_time=_ns(event.at))

    def _end_run(self, spans: _RunSpans, event: RunFinished) -> None:
        end = _ns(event.at)
        for span in (spans.model, *spans.tools.values()):
            if span is not None:
                span.end(end_time=end)
        usage = event.usage
        spans.run.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "ownloop.status": event.status.value,
                "ownloop.stop_reason": event.stop_reason.value,
                "ownloop.usage.steps": usage.steps,
                "ownloop.usage.tool_calls": usage.tool_calls,
            }
        )
        if event.status.value == "failed":
            detail = f"{event.stop_reason.value}: {event.detail}"
            spans.run.set_attribute("error.type", event.stop_reason.value)
            description = detail if self.capture_content else event.stop_reason.value
            spans.run.set_status(trace.StatusCode.ERROR, description)
        spans.run.end(end_time=end)
        del self._runs[event.run_id]

    def _annotate(self, spans: _RunSpans, event: EventBase) -> None:
        call_id = getattr(event, "call_id", None)
        target = spans.tools.get(call_id) if isinstance(call_id, str) else None
        target = target or spans.model or spans.run
        kind = str(getattr(event, "kind", "event"))
        target.add_event(kind, attributes=self._attributes(event), timestamp=_ns(event.at))

    def _attributes(self, event: EventBase) -> dict[str, Any]:
        event_type = type(event)
        fixed = set(event_type.model_fields) - set(free_fields(event_type))
        attributes: dict[str, Any] = {"ownloop.seq": event.seq}
        for name, value in event.model_dump(mode="json", exclude={"run_id", "seq", "at"}).items():
            if value is None:
                continue
            text = not isinstance(value, bool | int | float)
            if text and name not in fixed and name not in _NAMES and not self.capture_content:
                continue  # free text or structured payload: content
            attributes[f"ownloop.{name}"] = _json(value) if text else value
        return attributes

    def __repr__(self) -> str:
        return f"OtelSink(capture_content={self.capture_content}, open_runs={len(self._runs)})"


def _tool_attributes(event: ToolStarted | ToolFinished) -> dict[str, Any]:
    return {
        "gen_ai.tool.name": event.tool,
        "gen_ai.tool.call.id": event.call_id,
        "gen_ai.tool.type": "function",
    }


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
