"""Secrets that used to slip out: URL userinfo, DSN passwords holding "@", and `runs show`."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from ownloop import Agent, RunStatus, ToolRegistry
from ownloop.cli import main
from ownloop.models import OpenAIChatModel, allow_model_requests
from ownloop.models._settings import read_settings  # what the adapters resolve, rendered in logs
from ownloop.policy import allow_all
from ownloop.redaction import Redactor
from ownloop.store import SqliteRunStore
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tracing import JsonlSink

PASSWORD = "hunter2-Pa55"
KEY = "sk-proj-0123456789abcdefABCDEF"


class Card(BaseModel):
    """A payment card whose security code is a secret."""

    number: str
    cvc: SecretStr


def _closed_port() -> int:
    """A loopback port with nothing listening (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_url_userinfo_is_stripped_from_every_rendering() -> None:
    """Repr of the model, the settings and the agent, error messages and result.detail."""
    url = f"http://user:{PASSWORD}@127.0.0.1:{_closed_port()}/v1"
    model = OpenAIChatModel("m", api_key=KEY, base_url=url)
    agent = Agent(model, ToolRegistry(), clock=FakeClock())
    settings = read_settings(api_key=KEY, model="m", base_url=url, environ={})
    with allow_model_requests(True):
        result = agent.run_sync("hi")
    assert result.status is RunStatus.FAILED
    rendered = [repr(model), repr(agent), repr(settings), result.detail, result.model_dump_json()]
    for text in rendered:
        assert PASSWORD not in text
        assert "user:" not in text
    assert f"127.0.0.1:{url.rsplit(':', 1)[1]}" in result.detail  # the host is still named


@pytest.mark.parametrize(
    "dsn",
    [
        "mysql://root:p@ssW0rd!@db/x",
        "postgresql://app:a@b@c@db.internal:5432/orders?sslmode=require",
        "redis://:@@@cache:6379/0",
    ],
)
def test_a_dsn_password_holding_a_raw_at_is_redacted_whole(dsn: str) -> None:
    """Everything between the scheme and the last "@" before the host is hidden."""
    redacted = Redactor().redact_text(f"connect to {dsn} now")
    host = dsn.rsplit("@", 1)[1]
    assert redacted.startswith("connect to ")
    assert redacted.endswith(f"@{host} now")
    assert "ssW0rd" not in redacted
    assert "b@c" not in redacted


def test_a_dsn_in_a_tool_output_never_reaches_the_trace_or_jsonl(tmp_path: Path) -> None:
    """The trace on the result and the JSONL file hold no part of the password."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def config() -> str:
        """Read the configuration."""
        return "db=mysql://root:p@ssW0rd!@db/x"

    sink = JsonlSink(tmp_path / "trace.jsonl")
    model = ScriptedModel([tool_call("config"), final("done")])
    result = Agent(model, registry, trace_sinks=[sink]).run_sync("show config")
    sink.close()
    assert "ssW0rd" not in result.model_dump_json(include={"trace"})
    assert "ssW0rd" not in (tmp_path / "trace.jsonl").read_text(encoding="utf-8")


def _stored_run(database: Path) -> str:
    """Store a finished run whose task, arguments and answer carry an API key."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def call_api(token: str) -> str:
        """Call an API.

        Args:
            token: The token.
        """
        return "ok"

    async def go() -> str:
        async with SqliteRunStore(database) as store:
            steps = [tool_call("call_api", token=KEY), final(f"used {KEY}")]
            agent = Agent(ScriptedModel(steps), registry, store=store, policy=allow_all())
            result = await agent.run(f"call the API with {KEY}")
        return result.run_id

    return asyncio.run(go())


@pytest.mark.parametrize("options", [[], ["--json"]])
def test_runs_show_redacts_by_default_and_raw_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    """`ownloop runs show` hides the key in the task and answer; `--raw` prints them as stored."""
    database = tmp_path / "runs.db"
    run_id = _stored_run(database)
    assert main(["runs", "show", run_id, "--db", str(database), *options]) == 0
    shown = capsys.readouterr().out
    assert KEY not in shown
    assert "[redacted:" in shown
    assert main(["runs", "show", run_id, "--db", str(database), "--raw", *options]) == 0
    assert KEY in capsys.readouterr().out


def test_settings_repr_without_a_url_still_reads() -> None:
    """Settings without a base URL render as before."""
    settings = read_settings(api_key=KEY, model="m", environ={})
    assert "base_url=None" in repr(settings)


def test_a_secret_typed_argument_is_never_traced_under_any_name(tmp_path: Path) -> None:
    """`SecretStr` parameters and a model argument's secret fields are traced like `Sensitive()`."""
    registry = ToolRegistry()
    received: list[str] = []

    @registry.tool(effect="read")
    def unlock(pin: SecretStr, card: Card | None = None) -> str:
        """Unlock with a PIN (and a card)."""
        received.append(pin.get_secret_value())
        if card is not None:
            received.append(card.cvc.get_secret_value())
        return "unlocked"

    spec = next(s for s in registry.specs() if s.name == "unlock")
    assert spec.sensitive == ("pin", "cvc")  # the one record every surface reads
    path = tmp_path / "trace.jsonl"
    call = tool_call("unlock", pin="4321-9876", card={"number": "4111", "cvc": "c7v3x9"})
    sink = JsonlSink(path)
    agent = Agent(ScriptedModel([call, final("done")]), registry, trace_sinks=[sink])
    result = agent.run_sync("go")
    sink.close()
    assert result.status == RunStatus.COMPLETED
    assert received == ["4321-9876", "c7v3x9"]  # the handler gets the real values
    shown = path.read_text(encoding="utf-8") + result.model_dump_json(include={"trace"})
    assert "4321-9876" not in shown
    assert "c7v3x9" not in shown  # digits alone could appear in a timestamp
    assert "4111" in shown  # what is not a secret stays readable
