"""Every program in examples/ runs offline and prints what its docstring promises."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from ownloop.cli import main
from ownloop.models import allow_model_requests

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

EXPECTED = {
    "population_research.py": [
        "output: Nanjing: 954 x 10,000 people (from city_population).",
        "turns: 2, tool calls: 1",
        "output: Nanjing has the higher GDP per person, 14.0% above Hangzhou",
        "turns: 6, tool calls: 5",
    ],
    "react_text.py": [
        "completed (final_output): the final answer passed every check",
        "output: ReAct interleaves reasoning and acting: a thought, an action, an observation. "
        "And 17 * 23 = 391.0.",
        "turns: 3, tool calls: 2",
    ],
    "chain_vs_loop.py": [
        "chain (4 steps, fixed by the code): Hangzhou has 31.2% more residents than Nanjing.",
        "loop (4 turns, chosen by the model): Hangzhou has 31.2% more residents than Nanjing.",
    ],
    "plan_execute.py": [
        "plan: Look up the population of Hangzhou; Look up the population of Nanjing; "
        "Look up the population of Suzhou; Compare the three populations",
        "  executed: The population of Suzhou is 1296 (10,000 people).",
        "completed (final_output): Suzhou is the largest (Hangzhou 1252, Nanjing 954, "
        "Suzhou 1296, in 10,000 people).",
    ],
    "delegation.py": [
        "  executed: The population of Nanjing is 954 (10,000 people).",
        "completed (final_output): Suzhou is the largest (Hangzhou 1252, Nanjing 954, "
        "Suzhou 1296, in 10,000 people).",
        "one budget: 8 turns, 6 tool calls (executors included)",
    ],
    "harness_lab.py": [
        "publish      without_permissions  explicit_stop          published_without_permission",
        "loop         instrumented         max_steps              -",
        "max_requests blocks requests_over_budget (it gets through in without_budget)",
        "approval_required        paused (approval_required)",
    ],
    "memory_lesson.py": [
        "turn 1 (thread city-chat): Hangzhou has 1252 x 10,000 residents [pop-Hangzhou].",
        "turn 2 (thread city-chat): Nanjing has 954 x 10,000 residents, 298 x 10,000 fewer than "
        "Hangzhou [pop-Nanjing, pop-Hangzhou].",
        "  short-term: turn 2 started from 6 earlier messages and cited earlier evidence "
        "pop-Hangzhou",
        "new thread (other-chat): From long-term memory: This user follows Yangtze River Delta",
    ],
    "email_assistant.py": [
        "paused (approval_required): 'send_reply' needs an approval",
        "  ownloop runs show email-1 --db email.db",
    ],
}
"""Lines each example must print (the MCP example runs in tests/test_mcp_git.py, the typed ones
in tests/test_output_examples.py)."""


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No provider in the environment, the repository as the working folder, files in tmp."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "OWNLOOP_API"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMAIL_DIR", str(tmp_path))
    monkeypatch.setenv("OWNLOOP_EXAMPLE_DIR", str(tmp_path))
    monkeypatch.chdir(ROOT)
    return tmp_path


def test_every_example_is_listed_here() -> None:
    """A new example must say here what it prints, so none goes untested."""
    elsewhere = {"mcp_git.py", "typed_population.py", "typed_harness_verdict.py"}  # own tests
    found = {path.name for path in EXAMPLES.glob("*.py")} - elsewhere
    assert found == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_example_runs_offline_and_prints_its_lines(
    name: str, offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run as `python examples/NAME`, the example prints every line it promises."""
    status: object = 0
    with allow_model_requests(True):  # the ReAct example talks to its own loopback stand-in
        try:
            runpy.run_path(str(EXAMPLES / name), run_name="__main__")
        except SystemExit as ended:  # an example whose main returns an exit status
            status = ended.code
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    for expected in EXPECTED[name]:
        assert any(line.startswith(expected) for line in out), (expected, out)


def _approval_request(database: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["runs", "show", "email-1", "--db", str(database), "--json"]) == 0
    snapshot = json.loads(capsys.readouterr().out)["snapshot"]
    request: str = snapshot["approval_requests"][0]["id"]
    return request


def test_the_tutorial_pauses_approves_resumes_and_sends_the_reply_once(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/tutorial.md: run, runs show, approve, resume, resume again, trace show — one reply."""
    with pytest.raises(SystemExit) as ended:
        runpy.run_path(str(EXAMPLES / "email_assistant.py"), run_name="__main__")
    assert ended.value.code == 0
    capsys.readouterr()
    database = offline / "email.db"
    assert main(["runs", "show", "email-1", "--db", str(database)]) == 0
    shown = capsys.readouterr().out
    assert "state:       paused (paused / approval_required)" in shown
    assert "waiting:     request apr-" in shown
    assert not (offline / "outbox.jsonl").exists()  # nothing sent before the approval
    request = _approval_request(database, capsys)
    assert main(["approve", "email-1", request, "--db", str(database), "--approver", "me"]) == 0
    capsys.readouterr()
    agent = "examples.email_assistant:agent"
    assert main(["resume", "email-1", "--agent", agent, "--db", str(database)]) == 0
    resumed = capsys.readouterr().out
    assert "status:      completed (final_output)" in resumed
    assert "answer:      Replied to Client A's urgent mail about the quote." in resumed
    assert main(["resume", "email-1", "--agent", agent, "--db", str(database)]) == 2
    assert "is completed, not paused" in capsys.readouterr().err
    sent = (offline / "outbox.jsonl").read_text().splitlines()
    assert [json.loads(line)["content"] for line in sent] == ["Received, I will handle it today."]
    assert main(["trace", "show", str(offline / "email.jsonl")]) == 0
    timeline = capsys.readouterr().out
    assert f"approve  {request} [call-send_reply] approved by me" in timeline
    assert "stop     completed (final_output)" in timeline
