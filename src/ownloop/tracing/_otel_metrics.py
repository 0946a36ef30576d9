"""OpenTelemetry metrics: what runs do (from their events) and what a store holds (its stats).

Off unless configured: `OtelMetrics` is a trace sink an application adds (``trace_sinks=[...]``);
`StoreMetrics` reports gauges of a store's `RunStats`, refreshed when the application calls
``refresh`` (a worker's loop, a timer). Both use the global meter provider unless given one.
Attributes are identifiers and codes (status, stop reason, tool name, error type), never content.
Imported through ``ownloop.tracing.otel`` (it needs ``opentelemetry-api``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from opentelemetry import metrics

from ownloop._version import __version__
from ownloop.clock import Clock, SystemClock
from ownloop.contracts import (
    EventBase,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunStarted,
    RunStats,
    ToolFinished,
    ToolStarted,
)

__all__ = ["OtelMetrics", "StatsSource", "StoreMetrics"]


class StatsSource(Protocol):
    """What `StoreMetrics` reads: any `RunStore`."""

    async def run_stats(self) -> RunStats:
        """Return the store's summary."""
        ...


class OtelMetrics:
    """A trace sink that counts runs, attempts, failures, tokens and cost, and times steps.

    Instruments (all prefixed ``ownloop.``): ``runs.started``, ``runs.ended`` (``ownloop.status``,
    ``ownloop.stop_reason``), ``model.attempts``, ``model.failures`` (``error.type``),
    ``tool.attempts`` and ``tool.failures`` (``gen_ai.tool.name``, ``ownloop.receipt.status``),
    ``tokens`` (``gen_ai.token.type``: input or output), ``cost``, and the histograms
    ``step.duration``, ``model.duration`` and ``tool.duration`` (seconds).

    Args:
        meter_provider: Where the measurements go; the global meter provider when omitted.
    """

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter("ownloop", __version__, meter_provider=meter_provider)
        count = meter.create_counter
        self._started = count("ownloop.runs.started", "{run}", "Runs started")
        self._ended = count("ownloop.runs.ended", "{run}", "Runs ended or paused, by status")
        self._model_attempts = count("ownloop.model.attempts", "{attempt}", "Model calls started")
        self._model_failures = count("ownloop.model.failures", "{attempt}", "Model calls failed")
        self._tool_attempts = count("ownloop.tool.attempts", "{attempt}", "Tool attempts started")
        self._tool_failures = count("ownloop.tool.failures", "{attempt}", "Tool attempts not ok")
        self._tokens = count("ownloop.tokens", "{token}", "Tokens the provider reported")
        self._cost = count("ownloop.cost", "1", "Money spent, in the price table's unit")
        time = meter.create_histogram
        self._step = time("ownloop.step.duration", "s", "From a step's model call to the next")
        self._model = time("ownloop.model.duration", "s", "Model calls that answered")
        self._tool = time("ownloop.tool.duration", "s", "Tool attempts")
        self._steps: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def __call__(self, event: EventBase) -> None:
        """Record what one event says.

        Args:
            event: The event (already redacted by the recorder).
        """
        with self._lock:
            match event:
                case RunStarted():
                    self._started.add(1)
                case ModelRequested():
                    self._model_attempts.add(1)
                    if event.attempt == 1:
                        self._end_step(event.run_id, event.at)
                        self._steps[event.run_id] = event.at
                case ModelResponded():
                    usage = event.usage
                    self._tokens.add(usage.input_tokens, {"gen_ai.token.type": "input"})
                    self._tokens.add(usage.output_tokens, {"gen_ai.token.type": "output"})
                    self._model.record(event.duration_s)
                case ModelFailed():
                    error_type = str(event.error.get("type") or "ModelError")
                    self._model_failures.add(1, {"error.type": error_type})
                case ToolStarted():
                    self._tool_attempts.add(1, {"gen_ai.tool.name": event.tool})
                case ToolFinished():
                    attributes = {
                        "gen_ai.tool.name": event.tool,
                        "ownloop.receipt.status": event.status,
                    }
                    self._tool.record(event.duration_s, attributes)
                    if event.status != "ok":
                        self._tool_failures.add(1, attributes)
                case RunFinished():
                    self._end_step(event.run_id, event.at)
                    self._steps.pop(event.run_id, None)
                    outcome = {
                        "ownloop.status": event.status.value,
                        "ownloop.stop_reason": event.stop_reason.value,
                    }
                    self._ended.add(1, outcome)
                    if event.usage.cost:
                        self._cost.add(event.usage.cost)
                case _:
                    pass

    def _end_step(self, run_id: str, at: datetime) -> None:
        started = self._steps.get(run_id)
        if started is not None:
            self._step.record(max((at - started).total_seconds(), 0.0))

    def __repr__(self) -> str:
        return f"OtelMetrics(open_steps={len(self._steps)})"


class StoreMetrics:
    """Gauges of what a store holds, from its `RunStats` as of the last `refresh`.

    Gauges: ``ownloop.runs.stored`` (``ownloop.state``), ``ownloop.runs.paused``,
    ``ownloop.runs.paused.oldest_age`` (seconds the longest-waiting paused run has waited),
    ``ownloop.effects.unknown`` (writes whose effect is unknown) and ``ownloop.runs.leased``.

    Args:
        store: The store.
        meter_provider: Where the gauges go; the global meter provider when omitted.
        clock: Ages paused runs; the system clock by default.
    """

    def __init__(
        self,
        store: StatsSource,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.stats = RunStats()
        self._clock: Clock = clock if clock is not None else SystemClock()
        meter = metrics.get_meter("ownloop", __version__, meter_provider=meter_provider)
        gauge = meter.create_observable_gauge
        gauge("ownloop.runs.stored", [self._stored], "{run}", "Runs stored, by state")
        gauge("ownloop.runs.paused", [self._paused], "{run}", "Runs paused, waiting for people")
        gauge(
            "ownloop.runs.paused.oldest_age", [self._age], "s", "The longest wait of a paused run"
        )
        gauge(
            "ownloop.effects.unknown", [self._unknown], "{write}", "Writes whose effect is unknown"
        )
        gauge("ownloop.runs.leased", [self._leased], "{run}", "Runs a worker holds now")

    async def refresh(self) -> RunStats:
        """Read the store's stats again; the gauges report them until the next refresh.

        Returns:
            The stats.
        """
        self.stats = await self.store.run_stats()
        return self.stats

    def _stored(self, _: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [
            metrics.Observation(count, {"ownloop.state": state})
            for state, count in sorted(self.stats.runs.items())
        ]

    def _paused(self, _: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(self.stats.runs.get("paused", 0))]

    def _age(self, _: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(self.stats.paused_age_s(self._clock.now()))]

    def _unknown(self, _: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(self.stats.unknown_effects)]

    def _leased(self, _: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(self.stats.leased)]

    def __repr__(self) -> str:
        return f"StoreMetrics({self.store!r})"
