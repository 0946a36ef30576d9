"""Worker processes for the Temporal tests: real Temporal workers on the session's dev server.

Each worker is a real process forked from the ``forkserver`` of ``tests/durable_worker.py``. It
connects a client, builds ``TemporalRunner.worker()`` for its spec's task queue, writes a
``ready-<name>`` file once it polls and serves until the test writes ``stop`` (then it shuts the
worker down) or SIGKILLs it. The store is one SQLite file every process of a test shares; the
write tools record every effect in the SQLite ledger of ``tests/durable_worker.py``. A spec may
name a run and a kill point inside that run's tools (``read``, ``write:before_commit``,
``write:after_commit``); the worker stops there and waits to be killed.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
import uuid
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from ownloop import Agent
from ownloop.contracts import AssistantMessage, Limits, ModelRequest, ModelResponse
from ownloop.policy import allow_writes
from ownloop.store import SqliteRunStore
from ownloop.testing import FunctionModel
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry
from tests.dbos_worker import _halt, _record
from tests.durable_worker import _CONTEXT, SCRIPTS, ledger_rows


@dataclass(frozen=True)
class Spec:
    """One worker (or one process that starts runs or approves).

    Attributes:
        directory: Where the store, the ledger, markers and reports live.
        address: The Temporal server.
        queue: The task queue.
        name: The worker's name (its ready file).
        kill_run: The run whose tools halt at ``kill_at``.
        kill_at: Where to halt.
        reconcile: Whether the export tool declares a lookup reading the ledger.
        version: The runner's workflow-code version.
        model_latency_s: How long each model call takes.
        task_timeout_s: The workflow task timeout (how soon a dead worker's run moves).
        step_timeout_s: The longest one step may take.
    """

    directory: str
    address: str
    queue: str
    name: str = "w1"
    kill_run: str | None = None
    kill_at: str | None = None
    reconcile: bool = False
    version: str = "v1"
    model_latency_s: float = 0.0
    task_timeout_s: float = 10.0
    step_timeout_s: float = 60.0

    def path(self, name: str) -> Path:
        """Return a file of the spec's directory."""
        return Path(self.directory) / name


def build_registry(spec: Spec) -> ToolRegistry:
    """Return the tools: a read, a journaled write and a write needing approval."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search_orders(query: str, ctx: ToolContext) -> list[dict[str, str]]:
        """Find orders.

        Args:
            query: Keywords.
            ctx: Injected by the runtime.
        """
        if ctx.run_id == spec.kill_run and spec.kill_at == "read":
            _halt(spec, "read")
        return [{"id": f"order-{query}", "title": query}]

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        keys = {key for key, _ in ledger_rows(spec.directory)}
        return (
            Confirmed({"done": arguments["name"]}) if ctx.idempotency_key in keys else NotApplied()
        )

    @registry.tool(effect="write", reconcile=lookup if spec.reconcile else None)
    def export(name: str, ctx: ToolContext) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        return _record(spec, f"export:{name}", ctx)

    @registry.tool(effect="write", requires_approval=True)
    def refund(order_id: str, amount: int, ctx: ToolContext) -> dict[str, str]:
        """Refund an order.

        Args:
            order_id: The order.
            amount: Cents.
            ctx: Injected by the runtime.
        """
        return _record(spec, f"refund:{order_id}:{amount}", ctx)

    return registry


def make_agent(
    spec: Spec,
    scenario: str,
    latency_s: float | None = None,
    deadline_s: float | None = None,
    store: SqliteRunStore | None = None,
) -> Agent:
    """Return an agent playing ``scenario`` (its model answers from the conversation alone)."""
    latency = spec.model_latency_s if latency_s is None else latency_s

    async def respond(request: ModelRequest) -> ModelResponse:
        if latency:
            await asyncio.sleep(latency)
        played = sum(isinstance(message, AssistantMessage) for message in request.messages)
        return SCRIPTS[scenario][played]

    limits = None if deadline_s is None else Limits(deadline_s=deadline_s)
    return Agent(
        FunctionModel(respond, model_name="scripted"),
        build_registry(spec),
        policy=allow_writes("export", "refund"),
        limits=limits,
        store=store,
    )


def hanging_agent(spec: Spec) -> Agent:
    """An agent whose read hangs on its first attempt and whose write never finishes."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def search_orders(query: str, ctx: ToolContext) -> list[str]:
        """Find orders.

        Args:
            query: Keywords.
            ctx: Injected by the runtime.
        """
        if ctx.attempt == 1:
            await asyncio.sleep(60)
        return [query]

    @registry.tool(effect="write")
    async def export(name: str, ctx: ToolContext) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        await asyncio.sleep(60)
        return _record(spec, f"export:{name}", ctx)

    def respond(request: ModelRequest) -> ModelResponse:
        return SCRIPTS["export"][sum(isinstance(m, AssistantMessage) for m in request.messages)]

    return Agent(
        FunctionModel(respond, model_name="scripted"), registry, policy=allow_writes("export")
    )


def flaky_agent(spec: Spec) -> Agent:
    """An agent whose write fails transiently on its first attempt (then ownloop retries it)."""
    from ownloop.exceptions import TransientToolError
    from ownloop.testing import final, tool_call

    registry = ToolRegistry()

    @registry.tool(effect="write")
    def flaky(ctx: ToolContext) -> dict[str, str]:
        """Write something, failing transiently on the first attempt.

        Args:
            ctx: Injected by the runtime.
        """
        if ctx.attempt == 1:
            raise TransientToolError("busy", retry_after=0.2)
        return _record(spec, f"flaky:{ctx.attempt}", ctx)

    script = [tool_call("flaky", "c1"), final("done")]

    def respond(request: ModelRequest) -> ModelResponse:
        return script[sum(isinstance(m, AssistantMessage) for m in request.messages)]

    return Agent(
        FunctionModel(respond, model_name="scripted"), registry, policy=allow_writes("flaky")
    )


def broken_revision_agent(spec: Spec) -> Agent:
    """An agent whose revision source fails (which fails a run, in process or on an engine)."""

    def revision() -> str:
        raise RuntimeError("the revision source is down")

    agent = make_agent(spec, "export")
    return Agent(agent.model, agent.tools, policy=allow_writes("export"), revision=revision)


def make_runner(spec: Spec, client: Any) -> Any:
    """Return the runner and its agents.

    ``export``, ``refund``, ``sleepy`` (never answers in time), ``hanging`` (tools that do not
    finish) and ``flaky`` (a write retried once).
    """
    from ownloop.temporal import TemporalRunner

    return TemporalRunner(
        SqliteRunStore(spec.path("runs.db")),
        {
            "export": functools.partial(make_agent, spec, "export"),
            "refund": functools.partial(make_agent, spec, "refund"),
            "sleepy": functools.partial(make_agent, spec, "export", 30.0, 1.5),
            "hanging": functools.partial(hanging_agent, spec),
            "flaky": functools.partial(flaky_agent, spec),
            "broken": functools.partial(broken_revision_agent, spec),
        },
        client,
        queue=spec.queue,
        version=spec.version,
        task_timeout_s=spec.task_timeout_s,
        step_timeout_s=spec.step_timeout_s,
    )


async def connect(spec: Spec) -> Any:
    """Connect a client to the spec's server."""
    from temporalio.client import Client

    return await Client.connect(spec.address)


async def _serve(spec: Spec) -> None:
    runner = make_runner(spec, await connect(spec))
    async with runner.worker():
        spec.path(f"ready-{spec.name}").write_text(str(os.getpid()))
        while not spec.path("stop").exists():
            await asyncio.sleep(0.02)


def serve(spec: Spec) -> None:
    """The worker process: serve the task queue until told to stop."""
    asyncio.run(_serve(spec))
    spec.path(f"stopped-{spec.name}").write_text("yes")
    os._exit(0)  # the SDK's runtime may not survive interpreter finalisation in a child


def start(spec: Spec) -> BaseProcess:
    """Start a worker process and wait until it polls its task queue."""
    process = _CONTEXT.Process(target=serve, args=(spec,), name=spec.name)
    process.start()
    deadline = time.monotonic() + 30
    while not spec.path(f"ready-{spec.name}").exists():
        assert process.is_alive(), f"worker {spec.name} exited with {process.exitcode}"
        assert time.monotonic() < deadline, f"worker {spec.name} never became ready"
        time.sleep(0.01)
    return process


def stop(spec: Spec, *workers: BaseProcess) -> None:
    """Ask the workers to shut down; check they exited cleanly."""
    spec.path("stop").write_text("stop")
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0, f"{worker.name} exited with {worker.exitcode}"
    spec.path("stop").unlink()


def enqueue(spec: Spec, agent: str, count: int, run_ids: list[str] | None = None) -> list[str]:
    """Start ``count`` runs of ``agent`` (with the given ids, or random ones); return the ids."""
    wanted = run_ids or [f"run-{uuid.uuid4().hex[:8]}" for _ in range(count)]

    async def go() -> list[str]:
        runner = make_runner(spec, await connect(spec))
        try:
            return [await runner.enqueue(agent, "do the task", run_id=run_id) for run_id in wanted]
        finally:
            await runner.store.close()

    return asyncio.run(go())


def results(spec: Spec, run_ids: list[str], timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Wait for every run's workflow to end; return the summaries."""

    async def go() -> list[dict[str, Any]]:
        runner = make_runner(spec, await connect(spec))
        try:
            waits = [runner.result(run_id) for run_id in run_ids]
            return list(await asyncio.wait_for(asyncio.gather(*waits), timeout_s))
        finally:
            await runner.store.close()

    return asyncio.run(go())


def approve_twice(spec: Spec, run_id: str, request_id: str) -> None:
    """An approving process (no worker): submit the same decision twice, signalling twice."""
    from ownloop.contracts import Approval

    async def go() -> None:
        runner = make_runner(spec, await connect(spec))
        try:
            for reason in ("ok", "ok again"):
                decision = Approval(
                    request_id=request_id, approved=True, approver="ops", reason=reason
                )
                await runner.approve(run_id, decision)
        finally:
            await runner.store.close()

    asyncio.run(go())
    spec.path("approved").write_text("yes")
    os._exit(0)


def run_in_process(target: Any, *args: Any) -> None:
    """Run ``target(*args)`` in a fresh process and wait for it to succeed."""
    process = _CONTEXT.Process(target=target, args=args)
    process.start()
    process.join(60)
    assert process.exitcode == 0, f"{target.__name__} exited with {process.exitcode}"
