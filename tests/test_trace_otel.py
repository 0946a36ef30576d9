"""OpenTelemetry export: GenAI spans derived from the redacted event stream."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ownloop import Agent, PermanentModelError, TransientModelError
from ownloop.contracts import (
    Limits,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    RunFinished,
    RunStarted,
    RunStatus,
    StopReason,
    TokenUsage,
    ToolCall,
    ToolFinished,
    ToolStarted,
    Usage,
    Versions,
)
from ownloop.testing import FakeClock, ScriptedModel, final
from ownloop.tracing import TraceRecorder, UnknownEvent
from ownloop.tracing.otel import OtelSink

from .helpers import research_registry

OPENAI_KEY = "sk-proj-Zq8f0Lr2Xw7Yt3Vb9Nm4Kc6Hd1Jg5Ps8"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """An exporter that keeps finished spans in memory."""
    return InMemorySpanExporter()


def _provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _call(name: str, call_id: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
        usage=TokenUsage(input_tokens=11, output_tokens=7),
        model="gpt-test-2026",
        provider_request_id="req-1",
    )


def _run(sink: OtelSink, steps: list[Any]) -> Any:
    model = ScriptedModel(steps, model_name="gpt-test")
    agent = Agent(model, research_registry(), clock=FakeClock(), trace_sinks=[sink])
    return agent.run_sync("q", run_id="run-1")


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def test_a_run_becomes_an_agent_span_with_chat_and_tool_children(
    exporter: InMemorySpanExporter,
) -> None:
    """One invoke_agent span per run, a chat span per model call, an execute_tool span per tool."""
    _run(
        OtelSink(_provider(exporter)),
        [_call("search_documents", "call-1", query="agent"), final("done")],
    )
    spans = _by_name(exporter.get_finished_spans())
    (run,) = spans["invoke_agent ownloop"]
    chats = spans["chat gpt-test"]
    (tool,) = spans["execute_tool search_documents"]
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.request.model"] == "gpt-test"
    assert run.attributes["ownloop.status"] == "completed"
    assert run.attributes["gen_ai.usage.input_tokens"] == 11
    assert len(chats) == 2
    first = chats[0].attributes
    assert first is not None
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "gpt-test"
    assert first["gen_ai.response.model"] == "gpt-test-2026"
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (11, 7)
    assert first["gen_ai.response.id"] == "req-1"
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "search_documents"
    assert tool.attributes["gen_ai.tool.call.id"] == "call-1"
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    for child in (*chats, tool):
        assert child.parent is not None
        assert child.parent.span_id == run.context.span_id  # type: ignore[union-attr]
    assert [event.name for event in run.events][:2] == ["tool_proposed", "observation_added"]


def test_content_is_exported_only_when_enabled_and_redacted_even_then(
    exporter: InMemorySpanExporter,
) -> None:
    """Tool arguments appear with capture_content=True, and their secrets are redacted."""
    sink = OtelSink(_provider(exporter), capture_content=True)
    _run(sink, [_call("search_documents", "call-1", query=f"key {OPENAI_KEY}"), final("done")])
    (tool,) = _by_name(exporter.get_finished_spans())["execute_tool search_documents"]
    assert tool.attributes is not None
    arguments = str(tool.attributes["gen_ai.tool.call.arguments"])
    assert "[redacted:" in arguments
    assert OPENAI_KEY not in arguments


def test_failures_become_error_statuses(exporter: InMemorySpanExporter) -> None:
    """A failed model attempt, a failed tool and a failed run carry an error status."""
    registry = research_registry()

    @registry.tool(effect="read")
    def explode(reason: str) -> str:
        """Always fail.

        Args:
            reason: Why.
        """
        raise RuntimeError(f"boom with {reason}")

    model = ScriptedModel(
        [
            TransientModelError(f"overloaded, key {OPENAI_KEY}"),
            _call("explode", "call-9", reason=OPENAI_KEY),
            PermanentModelError(f"bad key {OPENAI_KEY}", category="authentication"),
        ]
    )
    sink = OtelSink(_provider(exporter))
    Agent(model, registry, clock=FakeClock(), trace_sinks=[sink]).run_sync("q")
    spans = _by_name(exporter.get_finished_spans())
    failed_chat, _, last_chat = spans["chat scripted"]
    assert failed_chat.status.status_code is StatusCode.ERROR
    assert failed_chat.status.description == "TransientModelError"
    assert last_chat.status.status_code is StatusCode.ERROR
    (tool,) = spans["execute_tool explode"]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "error"
    (run,) = spans["invoke_agent ownloop"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "model_error"
    everything = repr(
        [
            (span.attributes, span.events, span.status)
            for spans_ in spans.values()
            for span in spans_
        ]
    )
    assert OPENAI_KEY not in everything


def test_error_details_are_content(exporter: InMemorySpanExporter) -> None:
    """With capture_content=True error statuses carry the (redacted) messages."""
    model = ScriptedModel([PermanentModelError(f"bad key {OPENAI_KEY}")])
    sink = OtelSink(_provider(exporter), capture_content=True, agent_name="support")
    Agent(model, clock=FakeClock(), trace_sinks=[sink]).run_sync("q")
    spans = _by_name(exporter.get_finished_spans())
    (run,) = spans["invoke_agent support"]
    assert "model call failed" in str(run.status.description)
    (chat,) = spans["chat scripted"]
    assert "[redacted:" in str(chat.status.description)
    assert OPENAI_KEY not in str(chat.status.description)


def test_events_without_a_started_run_and_unknown_kinds_degrade_gracefully(
    exporter: InMemorySpanExporter,
) -> None:
    """A sink attached mid-run opens the run span itself; unknown kinds become span events."""
    sink = OtelSink(_provider(exporter))
    clock = FakeClock()
    recorder = TraceRecorder("late", clock, [sink])

    recorder.emit(ModelResponded, step=1, attempt=1, decision="final", duration_s=0.1)
    recorder.emit(
        ToolFinished, call_id="c", tool="t", attempt=1, status="ok", effect="none", duration_s=0
    )
    sink(UnknownEvent(run_id="late", seq=3, at=clock.now(), kind="future_kind", note="x", n=2))
    recorder.emit(
        RunFinished,
        status=RunStatus.COMPLETED,
        stop_reason=StopReason.FINAL_OUTPUT,
        detail="ok",
        usage=Usage(),
    )
    spans = _by_name(exporter.get_finished_spans())
    (run,) = spans["invoke_agent ownloop"]
    assert "chat" in spans
    assert "execute_tool t" in spans
    (future,) = [event for event in run.events if event.name == "future_kind"]
    assert future.attributes is not None
    assert future.attributes["ownloop.n"] == 2
    assert "ownloop.note" not in future.attributes  # free text is content
    assert repr(sink) == "OtelSink(capture_content=False, open_runs=0)"


def test_open_spans_are_ended_when_the_run_ends(exporter: InMemorySpanExporter) -> None:
    """Model and tool spans still open when the run finishes are ended with it."""
    sink = OtelSink(_provider(exporter))
    recorder = TraceRecorder("r", FakeClock(), [sink])
    recorder.emit(
        RunStarted, task_chars=1, limits=Limits(), versions=Versions(ownloop="1", python="3")
    )
    recorder.emit(ModelRequested, step=1, attempt=1, messages=1, request_chars=1, tools=0)
    recorder.emit(ModelRequested, step=1, attempt=2, messages=1, request_chars=1, tools=0)
    recorder.emit(ToolStarted, call_id="c", tool="t", attempt=1)
    recorder.emit(
        RunFinished,
        status=RunStatus.STOPPED,
        stop_reason=StopReason.DEADLINE,
        detail="late",
        usage=Usage(),
    )
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["chat", "chat", "execute_tool t", "invoke_agent ownloop"]


def test_the_run_span_nests_under_the_applications_current_span(
    exporter: InMemorySpanExporter,
) -> None:
    """A run started inside an application span becomes its child."""
    provider = _provider(exporter)
    with provider.get_tracer("app").start_as_current_span("request") as parent:
        _run(OtelSink(provider), [final("done")])
    (run,) = _by_name(exporter.get_finished_spans())["invoke_agent ownloop"]
    assert run.parent is not None
    assert run.parent.span_id == parent.get_span_context().span_id


def test_the_module_explains_how_to_install_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OpenTelemetry installed, importing the module names the extra to install."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "ownloop.tracing.otel")
    with pytest.raises(ImportError, match=r"ownloop\[otel\]"):
        importlib.import_module("ownloop.tracing.otel")
