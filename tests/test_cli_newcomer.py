"""The command line as a newcomer meets it: traces to try, quiet pipes, help, a fast start."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ownloop
from ownloop.cli import build_parser, main
from ownloop.contracts import Limits, RunResumed, RunStarted, Versions
from ownloop.testing import FakeClock
from ownloop.tracing import TraceRecorder, timeline


def _python(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return completed.stdout.strip()


def test_demo_trace_file_is_what_trace_show_and_diagnose_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'ownloop demo --trace FILE' writes JSON lines that 'trace show' and 'diagnose' read."""
    trace = tmp_path / "demo.jsonl"
    assert main(["demo", "--trace", str(trace)]) == 0
    kinds = [json.loads(line)["kind"] for line in trace.read_text().splitlines()]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    capsys.readouterr()
    assert main(["trace", "show", str(trace)]) == 0
    assert "stop     completed (final_output)" in capsys.readouterr().out
    assert main(["trace", "diagnose", str(trace)]) == 0


def test_harness_trace_shows_approvals_like_the_other_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The harness's trace shows approval requests and decisions as their own readable lines."""
    trace = tmp_path / "harness.jsonl"
    assert main(["demo", "harness", "--json", "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert main(["trace", "show", str(trace)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"approve  queue_export \[call-2\] needs approval apr-\w+: the tool", out)
    assert re.search(r"approve  apr-\w+ \[call-2\] approved by reviewer-1", out)
    assert "approval_requested:" not in out
    assert "digest=" not in out
    budget_lines = [line for line in out.splitlines() if "deadline (s)" in line]
    assert budget_lines
    assert all(re.search(r"deadline \(s\) \d+\.\d\d/10 ", line) for line in budget_lines)


def test_trace_show_renders_a_resume_with_rounded_seconds() -> None:
    """A resume reads as one 'resume' line; seconds are rounded to two decimals."""
    recorder = TraceRecorder("r", FakeClock())
    recorder.emit(
        RunStarted,
        task_chars=1,
        limits=Limits(deadline_s=10),
        versions=Versions(ownloop="1", python="3"),
    )
    recorder.emit(RunResumed, approvals=1, elapsed_s=2.345678)
    text = timeline(recorder.events).render()
    assert "resume   resumed with 1 decision(s); 2.35s already used" in text
    assert "2.345678" not in text


def test_output_piped_to_a_reader_that_leaves_ends_without_a_traceback() -> None:
    """When the reader of stdout goes away ('| head'), the command stops with no traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ownloop.cli", "demo", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # before the command writes anything: every write hits a closed pipe
    _, stderr = process.communicate(timeout=120)
    assert stderr.decode() == ""
    assert process.returncode == 1


def _actions(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _actions(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_option_and_argument_has_help_text() -> None:
    """Every option and positional argument of every command says what it is for."""
    actions = _actions(build_parser(), "ownloop")
    assert len(actions) > 40
    missing = [f"{path} {action.option_strings or action.dest}" for path, action in actions]
    missing = [name for name, (_, action) in zip(missing, actions, strict=True) if not action.help]
    assert missing == []


def test_a_command_parser_registers_only_its_own_group() -> None:
    """'ownloop trace ...' builds a parser with the trace command only; none gives them all."""
    only = build_parser("trace")._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    every = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(only) == ["trace"]
    assert {"demo", "run", "ablate", "runs", "approve", "resume", "trace", "workers"} <= set(every)


def test_version_and_trace_show_load_neither_the_runtime_nor_openai(tmp_path: Path) -> None:
    """'--version' loads no command module; 'trace show' loads no runtime and no provider SDK."""
    trace = tmp_path / "t.jsonl"
    assert main(["demo", "--trace", str(trace)]) == 0
    probe = (
        "import contextlib, io, sys\n"
        "from ownloop.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main({argv!r})\n"
        "print(sorted(m for m in ('openai', 'ownloop.agent', 'ownloop.loop', 'ownloop.cli._trace')"
        " if m in sys.modules))"
    )
    assert _python(probe.format(argv=["--version"])) == "[]"
    assert _python(probe.format(argv=["trace", "show", str(trace)])) == "['ownloop.cli._trace']"


def test_import_ownloop_loads_no_provider_sdk_until_an_adapter_is_used() -> None:
    """Every public name of ownloop loads without openai; the first adapter use loads it."""
    probe = (
        "import sys, ownloop, ownloop.models\n"
        "bare = 'openai' in sys.modules\n"
        "names = [getattr(ownloop, name) for name in ownloop.__all__]\n"
        "after_facade = 'openai' in sys.modules\n"
        "ownloop.models.OpenAIChatModel\n"
        "print(bare, after_facade, 'openai' in sys.modules)"
    )
    assert _python(probe) == "False False True"


def test_the_lazy_facade_lists_every_name_and_refuses_unknown_ones() -> None:
    """dir(ownloop) lists every public name; an unknown name is an AttributeError as usual."""
    assert set(ownloop.__all__) <= set(dir(ownloop))
    with pytest.raises(AttributeError, match="no attribute 'Agnet'"):
        _ = ownloop.Agnet  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'OpenAIChat'"):
        _ = ownloop.models.OpenAIChat  # type: ignore[attr-defined]


def test_a_closed_pipe_in_process_ends_the_command_with_status_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In process too: a write to a pipe nobody reads ends the command quietly with status 1."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = open(write_end, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert main(["demo", "--schemas"]) == 1
        stream.write("after the reader left, writes go nowhere\n")
        stream.flush()
    finally:
        stream.close()


def test_version_in_process_prints_the_package_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """main(['--version']) answers before any parser or command module is built."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ownloop {ownloop.__version__}\n"


ROOT = Path(__file__).resolve().parents[1]
_DOCUMENTED = re.compile(r"ownloop (?:workers recover|resume) [^`|\n]*")


def test_documented_resume_and_recover_commands_have_their_required_options() -> None:
    """Each 'ownloop resume' and 'ownloop workers recover' in README and docs parses as written."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        match.group(0).strip().replace("...", "app:factory")
        for page in pages
        for match in _DOCUMENTED.finditer(page.read_text(encoding="utf-8"))
    ]
    assert any(command.startswith("ownloop workers recover") for command in found)
    for command in found:
        argv = command.split()[1:]
        build_parser(argv[0]).parse_args(argv)  # a missing required option exits: the test fails
    with pytest.raises(SystemExit):
        build_parser("workers").parse_args(["workers", "recover", "--executor", "ID"])
