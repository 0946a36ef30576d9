"""``ownloop run "question"``: the research task against the endpoint named by the environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ownloop import RunResult, RunStatus
from ownloop.cli import main
from ownloop.models import allow_model_requests

from .openai_server import OpenAIServer, Received, Reply, json_reply
from .test_models_http_e2e import chat_brain, responses_brain

KEY = "sk-planted-CLI-SECRET-0123456789"


def run(*argv: str) -> int:
    """Run ``ownloop run`` through the real command line entry point."""
    return main(["run", *argv])


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """A local server answering as a tool-calling model, named by OPENAI_* variables."""

    def brain(received: Received) -> Reply:
        return (responses_brain if "input" in received.body else chat_brain)(received)

    with OpenAIServer(brain) as server, allow_model_requests(True):
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_MODEL", "scripted")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.delenv("OWNLOOP_API", raising=False)
        monkeypatch.delenv("OWNLOOP_COMPAT", raising=False)
        yield server


def test_run_prints_the_summary_of_a_completed_run(
    endpoint: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """'ownloop run' answers with citations and prints the model, status, answer and trace."""
    assert run("How should agents be evaluated?") == 0
    out = capsys.readouterr().out
    assert "model:       OpenAIChatModel(model='scripted'" in out
    assert "status:      completed (final_output)" in out
    assert "[R-02]" in out
    assert KEY not in out
    assert "Cite every document" in endpoint.requests[0].body["messages"][0]["content"]


def test_run_json_streams_over_the_api_chosen_by_flag(
    endpoint: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """'--json --stream --api responses' prints a whole RunResult of a streamed Responses run."""
    assert run("evaluation", "--json", "--stream", "--api", "responses") == 0
    result = RunResult.model_validate_json(capsys.readouterr().out)
    assert result.status is RunStatus.COMPLETED
    assert all(request.path == "/v1/responses" for request in endpoint.requests)
    assert all(request.body["stream"] is True for request in endpoint.requests)


def test_run_exits_non_zero_when_the_run_fails(
    endpoint: OpenAIServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that does not complete (here: a bad model name) exits with status 1."""
    missing = json_reply({"error": {"code": "model_not_found", "message": "no such model"}}, 404)
    with OpenAIServer(lambda received: missing) as bad:
        monkeypatch.setenv("OPENAI_BASE_URL", bad.url)
        assert run("q", "--max-steps", "2") == 1
    assert "model_not_found" in capsys.readouterr().out


def test_run_without_a_key_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without OPENAI_API_KEY the command stops before any request, naming the variable."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert run("q") == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err


def test_run_trace_writes_json_lines_for_trace_show(
    endpoint: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'ownloop run --trace FILE' appends the run's events, which 'trace show' reads back."""
    trace = tmp_path / "run.jsonl"
    assert run("evaluation", "--trace", str(trace)) == 0
    assert KEY not in trace.read_text()
    capsys.readouterr()
    assert main(["trace", "show", str(trace)]) == 0
    assert "stop     completed (final_output)" in capsys.readouterr().out


def test_run_caps_every_reply_and_sends_the_temperature(
    endpoint: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default output cap always; flags win over OWNLOOP_MAX_OUTPUT_TOKENS/OWNLOOP_TEMPERATURE."""
    assert run("evaluation") == 0
    first = endpoint.requests[0].body
    assert (first["max_completion_tokens"], "temperature" in first) == (1024, False)
    monkeypatch.setenv("OWNLOOP_MAX_OUTPUT_TOKENS", "300")
    monkeypatch.setenv("OWNLOOP_TEMPERATURE", "0.5")
    sent = len(endpoint.requests)
    run("evaluation", "--compat", "llamacpp")  # the scripted brain expects tool messages
    body = endpoint.requests[sent].body
    assert (body["max_tokens"], body["temperature"], body["tool_choice"]) == (300, 0.5, "auto")
    sent = len(endpoint.requests)
    assert run("evaluation", "--max-output-tokens", "50", "--temperature", "0") == 0
    body = endpoint.requests[sent].body
    assert (body["max_completion_tokens"], body["temperature"]) == (50, 0)


@pytest.mark.parametrize(
    ("variable", "value"), [("OWNLOOP_MAX_OUTPUT_TOKENS", "many"), ("OWNLOOP_TEMPERATURE", "9")]
)
def test_run_refuses_settings_it_cannot_use(
    endpoint: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
) -> None:
    """A malformed or out-of-range variable is a configuration error naming the variables."""
    monkeypatch.setenv(variable, value)
    assert run("evaluation") not in {0, 1}
    assert "invalid OWNLOOP_MAX_OUTPUT_TOKENS or OWNLOOP_TEMPERATURE" in capsys.readouterr().err
    assert endpoint.requests == []
