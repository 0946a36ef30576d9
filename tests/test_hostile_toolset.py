"""An MCP toolset's life in this process: start, refresh, collisions, keys, start-up failures."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ownloop import Agent, ConfigurationError
from ownloop.mcp import IDEMPOTENCY_META_KEY, HttpServer, InProcessServer, MCPToolset, StdioServer
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ExternalTool, ToolContext
from tests.mcp_hostile import Hostile, tool


def _record(hostile: Hostile, name: str = "hostile", **options: Any) -> InProcessServer:
    return InProcessServer(name=name, server=hostile.server(), **options)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_toolset_starts_once_refreshes_on_demand_and_needs_starting() -> None:
    """start() is idempotent, refresh() takes the current listing, a closed toolset refuses."""
    hostile = Hostile(tool("a", read_only=True), tool("b", read_only=True))
    tools = MCPToolset(_record(hostile, trust_annotations=True))
    with pytest.raises(ConfigurationError, match="not started"):
        tools.refresh()

    async def scenario() -> list[str]:
        async with tools as started:
            assert started is tools
            assert tools.start() is tools  # a second start changes nothing
            assert list(tools.names()) == ["a", "b"]
            del hostile.tools["b"]
            hostile.tools["c"] = tool("c", read_only=True)
            tools.refresh()
            return list(tools.names())

    assert asyncio.run(scenario()) == ["a", "c"]
    assert hostile.listings == 2  # once at start, once refreshed: the second start listed nothing
    with pytest.raises(ConfigurationError, match="not started"):
        tools.refresh()


def test_two_servers_listing_one_name_collide_at_start() -> None:
    """Without a prefix, a second server's tool of the same name is refused at start-up."""
    first, second = Hostile(tool("same")), Hostile(tool("same"))
    toolset = MCPToolset(_record(first, "one"), _record(second, "two"))
    with pytest.raises(ConfigurationError, match="'same' of server 'two' collides"):
        toolset.start()
    with MCPToolset(_record(first, "one"), _record(second, "two", prefix="t_")) as tools:
        assert list(tools.names()) == ["same", "t_same"]


def test_a_write_that_declares_the_key_argument_receives_its_idempotency_key() -> None:
    """The key goes in _meta and, for a tool declaring the argument, in its arguments too."""
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "request_key": {}},
        "required": ["n", "request_key"],
    }
    hostile = Hostile(tool("put", schema), tool("plain"))
    record = _record(hostile, idempotency_argument="request_key")
    model = ScriptedModel([tool_call("put", n=1), tool_call("plain"), final("ok")])
    with MCPToolset(record) as tools:
        (spec, _) = tools.specs()
        assert spec.parameters["properties"] == {"n": {"type": "integer"}}  # no key, n required
        assert spec.parameters["required"] == ["n"]
        Agent(model, tools, policy=allow_writes("put", "plain")).run_sync("put")
    (_, put, put_meta), (_, plain, plain_meta) = hostile.calls
    key = put_meta[IDEMPOTENCY_META_KEY]
    assert put == {"n": 1, "request_key": key}
    assert plain == {}
    assert plain_meta[IDEMPOTENCY_META_KEY] not in (None, key)


def test_a_server_that_fails_to_start_is_reported_with_its_stderr(tmp_path: Path) -> None:
    """A stdio server that exits at once: the error quotes its stderr; all servers are tried."""
    script = "import os, sys; sys.stderr.write('no config in ' + os.getcwd() + os.environ['W'])"
    broken = StdioServer(
        name="broken",
        command=sys.executable,
        args=["-I", "-c", f"{script}; sys.exit(3)"],
        env={"W": "!"},
        cwd=str(tmp_path),
    )
    hostile = Hostile(tool("fine"))
    toolset = MCPToolset(_record(hostile), broken)
    with pytest.raises(ConfigurationError) as failed:
        toolset.start()
    message = str(failed.value)
    assert message.startswith("MCP server 'broken' failed to start: ")
    assert message.endswith(f"its stderr ends with:\nno config in {tmp_path}!")
    assert toolset.stderr_tail("broken") == ""  # a failed start closes it, capture released


def test_an_unreachable_or_silent_http_server_ends_start_up_in_time() -> None:
    """A closed port fails start-up at once; a port that never answers, at startup_timeout_s."""
    closed = HttpServer(name="closed", url=f"http://127.0.0.1:{_free_port()}/mcp")
    with pytest.raises(ConfigurationError, match=r"^MCP server 'closed' failed to start: "):
        MCPToolset(closed).start()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        record = HttpServer(name="silent", url=url, startup_timeout_s=0.2)
        # Unbounded, a start-up would wait forever: closing the port at 5 s resets the request,
        # so a build that lost the bound fails in seconds (with another message), not hangs.
        watchdog = threading.Timer(5, silent.close)
        watchdog.start()
        try:
            with pytest.raises(ConfigurationError) as failed:
                MCPToolset(record).start()
        finally:
            watchdog.cancel()
    assert str(failed.value) == "MCP server 'silent' did not complete start-up within 0.2s"


def test_a_call_without_a_deadline_checks_its_patterns_for_their_own_budget() -> None:
    """With no run deadline, the patterns get pattern_timeout_s and the call is sent."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}
    hostile = Hostile(tool("look", schema))
    with MCPToolset(_record(hostile, effects={"look": "read"})) as tools:
        look = tools.get("look")
        assert isinstance(look, ExternalTool)
        context = ToolContext(run_id="r", call_id="c", tool="look")
        assert context.seconds_left() is None
        answer = asyncio.run(look.invoke({"s": "ab"}, context))
    assert answer == {"done": "look", "arguments": {"s": "ab"}}
