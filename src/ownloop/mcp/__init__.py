"""MCP: tools from any Model Context Protocol server under ownloop's gateway, and back.

`MCPToolset` turns the tools of MCP servers (`StdioServer` processes ownloop starts, `HttpServer`
endpoints over Streamable HTTP) into registry tools, so policy, approvals, receipts, the write
journal, redaction and the trace apply to them exactly as to Python tools. `RegistryServer` does
the reverse: it exposes a `ToolRegistry` to any MCP client, every call going through the gateway
and a store. Only this package imports the ``mcp`` SDK (``pip install 'ownloop[mcp]'``).
"""

from ownloop.exceptions import ConfigurationError as _ConfigurationError

try:
    import mcp as _mcp  # noqa: F401 - only to give a clear error when the extra is missing
except ImportError as error:  # pragma: no cover - run in a subprocess (test_newcomer_hints.py)
    raise _ConfigurationError(
        f"ownloop.mcp needs the MCP SDK: pip install 'ownloop[mcp]' ({error})"
    ) from error

from ownloop.mcp._config import (
    DEFAULT_IDEMPOTENCY_ARGUMENT,
    HttpServer,
    InProcessServer,
    ServerOptions,
    StdioServer,
)
from ownloop.mcp._serve import RegistryServer, served_call_key
from ownloop.mcp._toolset import IDEMPOTENCY_META_KEY, MCPToolset

__all__ = [
    "DEFAULT_IDEMPOTENCY_ARGUMENT",
    "IDEMPOTENCY_META_KEY",
    "HttpServer",
    "InProcessServer",
    "MCPToolset",
    "RegistryServer",
    "ServerOptions",
    "StdioServer",
    "served_call_key",
]
