"""The offline research demo and the ownloop command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ownloop import RunResult, RunStatus, __version__
from ownloop.cli import main
from ownloop.demo.research import ResearchModel, build_agent


def test_demo_agent_searches_reads_and_answers_with_real_citations() -> None:
    """The demo model searches, reads the top hits and cites only what it read."""
    result = build_agent().run_sync("How should a safe AI agent be evaluated?")
    assert result.status is RunStatus.COMPLETED
    assert (result.usage.steps, result.usage.tool_calls) == (3, 3)
    cited = {item.id for item in result.evidence}
    assert "[R-02]" in (result.output or "")
    assert all(
        f"[{doc}]" not in (result.output or "") for doc in {"R-01", "R-03", "R-04", "R-06"} - cited
    )


def test_demo_stops_explicitly_when_nothing_matches() -> None:
    """A question the corpus cannot answer ends with the model's explicit stop."""
    result = build_agent(ResearchModel()).run_sync("zebra migration xylophone")
    assert result.stop_reason.value == "explicit_stop"


def test_cli_demo_prints_answer_counters_and_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop demo' prints the status, the answer, the counters and a readable trace."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "status:      completed (final_output)" in out
    assert "[R-02]" in out
    assert "steps=3" in out
    assert "01 run_started" in out
    assert "run_finished" in out


def test_cli_demo_json_is_a_whole_run_result(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop demo --json' prints a RunResult that validates back."""
    assert main(["demo", "--json", "--question", "evaluation of agents"]) == 0
    result = RunResult.model_validate_json(capsys.readouterr().out)
    assert result.status is RunStatus.COMPLETED


def test_cli_demo_budget_flags_apply(capsys: pytest.CaptureFixture[str]) -> None:
    """'--max-steps 1' stops the demo after one step and exits non-zero."""
    assert main(["demo", "--max-steps", "1"]) == 1
    assert "max_steps" in capsys.readouterr().out


def test_cli_demo_schemas_are_strict(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop demo --schemas' prints the demo tools' strict schemas."""
    assert main(["demo", "--schemas"]) == 0
    specs = json.loads(capsys.readouterr().out)
    assert [spec["name"] for spec in specs] == ["search_documents", "read_document"]
    assert all(
        spec["strict"] and spec["parameters"]["additionalProperties"] is False for spec in specs
    )


def test_cli_bad_limits_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    """An impossible budget flag is a clear error with exit status 2."""
    assert main(["demo", "--max-steps", "0"]) == 2
    assert "max_steps" in capsys.readouterr().err


def test_cli_without_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop' alone prints the help and exits 2."""
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_console_script_reports_its_version() -> None:
    """'python -m ownloop.cli --version' prints the package version."""
    completed = subprocess.run(
        [sys.executable, "-m", "ownloop.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.strip() == f"ownloop {__version__}"
