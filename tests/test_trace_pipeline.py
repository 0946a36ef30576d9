"""The trace pipeline: every event redacted and bounded before it is stored or sent anywhere."""

from __future__ import annotations

import logging
import re
from typing import Annotated

import structlog

from ownloop import Agent, Sensitive, TransientModelError
from ownloop.contracts import (
    Limits,
    ModelFailed,
    ModelRequested,
    RunStarted,
    ToolFinished,
    ToolProposed,
    ToolRejected,
    Versions,
)
from ownloop.redaction import Bounds, Redactor
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from ownloop.tracing import TracePipeline, TraceRecorder, free_fields

OPENAI_KEY = "sk-proj-Zq8f0Lr2Xw7Yt3Vb9Nm4Kc6Hd1Jg5Ps8"
MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")


def _recorder(**kwargs: object) -> TraceRecorder:
    return TraceRecorder("run-1", FakeClock(), **kwargs)  # type: ignore[arg-type]


def test_the_stored_event_and_every_sink_get_the_redacted_event() -> None:
    """The recorder stores and hands on one and the same redacted event."""
    seen: list[object] = []
    recorder = TraceRecorder("run-1", FakeClock(), [seen.append])
    event = recorder.emit(
        ToolProposed, step=1, call_id="c1", tool="fetch", arguments={"api_key": OPENAI_KEY}
    )
    assert recorder.events == (event,)
    assert seen == [event]
    assert isinstance(event.arguments, dict)
    assert MARKER.fullmatch(str(event.arguments["api_key"]))


def test_identity_fields_are_never_touched() -> None:
    """run_id, seq, at and kind survive redaction exactly, even with hostile user rules."""
    clock = FakeClock()
    recorder = TraceRecorder("run-1", clock, redactor=Redactor(patterns=["run", "tool", r"\d"]))
    event = recorder.emit(
        ToolProposed, step=1, call_id="c1", tool="tool_proposed", arguments="run 1"
    )
    assert (event.run_id, event.seq, event.at, event.kind) == (
        "run-1",
        1,
        clock.now(),
        "tool_proposed",
    )
    assert event.step == 1
    assert "run" not in str(event.arguments)


def test_clean_events_are_passed_on_unchanged() -> None:
    """An event with nothing to redact or cut is the very event the loop built."""
    recorder = _recorder()
    event = recorder.emit(
        ToolFinished,
        call_id="c1",
        tool="search",
        attempt=1,
        status="ok",
        effect="none",
        duration_s=0.25,
    )
    assert event.model_dump()["duration_s"] == 0.25
    again = recorder.emit(ModelRequested, step=1, attempt=1, messages=2, request_chars=10, tools=1)
    assert again.seq == 2


def test_free_text_fields_are_redacted_and_bounded() -> None:
    """Error payloads and reasons are redacted, and long text is cut to the bounds."""
    recorder = _recorder(redactor=Redactor(bounds=Bounds(max_string=60)))
    failed = recorder.emit(
        ModelFailed,
        step=1,
        attempt=1,
        error={"type": "TransientModelError", "message": f"invalid key {OPENAI_KEY}"},
        retryable=True,
    )
    rejected = recorder.emit(
        ToolRejected, call_id="c1", tool="t", code="invalid_arguments", reason="x" * 500
    )
    assert OPENAI_KEY not in str(failed.error)
    assert len(rejected.reason) == 60
    assert rejected.reason.endswith("truncated]")


def test_numbers_times_and_enums_are_never_redacted() -> None:
    """Fields that can only hold numbers, times or enumerated values are outside redaction."""
    assert free_fields(ModelRequested) == ()
    assert free_fields(ToolFinished) == ("call_id", "tool", "message")
    assert "limits" not in free_fields(RunStarted)
    assert "versions" in free_fields(RunStarted)


def test_a_field_a_rule_makes_invalid_is_replaced_by_one_marker() -> None:
    """A user pattern that stretches a length-limited field past its limit hides it whole."""
    recorder = _recorder(redactor=Redactor(patterns=["a"], defaults=False))
    event = recorder.emit(
        RunStarted,
        task_chars=1,
        actor_id="a" * 128,
        limits=Limits(),
        versions=Versions(ownloop="1", python="3"),
    )
    assert MARKER.fullmatch(str(event.actor_id))


def test_protected_values_are_removed_from_later_events() -> None:
    """Literal secrets learnt during a run are removed from every later event."""
    recorder = _recorder()
    recorder.protect("4242-my-pin", "abc")  # too short values are ignored
    event = recorder.emit(
        ToolFinished,
        call_id="c1",
        tool="t",
        attempt=1,
        status="error",
        effect="none",
        duration_s=0.0,
        message="ValueError: wrong pin 4242-my-pin (abc)",
    )
    assert "4242-my-pin" not in str(event.message)
    assert "(abc)" in str(event.message)
    assert "values=<1 hidden>" in repr(recorder.redactor)
    before = recorder.redactor
    recorder.protect("xyz", "")
    assert recorder.redactor is before


def test_a_resumed_recorder_continues_the_sequence() -> None:
    """start_seq continues numbering, as when a paused run resumes."""
    recorder = TraceRecorder("run-1", FakeClock(), start_seq=7)
    event = recorder.emit(ModelRequested, step=1, attempt=1, messages=1, request_chars=1, tools=0)
    assert event.seq == 8
    assert len(recorder) == 1
    assert repr(recorder) == "TraceRecorder(run_id='run-1', events=1)"


def test_pipeline_runs_the_processors_in_order() -> None:
    """The chain is redact, bound, render, and its repr says so."""
    pipeline = TracePipeline("run-1", Redactor())
    assert [processor.__name__ for processor in pipeline.processors] == [
        "redact",
        "bound",
        "render",
    ]
    assert "processors=[redact, bound, render]" in repr(pipeline)


def test_agent_redactor_and_sensitive_parameters_reach_the_trace() -> None:
    """Agent(redactor=...) rules apply, and Sensitive parameter names become secret keys."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(customer: str, pin: Annotated[str, Sensitive()]) -> str:
        """Look a customer up.

        Args:
            customer: The customer.
            pin: Their PIN.
        """
        return f"customer {customer} ok"

    model = ScriptedModel(
        [
            tool_call("lookup", customer="ACME-778899", pin="4242-canary"),
            tool_call("lookup", "c2", customer="bob", pin="pin: 4242-canary"),
            final("done"),
        ]
    )
    agent = Agent(model, registry, redactor=Redactor(patterns=[r"ACME-\d{6}"]), clock=FakeClock())
    result = agent.run_sync("look them up")
    text = "".join(event.model_dump_json() for event in result.trace)
    assert "ACME-778899" not in text
    assert "4242-canary" not in text
    assert repr(agent.redactor) == "Redactor(defaults=True, patterns=['ACME-\\\\d{6}'])"


def test_transient_model_error_messages_are_redacted_in_every_event() -> None:
    """A key inside a provider error message never reaches model_failed or retry_scheduled."""
    model = ScriptedModel([TransientModelError(f"bad key {OPENAI_KEY}"), final("ok")])
    result = Agent(model, clock=FakeClock()).run_sync("q")
    text = "".join(event.model_dump_json() for event in result.trace)
    assert OPENAI_KEY not in text
    assert [event.kind for event in result.trace].count("retry_scheduled") == 1


def test_tracing_never_changes_global_structlog_or_logging_configuration() -> None:
    """Running agents leaves structlog's global configuration and the root logger unchanged."""
    before = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    model = ScriptedModel([tool_call("missing", x=OPENAI_KEY), final("ok")])
    Agent(model, clock=FakeClock()).run_sync("q")
    assert structlog.get_config() == before
    assert (list(root.handlers), root.level) == (handlers, level)


def test_redactor_keys_do_not_touch_structural_fields() -> None:
    """A user key equal to an event field name does not redact that field's own value."""
    recorder = _recorder(redactor=Redactor(keys=["tool"]))
    event = recorder.emit(ToolProposed, step=1, call_id="c", tool="tool", arguments={"tool": "x"})
    assert event.tool == "tool"
    assert MARKER.fullmatch(str(event.arguments["tool"]))  # type: ignore[index]
