"""Schemas, keys, timeouts, lost connections, reconnects and list changes, on a real MCP server.

The server is the test's own (``tests/mcp_fixture_server.py``, built on the MCP SDK) because these
behaviours need a server that sleeps, dies mid-call or changes its tools on demand.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop import Agent, Limits, RunStatus, StopReason
from ownloop.mcp import IDEMPOTENCY_META_KEY, HttpServer, MCPToolset
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, ToolContext
from tests.mcp_support import FIXTURE, fixture_server


def _ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """Where the fixture server records the writes it performed."""
    return tmp_path / "ledger.jsonl"


def test_a_schema_strict_mode_cannot_express_falls_back_to_the_servers_schema(
    ledger: Path,
) -> None:
    """A free-form object keeps the server's schema (strict=False) and still validates."""
    model = ScriptedModel(
        [
            tool_call("free_form", labels="not an object"),
            tool_call("free_form", labels={"team": "a"}),
            final("ok"),
        ]
    )
    with MCPToolset(fixture_server(ledger)) as tools:
        spec = next(s for s in tools.specs() if s.name == "free_form")
        result = Agent(model, tools).run_sync("label")
    assert spec.strict is False
    assert spec.parameters["properties"] == {"labels": {"type": "object"}}
    assert [e.kind for e in result.trace if e.kind.startswith("tool_r")] == ["tool_rejected"]
    (receipt,) = result.receipts
    assert receipt.data == {"labels": {"team": "a"}}


def test_a_write_gets_its_idempotency_key_and_optional_nulls_are_dropped(ledger: Path) -> None:
    """The key fills the declared argument and _meta; the model never sees it; null means omit."""
    model = ScriptedModel([tool_call("keyed_write", item="x", note=None), final("ok")])
    with MCPToolset(fixture_server(ledger)) as tools:
        spec = next(s for s in tools.specs() if s.name == "keyed_write")
        result = Agent(model, tools, policy=allow_writes("keyed_write")).run_sync("store x")
    assert "idempotency_key" not in spec.parameters["properties"]
    assert spec.idempotent
    assert spec.parameters["required"] == ["item", "note"]  # optional: required but nullable
    assert result.status is RunStatus.COMPLETED
    (entry,) = _ledger(ledger)
    assert entry["arguments"].keys() == {"item", "idempotency_key"}
    key = entry["arguments"]["idempotency_key"]
    assert entry["meta"][IDEMPOTENCY_META_KEY] == key
    assert result.receipts[0].data == {"stored": "x", "key": key}


def test_a_read_that_times_out_is_retried_within_the_budget(ledger: Path) -> None:
    """A slow read declared idempotent times out per call, is retried, and the run stops bounded."""
    model = ScriptedModel([tool_call("slow", seconds=30)])
    limits = Limits(max_tool_attempts=2)
    started = time.monotonic()
    server = fixture_server(ledger, call_timeout_s=0.5, idempotent=("slow",))
    with MCPToolset(server) as tools:
        result = Agent(model, tools, limits=limits).run_sync("wait")
    assert time.monotonic() - started < 25
    attempts = [e for e in result.trace if e.kind == "tool_started"]
    assert len(attempts) == 2
    assert result.status is not RunStatus.COMPLETED


def test_a_write_that_times_out_is_unknown_and_never_retried(ledger: Path) -> None:
    """A write that timed out after it was sent is a pending operation, tried once."""
    model = ScriptedModel([tool_call("slow", seconds=30), final("done?")])
    server = fixture_server(ledger, call_timeout_s=0.5, effects={"slow": "write"})
    with MCPToolset(server) as tools:
        result = Agent(model, tools, policy=allow_writes("slow")).run_sync("wait")
    assert (result.status, result.stop_reason) == (
        RunStatus.UNRESOLVED,
        StopReason.UNRESOLVED_EFFECT,
    )
    assert len([e for e in result.trace if e.kind == "tool_started"]) == 1


def test_a_lost_connection_makes_a_write_unknown_settled_by_the_declared_lookup(
    ledger: Path,
) -> None:
    """The server dies mid-write: unknown, not retried; the lookup confirms; reads reconnect."""
    looked: list[str | None] = []

    def lookup(arguments: dict[str, Any], context: ToolContext) -> Confirmed | None:
        looked.append(context.idempotency_key)
        return Confirmed({"died": True}) if _ledger(ledger) else None

    model = ScriptedModel([tool_call("die"), final("after the crash")])
    server = fixture_server(ledger, reconcile={"die": lookup}, max_reconnects=1)
    with MCPToolset(server) as tools:
        assert next(s for s in tools.specs() if s.name == "die").effect == "write"  # no hints
        result = Agent(model, tools, policy=allow_writes("die")).run_sync("crash it")
        assert result.status is RunStatus.COMPLETED
        assert len(_ledger(ledger)) == 1
        assert looked != []
        assert looked[0] is not None
        again = Agent(ScriptedModel([tool_call("free_form", labels={}), final("ok")]), tools)
        assert again.run_sync("read after reconnect").receipts[0].status == "ok"
        model = ScriptedModel([tool_call("die"), final("?")])
        Agent(model, tools, policy=allow_writes("die")).run_sync("crash again")
        spent = Agent(ScriptedModel([tool_call("free_form", labels={})]), tools)
        result = spent.run_sync("no reconnects left")
    assert "reconnect budget" in str(result.detail) + str(
        [e.model_dump() for e in result.trace if e.kind == "tool_finished"]
    )


def test_json_rpc_errors_refuse_reads_and_leave_writes_unknown(ledger: Path) -> None:
    """A refusal is an error receipt; an internal error answering a write is an unknown effect."""
    model = ScriptedModel([tool_call("boom"), tool_call("half_write"), final("ok")])
    with MCPToolset(fixture_server(ledger)) as tools:
        result = Agent(model, tools, policy=allow_writes("half_write")).run_sync("boom")
    refused, half = result.receipts
    assert refused.status == "error"
    assert "boom refuses" in (refused.message or "")
    assert (half.status, half.effect) == ("unknown", "unknown")
    assert result.stop_reason is StopReason.UNRESOLVED_EFFECT
    assert len(_ledger(ledger)) == 1


def test_a_tool_list_change_is_offered_from_the_next_run(ledger: Path) -> None:
    """After notifications/tools/list_changed the registry is refreshed for the next run."""
    with MCPToolset(fixture_server(ledger)) as tools:
        assert "extra" not in tools
        Agent(ScriptedModel([tool_call("grow"), final("ok")]), tools).run_sync("grow")
        deadline = time.monotonic() + 20
        while "extra" not in tools:
            assert time.monotonic() < deadline, "the list change never arrived"
            time.sleep(0.05)
        result = Agent(ScriptedModel([tool_call("extra"), final("ok")]), tools).run_sync("x")
    assert result.receipts[0].data == {"extra": True}


@pytest.fixture
def http_url(ledger: Path) -> Iterator[str]:
    """The fixture server over Streamable HTTP on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, FIXTURE, "--ledger", str(ledger), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_streamable_http_servers_are_tool_sources(http_url: str) -> None:
    """An HTTP server's tools are called through the gateway like stdio ones."""
    model = ScriptedModel([tool_call("h_free_form", labels={"a": "b"}), final("ok")])
    with MCPToolset(
        HttpServer(name="http", url=http_url, prefix="h_", trust_annotations=True)
    ) as tools:
        assert tools.stderr_tail("http") == ""
        result = Agent(model, tools).run_sync("call over http")
    assert result.receipts[0].data == {"labels": {"a": "b"}}


def test_a_refresh_that_would_collide_keeps_the_tools_as_they_were(ledger: Path) -> None:
    """A listing that now collides with another tool is refused; the rest keep working."""
    tools = MCPToolset(fixture_server(ledger))

    @tools.tool(effect="read", name="extra")
    def python_extra() -> str:
        """A Python tool that owns the name first."""
        return "python"

    with tools:
        Agent(ScriptedModel([tool_call("grow"), final("ok")]), tools).run_sync("grow")
        deadline = time.monotonic() + 20
        while tools.refresh_error is None:
            assert time.monotonic() < deadline, "the list change never arrived"
            time.sleep(0.05)
        assert "collides" in str(tools.refresh_error)
        result = Agent(ScriptedModel([tool_call("extra"), final("ok")]), tools).run_sync("x")
    assert result.receipts[0].data == "python"


def test_the_run_deadline_cuts_a_call_short(ledger: Path) -> None:
    """A call is bounded by the run's deadline even when its own timeout is longer."""
    model = ScriptedModel([tool_call("slow", seconds=30)])
    with MCPToolset(fixture_server(ledger, call_timeout_s=60)) as tools:
        started = time.monotonic()
        result = Agent(model, tools, limits=Limits(deadline_s=2)).run_sync("wait")
        elapsed = time.monotonic() - started
    assert result.status is not RunStatus.COMPLETED
    assert elapsed < 15  # the server would have slept 30 s


def test_closing_lets_a_stdio_servers_call_in_flight_finish(ledger: Path) -> None:
    """close() during a write to a real stdio server waits for its answer, then ends the server."""
    tools = MCPToolset(fixture_server(ledger)).start()
    model = ScriptedModel([tool_call("slow_write", seconds=0.5), final("ok")])
    agent = Agent(model, tools, policy=allow_writes("slow_write"))
    results: list[Any] = []
    writer = threading.Thread(target=lambda: results.append(agent.run_sync("w")), daemon=True)
    writer.start()
    deadline = time.monotonic() + 30
    while not _ledger(ledger):
        assert time.monotonic() < deadline, "the write never reached the server"
        time.sleep(0.01)
    tools.close()
    writer.join(30)
    (result,) = results
    (receipt,) = result.receipts
    assert (receipt.status, receipt.data) == ("ok", {"written": True}), receipt.message
    assert [entry["state"] for entry in _ledger(ledger)] == ["started", "finished"]
