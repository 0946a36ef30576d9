"""`MCPToolset`'s own contract, in this process: closing, restarting, in-flight calls, notices.

Every wait here is bounded by a few seconds (`_within`, `_wait_for`), so a toolset that hangs on
close, on a notice or on a call fails its test at once instead of at the runner's wall limit.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ownloop import Agent
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
    assert (receipt.status, receipt.effect) == ("ok", "applied")
    assert hostile.finished == ["slow_write"]
    assert hostile.cancelled == 0
    assert transport.exits == [None]  # the session left normally, not by a cancellation
    assert transport.closed == transport.opened == 1
