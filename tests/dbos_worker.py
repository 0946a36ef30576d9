"""Worker processes for the DBOS tests: real DBOS executors on the test PostgreSQL server.

Each worker is a real process forked from the ``forkserver`` (see ``tests/durable_worker.py``). It
configures DBOS with `ownloop.dbos.worker_config`, registers the runner as a worker, launches,
registers the queue, writes a ``ready-<name>`` file and serves the queue until the test writes
``stop`` or sends SIGTERM (then ``runner.shutdown()``, the documented way to stop a worker) or
SIGKILLs it. A *host* process launches DBOS as no worker, enqueues and approves. The model is a
function of the conversation (a replayed run may call it at any step), and the ``export``/``refund``
write tools record every effect in the SQLite ledger of ``tests/durable_worker.py``. A spec may
name a run and a kill point inside that run's tools (``read``, ``write:before_commit``,
``write:after_commit``); the worker stops there and waits to be killed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ownloop import Agent
from ownloop.contracts import AssistantMessage, ModelRequest, ModelResponse, ToolCall
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore
from ownloop.testing import FunctionModel
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry
from tests.durable_worker import _CONTEXT, SCRIPTS, _ledger, ledger_rows

APP_NAME = "ownloop-test"


@dataclass(frozen=True)
class Spec:
    """One worker (or one enqueueing process).

    Attributes:
        directory: Where the ledger, markers and reports live.
        dsn: The run store's PostgreSQL DSN.
        schema: The run store's schema.
        system_url: The DBOS system database URL.
        executor_id: The DBOS executor id.
        name: The worker's name (its ready file).
        kill_run: The run whose tools halt at ``kill_at``.
        kill_at: Where to halt.
        reconcile: Whether the export tool declares a lookup reading the ledger.
        model_latency_s: How long each model call takes.
        queue: The DBOS queue.
        drain_s: How long a stopping worker lets its running segments finish.
        slow_latency_s: How long each model call of the ``slow`` agent takes.
    """

    directory: str
    dsn: str
    schema: str
    system_url: str
    executor_id: str = "exec-1"
    name: str = "w1"
    kill_run: str | None = None
    kill_at: str | None = None
    reconcile: bool = False
    model_latency_s: float = 0.0
    queue: str = "ownloop"
    drain_s: int = 10
    slow_latency_s: float = 0.4

    def path(self, name: str) -> Path:
        """Return a file of the spec's directory."""
        return Path(self.directory) / name


def _halt(spec: Spec, point: str) -> None:
    spec.path("halted.tmp").write_text(point)
    spec.path("halted.tmp").replace(spec.path("halted"))
    time.sleep(30)
    os._exit(3)  # never killed: the test is broken; never continue past a kill point


def _record(spec: Spec, what: str, ctx: ToolContext) -> dict[str, str]:
    halting = ctx.run_id == spec.kill_run
    if halting and spec.kill_at == "write:before_commit":
        _halt(spec, spec.kill_at)
    with _ledger(Path(spec.directory)) as ledger:
        ledger.execute(
            "INSERT INTO effects (idempotency_key, what, pid) VALUES (?, ?, ?)",
            (ctx.idempotency_key, f"{ctx.run_id}:{what}", os.getpid()),
        )
        ledger.commit()
    if halting and spec.kill_at == "write:after_commit":
        _halt(spec, spec.kill_at)
    return {"done": what}


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


def _scripted(scenario: str, latency_s: float) -> Any:
    """A model answering from the conversation alone: step N plays the scenario's step N."""

    async def respond(request: ModelRequest) -> ModelResponse:
        if latency_s:
            await asyncio.sleep(latency_s)
        played = sum(isinstance(message, AssistantMessage) for message in request.messages)
        return SCRIPTS[scenario][played]

    return respond


def make_agent(spec: Spec, scenario: str, latency_s: float | None = None) -> Agent:
    """Return an agent playing ``scenario`` (no store: the runner owns durability)."""
    latency = spec.model_latency_s if latency_s is None else latency_s
    return Agent(
        FunctionModel(_scripted(scenario, latency), model_name="scripted"),
        build_registry(spec),
        policy=allow_writes("export", "refund"),
    )


def make_runner(spec: Spec) -> Any:
    """Return the runner: agents ``export``, ``slow`` (a slow export) and ``refund``."""
    from ownloop.dbos import DbosRunner

    return DbosRunner(
        PostgresRunStore(spec.dsn, schema=spec.schema),
        {
            "export": functools.partial(make_agent, spec, "export"),
            "refund": functools.partial(make_agent, spec, "refund"),
            "slow": functools.partial(make_agent, spec, "export", spec.slow_latency_s),
            "ship": functools.partial(identity_agent, spec, 1),
            "ship_twice": functools.partial(identity_agent, spec, 2),
        },
        queue=spec.queue,
        system_database_url=spec.system_url,
        polling_interval_s=0.05,
    )


def serve(spec: Spec) -> None:
    """The worker process: launch DBOS, serve the queue until told to stop, then shut down."""
    from dbos import DBOS

    from ownloop.dbos import worker_config

    DBOS(config=worker_config(APP_NAME, spec.system_url, spec.executor_id, log_level="WARNING"))
    runner = make_runner(spec)
    runner.register(worker=True)
    DBOS.launch()
    runner.start()
    terminated = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: terminated.set())  # as a pod is told to stop
    spec.path(f"ready-{spec.name}").write_text(str(os.getpid()))
    while not (spec.path("stop").exists() or terminated.is_set()):
        time.sleep(0.02)
    handed = runner.shutdown(drain_s=spec.drain_s, destroy_registry=True)
    spec.path(f"handed-{spec.name}").write_text(json.dumps(handed))
    runner.close()


def host(spec: Spec, run_ids: list[str], approve: tuple[str, str] | None, linger_s: float) -> None:
    """A process that launches DBOS as no worker, enqueues runs, approves one, lingers, stops.

    It registers the workflow (so on the old code, a launched DBOS that listens to every queue
    of its application, it could have run what it dequeued) and reports its pid.
    """
    from dbos import DBOS

    from ownloop.contracts import Approval
    from ownloop.dbos import worker_config

    DBOS(config=worker_config(APP_NAME, spec.system_url, spec.executor_id, log_level="WARNING"))
    runner = make_runner(spec)
    runner.register(worker=False)
    DBOS.launch()

    async def go() -> None:
        for run_id in run_ids:
            await runner.enqueue("export", "do the task", run_id=run_id)
        if approve is not None:
            run_id, request_id = approve
            decision = Approval(request_id=request_id, approved=True, approver="ops")
            await runner.approve(run_id, decision)
        await asyncio.sleep(linger_s)  # a listening DBOS would dequeue within this time
        await runner.store.close()

    asyncio.run(go())
    runner.shutdown(drain_s=spec.drain_s, destroy_registry=True)
    runner.close()
    spec.path("host").write_text(str(os.getpid()))


def start(spec: Spec) -> BaseProcess:
    """Start a worker process and wait until it serves the queue."""
    process = _CONTEXT.Process(target=serve, args=(spec,), name=spec.name)
    process.start()
    deadline = time.monotonic() + 30
    while not spec.path(f"ready-{spec.name}").exists():
        assert process.is_alive(), f"worker {spec.name} exited with {process.exitcode}"
        assert time.monotonic() < deadline, f"worker {spec.name} never became ready"
        time.sleep(0.01)
    return process


def enqueue_many(spec: Spec, agent: str, count: int, run_ids: list[str] | None = None) -> list[str]:
    """Enqueue ``count`` runs of ``agent`` (with the given ids, or random ones); return the ids."""
    wanted = run_ids or [f"run-{uuid.uuid4().hex[:8]}" for _ in range(count)]

    async def go() -> list[str]:
        runner = make_runner(spec)
        try:
            return [await runner.enqueue(agent, "do the task", run_id=run_id) for run_id in wanted]
        finally:
            runner.close()
            await runner.store.close()

    return asyncio.run(go())


def approve_twice(spec: Spec, run_id: str, request_id: str) -> None:
    """An approving process with no DBOS launched: submit the same approval twice."""
    from ownloop.contracts import Approval

    async def go() -> None:
        runner = make_runner(spec)
        try:
            for reason in ("ok", "ok again"):
                approval = Approval(
                    request_id=request_id, approved=True, approver="ops", reason=reason
                )
                await runner.approve(run_id, approval)
        finally:
            runner.close()
            await runner.store.close()

    asyncio.run(go())
    spec.path("approved").write_text("yes")


def run_in_process(target: Any, *args: Any) -> None:
    """Run ``target(*args)`` in a fresh worker process and wait for it to succeed."""
    process = _CONTEXT.Process(target=target, args=args)
    process.start()
    process.join(60)
    assert process.exitcode == 0, f"{target.__name__} exited with {process.exitcode}"


SPEC_VARIABLE = "OWNLOOP_TEST_DBOS_SPEC"


def cli_app() -> tuple[Any, Any]:
    """The factory ``ownloop workers recover --app tests.dbos_worker:cli_app`` loads."""
    from ownloop.dbos import worker_config

    spec = Spec(**json.loads(os.environ[SPEC_VARIABLE]))
    config = worker_config(APP_NAME, spec.system_url, "operator", log_level="WARNING")
    return make_runner(spec), config


def cli_app_other_version() -> tuple[Any, Any]:
    """A factory whose DBOS config and runner disagree on the application version."""
    runner, config = cli_app()
    return runner, {**config, "application_version": "other"}


def cli_main(argv: list[str]) -> int:
    """Run the ``workers`` command group as ``ownloop`` would (it is registered there)."""
    import argparse

    from ownloop.cli import _workers

    parser = argparse.ArgumentParser(prog="ownloop")
    _workers.register(parser.add_subparsers(dest="command", required=True))
    arguments = parser.parse_args(argv)
    status: int = arguments.handler(arguments)
    return status


def rescue(spec: Spec) -> None:
    """A process running ``ownloop workers recover --executor <spec's executor>`` (the runbook)."""
    os.environ[SPEC_VARIABLE] = json.dumps(spec.__dict__)
    argv = ["workers", "recover", "--executor", spec.executor_id]
    cli_main([*argv, "--app", "tests.dbos_worker:cli_app", "--dsn", spec.system_url])


def start_rescuer(spec: Spec) -> BaseProcess:
    """Start `rescue` in a worker process (it exits when its recovered runs are done)."""
    process = _CONTEXT.Process(target=rescue, args=(spec,), name="rescuer")
    process.start()
    return process


def flaky_agent(spec: Spec) -> Agent:
    """An agent whose approved write fails transiently once, with an approver and a revision."""
    from ownloop.contracts import Approval, ApprovalRequest
    from ownloop.exceptions import TransientToolError
    from ownloop.testing import final, tool_call

    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def flaky(ctx: ToolContext) -> dict[str, str]:
        """Write something, failing transiently on the first attempt.

        Args:
            ctx: Injected by the runtime.
        """
        if ctx.attempt == 1:
            raise TransientToolError("busy", retry_after=0.01)
        return _record(spec, f"flaky:{ctx.attempt}", ctx)

    script = [tool_call("flaky", "c1"), final("done")]

    def respond(request: ModelRequest) -> ModelResponse:
        return script[sum(isinstance(m, AssistantMessage) for m in request.messages)]

    def approver(request: ApprovalRequest) -> Approval:
        return Approval(request_id=request.id, approved=True, approver="auto")

    return Agent(
        FunctionModel(respond, model_name="scripted"),
        registry,
        policy=allow_writes("flaky"),
        approver=approver,
        revision=lambda: "r1",
    )


def readers_agent(spec: Spec) -> Agent:
    """An agent whose one turn proposes two reads (run together) and then a write."""
    from ownloop.testing import final

    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def read_order(order_id: str) -> dict[str, str]:
        """Read an order.

        Args:
            order_id: The order.
        """
        return {"id": order_id}

    @registry.tool(effect="write")
    def export(name: str, ctx: ToolContext) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        return _record(spec, f"export:{name}", ctx)

    proposals = ModelResponse(
        tool_calls=(
            ToolCall(id="c1", name="read_order", arguments={"order_id": "o-1"}),
            ToolCall(id="c2", name="read_order", arguments={"order_id": "o-2"}),
            ToolCall(id="c3", name="export", arguments={"name": "q3"}),
        )
    )
    script = [proposals, final("done")]

    def respond(request: ModelRequest) -> ModelResponse:
        return script[sum(isinstance(m, AssistantMessage) for m in request.messages)]

    return Agent(
        FunctionModel(respond, model_name="scripted"),
        registry,
        policy=allow_writes("export"),
        revision=lambda: "r1",
    )


IDENTITY_ITEMS = ["pear", "apple", "fig", "banana", "kiwi", "plum", "cherry", "lime"]


def identity_agent(spec: Spec, times: int) -> Agent:
    """An agent proposing one approval-gated ``ship`` ``times`` times with the same arguments.

    ``ship`` takes a ``set[str]`` and a parameter with a ``default_factory`` (its value is left to
    the factory when proposed once; twin proposals name it, so both have one digest), and declares
    a lookup reading the ledger. Each process the model runs in leaves ``hash-<pid>`` with its
    ``hash("ownloop")``, so a test can tell that two processes hash strings differently.
    """
    from ownloop.testing import final, tool_call

    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        keys = {key for key, _ in ledger_rows(spec.directory)}
        return Confirmed({"done": True}) if ctx.idempotency_key in keys else NotApplied()

    @registry.tool(effect="write", requires_approval=True, reconcile=lookup)
    def ship(
        order: str,
        items: set[str],
        ctx: ToolContext,
        ref: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
    ) -> dict[str, str]:
        """Ship an order's items under a fresh reference.

        Args:
            order: The order.
            items: What to ship.
            ctx: Injected by the runtime.
            ref: The shipment's reference.
        """
        return _record(spec, f"ship:{order}:{','.join(sorted(items))}:{ref}", ctx)

    named = {"ref": "r-1"} if times > 1 else {}
    proposal = functools.partial(tool_call, "ship", order="o-1", items=IDENTITY_ITEMS, **named)
    script = [*(proposal(f"c{n + 1}") for n in range(times)), final("Shipped.")]

    def respond(request: ModelRequest) -> ModelResponse:
        spec.path(f"hash-{os.getpid()}").write_text(str(hash("ownloop")))
        return script[sum(isinstance(m, AssistantMessage) for m in request.messages)]

    return Agent(
        FunctionModel(respond, model_name="scripted"), registry, policy=allow_writes("ship")
    )
