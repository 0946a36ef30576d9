"""Serve a `ToolRegistry` over MCP, every call going through the gateway and a store.

Each ``tools/call`` becomes one stored ownloop run whose only proposal is that call: the policy
decides with the actor the server was configured with (never anything the client sends), an
approval is asked when the policy or the tool requires one, writes are journaled, and the receipt,
the trace and the outcome are kept in the store. A call that needs an approval answers with a
pending result naming the run and the request; once someone decides with ``ownloop approve RUN
REQUEST``, the same call (same tool, same arguments) made again resumes exactly that run, which
consumes the approval: it admits that call once. Invalid calls are answered without a run.

Served calls happen at most once per thing the client can repeat (`served_call_key`): its
idempotency key in ``_meta``, else the JSON-RPC request within its session. A served call's run id
is derived from that key (so is the idempotency key its tool receives), so a repeat finds the run
in the store by id and is answered from it, never executed again: a finished run's answer is
given again, a run still in flight is awaited (bounded), a run interrupted elsewhere is reported
unknown. A run is never cancelled with the client's request: once started it finishes and is
stored. Calls without a client key are also found by what the client sent (actor, tool, its
arguments in the canonical encoding of `ownloop.identity`): run ids ``mcp-<identity>-<n>`` for the
n-th such call, the latest found by a binary search over ids, so a paused call is resumed and an
unknown one answered, however many other runs the store holds. A repeat is matched by that
request, recorded once as its run's task, never by validating it again: a deploy that changes the
tool's schema or defaults, or another hash seed, cannot make a recorded call look new. The run
validates the call once and journals its identity, which a resume reads back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Mapping
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
from ownloop.exceptions import ConfigurationError, RunLeased, StaleCheckpoint
from ownloop.identity import canonical_text, decode, encode
from ownloop.mcp._toolset import IDEMPOTENCY_META_KEY
from ownloop.policy import Policy
from ownloop.store import RunStore, StoredRun
from ownloop.tools import ToolRegistry, ToolRejection

__all__ = ["RegistryServer", "served_call_key"]

_CALL_ID = "mcp-call"
_MAX_KEY_CHARS = 256


def served_call_key(meta: Mapping[str, Any] | None, session: str, request_id: object) -> str:
    """What makes a served call the same call again: something the client can repeat.

    Args:
        meta: The request's ``_meta``; its `IDEMPOTENCY_META_KEY` (a non-empty string of at most
            256 characters) is the client's own key for the call, valid across sessions.
        session: An identifier of the client's session, unique to it.
        request_id: The JSON-RPC request id, which the client may replay within its session.

    Returns:
        ``key:<the client's key>``, else ``request:<session>:<request id>``.
    """
    given = (meta or {}).get(IDEMPOTENCY_META_KEY)
    if isinstance(given, str) and 0 < len(given) <= _MAX_KEY_CHARS:
        return f"key:{given}"
    return f"request:{session}:{json.dumps(request_id, default=str)}"


class _ServedCall:
    """The model port of a served call: propose the client's call once, then finish."""

    model_name = "mcp-client"

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if any(isinstance(message, ToolMessage) for message in request.messages):
            return ModelResponse(final_output="served", model=self.model_name)
        task = next(m for m in request.messages if isinstance(m, UserMessage))
        wanted = decode(json.loads(task.content))
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
        repeat_wait_s: How long a repeat of a call still in flight here waits for its answer
            before it is told the call is still being performed.
        remembered_requests: How many of the latest JSON-RPC requests without a client key
            this server remembers, to answer their replays from their runs (the oldest are
            forgotten first; a forgotten one is then known only by its identity).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        store: RunStore,
        actor: Actor | None = None,
        policy: Policy | None = None,
        name: str = "ownloop",
        repeat_wait_s: float = 30.0,
        remembered_requests: int = 10_000,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise ConfigurationError(f"expected a ToolRegistry, got {type(registry).__name__}")
        self.registry = registry
        self.store = store
        self.actor = actor
        self.name = name
        self.repeat_wait_s = repeat_wait_s
        self.remembered_requests = remembered_requests
        self._inflight: dict[str, asyncio.Future[RunResult]] = {}
        self._deciding = asyncio.Lock()
        self._requests: OrderedDict[str, str] = OrderedDict()  # request identity -> run id
        self._sessions: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._agent = Agent(
            _ServedCall(),
            registry,
            policy=policy,
            store=store,
            limits=Limits(max_steps=3, max_tool_calls=1),
            # The client's call is the model's proposal, traced: the agent's redactor hides the
            # values under every name in ToolSpec.sensitive (Sensitive() and pydantic secrets).
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

    async def call(
        self, name: str, arguments: dict[str, Any] | None, *, key: str | None = None
    ) -> types.CallToolResult:
        """Serve one call at most once per key: answer a repeat from its run, or start one.

        Args:
            name: The tool.
            arguments: The client's arguments (untrusted).
            key: What the client can repeat (`served_call_key`); ``None`` for a call known only
                by its identity (actor, tool, arguments).

        Returns:
            The tool's result; ``isError`` for refusals, errors, unknown effects and calls
            waiting for an approval (whose structured content names the run and request).
        """
        offered = sorted(spec.name for spec in self._agent.offered_tools(self.actor))
        if name not in offered:  # never name tools this caller may not call
            return _error(
                f"Unknown tool {name!r}. Available tools: {', '.join(offered) or 'none'}.",
                {"status": "rejected", "code": "unknown_tool"},
            )
        call = ToolCall(id=_CALL_ID, name=name, arguments=dict(arguments or {}))
        # What the client sent, in the canonical encoding: the same text in every process, under
        # every hash seed and every release of the tool. The run validates it once and journals
        # the call's identity; a repeat is matched by this text, never by a validation redone.
        task = canonical_text(encode({"tool": name, "arguments": call.arguments}))
        tool = self.registry.get(name)
        write = tool is not None and tool.spec.effect == "write"
        # Deciding only reads the store; a run held elsewhere is found out by the run itself.
        async with self._deciding:  # calls decide one at a time (a few lookups by id)
            running = await self._decide(self._call_key(task), task, key, call, write=write)
        if isinstance(running, types.CallToolResult):
            return running
        future, repeat = running
        return await self._await(future, self.repeat_wait_s if repeat else None)

    async def _decide(
        self, identity: str, task: str, key: str | None, call: ToolCall, *, write: bool
    ) -> types.CallToolResult | tuple[asyncio.Future[RunResult], bool]:
        """Find the run this call already has (a repeat), or validate it and start its own.

        Without a client key, the latest call of the same identity is this one when it waits
        for an approval, or (for a write) when it is in flight or its effect is unknown.
        """
        run_id: str | None
        if key is None:
            run_id = None
        elif key.startswith("key:"):
            run_id = f"mcp-k-{self._call_key(key)}"
        else:
            run_id = self._requests.get(key)
        stored: StoredRun | None
        if run_id is not None:
            stored = await self.store.get(run_id)
        else:  # known only by its identity: the latest such call, or the next
            latest = await self._latest(identity)
            if latest is not None and _still_open(latest, write=write):
                run_id, stored = latest.snapshot.run_id, latest
            else:
                run_id, stored = f"mcp-{identity}-{_generation(latest) + 1}", None
        if run_id not in self._inflight and stored is None:
            checked = self.registry.validate(call)  # a new call: an invalid one gets no run
            if isinstance(checked, ToolRejection):
                return _error(checked.message, {"status": "rejected", "code": checked.code})
        if key is not None and not key.startswith("key:"):
            self._remember(key, run_id)
        if run_id in self._inflight:
            return self._inflight[run_id], True
        if stored is not None:
            return await self._from_stored(stored, task)
        return self._start(run_id, self._agent.run(task, actor=self.actor, run_id=run_id)), False

    async def _from_stored(
        self, stored: StoredRun, task: str
    ) -> types.CallToolResult | tuple[asyncio.Future[RunResult], bool]:
        snapshot = stored.snapshot
        if snapshot.task != task:
            return _error(
                "This idempotency key was used for a different call; use a new key.",
                {"status": "rejected", "code": "key_reused", "run_id": snapshot.run_id},
            )
        if snapshot.state == "paused":
            return self._start(snapshot.run_id, self._agent.resume(snapshot.run_id)), False
        if snapshot.state == "running" or snapshot.result is None:
            return _error(
                f"This call was started before (run {snapshot.run_id}) and did not finish "
                "here: its outcome is unknown. It will not be performed again.",
                {"status": "unknown", "run_id": snapshot.run_id},
            )
        return _answer(snapshot.result)

    def _start(self, run_id: str, work: Any) -> asyncio.Future[RunResult]:
        """Run ``work`` in a task of its own: a client cancelling its request cannot stop it."""
        future: asyncio.Future[RunResult] = asyncio.ensure_future(work)
        self._inflight[run_id] = future
        future.add_done_callback(lambda _: self._inflight.pop(run_id))  # set just above
        return future

    async def _await(
        self, running: asyncio.Future[RunResult], bound: float | None
    ) -> types.CallToolResult:
        """Wait for a run (a repeat waits at most ``bound``); cancelling this leaves it going."""
        try:
            result = await asyncio.wait_for(asyncio.shield(running), bound)
        except TimeoutError:
            return _error("This call is still being performed; ask again later.")
        except (RunLeased, StaleCheckpoint):
            return _error("this call is being served already; try again shortly")
        except ConfigurationError as error:  # e.g. paused under tools or a policy since changed
            return _error(f"The call was not performed: {error}", {"status": "not_performed"})
        return _answer(result)

    async def _latest(self, identity: str) -> StoredRun | None:
        """The latest run of calls with this identity, found in O(log n) lookups by id."""

        async def get(generation: int) -> StoredRun | None:
            return await self.store.get(f"mcp-{identity}-{generation}")

        if await get(1) is None:
            return None
        high = 2
        while await get(high) is not None:  # generations are 1..n: find a power of two above n
            high = high * 2
        # n is in [high // 2, high): add its lower binary digits, largest first. A halving step
        # ends the search whatever the lookups answer (no mutant of it loops for ever, either).
        latest, step = high // 2, high // 4
        while step:
            if await get(latest + step) is not None:
                latest = latest + step
            step = step // 2
        return await get(latest)

    def _remember(self, request: str, run_id: str) -> None:
        self._requests[request] = run_id
        self._requests.move_to_end(request)
        while len(self._requests) > self.remembered_requests:
            self._requests.popitem(last=False)

    def _session(self, session: Any) -> str:
        # The SDK builds a ServerSession for each request: what lasts as long as the client's
        # session is the connection it holds (the SDK offers no public way to reach it).
        connection = getattr(session, "_connection", session)
        if connection not in self._sessions:
            self._sessions[connection] = uuid.uuid4().hex
        return self._sessions[connection]

    def server(self) -> Server[Any]:
        """The MCP SDK's low-level server object for this registry."""

        async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools())

        async def call_tool(
            context: Any, params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            key = served_call_key(params.meta, self._session(context.session), context.request_id)
            return await self.call(params.name, params.arguments, key=key)

        return Server(self.name, on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve_stdio(self) -> None:
        """Serve over this process's stdin and stdout until the client disconnects."""
        server = self.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    def run_stdio(self) -> None:
        """Serve over stdio (blocking)."""
        anyio.run(self.serve_stdio)

    def _call_key(self, text: str) -> str:
        actor = self.actor.model_dump_json() if self.actor is not None else ""
        return hashlib.sha256(f"{actor}:{text}".encode()).hexdigest()[:24]

    def __repr__(self) -> str:
        return f"RegistryServer(name={self.name!r}, tools={list(self.registry.names())!r})"


def _generation(stored: StoredRun | None) -> int:
    return 0 if stored is None else int(stored.snapshot.run_id.rsplit("-", 1)[1])


def _still_open(stored: StoredRun, *, write: bool) -> bool:
    """Whether a repeat belongs to this run: waiting for approval; a write in flight or unknown."""
    snapshot = stored.snapshot
    if snapshot.state == "paused":
        return True
    if not write:
        return False
    if snapshot.state == "running" or snapshot.result is None:
        return True
    return snapshot.result.status is RunStatus.UNRESOLVED


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


def _error(message: str, facts: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content=facts,
        is_error=True,
    )
