"""MCP tools under the gateway, against the unmodified ``mcp-server-time`` from PyPI."""

from __future__ import annotations

import asyncio
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ownloop import Agent, ConfigurationError, RunStatus, StopReason
from ownloop.mcp import MCPToolset, StdioServer
from ownloop.policy import PolicyDocument
from ownloop.testing import ScriptedModel, final, tool_call
from tests.mcp_support import time_server


@pytest.fixture(scope="module")
def time_tools() -> Iterator[MCPToolset]:
    """One running ``mcp-server-time`` shared by the tests that only call it."""
    with MCPToolset(time_server()) as tools:
        yield tools


def test_time_tools_become_strict_read_tools(time_tools: MCPToolset) -> None:
    """A read-only hint makes read tools whose schemas are strict and closed."""
    assert time_tools.start() is time_tools  # starting again changes nothing
    time_tools.refresh()
    specs = {spec.name: spec for spec in time_tools.specs()}
    assert set(specs) == {"get_current_time", "convert_time"}
    spec = specs["get_current_time"]
    assert spec.effect == "read"
    assert spec.strict
    assert spec.parameters["additionalProperties"] is False
    assert spec.parameters["required"] == ["timezone"]


def test_an_agent_calls_an_mcp_tool_and_keeps_its_receipt(time_tools: MCPToolset) -> None:
    """A proposed MCP call runs on the server and its structured result is the receipt data."""
    model = ScriptedModel([tool_call("get_current_time", timezone="Europe/Paris"), final("ok")])
    result = Agent(model, time_tools).run_sync("What time is it in Paris?")
    assert result.status is RunStatus.COMPLETED
    (receipt,) = result.receipts
    assert receipt.status == "ok"
    assert receipt.effect == "none"
    assert isinstance(receipt.data, dict)
    assert receipt.data["timezone"] == "Europe/Paris"


def test_the_toolset_works_as_an_async_context_manager() -> None:
    """`async with` starts the server and an async run calls through the toolset's own loop."""

    async def scenario() -> str:
        model = ScriptedModel([tool_call("get_current_time", timezone="Asia/Tokyo"), final("ok")])
        async with MCPToolset(time_server()) as tools:
            result = await Agent(model, tools).run("time?")
        return str(result.receipts[0].status)

    assert asyncio.run(scenario()) == "ok"


def test_invalid_arguments_never_reach_the_server(time_tools: MCPToolset) -> None:
    """Arguments that break the server's schema are rejected before any call is sent."""
    model = ScriptedModel([tool_call("get_current_time", zone="UTC"), final("gave up")])
    result = Agent(model, time_tools).run_sync("time?")
    assert result.receipts == ()
    assert [event for event in result.trace if event.kind == "tool_started"] == []
    rejected = [e for e in result.trace if e.kind == "tool_rejected"]
    assert rejected
    assert "zone" in str(rejected[0].model_dump())


def test_an_is_error_result_becomes_an_error_receipt_the_model_sees(time_tools: MCPToolset) -> None:
    """A result with isError is an error receipt with the server's message, not a crash."""
    model = ScriptedModel([tool_call("get_current_time", timezone="Nowhere/Atlantis"), final("?")])
    result = Agent(model, time_tools).run_sync("time?")
    (receipt,) = result.receipts
    assert (receipt.status, receipt.effect) == ("error", "none")
    assert "Nowhere/Atlantis" in (receipt.message or "")
    assert result.status is RunStatus.COMPLETED


def test_prefixes_keep_servers_apart_and_effects_can_be_overridden(tmp_path: Path) -> None:
    """Prefixed servers coexist; overrides in a record or a policy file (registry name) win."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[tool_effects]\nb_get_current_time = "write"\n', encoding="utf-8")
    with MCPToolset(
        time_server(name="a", prefix="a_", effects={"convert_time": "write"}),
        time_server(name="b", prefix="b_"),
        effects=PolicyDocument.model_validate(tomllib.loads(policy.read_text())).tool_effects,
    ) as both:
        effects = {spec.name: spec.effect for spec in both.specs()}
    assert effects == {
        "a_get_current_time": "read",
        "a_convert_time": "write",
        "b_get_current_time": "write",
        "b_convert_time": "read",
    }


def test_a_name_collision_is_refused() -> None:
    """An MCP tool whose name is taken (here by a Python tool) fails start-up clearly."""
    tools = MCPToolset(time_server())

    @tools.tool(effect="read")
    def get_current_time(timezone: str) -> str:
        """Shadow the server's tool.

        Args:
            timezone: Ignored.
        """
        return timezone

    with pytest.raises(ConfigurationError, match="collides"):
        tools.start()


def test_a_write_is_denied_by_the_default_policy_unless_it_requires_approval() -> None:
    """By default a write (here by override) is denied; a write requiring approval pauses."""
    call = tool_call("get_current_time", timezone="UTC")
    plain = time_server(effects={"get_current_time": "write"}, tools=("get_current_time",))
    with MCPToolset(plain) as tools:
        assert tools.names() == ("get_current_time",)  # only the tools the record takes
        denied = Agent(ScriptedModel([call]), tools).run_sync("time?")
    assert denied.stop_reason is StopReason.TOOL_DENIED
    assert denied.receipts == ()
    approved = time_server(
        effects={"get_current_time": "write"},
        tools=("get_current_time",),
        approval_required=("get_current_time",),
    )
    with MCPToolset(approved) as tools:
        (spec,) = tools.specs()
        assert spec.requires_approval
        paused = Agent(ScriptedModel([call]), tools).run_sync("time?")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    assert paused.receipts == ()


def test_a_server_that_fails_to_start_is_reported_with_its_stderr() -> None:
    """A crashing server fails start-up with the tail of its stderr in the message."""
    crashing = StdioServer(
        name="crash",
        command=sys.executable,
        args=("-c", "import sys; print('no config here', file=sys.stderr); sys.exit(3)"),
    )
    with pytest.raises(ConfigurationError, match="no config here"):
        MCPToolset(crashing).start()


def test_a_server_that_never_answers_is_bounded_by_the_startup_timeout() -> None:
    """A server that never completes the handshake fails within startup_timeout_s."""
    silent = StdioServer(
        name="silent",
        command=sys.executable,
        args=("-c", "import time; time.sleep(60)"),
        startup_timeout_s=1.0,
    )
    with pytest.raises(ConfigurationError, match="within 1s"):
        MCPToolset(silent).start()


def test_a_toolset_must_be_started_before_use() -> None:
    """Calling an unstarted toolset's refresh is a clear configuration error."""
    with pytest.raises(ConfigurationError, match="not started"):
        MCPToolset(time_server()).refresh()
