"""Serve a `ToolRegistry` over MCP, every call going through the gateway and a store.

Each ``tools/call`` becomes one stored ownloop run whose only proposal is that call: the policy
decides with the actor the server was configured with (never anything the client sends), an
approval is asked when the policy or the tool requires one, writes are journaled, and the receipt,
the trace and the outcome are kept in the store. A call that needs an approval answers with a
pending result naming the run and the request; once someone decides with ``ownloop approve RUN
REQUEST``, the same call (same tool, same arguments) made again resumes exactly that run, which
consumes the approval: it admits that call once. Invalid calls are answered without a run.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from ownloop.agent import Agent
from ownloop.contracts import (
    Actor,
    Limits,
    ModelRequest,
    ModelResponse,
    RunResult,
    RunStatus,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ownloop.exceptions import ConfigurationError, RunLeased
from ownloop.policy import Policy
from ownloop.store import RunStore
from ownloop.tools import ToolRegistry, ToolRejection

__all__ = ["RegistryServer"]

_CALL_ID = "mcp-call"


class _ServedCall:
    """The model port of a served call: propose the client's call once, then finish."""

    model_name = "mcp-client"

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if any(isinstance(message, ToolMessage) for message in request.messages):
            return ModelResponse(final_output="served", model=self.model_name)
        task = next(m for m in request.messages if isinstance(m, UserMessage))
        wanted = json.loads(task.content)
        call = ToolCall(id=_CALL_ID, name=wanted["tool"], arguments=wanted["arguments"])
        return ModelResponse(tool_calls=(call,), model=self.model_name)


class RegistryServer:
    """An MCP server over a registry whose calls are authorized, approved, journaled and traced.

    Args:
        registry: The tools to serve.
        store: Where every call's run, journal, approvals and trace are kept.
        actor: Who every call acts for (from the server's configuration, never the client).
        policy: Who may call what; by default reads are allowed and writes denied.
        name: The server's name, as clients see it.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        store: RunStore,
        actor: Actor | None = None,
        policy: Policy | None = None,
        name: str = "ownloop",
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise ConfigurationError(f"expected a ToolRegistry, got {type(registry).__name__}")
        self.registry = registry
        self.store = store
        self.actor = actor
        self.name = name
        self._agent = Agent(
            _ServedCall(),
            registry,
            policy=policy,
            store=store,
            limits=Limits(max_steps=3, max_tool_calls=1),
        )

    def tools(self) -> list[types.Tool]:
        """The tools this actor may call, as MCP tools (writes are not read-only)."""
        return [
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.parameters,
                annotations=types.ToolAnnotations(read_only_hint=spec.effect == "read"),
            )
            for spec in self._agent.offered_tools(self.actor)
        ]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Serve one call: resume the run waiting for exactly this call, or start one.

        Args:
            name: The tool.
            arguments: The client's arguments (untrusted).

        Returns:
            The tool's result; ``isError`` for refusals, errors, unknown effects and calls
            waiting for an approval (whose structured content names the run and request).
        """
        checked = self.registry.validate(
            ToolCall(id=_CALL_ID, name=name, arguments=dict(arguments or {}))
        )
        if isinstance(checked, ToolRejection):
            return _error(checked.message, {"status": "rejected", "code": checked.code})
        prefix = f"mcp-{self._call_key(checked.digest)}-"
        waiting = await self._waiting_run(prefix)
        try:
            if waiting is not None:
                result = await self._agent.resume(waiting)
            else:
                task = json.dumps({"tool": name, "arguments": checked.canonical})
                run_id = f"{prefix}{uuid.uuid4().hex[:12]}"
                result = await self._agent.run(task, actor=self.actor, run_id=run_id)
        except RunLeased:
            return _error("this call is being served already; try again shortly", {})
        return _answer(result)

    def server(self) -> Server[Any]:
        """The MCP SDK's low-level server object for this registry."""

        async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools())

        async def call_tool(
            context: Any, params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await self.call(params.name, params.arguments)

        return Server(self.name, on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve_stdio(self) -> None:
        """Serve over this process's stdin and stdout until the client disconnects."""
        server = self.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    def run_stdio(self) -> None:
        """Serve over stdio (blocking)."""
        anyio.run(self.serve_stdio)

    def _call_key(self, digest: str) -> str:
        actor = self.actor.model_dump_json() if self.actor is not None else ""
        return hashlib.sha256(f"{actor}:{digest}".encode()).hexdigest()[:24]

    async def _waiting_run(self, prefix: str) -> str | None:
        paused = await self.store.list_runs(state="paused", limit=1000)
        matching = sorted(run.run_id for run in paused if run.run_id.startswith(prefix))
        return matching[0] if matching else None

    def __repr__(self) -> str:
        return f"RegistryServer(name={self.name!r}, tools={list(self.registry.names())!r})"


def _answer(result: RunResult) -> types.CallToolResult:
    """Turn the run of one served call into the client's result."""
    facts: dict[str, Any] = {"run_id": result.run_id, "status": result.status.value}
    if result.status is RunStatus.PAUSED and result.approval_requests:
        request = result.approval_requests[0]
        facts.update(status="approval_required", request_id=request.id, reason=request.reason)
        return _error(
            f"This call needs an approval: run {result.run_id}, request {request.id} "
            f"({request.reason}). After `ownloop approve {result.run_id} {request.id}`, make "
            "the same call again to perform it once.",
            facts,
        )
    receipt = result.receipts[-1] if result.receipts else None
    if receipt is None:
        facts["stop_reason"] = result.stop_reason.value
        return _error(f"The call was not performed: {result.detail}", facts)
    facts.update(receipt_status=receipt.status, effect=receipt.effect)
    if receipt.status == "ok":
        data = receipt.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        structured = data if isinstance(data, dict) else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )
    if receipt.status == "unknown":
        return _error(
            f"The outcome of this write is unknown (run {result.run_id}); it is recorded as a "
            "pending operation. Do not repeat it.",
            facts,
        )
    return _error(receipt.message or f"The call failed: {result.detail}", facts)


def _error(message: str, facts: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content=facts or None,
        is_error=True,
    )
