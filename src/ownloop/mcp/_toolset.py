"""`MCPToolset`: a `ToolRegistry` whose tools come from MCP servers (and may include Python tools).

The toolset starts (or connects to) its servers, lists their tools and registers each as an
`ExternalTool`, so the agent's gateway validates, authorizes, asks approval, executes, journals
and records receipts for MCP tools exactly as for Python tools. It owns a private event loop in a
background thread where the connections live; any agent on any loop (``run``, ``run_sync``) can
call through it. Use it as a context manager (``async with`` / ``with``) or call ``start`` and
``close``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import httpx
import mcp.types as mcp_types
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import MCPError

from ownloop.contracts import Effect, Receipt, ToolSpec
from ownloop.exceptions import ConfigurationError, TransientToolError
from ownloop.mcp._config import HttpServer, InProcessServer, StdioServer
from ownloop.mcp._connection import Connection
from ownloop.mcp._convert import build_tool, call_result
from ownloop.tools import DEFAULT_MAX_ARGUMENT_BYTES, ToolContext, ToolRegistry

__all__ = ["IDEMPOTENCY_META_KEY", "MCPToolset"]

IDEMPOTENCY_META_KEY = "io.github.ownloop/idempotency-key"
"""The ``_meta`` key under which every write call carries its idempotency key."""

_TRANSPORT_FAILURES = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx.TransportError,
    OSError,  # after TimeoutError, which is one but says nothing about the connection
)
_CONNECTION_CLOSED = -32000
_REFUSALS = frozenset({-32600, -32601, -32602})  # invalid request, no such method, bad params:
# the server refused before running anything. Any other error answer to a write (an internal
# error, say) may come after part of it ran, so its effect is unknown.


class MCPToolset(ToolRegistry):
    """The tools of one or more MCP servers, as a registry an `Agent` can own.

    Args:
        *servers: The servers (`StdioServer`, `HttpServer`, `InProcessServer`); their names
            must be distinct.
        effects: Effect overrides by registry name (prefix included), for example from a policy
            file's ``tool_effects``; they win over the server records' own ``effects``.
        max_argument_bytes: The cap on one call's raw arguments.

    Raises:
        ConfigurationError: Two servers share a name, or a server is not a server record.
    """

    def __init__(
        self,
        *servers: StdioServer | HttpServer | InProcessServer,
        effects: Mapping[str, Effect] | None = None,
        max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
    ) -> None:
        super().__init__(max_argument_bytes=max_argument_bytes)
        if not all(
            isinstance(server, StdioServer | HttpServer | InProcessServer) for server in servers
        ):
            raise ConfigurationError(
                "MCPToolset takes StdioServer, HttpServer or InProcessServer records"
            )
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"MCP server names must be distinct, got {names}")
        overrides = dict(effects or {})
        self._records = [_with_overrides(server, overrides) for server in servers]
        self._connections = self._new_connections()
        self._owned: dict[str, set[str]] = {name: set() for name in names}
        self._offered: dict[str, ToolSpec] = {}  # the strictest spec each tool ever had
        self._portal: BlockingPortal | None = None
        self._calls: set[concurrent.futures.Future[Any]] = set()  # sent and not yet ended
        # Held while a call is started and recorded in _calls, and while close() takes the
        # portal away and reads _calls: a call is either refused or waited for, never cut.
        self._calling = threading.Lock()
        self._mutation = threading.Lock()
        # Set by start() before anything reads them, afresh for each start:
        self._portal_context: AbstractContextManager[BlockingPortal]
        self._task_group: anyio.abc.TaskGroup  # holds the sessions
        self._listings: anyio.abc.TaskGroup  # holds the refreshes after change notices
        self._stop: anyio.Event
        self._refreshing: set[str]
        self._pending: set[str]
        self.refresh_error: Exception | None = None
        """The error of the last refresh after a list change, if it failed (tools unchanged)."""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        """Start or connect every server and register its tools (blocking; idempotent).

        A toolset closed before starts afresh: new sessions, each with its whole reconnect
        budget. A tool keeps the strictest effect it was ever offered with.

        Raises:
            ConfigurationError: A server could not be reached in time, or its tools cannot be
                taken (a name collision, an invalid schema).
        """
        if self._portal is not None:
            return self
        self._connections = self._new_connections()
        self._refreshing, self._pending = set(), set()
        self._portal_context = start_blocking_portal()
        self._portal = self._portal_context.__enter__()
        try:
            self._portal.start_task(self._supervise)
            self._portal.call(self._open_all)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every server started here and the background loop (blocking; idempotent).

        New calls are refused at once. Calls already made end first, each within its own
        bounds (``startup_timeout_s`` to reconnect, then ``call_timeout_s`` or the run's
        deadline); then every session is asked to end and given the longest
        ``startup_timeout_s`` to do so (a stdio server sees its input close and exits), and
        only what is left after that is cancelled.
        """
        with self._calling:
            portal, self._portal = self._portal, None
            calls = self._calls.copy()
        if portal is not None:
            concurrent.futures.wait(calls)
            try:
                portal.call(self._shut_down)
            finally:  # whatever failed, the loop ends (within the sessions' grace)
                portal.call(self._stop.set)
                self._portal_context.__exit__(None, None, None)
        for connection in self._connections.values():
            connection.release()

    def refresh(self) -> None:
        """List every server's tools again now and update the registry (blocking)."""
        portal = self._running_portal()
        for connection in self._connections.values():
            portal.call(self._sync_tools, connection)

    def specs(self) -> list[ToolSpec]:
        """Return every tool's spec, in registration order (safe during a refresh)."""
        with self._mutation:
            return super().specs()

    def stderr_tail(self, server: str) -> str:
        """What a stdio server last wrote to stderr (empty for HTTP servers)."""
        return self._connections[server].stderr_tail()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)

    # ------------------------------------------------------------------ on the toolset's loop
    async def _supervise(self, *, task_status: TaskStatus[None]) -> None:
        self._stop = anyio.Event()
        async with anyio.create_task_group() as sessions:
            self._task_group = sessions
            async with anyio.create_task_group() as listings:
                self._listings = listings
                task_status.started()
                await self._stop.wait()
                listings.cancel_scope.cancel()
            if self._connections:  # each session was asked to end: give them time to
                grace = max(c.options.startup_timeout_s for c in self._connections.values())
                sessions.cancel_scope.deadline = anyio.current_time() + grace

    async def _shut_down(self) -> None:
        """Abandon the listings in flight, then ask every session to end."""
        self._listings.cancel_scope.cancel()  # a listing must not reconnect a closed session
        for connection in self._connections.values():
            await connection.close()

    async def _open_all(self) -> None:
        """Start every server at once (start-ups are slow), then take their tools in order."""
        failures: list[ConfigurationError] = []

        async def open_one(connection: Connection) -> None:
            try:
                await connection.open(self._task_group)
            except ConfigurationError as error:
                failures.append(error)

        async with anyio.create_task_group() as starting:
            for connection in self._connections.values():
                starting.start_soon(open_one, connection)
        if failures:
            raise failures[0]
        for connection in self._connections.values():
            await self._sync_tools(connection)

    def _new_connections(self) -> dict[str, Connection]:
        return {
            record.name: Connection(record, self._changed(record.name)) for record in self._records
        }

    def _changed(self, server: str) -> Any:
        async def refresh() -> None:
            """Coalesce change notices: at most one listing in flight and one pending."""
            if server in self._refreshing:
                self._pending.add(server)
                return
            self._refreshing.add(server)
            self._listings.start_soon(self._refresh_quietly, self._connections[server])

        return refresh

    async def _refresh_quietly(self, connection: Connection) -> None:
        """Refresh after change notices; on failure keep the tools as they were."""
        server = connection.options.name
        try:
            while True:
                self._pending.discard(server)
                try:
                    await self._sync_tools(connection)
                except Exception as error:  # a bad listing must not take the other servers down
                    self.refresh_error = error
                if server not in self._pending:
                    return
        finally:
            self._refreshing.discard(server)

    async def _sync_tools(self, connection: Connection) -> None:
        """Make the registry hold exactly the server's current tools."""
        options = connection.options
        listed = await connection.list_tools(self._task_group)
        wanted = [t for t in listed if options.tools is None or t.name in options.tools]
        built = [
            build_tool(
                tool,
                options,
                self._handler(connection, tool),
                floor=self._offered.get(f"{options.prefix}{tool.name}"),
            )
            for tool in wanted
        ]
        owned = self._owned[options.name]
        for tool in built:
            if tool.name in self and tool.name not in owned:
                raise ConfigurationError(
                    f"MCP tool {tool.name!r} of server {options.name!r} collides with another "
                    "tool; give the server a prefix"
                )
        with self._mutation:  # agents read the registry from other threads
            for name in owned - {tool.name for tool in built}:
                self.remove(name)
            for tool in built:
                self.register(tool, replace=True)
                self._offered[tool.name] = tool.spec
            self._owned[options.name] = {tool.name for tool in built}

    def _handler(self, connection: Connection, tool: mcp_types.Tool) -> Any:
        key_argument = connection.options.idempotency_argument
        properties = tool.input_schema.get("properties") or {}
        takes_key = key_argument is not None and key_argument in properties

        async def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
            if takes_key and context.idempotency_key is not None:
                arguments = {**arguments, str(key_argument): context.idempotency_key}
            with self._calling:  # the call may reach the server before this thread goes on
                portal = self._running_portal()
                future = portal.start_task_soon(
                    self._call, connection, tool.name, arguments, context
                )
                self._calls.add(future)  # close() lets it end first
            future.add_done_callback(self._calls.discard)
            return await asyncio.wrap_future(future)

        return handler

    async def _call(
        self, connection: Connection, name: str, arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        client = await connection.ensure(self._task_group)  # not sent yet: failures are transient
        timeout = connection.options.call_timeout_s
        left = context.seconds_left()
        if left is not None:
            timeout = max(min(timeout, left), 0.001)
        meta: Any = (
            {IDEMPOTENCY_META_KEY: context.idempotency_key} if context.idempotency_key else None
        )
        registry_name = context.tool
        spec = self._offered[registry_name]  # the strictest this tool was ever offered as
        write, again = spec.effect == "write", spec.idempotent
        try:
            with anyio.fail_after(timeout):  # abandoning it sends notifications/cancelled
                result = await client.call_tool(name, arguments, meta=meta)
        except MCPError as error:
            if error.code in _REFUSALS or (error.code != _CONNECTION_CLOSED and not write):
                return _refused(context, error)  # the server answered; a read changed nothing
            if error.code == _CONNECTION_CLOSED:
                connection.dropped()
            return _lost(context, name, error, write=write, again=again)
        except TimeoutError as error:  # an OSError, but the connection is fine: only this
            # request was abandoned (the SDK sends notifications/cancelled for it)
            return _timed_out(context, name, timeout, write=write, again=again, cause=error)
        except _TRANSPORT_FAILURES as error:
            connection.dropped()
            return _lost(context, name, error, write=write, again=again)
        return call_result(
            result,
            call_id=context.call_id,
            tool=registry_name,
            max_bytes=connection.options.max_result_bytes,
        )

    def _running_portal(self) -> BlockingPortal:
        if self._portal is None:
            raise ConfigurationError("the MCP toolset is not started: use `with` or start()")
        return self._portal

    def __repr__(self) -> str:
        return f"MCPToolset(servers={list(self._connections)!r}, tools={list(self.names())!r})"


def _with_overrides(
    server: StdioServer | HttpServer | InProcessServer, effects: Mapping[str, Effect]
) -> Any:
    prefix = server.prefix
    mine = {
        name[len(prefix) :]: effect for name, effect in effects.items() if name.startswith(prefix)
    }
    if not mine:
        return server
    return server.model_copy(update={"effects": {**server.effects, **mine}})


def _refused(context: ToolContext, error: MCPError) -> Receipt:
    return Receipt(
        call_id=context.call_id,
        tool=context.tool,
        status="error",
        effect="none",
        message=f"the MCP server refused the call ({error.code}): {error.message}"[:2000],
    )


def _timed_out(
    context: ToolContext,
    name: str,
    timeout: float,
    *,
    write: bool,
    again: bool,
    cause: BaseException,
) -> Receipt:
    """A call abandoned at its timeout: a write's effect is unknown; see `_lost` for reads."""
    error = TimeoutError(f"MCP call {name!r} timed out after {timeout:g}s")
    error.__cause__ = cause
    lost: Receipt = _lost(context, name, error, write=write, again=again)
    return lost


def _lost(
    context: ToolContext, name: str, error: BaseException, *, write: bool, again: bool
) -> Receipt:
    """A call that failed after it was sent.

    A write's effect is unknown (raised, so the runtime records it so); an idempotent read is
    retried (a transient failure); any other read is not sent again, since a server that is not
    trusted may have done something: its receipt is an error the model sees.
    """
    message = f"MCP call {name!r} failed after it was sent: {error}"
    if write:
        raise ConnectionError(message) from error
    if again:
        raise TransientToolError(message) from error
    return Receipt(
        call_id=context.call_id,
        tool=context.tool,
        status="error",
        effect="none",
        message=f"{message}; not sent again (the tool is not declared idempotent)"[:2000],
    )
