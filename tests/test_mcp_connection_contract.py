"""One MCP connection's contract, in this process: drops, reconnects, timeouts, pages, refreshes.

The servers are the SDK's own objects; `Cuttable` is a transport to one that the test can cut
as a dying server would, so lost connections and reconnects are driven without a process.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError, types
from mcp.server.lowlevel.server import Server
from mcp.shared.memory import create_client_server_memory_streams

from ownloop import Agent, ConfigurationError, Limits, RunStatus, ToolDefinitionError
from ownloop.mcp import IDEMPOTENCY_META_KEY, HttpServer, InProcessServer, MCPToolset, StdioServer
from ownloop.mcp._connection import Connection
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ExternalTool, ToolContext
from tests.mcp_hostile import Hostile, over_http, text_result, tool


def _wait_for(condition: Callable[[], bool], what: str, bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Cuttable:
    """A transport to an in-process server; a call named ``cut`` ends the connection mid-call.

    Every opening is a fresh connection to the same server object, counted in ``opened``.
    """

    def __init__(self, hostile: Hostile) -> None:
        self.hostile = hostile
        self.opened = self.closed = 0
        self.refuse = False
        """Refuse every later opening, as a server that is gone for good."""
        self.crash_after_next = False
        """Fail the client's read after the next message, as a transport that crashed."""
        self.exits: list[object] = []
        self.broken = False
        """Fail the next send with an OSError, as a network that went down for a moment."""
        self.hang_on_exit = False
        """Do not return from closing while this is set (unless cancelled), as a server that
        ignores its end; clearing it lets a closing that hangs finish."""
        self._stacks: dict[int, AsyncExitStack] = {}
        self._cuts: list[anyio.abc.ObjectSendStream[Any]] = []

    def server(self) -> Server[Any]:
        """The server: the hostile one, but ``cut`` hangs up instead of answering."""

        async def call_tool(context: Any, params: types.CallToolRequestParams) -> Any:
            if params.name == "crash":
                self.crash_after_next = True
                return text_result("crashing")
            if params.name.startswith("cut"):
                self.hostile.calls.append((params.name, dict(params.arguments or {}), {}))
                await self._cuts[-1].aclose()
                await anyio.sleep_forever()
            return await self.hostile.call_tool(context, params)

        return Server("cuttable", on_list_tools=self.hostile.list_tools, on_call_tool=call_tool)

    async def __aenter__(self) -> Any:
        if self.refuse:
            raise ConnectionRefusedError("nobody listens")
        stack = AsyncExitStack()
        client, (server_read, server_write) = await stack.enter_async_context(
            create_client_server_memory_streams()
        )
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)
        server = self.server()
        group.start_soon(
            server.run, server_read, server_write, server.create_initialization_options()
        )
        self._stacks[anyio.get_current_task().id] = stack
        self._cuts.append(server_write)
        self.opened += 1
        read, write = client
        return _Crashable(read, self), _Breakable(write, self)

    async def __aexit__(self, kind: object, *exc: object) -> None:
        self.exits.append(kind)
        try:
            while self.hang_on_exit:
                await anyio.sleep(0.01)
        finally:
            await self._stacks.pop(anyio.get_current_task().id).aclose()
            self.closed += 1


class _Crashable:
    """A receive stream that raises OSError after the message that armed its transport."""

    def __init__(self, stream: Any, transport: Cuttable) -> None:
        self._stream, self._transport, self._armed = stream, transport, False

    def __aiter__(self) -> _Crashable:
        return self

    async def __anext__(self) -> Any:
        if self._armed:
            raise OSError("the transport crashed")
        item = await self._stream.__anext__()
        self._armed = self._transport.crash_after_next
        self._transport.crash_after_next = False
        return item

    async def __aenter__(self) -> _Crashable:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Breakable:
    """A send stream that raises OSError once its transport is ``broken``."""

    def __init__(self, stream: Any, transport: Cuttable) -> None:
        self._stream, self._transport = stream, transport

    async def send(self, item: Any) -> None:
        if self._transport.broken:
            self._transport.broken = False
            raise OSError("network is down")
        await self._stream.send(item)

    async def __aenter__(self) -> _Breakable:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _cuttable(hostile: Hostile, **options: Any) -> tuple[Cuttable, InProcessServer]:
    transport = Cuttable(hostile)
    return transport, InProcessServer(name="cuttable", server=transport, **options)


def _finished(result: Any) -> list[dict[str, Any]]:
    return [e.model_dump() for e in result.trace if e.kind == "tool_finished"]


def test_a_cut_write_is_unknown_the_next_call_reconnects_and_the_budget_ends_it() -> None:
    """A connection lost mid-call: a write unknown, a read not resent; reconnects are budgeted."""
    hostile = Hostile(tool("cut_write"), tool("look"), tool("cut_read"))
    transport, record = _cuttable(
        hostile, effects={"look": "read", "cut_read": "read"}, max_reconnects=1
    )
    with MCPToolset(record) as tools:
        model = ScriptedModel([tool_call("cut_write"), final("?")])
        cut = Agent(model, tools, policy=allow_writes("cut_write")).run_sync("w")
        again = Agent(ScriptedModel([tool_call("look"), final("ok")]), tools).run_sync("r")
        reconnected = transport.opened
        model = ScriptedModel([tool_call("cut_read"), tool_call("look"), final("ok")])
        spent = Agent(model, tools, limits=Limits(max_tool_attempts=2)).run_sync("r")
    (receipt,) = cut.receipts
    assert (receipt.status, receipt.effect) == ("unknown", "unknown")
    assert receipt.message == (
        "ConnectionError: MCP call 'cut_write' failed after it was sent: Connection closed"
    )
    assert cut.status is RunStatus.UNRESOLVED
    assert [r.status for r in again.receipts] == ["ok"]
    assert reconnected == transport.opened == 2  # one reconnect, then none: the budget was 1
    read = spent.receipts[0]
    assert (read.status, read.effect) == ("error", "none")
    assert read.message == (
        "MCP call 'cut_read' failed after it was sent: Connection closed; "
        "not sent again (the tool is not declared idempotent)"
    )
    (_, refused) = _finished(spent)
    assert refused["message"] == (
        "TransientToolError: MCP server 'cuttable' is disconnected and its reconnect budget (1) "
        "is spent"
    )
    assert hostile.names() == ["cut_write", "look", "cut_read"]


def test_a_timeout_names_its_bound_and_the_run_deadline_shortens_it() -> None:
    """A call waits call_timeout_s, or less when the run's deadline comes first."""
    hostile = Hostile(tool("slow"))
    hostile.delays["slow"] = 5  # far past the timeout; a mutant without one fails in seconds
    record = InProcessServer(
        name="h", server=hostile.server(), effects={"slow": "read"}, call_timeout_s=0.25
    )
    with MCPToolset(record) as tools:
        own = Agent(ScriptedModel([tool_call("slow"), final("ok")]), tools).run_sync("own")
    assert own.receipts[0].message == (
        "MCP call 'slow' failed after it was sent: MCP call 'slow' timed out after 0.25s; "
        "not sent again (the tool is not declared idempotent)"
    )
    with MCPToolset(record.model_copy(update={"call_timeout_s": 5.0})) as tools:
        slow = tools.get("slow")
        assert isinstance(slow, ExternalTool)
        deadline = datetime.now(UTC) + timedelta(seconds=0.5)
        context = ToolContext(run_id="r", call_id="c", tool="slow", deadline=deadline)
        cut = asyncio.run(slow.invoke({}, context))
    message = str(cut.message)
    bound = float(message.split("timed out after ")[1].split("s;", maxsplit=1)[0])
    assert 0.01 < bound <= 0.5
    assert hostile.names() == ["slow", "slow"]


def test_listings_follow_pages_to_their_end_and_stop_at_one_hundred() -> None:
    """A paged listing is read to its last page; a listing that never ends stops at 100 pages."""
    cursors: list[str | None] = []

    def pager(pages: int | None) -> Server[Any]:
        async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
            cursors.append(params.cursor if params is not None else None)
            page = int(params.cursor) if params is not None and params.cursor else 0
            last = pages is not None and page == pages - 1
            return types.ListToolsResult(
                tools=[tool(f"t{page}")] if pages or page >= 98 else [],
                next_cursor=None if last else str(page + 1),
            )

        return Server("pager", on_list_tools=list_tools)

    with MCPToolset(InProcessServer(name="paged", server=pager(3))) as tools:
        assert list(tools.names()) == ["t0", "t1", "t2"]
    assert cursors == [None, "1", "2"]
    with MCPToolset(InProcessServer(name="endless", server=pager(None))) as tools:
        assert list(tools.names()) == ["t98", "t99"]


def test_a_listing_answered_with_an_error_is_a_tool_definition_error() -> None:
    """A server that refuses tools/list fails start-up with its name and the error's message."""

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        raise MCPError(code=-32603, message="no tools today")

    record = InProcessServer(name="sulky", server=Server("s", on_list_tools=list_tools))
    with pytest.raises(ToolDefinitionError) as failed:
        MCPToolset(record).start()
    assert str(failed.value) == "MCP server 'sulky' could not list its tools: no tools today"


def test_a_refresh_that_would_collide_keeps_the_tools_and_says_why() -> None:
    """A changed listing that collides with a Python tool is refused; nothing changes."""
    hostile = Hostile(tool("announce"), tool("gone"))
    hostile.after_notice = {"extra": tool("extra")}
    tools = MCPToolset(
        InProcessServer(name="h", server=hostile.server(), effects={"announce": "read"})
    )

    @tools.tool(effect="read", name="extra")
    def python_extra() -> str:
        """A Python tool that owns the name first."""
        return "python"

    with tools:
        assert tools.refresh_error is None
        Agent(ScriptedModel([tool_call("announce"), final("ok")]), tools).run_sync("grow")
        _wait_for(lambda: tools.refresh_error is not None, "the refused refresh")
        assert str(tools.refresh_error) == (
            "MCP tool 'extra' of server 'h' collides with another tool; give the server a prefix"
        )
        assert list(tools.names()) == ["extra", "announce", "gone"]
        result = Agent(ScriptedModel([tool_call("extra"), final("ok")]), tools).run_sync("x")
    assert result.receipts[0].data == "python"


def test_a_notice_during_a_listing_brings_one_more_listing() -> None:
    """A change announced while a listing is in flight is listed after it, one at a time."""
    hostile = Hostile()
    add = {"type": "object", "properties": {"name": {"type": "string"}}}

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> Any:
        name = str((params.arguments or {})["name"])
        hostile.tools[name] = tool(name)
        await context.session.send_tool_list_changed()
        if name == "one":  # the next change comes while this one's listing is slow
            await _until(lambda: hostile.listing_now == 1)
        return text_result("added")

    hostile.tools["add"] = tool("add", add)
    server = Server("adder", on_list_tools=hostile.list_tools, on_call_tool=call_tool)
    with MCPToolset(InProcessServer(name="h", server=server, effects={"add": "read"})) as tools:
        hostile.list_delay_s = 0.2
        model = ScriptedModel(
            [tool_call("add", name="one"), tool_call("add", name="two"), final("ok")]
        )
        Agent(model, tools).run_sync("add")
        _wait_for(lambda: "two" in tools.names(), "the second listing")
        # The second change came during the second listing: a third one follows it.
        _wait_for(lambda: hostile.listings == 3, "the listing after the second change")
        _wait_for(lambda: hostile.listing_now == 0, "the listings to end")
        Agent(ScriptedModel([tool_call("add", name="three"), final("ok")]), tools).run_sync("a")
        _wait_for(lambda: "three" in tools.names(), "a listing after the others ended")
    assert hostile.listing_peak == 1
    assert hostile.listings == 4  # at start, then one per change


async def _until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(30):
        while not condition():
            await anyio.sleep(0.005)


def test_effect_overrides_apply_by_registry_name_and_win_over_the_record() -> None:
    """Overrides name prefixed tools, beat the record's own effects and skip other names."""
    hostile = Hostile(tool("look"), tool("peek"), tool("keep"))
    record = InProcessServer(
        name="h", server=hostile.server(), prefix="p_", effects={"look": "write", "keep": "read"}
    )
    overrides = {"p_look": "read", "xxpeek": "read", "peek": "read"}
    with MCPToolset(record, effects=overrides) as tools:  # type: ignore[arg-type]
        effects = {spec.name: spec.effect for spec in tools.specs()}
    assert effects == {"p_look": "read", "p_peek": "write", "p_keep": "read"}


def test_a_server_offers_only_the_tools_its_record_names() -> None:
    """The record's tools selection filters the listing; a read sends no idempotency _meta."""
    hostile = Hostile(tool("a"), tool("b"))
    record = InProcessServer(name="h", server=hostile.server(), tools=("b",), effects={"b": "read"})
    with MCPToolset(record) as tools:
        assert list(tools.names()) == ["b"]
        Agent(ScriptedModel([tool_call("b"), final("ok")]), tools).run_sync("b")
    assert hostile.calls == [("b", {}, {})]


def test_start_up_reports_the_first_failure_and_the_end_of_a_long_stderr(tmp_path: Path) -> None:
    """A failed start-up quotes the last 4,000 bytes of the server's stderr, cut or not."""
    script = "import sys; sys.stderr.write('é' + 'y' * 3998 + '\\n'); sys.exit(3)"
    first = StdioServer(name="first", command=sys.executable, args=["-I", "-c", script])
    fine = InProcessServer(name="fine", server=Hostile(tool("a")).server())
    with pytest.raises(ConfigurationError) as failed:
        MCPToolset(fine, first).start()
    message = str(failed.value)
    assert message.startswith("MCP server 'first' failed to start: MCPError: Connection closed; ")
    assert message.endswith("its stderr ends with:\n\ufffd" + "y" * 3998)  # cut inside the é


def test_a_hang_up_that_refuses_reconnecting_and_a_dead_network_are_told_apart() -> None:
    """A failed reconnect is transient and says why; an OSError on send drops the connection."""
    hostile = Hostile(tool("look"), tool("cut"), tool("send"))
    transport, record = _cuttable(
        hostile, effects={"look": "read", "cut": "read", "send": "read"}, idempotent=("send",)
    )
    with MCPToolset(record) as tools:
        transport.broken = True
        model = ScriptedModel([tool_call("send"), final("ok")])
        lost = Agent(model, tools, limits=Limits(max_tool_attempts=2)).run_sync("r")
        _wait_for(lambda: transport.closed == 1, "the broken connection to close")
        after = Agent(ScriptedModel([tool_call("look"), final("ok")]), tools).run_sync("r")
        Agent(ScriptedModel([tool_call("cut"), final("ok")]), tools).run_sync("r")
        _wait_for(lambda: transport.closed == 2, "the cut connection to close")
        transport.refuse = True
        model = ScriptedModel([tool_call("look"), final("ok")])
        refused = Agent(model, tools, limits=Limits(max_tool_attempts=1)).run_sync("r")
    first, second = _finished(lost)
    assert first["message"] == (
        "TransientToolError: MCP call 'send' failed after it was sent: network is down"
    )
    assert second["status"] == "ok"  # the retry reconnected: an OSError drops the connection
    assert [r.status for r in after.receipts] == ["ok"]
    assert transport.opened == 2  # at start and after the dead network; the third was refused
    (failed,) = _finished(refused)
    assert failed["message"] == (
        "TransientToolError: reconnecting failed: MCP server 'cuttable' failed to start: "
        "ConnectionRefusedError: nobody listens"
    )
    assert hostile.names() == ["send", "look", "cut"]


def test_long_error_messages_are_cut_at_2000_characters() -> None:
    """A server's long error message is cut to 2,000 characters in receipts and listings."""
    long = "e" * 3000

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> Any:
        code = -32000 if params.name == "closed" else -32603
        raise MCPError(code=code, message=long)

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("failed"), tool("closed")])

    record = InProcessServer(
        name="h",
        server=Server("long", on_list_tools=list_tools, on_call_tool=call_tool),
        effects={"failed": "read", "closed": "read"},
    )
    with MCPToolset(record) as tools:
        model = ScriptedModel([tool_call("failed"), tool_call("closed"), final("ok")])
        result = Agent(model, tools).run_sync("r")
    failed, closed = (str(receipt.message) for receipt in result.receipts)
    assert failed == ("the MCP server refused the call (-32603): " + long)[:2000]
    assert closed == ("MCP call 'closed' failed after it was sent: " + long)[:2000]

    async def refuse_listing(context: Any, params: Any) -> types.ListToolsResult:
        raise MCPError(code=-32603, message=long)

    sulky = InProcessServer(name="s", server=Server("s", on_list_tools=refuse_listing))
    with pytest.raises(ToolDefinitionError) as listing:
        MCPToolset(sulky).start()
    assert str(listing.value) == ("MCP server 's' could not list its tools: " + long)[:2000]


def test_a_key_argument_is_looked_for_only_in_schemas_that_have_properties() -> None:
    """A tool whose schema names no properties lists fine and gets no key argument."""
    hostile = Hostile(tool("bare", {"type": "object"}))
    record = InProcessServer(name="h", server=hostile.server(), idempotency_argument="key")
    with MCPToolset(record) as tools:
        Agent(
            ScriptedModel([tool_call("bare"), final("ok")]), tools, policy=allow_writes("bare")
        ).run_sync("w")
    ((_, arguments, meta),) = hostile.calls
    assert arguments == {}
    assert list(meta) == [IDEMPOTENCY_META_KEY]


def test_a_transport_that_crashes_between_calls_is_reopened_by_the_next_one() -> None:
    """A crash after an answer ends the session; the next call reconnects; close ends it too."""
    hostile = Hostile(tool("crash"), tool("look"))
    transport, record = _cuttable(hostile, effects={"crash": "read", "look": "read"})
    with MCPToolset(record) as tools:
        model = ScriptedModel([tool_call("crash"), final("ok")])
        crashed = Agent(model, tools).run_sync("r")
        _wait_for(lambda: transport.closed == 1, "the crashed session to end")
        after = Agent(ScriptedModel([tool_call("look"), final("ok")]), tools).run_sync("r")
        assert transport.opened == 2
    assert [r.status for r in crashed.receipts + after.receipts] == ["ok", "ok"]
    assert _finished(after)[0]["attempt"] == 1
    assert len(transport.exits) == 2  # closing the toolset ended the second session too


def test_refused_reconnects_stay_transient_and_each_spends_the_budget() -> None:
    """Every reconnect that fails is tried anew by the next call, within max_reconnects."""
    hostile = Hostile(tool("cut"), tool("look"))
    transport, record = _cuttable(
        hostile, effects={"cut": "read", "look": "read"}, max_reconnects=2
    )
    with MCPToolset(record) as tools:
        Agent(ScriptedModel([tool_call("cut"), final("ok")]), tools).run_sync("r")
        transport.refuse = True
        model = ScriptedModel([tool_call("look"), final("ok")])
        refused = Agent(model, tools, limits=Limits(max_tool_attempts=3)).run_sync("r")
    messages = [str(event["message"]) for event in _finished(refused)]
    assert messages[0].startswith("TransientToolError: reconnecting failed: ")
    assert messages[1].startswith("TransientToolError: reconnecting failed: ")
    assert messages[2].endswith("reconnect budget (2) is spent")


def test_a_listing_that_does_not_answer_in_time_is_a_tool_definition_error() -> None:
    """A listing is bounded by call_timeout_s, at start-up as in a refresh."""
    hostile = Hostile(tool("a"))
    hostile.list_delay_s = 5  # long past the bound, yet an unbounded listing fails in seconds
    record = InProcessServer(name="slow", server=hostile.server(), call_timeout_s=0.2)
    with pytest.raises(ToolDefinitionError) as failed:
        MCPToolset(record).start()
    assert str(failed.value) == "MCP server 'slow' did not list its tools within 0.2s"


def test_a_timed_out_write_raises_its_unknown_effect_with_the_timeout_as_cause() -> None:
    """A write abandoned at its timeout raises ConnectionError from a TimeoutError naming it."""
    hostile = Hostile(tool("slow_write"))
    hostile.delays["slow_write"] = 5  # far past the timeout; a mutant without one fails soon
    record = InProcessServer(name="h", server=hostile.server(), call_timeout_s=0.2)
    with MCPToolset(record) as tools:
        slow = tools.get("slow_write")
        assert isinstance(slow, ExternalTool)
        context = ToolContext(run_id="r", call_id="c", tool="slow_write")
        with pytest.raises(ConnectionError) as raised:
            asyncio.run(slow.invoke({}, context))
    assert str(raised.value) == (
        "MCP call 'slow_write' failed after it was sent: MCP call 'slow_write' timed out after 0.2s"
    )
    timeout = raised.value.__cause__
    assert isinstance(timeout, TimeoutError)
    assert isinstance(timeout.__cause__, TimeoutError)


def test_lost_idempotent_reads_are_transient_and_lost_writes_unknown() -> None:
    """A cut idempotent read is retried; an OSError on a write's send makes it unknown."""
    hostile = Hostile(tool("cut_again"), tool("send_write"))
    transport, record = _cuttable(hostile, effects={"cut_again": "read"}, idempotent=("cut_again",))
    with MCPToolset(record) as tools:
        transport.broken = True
        model = ScriptedModel([tool_call("send_write"), final("?")])
        lost = Agent(model, tools, policy=allow_writes("send_write")).run_sync("w")
        model = ScriptedModel([tool_call("cut_again"), final("ok")])
        again = Agent(model, tools, limits=Limits(max_tool_attempts=1)).run_sync("r")
    assert _finished(again)[0]["message"] == (
        "TransientToolError: MCP call 'cut_again' failed after it was sent: Connection closed"
    )
    (receipt,) = lost.receipts
    assert (receipt.status, receipt.effect) == ("unknown", "unknown")
    assert receipt.message == (
        "ConnectionError: MCP call 'send_write' failed after it was sent: network is down"
    )


def test_a_toolset_that_is_not_started_says_so_and_caps_arguments() -> None:
    """A call on a closed toolset is refused with its reason; max_argument_bytes applies."""
    hostile = Hostile(tool("look", {"type": "object", "properties": {"s": {"type": "string"}}}))
    tools = MCPToolset(
        InProcessServer(name="h", server=hostile.server(), effects={"look": "read"}),
        max_argument_bytes=64,
    )
    with tools:
        look = tools.get("look")
        model = ScriptedModel([tool_call("look", s="x" * 100), final("ok")])
        capped = Agent(model, tools).run_sync("r")
    assert isinstance(look, ExternalTool)
    context = ToolContext(run_id="r", call_id="c", tool="look")
    with pytest.raises(ConfigurationError) as refused:
        asyncio.run(look.invoke({}, context))
    assert str(refused.value) == "the MCP toolset is not started: use `with` or start()"
    assert hostile.calls == []
    assert capped.receipts == ()


def test_a_result_the_server_marks_as_an_error_is_an_error_receipt_of_the_call() -> None:
    """is_error makes an error receipt under the call's id and the tool's registry name."""
    hostile = Hostile(tool("oops"))
    hostile.results["oops"] = types.CallToolResult(
        content=[types.TextContent(type="text", text="it broke")], is_error=True
    )
    record = InProcessServer(
        name="h", server=hostile.server(), prefix="p_", effects={"oops": "read"}
    )
    with MCPToolset(record) as tools:
        result = Agent(ScriptedModel([tool_call("p_oops"), final("ok")]), tools).run_sync("r")
    (receipt,) = result.receipts
    assert (receipt.call_id, receipt.tool, receipt.status) == ("call-p_oops", "p_oops", "error")
    assert receipt.message == "it broke"


async def _unchanged() -> None:
    """The tool list never changes in these tests."""


def test_close_returns_once_the_session_has_ended_by_itself() -> None:
    """Connection.close lets the session end as it would on its own and returns after it has."""
    transport, record = _cuttable(Hostile(tool("look")))

    async def scenario() -> None:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                connection = Connection(record, _unchanged)
                await connection.open(group)
                await connection.close()
                assert (transport.closed, transport.exits) == (1, [None])
                await connection.close()  # again: nothing left to close
                await Connection(record, _unchanged).close()  # never opened: nothing to close

    anyio.run(scenario)
    assert transport.opened == transport.closed == 1


def test_a_session_that_never_finishes_closing_is_cancelled_at_the_bound() -> None:
    """A transport that never returns from closing is cancelled after startup_timeout_s."""
    transport, record = _cuttable(Hostile(tool("look")), startup_timeout_s=0.2)
    transport.hang_on_exit = True
    took: list[float] = []

    async def scenario() -> None:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                connection = Connection(record, _unchanged)
                await connection.open(group)
                started = time.monotonic()
                with anyio.fail_after(5):
                    await connection.close()
                took.append(time.monotonic() - started)
                assert transport.exits == [None]  # it was asked to end, and did not

    anyio.run(scenario)  # the holding task was cancelled, so its task group could end
    assert 0.2 <= took[0] < 5
    assert transport.closed == 1


def test_closing_the_toolset_deletes_its_http_session() -> None:
    """The toolset's close ends an HTTP session as the protocol says: with a DELETE request."""
    hostile = Hostile(tool("look"))
    with over_http(hostile.server()) as (url, seen):
        with MCPToolset(HttpServer(name="web", url=url)):
            opened = len(seen)
        assert [headers[":method"] for headers in seen[opened:]] == ["DELETE"]
    (session,) = {headers.get("mcp-session-id") for headers in seen[1:]}  # after initialize
    assert session


def test_timeouts_and_answered_errors_keep_the_session_and_spend_no_reconnect() -> None:
    """A timeout, a refusal, a server error and an is_error result all reuse the one session."""
    names = ("slow", "refuse", "fail", "oops", "look")
    hostile = Hostile(*(tool(name) for name in names))
    hostile.delays["slow"] = 5  # far past the timeout; a mutant without one fails in seconds
    hostile.errors.update(refuse=-32602, fail=-32603)
    hostile.results["oops"] = text_result("it broke").model_copy(update={"is_error": True})
    transport, record = _cuttable(
        hostile, effects=dict.fromkeys(names, "read"), call_timeout_s=0.2, max_reconnects=0
    )
    with MCPToolset(record) as tools:
        model = ScriptedModel([*(tool_call(name) for name in names), final("ok")])
        result = Agent(model, tools).run_sync("r")
        _wait_for(lambda: hostile.cancelled == 1, "the server to see the cancellation")
    assert [r.status for r in result.receipts] == ["error", "error", "error", "error", "ok"]
    assert hostile.names() == list(names)
    assert (transport.opened, transport.exits) == (1, [None])  # closed once, by the toolset


def test_an_http_server_that_went_away_spends_the_budget_on_reconnecting() -> None:
    """HTTP connection errors count: the call is lost, each refused reconnect spends one."""
    hostile = Hostile(tool("look"))
    with over_http(hostile.server()) as (url, _):
        record = HttpServer(name="web", url=url, effects={"look": "read"}, max_reconnects=1)
        tools = MCPToolset(record).start()
    try:  # the server has stopped: nothing listens on its port any more
        model = ScriptedModel([tool_call("look"), tool_call("look"), tool_call("look"), final("?")])
        result = Agent(model, tools, limits=Limits(max_tool_attempts=3)).run_sync("r")
    finally:
        tools.close()
    lost, refused, spent = (str(event["message"]) for event in _finished(result))
    assert lost.startswith("MCP call 'look' failed after it was sent: ")
    assert refused.startswith(
        "TransientToolError: reconnecting failed: MCP server 'web' failed to start: ConnectError: "
    )
    assert spent == (
        "TransientToolError: MCP server 'web' is disconnected and its reconnect budget (1) is spent"
    )
    assert hostile.calls == []


def test_a_dropped_session_slow_to_close_does_not_hold_up_the_reconnect() -> None:
    """After a lost connection the next call reconnects at once, while the old one still closes."""
    hostile = Hostile(tool("cut"), tool("look"))
    transport, record = _cuttable(hostile, effects={"cut": "read", "look": "read"})
    with MCPToolset(record) as tools:
        transport.hang_on_exit = True  # the lost session never finishes closing
        model = ScriptedModel([tool_call("cut"), tool_call("look"), final("ok")])
        result = Agent(model, tools).run_sync("r")
        assert transport.closed == 0
        transport.hang_on_exit = False  # so the toolset's close ends it without a wait to the bound
    assert [r.status for r in result.receipts] == ["error", "ok"]
    assert transport.opened == 2
    assert transport.closed == 2  # the toolset's close ended both


def test_a_refresh_after_a_lost_connection_reconnects() -> None:
    """A listing, like a call, reopens a dropped connection (within the budget)."""
    hostile = Hostile(tool("cut"))
    transport, record = _cuttable(hostile, effects={"cut": "read"}, max_reconnects=1)
    with MCPToolset(record) as tools:
        Agent(ScriptedModel([tool_call("cut"), final("ok")]), tools).run_sync("r")
        hostile.tools["more"] = tool("more")
        tools.refresh()
        assert list(tools.names()) == ["cut", "more"]
    assert transport.opened == 2
