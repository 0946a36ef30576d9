"""One live connection to one MCP server, held by a task on the toolset's own event loop.

The MCP SDK's sessions are bound to the event loop (and the task) that opened them, while an
agent may run on any loop (``run_sync`` makes a fresh one per call). So every connection lives on
a private event loop in a background thread (an anyio blocking portal owned by the toolset), and
callers on any loop reach it through futures. One task per server opens the transport and the
session, reports it ready, and holds it until asked to stop, so the SDK's cancel scopes are
entered and left by the same task.

Failures are told apart by whether a request may have reached the server: a call made while the
connection is down (and could not be re-established) was never sent and raises
`TransientToolError`; an error after the request was handed to the session means it may have run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import IO, Any

import anyio
import mcp.types as mcp_types
from anyio.abc import TaskStatus
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ownloop.exceptions import ConfigurationError, ToolDefinitionError, TransientToolError
from ownloop.mcp._config import HttpServer, InProcessServer, StdioServer

__all__ = ["Connection"]

_STDERR_TAIL_BYTES = 4000


class _Holding:
    """One opening of the session and the signals of the task that holds it.

    ``stop`` asks the task to leave the session, ``ended`` says it has, and ``scope`` cancels it
    (when it does not end in time).
    """

    def __init__(self) -> None:
        self.stop = anyio.Event()
        self.ended = anyio.Event()
        self.scope = anyio.CancelScope()


class Connection:
    """The connection to one server; every coroutine here runs on the toolset's loop.

    Args:
        options: The server's record.
        on_tools_changed: Called (on the toolset's loop) when the server announces that its
            tool list changed.
    """

    def __init__(
        self,
        options: StdioServer | HttpServer | InProcessServer,
        on_tools_changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.options = options
        self.reconnects_left = options.max_reconnects
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._holding: _Holding | None = None
        self._stderr: IO[bytes] | None = None
        self._lock: anyio.Lock | None = None

    def stderr_tail(self) -> str:
        """The last 4,000 bytes the server process wrote to stderr, decoded (stdio only)."""
        if self._stderr is None:
            return ""
        with open(self._stderr.name, "rb") as file:  # its own offset: the server's stays put
            file.seek(max(os.path.getsize(self._stderr.name) - _STDERR_TAIL_BYTES, 0))
            return file.read().decode("utf-8", "replace")

    async def open(self, task_group: anyio.abc.TaskGroup) -> Client:
        """Connect and initialize within ``startup_timeout_s``; return the open session.

        Raises:
            ConfigurationError: The server could not be started or reached in time.
        """
        if self._lock is None:
            self._lock = anyio.Lock()
        holding = _Holding()
        self._holding = holding
        bound = self.options.startup_timeout_s
        try:
            with anyio.fail_after(bound):
                client: Client = await task_group.start(self._hold, holding)
        except Exception as error:
            self._client = None
            holding.stop.set()
            detail = self.stderr_tail().strip()
            where = f"; its stderr ends with:\n{detail}" if detail else ""
            cause = _first(error)
            what = (
                f"did not complete start-up within {bound:g}s"
                if isinstance(cause, TimeoutError)
                else f"failed to start: {type(cause).__name__}: {cause}"
            )
            raise ConfigurationError(f"MCP server {self.options.name!r} {what}{where}") from error
        return client

    async def close(self) -> None:
        """Close the session and stop the server; return when they ended, or at the bound.

        The session ends as it would on its own (an HTTP session is deleted, a stdio server's
        input closed), waited for at most ``startup_timeout_s``; one that has not ended by then
        (a server or transport that never finishes closing) is cancelled. The holding task
        clears the session as it leaves.
        """
        holding = self._holding
        if holding is None:
            return
        holding.stop.set()
        with anyio.move_on_after(self.options.startup_timeout_s):
            await holding.ended.wait()
        holding.scope.cancel()

    def release(self) -> None:
        """Close the stderr capture file (after the process has stopped)."""
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def _hold(self, holding: _Holding, *, task_status: TaskStatus[Client]) -> None:
        started = False
        try:
            with holding.scope:
                async with AsyncExitStack() as resources:
                    client = await resources.enter_async_context(self._new_client(resources))
                    self._client = client
                    task_status.started(client)
                    started = True
                    await holding.stop.wait()
        except Exception:
            if not started:
                raise  # open() reports it
            # After start-up a dropped connection shows up on the next call.
        finally:
            if self._holding is holding:
                self._client = None
            holding.ended.set()

    def _new_client(self, resources: AsyncExitStack) -> Client:
        options = self.options
        if isinstance(options, InProcessServer):
            transport: Any = options.server
        elif isinstance(options, StdioServer):
            if self._stderr is None:
                self._stderr = tempfile.NamedTemporaryFile()  # noqa: SIM115 - open for the life
            parameters = StdioServerParameters(
                command=options.command,
                args=list(options.args),
                env=dict(options.env) if options.env is not None else None,
                cwd=options.cwd,
            )
            transport = stdio_client(parameters, errlog=self._stderr)  # type: ignore[arg-type]
        else:
            http = create_mcp_http_client(headers=dict(options.headers))
            resources.push_async_callback(http.aclose)  # a client we pass in is ours to close
            transport = streamable_http_client(options.url, http_client=http)
        # The initialize handshake: every server speaks it, and change notifications arrive on
        # the session (the 2026 protocol moves them to a listen stream).
        return Client(transport, cache=None, mode="legacy", message_handler=self._on_message)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            await self._on_tools_changed()

    async def ensure(self, task_group: anyio.abc.TaskGroup) -> Client:
        """Return the open session, reconnecting (within the budget) when it dropped.

        Raises:
            TransientToolError: The connection is down and cannot be re-established now.
        """
        assert self._lock is not None
        async with self._lock:
            if self._client is not None:
                return self._client
            if self.reconnects_left <= 0:
                raise TransientToolError(
                    f"MCP server {self.options.name!r} is disconnected and its reconnect "
                    f"budget ({self.options.max_reconnects}) is spent"
                )
            self.reconnects_left -= 1
            try:
                return await self.open(task_group)
            except ConfigurationError as error:
                raise TransientToolError(f"reconnecting failed: {error}") from error

    def dropped(self) -> None:
        """Mark the session as gone (a call failed in transport), so the next call reconnects."""
        if self._holding is not None:
            self._holding.stop.set()
        self._client = None

    async def list_tools(self, task_group: anyio.abc.TaskGroup) -> list[mcp_types.Tool]:
        """Every tool the server lists, following pagination (bounded).

        Raises:
            ToolDefinitionError: The server answered the listing with an error, or with one
                the SDK could not read (too deep, for example), or not within
                ``call_timeout_s``.
        """
        client = await self.ensure(task_group)
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):
            try:
                with anyio.fail_after(self.options.call_timeout_s):
                    page = await client.list_tools(cursor=cursor)
            except MCPError as error:
                raise ToolDefinitionError(
                    f"MCP server {self.options.name!r} could not list its tools: {error.message}"[
                        :2000
                    ]
                ) from error
            except TimeoutError as error:
                raise ToolDefinitionError(
                    f"MCP server {self.options.name!r} did not list its tools within "
                    f"{self.options.call_timeout_s:g}s"
                ) from error
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools


def _first(error: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps a task's failure in one)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
