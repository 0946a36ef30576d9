"""A small MCP server (the SDK's low-level Server) for behaviours real servers show only by chance.

Tools: ``free_form`` (a schema strict mode cannot express), ``keyed_write`` (declares
``idempotency_key``; records every call in a ledger file), ``slow`` (sleeps), ``die`` (exits the
process mid-call, after appending to the ledger), ``grow`` (adds the tool ``extra`` and announces
``tools/list_changed``), ``boom`` (answers a JSON-RPC error), ``half_write`` (records, then
answers an internal error), ``slow_write`` (records its start, sleeps, records its end). Run it
with ``--ledger PATH`` over stdio, or with ``--http PORT`` over Streamable HTTP.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server

_LEDGER = {"path": ""}
_EXTRA = {"on": False}


def _tool(name: str, schema: dict[str, Any], *, read_only: bool | None = None) -> types.Tool:
    annotations = None if read_only is None else types.ToolAnnotations(read_only_hint=read_only)
    return types.Tool(
        name=name, description=f"fixture {name}", input_schema=schema, annotations=annotations
    )


def _tools() -> list[types.Tool]:
    tools = [
        _tool(
            "free_form",
            {"type": "object", "properties": {"labels": {"type": "object"}}},
            read_only=True,
        ),
        _tool(
            "keyed_write",
            {
                "type": "object",
                "properties": {
                    "item": {"type": "string"},
                    "idempotency_key": {"type": "string"},
                    "note": {"type": "string", "default": "none"},
                },
                "required": ["item", "idempotency_key"],
            },
            read_only=False,
        ),
        _tool("slow", {"type": "object", "properties": {"seconds": {}}}, read_only=True),
        _tool("die", {"type": "object", "properties": {}}),
        _tool("grow", {"type": "object", "properties": {}}, read_only=True),
        _tool("boom", {"type": "object", "properties": {}}, read_only=True),
        _tool("half_write", {"type": "object", "properties": {}}),
        _tool("slow_write", {"type": "object", "properties": {"seconds": {}}}),
    ]
    if _EXTRA["on"]:
        tools.append(_tool("extra", {"type": "object", "properties": {}}, read_only=True))
    return tools


def _record(entry: dict[str, Any]) -> None:
    with open(_LEDGER["path"], "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(entry) + "\n")


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    """List the fixture's tools (``extra`` once ``grow`` ran)."""
    return types.ListToolsResult(tools=_tools())


def _text(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    """Perform one fixture tool."""
    arguments = params.arguments or {}
    meta = dict(params.meta or {}) if params.meta is not None else {}
    if params.name == "free_form":
        return _text({"labels": arguments.get("labels")})
    if params.name == "keyed_write":
        _record({"tool": "keyed_write", "arguments": arguments, "meta": meta})
        return _text({"stored": arguments["item"], "key": arguments["idempotency_key"]})
    if params.name == "slow":
        await anyio.sleep(float(arguments.get("seconds", 5)))
        return _text({"slept": True})
    if params.name == "die":
        _record({"tool": "die"})
        os._exit(7)
    if params.name == "grow":
        _EXTRA["on"] = True
        await ctx.session.send_tool_list_changed()
        return _text({"grown": True})
    if params.name == "boom":
        raise MCPError(code=-32602, message="boom refuses")
    if params.name == "half_write":
        _record({"tool": "half_write"})
        raise MCPError(code=-32603, message="failed half way")
    if params.name == "slow_write":
        _record({"tool": "slow_write", "state": "started"})
        await anyio.sleep(float(arguments.get("seconds", 5)))
        _record({"tool": "slow_write", "state": "finished"})
        return _text({"written": True})
    if params.name == "extra" and _EXTRA["on"]:
        return _text({"extra": True})
    raise MCPError(code=-32602, message=f"unknown tool {params.name}")


def build() -> Server[Any]:
    """The server object."""
    return Server("ownloop-fixture", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    """Serve over stdin/stdout, announcing tool-list changes."""
    server = build()
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def main() -> None:
    """Parse the command line and serve."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--http", type=int)
    arguments = parser.parse_args()
    _LEDGER["path"] = arguments.ledger
    if arguments.http is None:
        anyio.run(serve_stdio)
        return
    import uvicorn

    app = build().streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=arguments.http, log_level="warning")


if __name__ == "__main__":
    sys.exit(main())
