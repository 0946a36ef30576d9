"""`MCPToolset`'s own contract, in this process: closing, restarting, in-flight calls, notices.

Every wait here is bounded by a few seconds (`_within`, `_wait_for`), so a toolset that hangs on
close, on a notice or on a call fails its test at once instead of at the runner's wall limit.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import pytest

from ownloop import Agent, ConfigurationError, Limits
from ownloop.mcp import InProcessServer, MCPToolset
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ExternalTool, ToolContext
from tests.mcp_hostile import Hostile, tool
from tests.test_mcp_connection_contract import Cuttable

T = TypeVar("T")
_BOUND_S = 5.0


def _wait_for(condition: Callable[[], bool], what: str, bound_s: float = _BOUND_S) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def _within(action: Callable[[], T], what: str, bound_s: float = _BOUND_S) -> T:
    """Run a blocking ``action`` in a daemon thread; fail if it has not returned in time."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, action()))
        except BaseException as error:  # handed to the test thread
            outcome.append((False, error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound_s)
    assert outcome, f"{what} did not return within {bound_s:g}s"
    ((returned, value),) = outcome
    if not returned:
        raise value
    result: T = value
    return result


def _cuttable(hostile: Hostile, **options: Any) -> tuple[Cuttable, InProcessServer]:
    transport = Cuttable(hostile)
    return transport, InProcessServer(name="cuttable", server=transport, **options)


def _invoke(tools: MCPToolset, name: str) -> Any:
    """Call one tool directly, as the gateway would, on a fresh event loop."""
    handle = tools.get(name)
    assert isinstance(handle, ExternalTool)
    context = ToolContext(run_id="r", call_id=f"call-{name}", tool=name)
    return asyncio.run(handle.invoke({}, context))


def test_close_lets_an_in_flight_write_finish_and_ends_every_session_cleanly() -> None:
    """close() waits for a call already sent and for each session's own end, never cuts them."""
    hostile = Hostile(tool("slow_write"))
    hostile.delays["slow_write"] = 0.3
    transport, record = _cuttable(hostile)
    tools = MCPToolset(record).start()
    model = ScriptedModel([tool_call("slow_write"), final("ok")])
    agent = Agent(model, tools, policy=allow_writes("slow_write"))
    results: list[Any] = []
    writer = threading.Thread(target=lambda: results.append(agent.run_sync("w")), daemon=True)
    writer.start()
    _wait_for(lambda: hostile.names() == ["slow_write"], "the write to reach the server")
    _within(tools.close, "close()")
    writer.join(_BOUND_S)
    (result,) = results
    (receipt,) = result.receipts
    assert (receipt.status, receipt.effect) == ("ok", "applied"), receipt.message
    assert hostile.finished == ["slow_write"]
    assert hostile.cancelled == 0
    assert transport.exits == [None]  # the session left normally, not by a cancellation
    assert transport.closed == transport.opened == 1


class _Stubborn(Cuttable):
    """A transport that will not finish closing when asked: its exit waits until cancelled."""

    def __init__(self, hostile: Hostile) -> None:
        super().__init__(hostile)
        self.cancelled = 0

    async def __aexit__(self, kind: object, *exc: object) -> None:
        await super().__aexit__(kind, *exc)
        try:  # the session is over, but the transport never finishes closing
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise


def test_close_waits_for_every_call_in_flight() -> None:
    """Two writes in flight, one longer than the other, both finish before the session ends."""
    hostile = Hostile(tool("quick_write"), tool("slow_write"))
    hostile.delays.update(quick_write=0.05, slow_write=0.4)
    transport, record = _cuttable(hostile)
    tools = MCPToolset(record).start()
    results: list[Any] = []

    def write(name: str) -> None:
        results.append(_invoke(tools, name))

    writers = [threading.Thread(target=write, args=(n,), daemon=True) for n in hostile.delays]
    for writer in writers:
        writer.start()
    _wait_for(lambda: len(hostile.calls) == 2, "both writes to reach the server")
    _within(tools.close, "close()")
    for writer in writers:
        writer.join(_BOUND_S)
    assert sorted(hostile.finished) == ["quick_write", "slow_write"]
    assert sorted(str(r["done"]) for r in results) == ["quick_write", "slow_write"]
    assert transport.exits == [None]


def test_close_with_nothing_in_flight_ends_at_once_and_refuses_later_calls() -> None:
    """With no call in flight close() does not wait out call_timeout_s; then calls are refused."""
    hostile = Hostile(tool("look"))
    transport, record = _cuttable(hostile, effects={"look": "read"})
    tools = MCPToolset(record).start()
    assert _invoke(tools, "look") == {"done": "look", "arguments": {}}
    _within(tools.close, "close()", bound_s=3.0)
    with pytest.raises(ConfigurationError, match="not started"):
        _invoke(tools, "look")
    assert transport.closed == transport.opened == 1
    assert hostile.names() == ["look"]


def test_a_session_that_will_not_end_is_cancelled_after_the_longest_startup_timeout() -> None:
    """close() gives a session startup_timeout_s to end on its own, then cancels it."""
    hostile = Hostile(tool("look"))
    transport = _Stubborn(hostile)
    record = InProcessServer(name="stubborn", server=transport, startup_timeout_s=0.2)
    other = InProcessServer(name="other", server=Hostile().server(), startup_timeout_s=0.1)
    tools = MCPToolset(other, record).start()
    _within(tools.close, "close()")
    assert transport.cancelled == 1
    assert transport.closed == transport.opened == 1


def test_a_toolset_of_python_tools_alone_starts_calls_and_closes() -> None:
    """With no server at all, the toolset still starts, runs its Python tools and closes."""
    tools = MCPToolset()

    @tools.tool(effect="read")
    def hello() -> str:
        """Say hello."""
        return "hello"

    with tools:
        result = Agent(ScriptedModel([tool_call("hello"), final("ok")]), tools).run_sync("hi")
        _within(tools.close, "close()")
    assert result.receipts[0].data == "hello"


def test_a_listing_in_flight_at_close_is_abandoned_and_reconnects_nothing() -> None:
    """A refresh after a change notice is cancelled by close(); it opens no new session."""
    hostile = Hostile(tool("announce"), tool("look"))
    transport, record = _cuttable(hostile, effects={"announce": "read"})
    tools = MCPToolset(record).start()
    hostile.list_delay_s = 60
    assert _invoke(tools, "announce") == {"announced": True}
    _wait_for(lambda: hostile.listing_now == 1, "the refresh to start listing")
    _within(tools.close, "close()")
    assert transport.opened == transport.closed == 1
    assert tools.refresh_error is None  # abandoned, not failed


def test_a_restarted_toolset_starts_afresh_with_its_whole_reconnect_budget() -> None:
    """After close(), start() opens new sessions; the spent reconnect budget is whole again."""
    hostile = Hostile(tool("cut"), tool("look"))
    transport, record = _cuttable(
        hostile, effects={"cut": "read", "look": "read"}, max_reconnects=1
    )
    tools = MCPToolset(record)
    for life in (1, 2):
        with tools:
            assert transport.opened == 2 * life - 1
            model = ScriptedModel([tool_call("cut"), tool_call("look"), final("ok")])
            result = Agent(model, tools).run_sync("r")
            assert [r.status for r in result.receipts] == ["error", "ok"]
            assert transport.opened == 2 * life  # the look reconnected, spending the budget
            Agent(ScriptedModel([tool_call("cut"), final("ok")]), tools).run_sync("r")
            model = ScriptedModel([tool_call("look"), final("ok")])
            spent = Agent(model, tools, limits=Limits(max_tool_attempts=1)).run_sync("r")
            (finished,) = [e.model_dump() for e in spent.trace if e.kind == "tool_finished"]
            assert str(finished["message"]).endswith("reconnect budget (1) is spent")
    assert transport.closed == transport.opened == 4
    assert hostile.names() == ["cut", "look", "cut"] * 2


def test_a_restart_never_relaxes_a_tool_the_toolset_offered_as_a_write() -> None:
    """A tool listed as a write keeps that effect when a restarted server lists it as a read."""
    hostile = Hostile(tool("flip", read_only=False))
    tools = MCPToolset(InProcessServer(name="h", server=hostile.server(), trust_annotations=True))
    with tools:
        assert [spec.effect for spec in tools.specs()] == ["write"]
    hostile.tools["flip"] = tool("flip", read_only=True, idempotent=True)
    with tools:
        (spec,) = tools.specs()
    assert (spec.effect, spec.idempotent) == ("write", False)
    assert hostile.listings == 2


def test_a_toolset_takes_only_server_records() -> None:
    """Anything but a server record is refused, saying which records it takes."""
    with pytest.raises(ConfigurationError) as refused:
        MCPToolset("not a server")  # type: ignore[arg-type]
    assert str(refused.value) == (
        "MCPToolset takes StdioServer, HttpServer or InProcessServer records"
    )


def test_a_refresh_after_a_lost_connection_reconnects_to_list() -> None:
    """refresh() on a dropped connection opens a new session within the budget, then lists."""
    hostile = Hostile(tool("cut"), tool("look"))
    transport, record = _cuttable(hostile, effects={"cut": "read", "look": "read"})
    with MCPToolset(record) as tools:
        Agent(ScriptedModel([tool_call("cut"), final("ok")]), tools).run_sync("r")
        _wait_for(lambda: transport.closed == 1, "the cut session to end")
        hostile.tools["new"] = tool("new")
        _within(tools.refresh, "refresh()")
        assert list(tools.names()) == ["cut", "look", "new"]
    assert transport.opened == 2
    assert hostile.listings == 2


def test_a_read_lost_on_its_send_is_an_error_receipt_of_the_call() -> None:
    """A read not declared idempotent, lost as it was sent, is an error receipt, not resent."""
    hostile = Hostile(tool("look"))
    transport, record = _cuttable(hostile, effects={"look": "read"})
    with MCPToolset(record) as tools:
        transport.broken = True
        result = Agent(ScriptedModel([tool_call("look"), final("ok")]), tools).run_sync("r")
    (receipt,) = result.receipts
    assert (receipt.call_id, receipt.tool) == ("call-look", "look")
    assert (receipt.status, receipt.effect) == ("error", "none")
    assert receipt.message == (
        "MCP call 'look' failed after it was sent: network is down; "
        "not sent again (the tool is not declared idempotent)"
    )
    assert hostile.calls == []


def test_a_call_that_ends_leaves_no_error_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """A finished call is forgotten quietly: nothing is logged at error level on its way out."""
    hostile = Hostile(tool("look"))
    with (
        caplog.at_level(logging.ERROR),
        MCPToolset(_cuttable(hostile, effects={"look": "read"})[1]) as tools,
    ):
        assert _invoke(tools, "look") == {"done": "look", "arguments": {}}
    assert caplog.records == []
