"""How to reach an MCP server and how its tools enter the registry: plain, validated records.

A server record says where the server is (a command to start over stdio, or a Streamable HTTP
URL), how long its start-up and each call may take, how many reconnects it may use, and what the
application decides about its tools: a name prefix, which tools to take, effect overrides,
approval, reconcile lookups and the argument that carries an idempotency key. Nothing here does
I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ownloop.contracts import Effect

__all__ = [
    "DEFAULT_IDEMPOTENCY_ARGUMENT",
    "HttpServer",
    "InProcessServer",
    "ServerOptions",
    "StdioServer",
]

DEFAULT_IDEMPOTENCY_ARGUMENT = "idempotency_key"
"""The input property that, when a tool declares it, receives the call's idempotency key."""

_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,32}$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HIDDEN = "***"


class ServerOptions(BaseModel):
    """What every MCP server record holds, whatever its transport.

    Attributes:
        name: The server's name in messages, errors and ``stderr_tail`` (not sent anywhere).
        prefix: Put before every tool name in the registry (``"git_"`` makes ``git_status``
            ``git_git_status``); use distinct prefixes for servers whose tool names collide.
        tools: Only these tools (the server's own names) are taken; ``None`` takes all.
        effects: Effect overrides by the server's tool name (the operator's declaration); they
            win over anything the server says.
        trust_annotations: Whether the server's annotations are believed. Off (the default, as
            the MCP specification asks of clients): every tool not declared in ``effects`` is a
            ``write``, and none is idempotent unless declared in ``idempotent``. On:
            ``readOnlyHint: true`` means ``read`` and ``idempotentHint: true`` idempotent.
        idempotent: Tools (the server's names) that may be sent again after a failure once
            they were sent: reads from this server are retried after a lost answer only when
            listed here (or hinted idempotent by a trusted server).
        approval_required: Tools (the server's names) whose every call needs an exact approval.
        reconcile: For write tools, the lookup that settles an unknown effect (by server name):
            a `ownloop.tools.Reconcile`.
        idempotency_argument: A tool whose input schema declares this property receives the
            call's idempotency key there (the model never sees or fills it) and is marked
            idempotent. ``None`` turns this off.
        startup_timeout_s: Seconds to connect and initialize (start-up of a stdio server), and
            to wait for the session to end when the toolset closes.
        call_timeout_s: Seconds one call may take, unless the deadline comes first.
        max_reconnects: How many times a dropped connection (end of stream, broken pipe, the
            process gone, an HTTP connection error) is re-established over the toolset's
            lifetime; past that, calls fail. Timeouts do not count: they cancel their request.
        max_result_bytes: A call's result larger than this (UTF-8 JSON) is cut to this size
            before it is stored, and the cut is recorded in the result.
        max_schema_depth: The deepest nesting a tool's input schema may have (at most 64:
            deeper, the JSON Schema validator can run out of Python's recursion).
        max_schema_bytes: The largest a tool's input schema may be (UTF-8 JSON).
        pattern_timeout_s: Seconds all the schema patterns (``pattern``,
            ``patternProperties``) of one call may take together, in a worker thread just
            before it is sent, and never past the run's deadline; a call whose patterns take
            longer is refused unsent.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    prefix: str = ""
    tools: tuple[str, ...] | None = None
    effects: Mapping[str, Effect] = Field(default_factory=dict)
    trust_annotations: bool = False
    idempotent: tuple[str, ...] = ()
    approval_required: tuple[str, ...] = ()
    reconcile: Mapping[str, Callable[..., Any]] = Field(default_factory=dict)
    idempotency_argument: str | None = DEFAULT_IDEMPOTENCY_ARGUMENT
    startup_timeout_s: float = Field(default=30.0, gt=0)
    call_timeout_s: float = Field(default=60.0, gt=0)
    max_reconnects: int = Field(default=3, ge=0)
    max_result_bytes: int = Field(default=1_000_000, ge=1024)
    max_schema_depth: int = Field(default=64, ge=2, le=64)
    max_schema_bytes: int = Field(default=1_000_000, ge=1024)
    pattern_timeout_s: float = Field(default=0.1, gt=0, le=60)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """Every field except secrets: header and environment values, URL credentials."""
        for field, value in super().__repr_args__():
            if field in ("headers", "env") and isinstance(value, Mapping):
                yield field, dict.fromkeys(value, _HIDDEN)
            elif field == "url" and isinstance(value, str):
                yield field, _without_credentials(value)
            else:
                yield field, value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"must match {_NAME.pattern}")
        return value

    @field_validator("prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if not _PREFIX.fullmatch(value):
            raise ValueError(f"must match {_PREFIX.pattern}")
        return value


class StdioServer(ServerOptions):
    """An MCP server that ownloop starts as a child process and talks to over stdin/stdout.

    The process is started on connect and stopped on close; its stderr goes to a temporary file
    whose tail (`MCPToolset.stderr_tail`) explains a failed start-up.

    Attributes:
        command: The executable.
        args: Its arguments.
        env: The environment (``None``: the MCP SDK's safe default set of variables).
        cwd: The working directory (``None``: the current one).
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None


class HttpServer(ServerOptions):
    """An MCP server already running, reached over Streamable HTTP.

    Attributes:
        url: The MCP endpoint, for example ``http://127.0.0.1:8000/mcp``.
        headers: Sent with every request (an ``Authorization`` header, for example).
    """

    url: str
    headers: Mapping[str, str] = Field(default_factory=dict)


class InProcessServer(ServerOptions):
    """An MCP server object in this process, reached over the SDK's in-memory transport.

    For servers an application embeds, and for tests: the same protocol, no process.

    Attributes:
        server: The SDK's server object (``mcp.server.lowlevel.Server`` or ``MCPServer``).
    """

    server: Any


def _without_credentials(url: str) -> str:
    """The URL with its user, password and query values hidden (tokens travel there too)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return _HIDDEN
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        netloc = f"{_HIDDEN}@{host}" + (f":{port}" if port is not None else "")
    query = "&".join(
        f"{pair.split('=', 1)[0]}={_HIDDEN}" if "=" in pair else pair
        for pair in parts.query.split("&")
        if pair
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
