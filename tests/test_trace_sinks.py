"""Trace sinks: JSON lines files, the console, and forwarding into the application's logging."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from ownloop import Agent, InputRejected
from ownloop.contracts import (
    ModelRequested,
    RunFinished,
    RunStatus,
    StopReason,
    ToolProposed,
    Usage,
)
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tracing import (
    ConsoleSink,
    JsonlSink,
    TraceRecorder,
    UnknownEvent,
    event_severity,
    forward_to_logging,
    forward_to_structlog,
    read_trace,
)

from .helpers import research_registry

OPENAI_KEY = "sk-proj-Zq8f0Lr2Xw7Yt3Vb9Nm4Kc6Hd1Jg5Ps8"


def _run(sinks: list[object], run_id: str = "run-1") -> object:
    model = ScriptedModel(
        [tool_call("search_documents", query="agent", api_key=OPENAI_KEY), final("done")]
    )
    agent = Agent(model, research_registry(), clock=FakeClock(), trace_sinks=sinks)  # type: ignore[arg-type]
    return agent.run_sync("q", run_id=run_id)


def test_jsonl_sink_writes_one_redacted_event_a_line(tmp_path: Path) -> None:
    """Each event is one JSON line, redacted, and the file reads back as the same events."""
    path = tmp_path / "traces" / "run.jsonl"
    result = _run([JsonlSink(path)])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(result.trace)  # type: ignore[attr-defined]
    assert all(json.loads(line)["run_id"] == "run-1" for line in lines)
    assert OPENAI_KEY not in path.read_text(encoding="utf-8")
    assert read_trace(path) == list(result.trace)  # type: ignore[attr-defined]


def test_jsonl_sink_appends_runs_and_flushes_every_event(tmp_path: Path) -> None:
    """Runs append to the same file, and each event is on disk before the next is emitted."""
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    sizes: list[int] = []
    _run([sink, lambda event: sizes.append(len(path.read_text().splitlines()))], "run-1")
    _run([sink], "run-2")
    assert sizes == list(range(1, len(sizes) + 1))
    assert {event.run_id for event in read_trace(path)} == {"run-1", "run-2"}
    assert "closed" in repr(sink)


def test_jsonl_sink_closes_on_run_end_and_on_demand(tmp_path: Path) -> None:
    """The file closes when a run finishes, on close(), or at the end of a with block."""
    recorder_events = []
    with JsonlSink(tmp_path / "a.jsonl") as sink:
        recorder = TraceRecorder("r", FakeClock(), [sink])
        recorder_events.append(
            recorder.emit(ModelRequested, step=1, attempt=1, messages=1, request_chars=1, tools=0)
        )
        assert "open" in repr(sink)
    assert "closed" in repr(sink)
    sink.close()  # closing twice is harmless
    assert read_trace(tmp_path / "a.jsonl") == recorder_events


def test_an_unclosed_sink_is_closed_when_collected(tmp_path: Path) -> None:
    """A sink dropped while its file is open closes it without a ResourceWarning."""
    sink = JsonlSink(tmp_path / "a.jsonl")
    TraceRecorder("r", FakeClock(), [sink]).emit(
        ModelRequested, step=1, attempt=1, messages=1, request_chars=1, tools=0
    )
    del sink  # warnings are errors: a leaked file would fail this test


def test_read_trace_skips_blank_and_unfinished_lines(tmp_path: Path) -> None:
    """Blank lines are skipped, and a last line still being written is ignored."""
    path = tmp_path / "run.jsonl"
    _run([JsonlSink(path)])
    complete = read_trace(path)
    with path.open("a", encoding="utf-8") as file:
        file.write('\n\n{"run_id": "run-1", "seq": 9')
    assert read_trace(path) == complete


def test_read_trace_loads_unknown_kinds_generically(tmp_path: Path) -> None:
    """Events of kinds this version does not know load as UnknownEvent, with their fields."""
    path = tmp_path / "run.jsonl"
    line = {"run_id": "r", "seq": 1, "at": "2026-01-01T00:00:00Z", "kind": "future", "x": 1}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    (event,) = read_trace(path)
    assert isinstance(event, UnknownEvent)
    assert (event.kind, event.model_extra) == ("future", {"x": 1})


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"kind": "run_started"}'])
def test_read_trace_rejects_lines_that_are_not_events(tmp_path: Path, line: str) -> None:
    """A complete line that is not an event is an error naming the file and line."""
    path = tmp_path / "run.jsonl"
    path.write_text(f"{line}\n", encoding="utf-8")
    with pytest.raises(InputRejected, match=r"run\.jsonl:1: not a trace event"):
        read_trace(path)


def test_console_sink_prints_readable_lines_without_colours_off_a_terminal() -> None:
    """Off a terminal each event is one plain line."""
    stream = io.StringIO()
    _run([ConsoleSink(stream)])
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("01 run_started")
    assert "\x1b[" not in stream.getvalue()
    assert OPENAI_KEY not in stream.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_sink_colours_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Colours appear on a terminal, unless NO_COLOR is set or they are turned off."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    terminal = _Terminal()
    _run([ConsoleSink(terminal)])
    assert "\x1b[32m" in terminal.getvalue()  # the completed run
    plain = _Terminal()
    _run([ConsoleSink(plain, color=False)])
    assert "\x1b[" not in plain.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    muted = _Terminal()
    _run([ConsoleSink(muted)])
    assert "\x1b[" not in muted.getvalue()
    forced = io.StringIO()
    _run([ConsoleSink(forced, color=True)])
    assert "\x1b[" in forced.getvalue()


def test_console_sink_defaults_to_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a stream the sink prints to the current standard error."""
    sink = ConsoleSink()
    TraceRecorder("r", FakeClock(), [sink]).emit(
        ModelRequested, step=1, attempt=1, messages=1, request_chars=1, tools=0
    )
    assert "model_requested" in capsys.readouterr().err
    assert repr(sink) == "ConsoleSink(stderr, color=None)"


def test_console_sink_treats_closed_streams_as_plain() -> None:
    """A stream whose isatty fails is treated as not a terminal."""

    class Closed(io.StringIO):
        def isatty(self) -> bool:
            raise ValueError("closed")

    stream = Closed()
    _run([ConsoleSink(stream)])
    assert "\x1b[" not in stream.getvalue()


def test_event_severity_classifies_failures_warnings_and_completion() -> None:
    """Severity drives colours and log levels: error, warning, done or info."""
    recorder = TraceRecorder("r", FakeClock())
    proposed = recorder.emit(ToolProposed, step=1, call_id="c", tool="t", arguments={})
    assert event_severity(proposed) == "info"
    finished = [
        recorder.emit(RunFinished, status=status, stop_reason=reason, detail="", usage=Usage())
        for status, reason in [
            (RunStatus.COMPLETED, StopReason.FINAL_OUTPUT),
            (RunStatus.FAILED, StopReason.MODEL_ERROR),
            (RunStatus.STOPPED, StopReason.MAX_STEPS),
        ]
    ]
    assert [event_severity(event) for event in finished] == ["done", "error", "warning"]


def test_events_forward_into_the_applications_structlog() -> None:
    """forward_to_structlog logs each redacted event with its kind as the message."""
    with capture_logs() as logs:
        _run([forward_to_structlog(structlog.get_logger("agents"))])
    kinds = [entry["event"] for entry in logs]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert all(entry["run_id"] == "run-1" for entry in logs)
    assert OPENAI_KEY not in repr(logs)
    assert {entry["log_level"] for entry in logs} <= {"info", "warning", "error"}


def test_events_forward_into_standard_logging(caplog: pytest.LogCaptureFixture) -> None:
    """forward_to_logging logs readable lines with the event attached to each record."""
    with caplog.at_level(logging.INFO, logger="ownloop.trace"):
        _run([forward_to_logging()])
    records = [record for record in caplog.records if record.name == "ownloop.trace"]
    assert records[0].getMessage().startswith("01 run_started")
    assert records[-1].ownloop_event["kind"] == "run_finished"  # type: ignore[attr-defined]
    assert OPENAI_KEY not in caplog.text


def test_forwarding_to_logging_skips_disabled_levels() -> None:
    """Nothing is built for a logger that would drop the record."""
    logger = logging.getLogger("ownloop.test.silent")
    logger.setLevel(logging.ERROR)
    handler = logging.Handler()
    records: list[logging.LogRecord] = []
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        _run([forward_to_logging(logger)])
    finally:
        logger.removeHandler(handler)
    assert records == []
