"""One trace: a child's events reach the parent's sinks, nested in `trace show` and in OTel."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ownloop import Agent, ToolRegistry
from ownloop.cli import main
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tracing import JsonlSink, delegated_from, nest_runs
from ownloop.tracing.otel import OtelSink


def _agents(sink: object) -> Agent[None, str]:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order id.
        """
        return f"order {order}: paid"

    child = Agent(ScriptedModel([tool_call("lookup", "c1", order="A1"), final("paid")]), registry)
    parent_registry = ToolRegistry()
    parent_registry.register(child.as_tool(name="payments", description="Payments.", effect="read"))
    return Agent(
        ScriptedModel([tool_call("payments", "p1", task="check A1"), final("done")]),
        parent_registry,
        trace_sinks=[sink],  # type: ignore[list-item]
    )


def test_trace_show_indents_the_childs_run_under_the_parents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The child's events reach the parent's JSON lines sink; `trace show` indents them."""
    path = tmp_path / "trace.jsonl"
    with JsonlSink(path) as sink:
        _agents(sink).run_sync("go", run_id="top")
    assert main(["trace", "show", str(path)]) == 0
    shown = capsys.readouterr().out
    parent, child = shown.split("\n\n")[:2]
    assert "top" in parent.splitlines()[0]
    assert child.startswith("    ")
    assert "top/payments/call#1" in child
    assert all(line.startswith("    ") for line in child.splitlines() if line)
    assert "lookup" in child


def test_the_childs_spans_are_children_of_the_parents_execute_tool() -> None:
    """With one OTel sink, the child's run span is a child of the parent's delegation span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _agents(OtelSink(provider)).run_sync("go", run_id="top")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    delegation = spans["execute_tool payments"]
    child_runs = [
        span
        for span in exporter.get_finished_spans()
        if span.name.startswith("invoke_agent")
        and (span.attributes or {}).get("ownloop.run_id") == "top/payments/call#1"
    ]
    assert len(child_runs) == 1
    assert child_runs[0].parent is not None
    assert child_runs[0].parent.span_id == delegation.context.span_id
    lookup = spans["execute_tool lookup"]
    assert lookup.parent is not None
    assert lookup.parent.span_id == child_runs[0].context.span_id


def test_nesting_follows_the_run_ids() -> None:
    """A run named ``<caller>/<tool>/<key>`` follows its caller, one level deeper."""
    runs: dict[str, list[object]] = {
        "a/x/call#1/y/call#1": [],
        "a": [],
        "b": [],
        "a/x/call#1": [],
        "orphan/x/call#1": [],
    }
    assert nest_runs(runs) == [  # type: ignore[arg-type]
        (0, "a"),
        (1, "a/x/call#1"),
        (2, "a/x/call#1/y/call#1"),
        (0, "b"),
        (0, "orphan/x/call#1"),
    ]
    assert delegated_from("plain") is None
    assert delegated_from("a//k") is None
