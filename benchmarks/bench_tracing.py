"""Per-event cost of ownloop's trace pipeline (redact, bound, validate) and its JSON lines sink.

The events are those of the research demo (three model turns, three tool executions: 20 events),
recorded once and replayed through recorders, so only the tracing is measured:

- ``baseline``: build each typed event and hand it to a sink that does nothing (what a recorder
  without a pipeline does);
- ``pipeline``: the default pipeline (structlog chain: redact -> bound -> render) and a null sink;
- ``pipeline + jsonl``: the default pipeline and `JsonlSink` writing to a temporary file, flushed
  per event.

A second mix adds payloads with secrets and long text (every event has something to redact or
cut), the worst case for the pipeline. Run:

    .venv/bin/python benchmarks/bench_tracing.py [--runs N] [--repeat R]

It prints microseconds per event (the best of R medians of N replays), the overhead per event and
per model turn, and the ratios to the baseline, as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ownloop import Agent
from ownloop.clock import FakeClock
from ownloop.contracts import EventBase, ModelFailed, RetryScheduled, ToolFinished, ToolProposed
from ownloop.demo.research import ResearchModel, build_registry
from ownloop.tracing import JsonlSink, TraceRecorder
from ownloop.validators import citations_observed

TURNS = 3
Replay = list[tuple[type[EventBase], dict[str, Any]]]


def demo_events() -> Replay:
    """Record the research demo's events once, as (class, own fields) pairs to replay."""
    agent = Agent(
        ResearchModel(),
        build_registry(),
        clock=FakeClock(),
        validators=[citations_observed(min_citations=1)],
    )
    result = agent.run_sync("How should a safe AI agent be evaluated?")
    base = {"run_id", "seq", "at", "kind"}
    return [
        (
            type(event),
            {name: getattr(event, name) for name in type(event).model_fields if name not in base},
        )
        for event in result.trace
    ]


def with_secrets(events: Replay) -> Replay:
    """The same events with secrets and long text added where the contracts allow free text."""
    key = "sk-proj-" + "a1B2c3D4" * 6
    secret_arguments = {"query": "x" * 900, "api_key": key, "url": "https://bob:hunter2@db.example"}
    extra: Replay = [
        (
            ToolProposed,
            {"step": 1, "call_id": "c9", "tool": "fetch", "arguments": secret_arguments},
        ),
        (
            ToolFinished,
            {
                "call_id": "c9",
                "tool": "fetch",
                "attempt": 1,
                "status": "error",
                "effect": "none",
                "duration_s": 0.1,
                "message": f"RuntimeError: upstream said Authorization: Bearer {key} " + "y" * 600,
            },
        ),
        (
            ModelFailed,
            {
                "step": 1,
                "attempt": 1,
                "error": {"type": "TransientModelError", "message": f"bad key {key}"},
                "retryable": True,
            },
        ),
        (
            RetryScheduled,
            {"target": "model", "next_attempt": 2, "delay_s": 0.5, "reason": f"key {key}"},
        ),
    ]
    return events + extra


class _BareRecorder:
    """The baseline: number and build the typed events, store them, call the sinks."""

    def __init__(self, sink: Callable[[Any], None]) -> None:
        self._seq = 0
        self._clock = FakeClock()
        self._sink = sink
        self.events: list[Any] = []

    def emit(self, event_type: type[EventBase], **fields: Any) -> None:
        self._seq += 1
        event = event_type(run_id="bench", seq=self._seq, at=self._clock.now(), **fields)
        self.events.append(event)
        self._sink(event)


def _null(event: Any) -> None:
    return None


def _time(make: Callable[[], Any], events: Replay, runs: int) -> float:
    """Return the median seconds per event over ``runs`` replays."""
    timings = []
    for _ in range(runs):
        recorder = make()
        started = time.perf_counter()
        for event_type, fields in events:
            recorder.emit(event_type, **fields)
        timings.append((time.perf_counter() - started) / len(events))
    return statistics.median(timings)


def measure(events: Replay, runs: int, repeat: int, directory: Path) -> dict[str, float]:
    """Measure one mix three ways, interleaved; the best of ``repeat`` medians, in µs per event.

    The best median is the least disturbed by other processes on a small shared machine.
    """
    clock = FakeClock()
    sink = JsonlSink(directory / "trace.jsonl")
    makers: dict[str, Callable[[], Any]] = {
        "baseline": lambda: _BareRecorder(_null),
        "pipeline": lambda: TraceRecorder("bench", clock, [_null]),
        "pipeline + jsonl": lambda: TraceRecorder("bench", clock, [sink]),
    }
    best = dict.fromkeys(makers, float("inf"))
    for _ in range(repeat):
        for name, make in makers.items():
            best[name] = min(best[name], _time(make, events, runs))
    sink.close()
    return {name: round(seconds * 1e6, 2) for name, seconds in best.items()}


def report(mix: str, per_event: dict[str, float], turn_events: float) -> dict[str, Any]:
    """Add the overhead and the ratios to one mix's measurements."""
    base, full = per_event["baseline"], per_event["pipeline + jsonl"]
    return {
        "mix": mix,
        "us_per_event": per_event,
        "overhead_us_per_event": round(full - base, 2),
        "overhead_us_per_turn": round((full - base) * turn_events, 1),
        "ratio_full_to_baseline": round(full / base, 2),
        "ratio_pipeline_to_baseline": round(per_event["pipeline"] / base, 2),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print the results as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="replays per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per configuration")
    arguments = parser.parse_args(argv)
    demo = demo_events()
    turn_events = len(demo) / TURNS
    with tempfile.TemporaryDirectory() as directory:
        results = [
            report(
                "research demo",
                measure(demo, arguments.runs, arguments.repeat, Path(directory)),
                turn_events,
            ),
            report(
                "with secrets and long text",
                measure(with_secrets(demo), arguments.runs, arguments.repeat, Path(directory)),
                turn_events,
            ),
        ]
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "runs": arguments.runs,
                "repeat": arguments.repeat,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
