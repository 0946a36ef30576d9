"""``ownloop trace show``: a run's trace as a readable timeline, in text or JSON."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from ownloop import Agent, InputRejected, Limits, TransientModelError
from ownloop.cli import _trace
from ownloop.contracts import ModelResponse, RunResumed, RunStarted, ToolStarted, Versions
from ownloop.demo.research import ResearchModel, build_registry
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tracing import JsonlSink, TraceRecorder, UnknownEvent, format_trace, timeline
from ownloop.validators import citations_observed

from .helpers import research_registry

GOLDEN = Path(__file__).parent / "golden" / "trace_show_research.txt"
FIXED_VERSIONS = Versions(
    ownloop="X.Y.Z", python="3.X", sdk="X.Y", model="ownloop-research-demo", policy_digest="d1g"
)


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ownloop")
    _trace.register(parser.add_subparsers(dest="command"))
    arguments = parser.parse_args(argv)
    status: int = arguments.handler(arguments)
    return status


def _write(path: Path, events: object) -> None:
    with JsonlSink(path) as sink:
        for event in events:  # type: ignore[attr-defined]
            sink(event)


def _research_trace(path: Path) -> None:
    agent = Agent(
        ResearchModel(),
        build_registry(),
        clock=FakeClock(),
        limits=Limits(max_steps=6, max_tool_calls=6, max_tool_attempts=8),
        validators=[citations_observed(min_citations=1)],
    )
    result = agent.run_sync("How should a safe AI agent be evaluated?", run_id="research-1")
    stable = [
        event.model_copy(update={"versions": FIXED_VERSIONS})
        if isinstance(event, RunStarted)
        else event
        for event in result.trace
    ]
    _write(path, stable)


def test_show_prints_the_research_demo_as_the_golden_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The research demo's timeline matches tests/golden (OWNLOOP_UPDATE_GOLDEN=1 rewrites it)."""
    path = tmp_path / "research.jsonl"
    _research_trace(path)
    assert _cli(["trace", "show", str(path)]) == 0
    shown = capsys.readouterr().out
    if os.environ.get("OWNLOOP_UPDATE_GOLDEN"):
        GOLDEN.write_text(shown, encoding="utf-8")
    assert shown == GOLDEN.read_text(encoding="utf-8")


def test_show_json_has_entries_budgets_and_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints each run's entries, budget use and versions."""
    path = tmp_path / "research.jsonl"
    _research_trace(path)
    assert _cli(["trace", "show", str(path), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["run_id"] == "research-1"
    assert run["status"] == "completed"
    assert [entry["phase"] for entry in run["entries"]][:3] == ["start", "think", "act"]
    assert run["budgets"][0] == {
        "budget": "max_steps",
        "name": "steps",
        "used": 3.0,
        "limit": 6.0,
        "ratio": 0.5,
    }
    assert run["versions"]["model"] == "ownloop-research-demo"


def test_retries_failures_and_rejections_have_their_own_lines() -> None:
    """Model failures, retries, rejected calls and budget stops read as dedicated lines."""
    model = ScriptedModel(
        [
            TransientModelError("overloaded"),
            tool_call("nope", q="x"),
            tool_call("search_documents", query="agent"),
        ]
    )
    agent = Agent(model, research_registry(), clock=FakeClock(), limits=Limits(max_steps=2))
    result = agent.run_sync("q")
    text = timeline(result.trace).render()
    assert "think    model attempt 1 failed (retryable): TransientModelError: overloaded" in text
    assert "retry    model attempt 2 in" in text
    assert "reject   nope id=call-nope unknown_tool" in text
    assert "budget   max_steps exhausted: 2 of 2 at before_model_call" in text
    assert "stop     stopped (max_steps)" in text


def test_unknown_kinds_and_unfinished_calls_still_show() -> None:
    """Kinds without a dedicated line show their fields; a tool without a finish shows started."""
    clock = FakeClock()
    recorder = TraceRecorder("r", clock)
    recorder.emit(ToolStarted, call_id="c1", tool="slow", attempt=1)
    events = [
        *recorder.events,
        UnknownEvent(run_id="r", seq=2, at=clock.now(), kind="approval_granted", who="ann"),
    ]
    shown = timeline(events)
    assert shown.status is None
    text = shown.render()
    assert text.startswith("run r: unfinished")
    assert "event    approval_granted: who=ann" in text
    assert "run      slow [c1] started" in text


def test_timeline_needs_exactly_one_run() -> None:
    """Events of several runs (or none) are refused; split them by run first."""
    clock = FakeClock()
    a = TraceRecorder("a", clock)
    b = TraceRecorder("b", clock)
    a.emit(ToolStarted, call_id="c", tool="t", attempt=1)
    b.emit(ToolStarted, call_id="c", tool="t", attempt=1)
    with pytest.raises(InputRejected, match="events of 2 runs"):
        timeline([*a.events, *b.events])
    with pytest.raises(InputRejected, match="no events"):
        timeline([])


def test_show_prints_every_run_of_a_file_or_the_one_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file with several runs shows each; --run selects one."""
    path = tmp_path / "runs.jsonl"
    sink = JsonlSink(path)
    for run_id in ("first", "second"):
        agent = Agent(ScriptedModel([final("ok")]), clock=FakeClock(), trace_sinks=[sink])
        agent.run_sync("q", run_id=run_id)
    assert _cli(["trace", "show", str(path)]) == 0
    both = capsys.readouterr().out
    assert "run first: completed" in both
    assert "run second: completed" in both
    assert _cli(["trace", "show", str(path), "--run", "second"]) == 0
    assert "run first" not in capsys.readouterr().out


def test_show_explains_missing_files_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file, an empty one or an unknown run id exit with status 2 and a message."""
    assert _cli(["trace", "show", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert _cli(["trace", "show", str(empty)]) == 2
    assert "no events" in capsys.readouterr().err
    assert _cli(["trace", "diagnose", str(empty), "--run", "x"]) == 2
    assert "no run x" in capsys.readouterr().err


def test_trace_without_an_action_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``ownloop trace`` alone prints its help and exits with status 2."""
    assert _cli(["trace"]) == 2
    assert "show" in capsys.readouterr().out


def test_explicit_stops_cut_answers_and_the_one_line_format() -> None:
    """An explicit stop and a cut answer have their lines; format_trace gives one line an event."""
    stopped = Agent(
        ScriptedModel([ModelResponse(stop_reason="NO_EVIDENCE")]), clock=FakeClock()
    ).run_sync("q")
    assert (
        "think    model attempt 1 → explicit stop: NO_EVIDENCE" in timeline(stopped.trace).render()
    )
    long = Agent(
        ScriptedModel([final("z" * 200)]), clock=FakeClock(), limits=Limits(max_output_chars=100)
    ).run_sync("q")
    assert "note     final answer cut: 200 -> 100 chars" in timeline(long.trace).render()
    budget = Agent(
        ScriptedModel([tool_call("search_documents", query="a")]),
        research_registry(),
        clock=FakeClock(),
        limits=Limits(max_steps=1),
    ).run_sync("q")
    lines = format_trace(budget.trace).splitlines()
    assert len(lines) == len(budget.trace)
    assert "budget_exhausted    max_steps limit=1 observed=1" in lines[-2]


def test_resumed_runs_do_not_report_deadline_use() -> None:
    """After a pause the wall-clock span is not the run's time, so no deadline use is shown."""
    recorder = TraceRecorder("r", FakeClock())
    recorder.emit(
        RunStarted, task_chars=1, limits=Limits(), versions=Versions(ownloop="1", python="3")
    )
    recorder.emit(RunResumed, approvals=1, elapsed_s=2.0)
    names = [use.budget for use in timeline(recorder.events).budgets]
    assert "deadline_s" not in names
    assert "max_steps" in names
