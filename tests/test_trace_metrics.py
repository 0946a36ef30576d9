"""OpenTelemetry metrics of a recorded run (OTel's in-memory reader) and of a store's stats."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from ownloop import Agent, Price, PriceTable, TransientModelError, TransientToolError
from ownloop.contracts import ModelResponse, RunStatus, TokenUsage, ToolCall
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore
from ownloop.testing import FakeClock, ScriptedModel, final
from ownloop.tools import ToolRegistry
from ownloop.tracing.otel import OtelMetrics, StoreMetrics
from tests.durable_support import T0, snapshot


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Each metric's data points as (attributes, value or histogram count and sum)."""
    found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, [])
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is None:
                        value = (point.count, round(point.sum, 6))  # type: ignore[attr-defined]
                    points.append((dict(point.attributes or {}), value))
    return found


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    calls = {"flaky": 0}

    @registry.tool(effect="read")
    def lookup(key: str) -> dict[str, str]:
        """Read a record.

        Args:
            key: The record.
        """
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise TransientToolError("the records service is busy")
        return {"key": key, "value": "42"}

    @registry.tool(effect="write")
    def record(key: str) -> dict[str, str]:
        """Write a record.

        Args:
            key: The record.
        """
        return {"key": key, "stored": "yes"}

    return registry


def _turn(*calls: ToolCall, tokens: int) -> ModelResponse:
    return ModelResponse(
        tool_calls=calls, usage=TokenUsage(input_tokens=tokens, output_tokens=tokens // 10)
    )


def test_a_recorded_run_gives_counts_tokens_cost_and_latencies() -> None:
    """Runs, attempts, failures, tokens, cost and step and tool durations, by name and value."""
    reader = InMemoryMetricReader()
    sink = OtelMetrics(MeterProvider(metric_readers=[reader]))
    script = [
        TransientModelError("overloaded"),
        _turn(ToolCall(id="c1", name="lookup", arguments={"key": "k"}), tokens=100),
        _turn(ToolCall(id="c2", name="record", arguments={"key": "k"}), tokens=200),
        final("stored k"),
    ]
    agent = Agent(
        ScriptedModel(script),
        _registry(),
        policy=allow_writes("record"),
        clock=FakeClock(),
        trace_sinks=[sink],
        prices=PriceTable({}, default=Price(input=1000.0, output=2000.0)),
    )
    result = agent.run_sync("store k")
    assert result.status is RunStatus.COMPLETED
    points = _points(reader)
    assert points["ownloop.runs.started"] == [({}, 1)]
    assert points["ownloop.runs.ended"] == [
        ({"ownloop.status": "completed", "ownloop.stop_reason": "final_output"}, 1)
    ]
    assert points["ownloop.model.attempts"] == [({}, 4)]
    assert points["ownloop.model.failures"] == [({"error.type": "TransientModelError"}, 1)]
    assert sorted(points["ownloop.tool.attempts"], key=str) == [
        ({"gen_ai.tool.name": "lookup"}, 2),
        ({"gen_ai.tool.name": "record"}, 1),
    ]
    failed = {"gen_ai.tool.name": "lookup", "ownloop.receipt.status": "transient"}
    assert points["ownloop.tool.failures"] == [(failed, 1)]
    assert sorted(points["ownloop.tokens"], key=str) == [
        ({"gen_ai.token.type": "input"}, 300),
        ({"gen_ai.token.type": "output"}, 30),
    ]
    assert points["ownloop.cost"] == [({}, round(result.usage.cost, 6))]
    assert result.usage.cost == (300 * 1000.0 + 30 * 2000.0) / 1e6
    (steps,) = points["ownloop.step.duration"]
    assert steps[1][0] == 3  # three steps, each timed until the next or the end
    durations = {tuple(sorted(a.items())): v[0] for a, v in points["ownloop.tool.duration"]}
    assert sorted(durations.values()) == [1, 1, 1]
    assert points["ownloop.model.duration"][0][1][0] == 3
    assert repr(sink) == "OtelMetrics(open_steps=0)"


def test_store_gauges_report_the_stats_of_the_last_refresh() -> None:
    """Paused runs, the oldest one's wait, unknown writes and leases, as of the last refresh."""
    reader = InMemoryMetricReader()
    store = MemoryRunStore()
    clock = FakeClock(start=T0 + timedelta(hours=2))
    gauges = StoreMetrics(store, MeterProvider(metric_readers=[reader]), clock=clock)
    assert _points(reader)["ownloop.runs.paused"] == [({}, 0)]
    assert _points(reader)["ownloop.runs.paused.oldest_age"] == [({}, 0.0)]

    async def fill() -> None:
        paused = snapshot("waiting", state="paused", status=RunStatus.PAUSED)
        await store.save(paused, expected_version=None)
        await store.save(snapshot("live"), expected_version=None)
        await gauges.refresh()

    asyncio.run(fill())
    points = _points(reader)
    assert points["ownloop.runs.paused"] == [({}, 1)]
    assert points["ownloop.runs.paused.oldest_age"] == [({}, 7200.0)]
    assert sorted(points["ownloop.runs.stored"], key=str) == [
        ({"ownloop.state": "paused"}, 1),
        ({"ownloop.state": "running"}, 1),
    ]
    assert points["ownloop.effects.unknown"] == [({}, 0)]
    assert points["ownloop.runs.leased"] == [({}, 0)]
    assert repr(gauges).startswith("StoreMetrics(MemoryRunStore(")


def test_a_run_without_prices_records_no_cost() -> None:
    """Without a price table nothing is spent: no cost is recorded, the run is still counted."""
    reader = InMemoryMetricReader()
    agent = Agent(
        ScriptedModel([final("done")]),
        _registry(),
        clock=FakeClock(),
        trace_sinks=[OtelMetrics(MeterProvider(metric_readers=[reader]))],
    )
    assert agent.run_sync("answer").status is RunStatus.COMPLETED
    points = _points(reader)
    assert points["ownloop.runs.ended"][0][1] == 1
    assert points.get("ownloop.cost", []) == []
