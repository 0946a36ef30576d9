"""``diagnose``: the patterns that explain how a run went, each pointing at its events."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from ownloop import Accept, Agent, Limits, PermanentModelError, Reject, TransientModelError
from ownloop.cli import _trace
from ownloop.contracts import ToolDenied
from ownloop.policy import allow_writes
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from ownloop.tracing import Diagnosis, JsonlSink, TraceRecorder, UnknownEvent, diagnose

from .helpers import research_registry


def _run(steps: list[Any], registry: ToolRegistry | None = None, **options: Any) -> Any:
    clock = options.pop("clock", FakeClock())
    agent = Agent(ScriptedModel(steps), registry or research_registry(), clock=clock, **options)
    return agent.run_sync("q", run_id="run-1")


def _codes(diagnosis: Diagnosis) -> list[str]:
    return [finding.code for finding in diagnosis.findings]


def test_a_clean_run_has_no_findings() -> None:
    """A run that completed without trouble is ok and says so."""
    result = _run([tool_call("search_documents", query="agent"), final("done")])
    diagnosis = diagnose(result.trace)
    assert diagnosis.findings == ()
    assert diagnosis.ok
    assert diagnosis.render() == "run run-1: completed (final_output) — no findings"


def test_repeated_actions_are_found_with_their_events() -> None:
    """The same tool with the same arguments proposed twice is a repeated action."""
    result = _run(
        [
            tool_call("search_documents", "a", query="agent"),
            tool_call("search_documents", "b", query="agent"),
            final("done"),
        ]
    )
    (finding,) = diagnose(result.trace).findings
    assert finding.code == "repeated_action"
    assert finding.seqs == (4, 10)
    assert "proposed 2 times" in finding.message
    assert diagnose(result.trace, repeat_threshold=3).findings == ()


def test_slow_tools_and_empty_results_are_found() -> None:
    """A tool over the threshold and a tool that returned nothing are both reported."""
    clock = FakeClock()
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def slow_search(query: str) -> list[str]:
        """Search slowly.

        Args:
            query: Keywords.
        """
        clock.advance(7.5)
        return []

    result = _run([tool_call("slow_search", query="x"), final("done")], registry, clock=clock)
    diagnosis = diagnose(result.trace)
    assert _codes(diagnosis) == ["slow_tool", "empty_result"]
    assert "took 7.50s (over 5s)" in diagnosis.findings[0].message
    assert diagnose(result.trace, slow_tool_s=10).findings[0].code == "empty_result"


def test_retries_and_permanent_model_failures_are_found() -> None:
    """Retries are grouped by target; a permanent model failure is an error."""
    result = _run([TransientModelError("overloaded"), PermanentModelError("bad request")])
    diagnosis = diagnose(result.trace)
    assert _codes(diagnosis) == ["model_failed", "run_failed", "retries"]
    assert diagnosis.findings[2].message == (
        "model calls were retried 1 time(s): TransientModelError: overloaded"
    )
    assert not diagnosis.ok


def test_tool_errors_unknown_effects_and_rejections_are_found() -> None:
    """Failed tools, writes of unknown effect and rejected calls are each reported."""
    registry = research_registry()

    @registry.tool(effect="read")
    def broken(x: str) -> str:
        """Fail.

        Args:
            x: Anything.
        """
        raise ValueError("cannot")

    @registry.tool(effect="write")
    def send(x: str) -> str:
        """Send, with an unknown outcome.

        Args:
            x: Anything.
        """
        raise TimeoutError("no answer")

    result = _run(
        [
            tool_call("nope", x="1"),
            tool_call("broken", x="1"),
            tool_call("send", x="1"),
            final("done"),
        ],
        registry,
        policy=allow_writes("send"),
    )
    codes = _codes(diagnose(result.trace))
    assert codes == ["unknown_effect", "run_unresolved", "tool_rejected", "tool_error"]
    assert "may or may not have applied" in diagnose(result.trace).render()


def test_completion_rejections_and_truncations_are_found() -> None:
    """A rejected answer is a warning; cut observations and answers are noted."""

    def needs_citation(output: str, evidence: Any) -> Any:
        return Reject("no citation") if "[" not in output else Accept()

    registry = ToolRegistry()

    @registry.tool(effect="read")
    def big() -> str:
        """Return a lot."""
        return "x" * 5000

    result = _run(
        [tool_call("big"), final("bare answer"), final("[R-1] " + "y" * 200)],
        registry,
        validators=[needs_citation],
        limits=Limits(max_observation_chars=100, max_output_chars=100),
    )
    codes = _codes(diagnose(result.trace))
    assert codes == [
        "completion_rejected",
        "observation_truncated",
        "observation_truncated",
        "output_truncated",
    ]


def test_budgets_exhausted_and_nearly_exhausted_are_found() -> None:
    """An exhausted budget is an error; one used to 80% or more is a warning."""
    result = _run(
        [tool_call("search_documents", query="a"), tool_call("search_documents", query="b")],
        limits=Limits(max_steps=2, max_tool_calls=2),
    )
    diagnosis = diagnose(result.trace)
    assert _codes(diagnosis) == ["budget_exhausted", "budget_near_limit", "run_stopped"]
    assert diagnosis.findings[1].message == "tool calls: 2 of 2 used (100%)"
    assert diagnose(result.trace, budget_ratio=1.5).findings[-1].code == "run_stopped"


def test_cut_mixed_and_unknown_traces_are_explained() -> None:
    """A trace with gaps, without an end, or with unknown kinds says so."""
    result = _run([final("done")])
    events = list(result.trace)
    gap = diagnose([events[0], *events[2:]])
    assert _codes(gap) == ["sequence_gap"]
    assert "skip [2]" in gap.findings[0].message
    mixed = diagnose([*events, events[0]])
    assert "repeat or go backwards" in mixed.findings[0].message
    unfinished = events[:-1]
    late = UnknownEvent(run_id="run-1", seq=len(events), at=events[-1].at, kind="future_kind")
    diagnosis = diagnose([*unfinished, late])
    assert _codes(diagnosis) == ["unfinished", "unrecognised_events"]
    assert diagnosis.status is None
    assert "unfinished" in diagnosis.render()


def test_denials_and_pauses_are_reported_by_level() -> None:
    """A denied call is a warning; kinds added later are read by their fields."""
    recorder = TraceRecorder("r", FakeClock())
    recorder.emit(ToolDenied, call_id="c", tool="pay", reason="over limit", rule="max_amount")
    (unfinished, denied) = diagnose(recorder.events).findings
    assert (unfinished.code, denied.code) == ("unfinished", "tool_denied")
    assert denied.message == "pay [c] denied by max_amount: over limit"


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ownloop")
    _trace.register(parser.add_subparsers(dest="command"))
    arguments = parser.parse_args(argv)
    status: int = arguments.handler(arguments)
    return status


def test_the_command_exits_1_on_warnings_and_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ownloop trace diagnose`` exits 0 when clean, 1 with warnings, and has --json."""
    clean, noisy = tmp_path / "clean.jsonl", tmp_path / "noisy.jsonl"
    Agent(ScriptedModel([final("ok")]), clock=FakeClock(), trace_sinks=[JsonlSink(clean)]).run_sync(
        "q"
    )
    _run(
        [TransientModelError("overloaded"), final("ok")],
        trace_sinks=[JsonlSink(noisy)],
    )
    assert _cli(["trace", "diagnose", str(clean)]) == 0
    assert "no findings" in capsys.readouterr().out
    assert _cli(["trace", "diagnose", str(noisy), "--json"]) == 1
    (diagnosis,) = json.loads(capsys.readouterr().out)
    assert diagnosis["ok"] is False
    assert diagnosis["findings"][0]["code"] == "retries"
    assert _cli(["trace", "diagnose", str(noisy), "--slow-tool-s", "1", "--repeats", "5"]) == 1
    assert "warning retries" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("served", "steps", "found"),
    [
        ("/models/SmolLM2-135M-Instruct.Q4_1.gguf", [], True),
        ("/models/SmolLM2-135M-Instruct.Q4_1.GGUF", [], True),
        ("gpt-4.1-mini", [], False),
        ("/models/x.gguf", [tool_call("search_documents", query="a")], False),
    ],
)
def test_tools_a_llama_cpp_server_never_showed_the_model_are_flagged(
    served: str, steps: list[Any], found: bool
) -> None:
    """Tools offered, no call ever, and a .gguf model: the server ignored them (tools_ignored)."""
    answer = final("17 + 25 = 30.").model_copy(update={"model": served})
    result = _run([*steps, answer])
    codes = _codes(diagnose(result.trace))
    assert ("tools_ignored" in codes) is found
    if found:
        (finding,) = [f for f in diagnose(result.trace).findings if f.code == "tools_ignored"]
        assert "OWNLOOP_COMPAT=llamacpp" in finding.message
        assert finding.severity == "warning"
        assert len(finding.seqs) == 2


def test_a_run_offering_no_tools_is_never_flagged_as_ignoring_them() -> None:
    """No tools offered: nothing to ignore, whatever the server."""
    answer = final("done").model_copy(update={"model": "m.gguf"})
    result = Agent(ScriptedModel([answer]), ToolRegistry(), clock=FakeClock()).run_sync("q")
    assert "tools_ignored" not in _codes(diagnose(result.trace))


def test_an_adapters_note_about_the_exchange_is_recorded_in_the_trace() -> None:
    """A response's notes (say, tools the server never showed) appear in its model_responded."""
    answer = final("30").model_copy(update={"notes": ("tools_ignored: no tool_choice sent",)})
    result = _run([answer])
    (responded,) = [event for event in result.trace if event.kind == "model_responded"]
    assert responded.notes == ("tools_ignored: no tool_choice sent",)
