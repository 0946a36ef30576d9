"""A worker process for the durable-run tests: runs or resumes one agent run, then reports.

Each worker is a real process, forked from a ``forkserver`` (started with ``sys.executable``) that
has imported ownloop once, so a worker starts in milliseconds. The agent's model is scripted; its
``export`` and ``refund`` write tools record every effect in a separate SQLite *ledger* (own file,
own table, own connection, committed before the tool returns), so a test counts real effects.

A job may name a kill point. The worker then stops there and waits — after the store committed a
checkpoint or journal record (``save:N``, ``intent``, ``receipt``), or inside the write tool
before or after its ledger commit (``write:before_commit``, ``write:after_commit``) — and the test
SIGKILLs it. ``write:hold`` waits inside the write tool until the test releases it.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from ownloop import Agent, Receipt, RunResult
from ownloop.contracts import AssistantMessage, Lease, RunSnapshot, WriteIntent
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry

SCRIPTS = {
    "export": [
        tool_call("search_orders", "c1", query="q3"),
        tool_call("export", "c2", name="q3"),
        final("Exported q3."),
    ],
    "refund": [tool_call("refund", "c1", order_id="o-1", amount=500), final("Refunded o-1.")],
    "two_refunds": [
        tool_call("refund", "c1", order_id="o-1", amount=500),
        tool_call("refund", "c2", order_id="o-2", amount=700),
        final("Refunded both."),
    ],
    "twin_refunds": [  # one refund proposed twice, in two turns: two calls with one digest
        tool_call("refund", "c1", order_id="o-1", amount=500),
        tool_call("refund", "c2", order_id="o-1", amount=500),
        final("Refunded o-1 twice."),
    ],
}

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([__name__])


@dataclass(frozen=True)
class Job:
    """What one worker process does.

    Attributes:
        run_id: The run.
        directory: Where the ledger, markers and results live.
        database: A SQLite path, or a PostgreSQL DSN when ``schema`` is set.
        schema: The PostgreSQL schema; ``None`` for SQLite.
        mode: ``run`` a new run, or ``resume`` it by id.
        worker_id: This worker's lease owner name.
        scenario: Which script the model plays.
        kill_at: Where to stop and wait to be killed.
        reconcile: Whether the export tool declares a lookup reading the ledger.
        lease_ttl_s: The worker's lease duration.
        start_file: If set, wait for this file before starting (to race workers).
        stall_at: A kill point where the worker stalls (blocked, no heartbeat) until released.
        label: Names the worker's report (default: its worker id), for workers sharing an id.
    """

    run_id: str
    directory: str
    database: str
    schema: str | None = None
    mode: str = "run"
    worker_id: str = "worker-1"
    scenario: str = "export"
    kill_at: str | None = None
    reconcile: bool = False
    lease_ttl_s: float = 5.0
    start_file: str | None = None
    stall_at: str | None = None
    label: str | None = None

    def path(self, name: str) -> Path:
        """Return a file of this job's directory."""
        return Path(self.directory) / name


def open_store(job: Job) -> SqliteRunStore | PostgresRunStore:
    """Return the job's store."""
    if job.schema is None:
        return SqliteRunStore(job.database)
    return PostgresRunStore(job.database, schema=job.schema)


def ledger_rows(directory: str | Path) -> list[tuple[str, str]]:
    """Return every recorded effect as ``(idempotency key, what)``, in order."""
    with _ledger(Path(directory)) as ledger:
        rows = ledger.execute("SELECT idempotency_key, what FROM effects ORDER BY id").fetchall()
    return [(key, what) for key, what in rows]


@contextmanager
def _ledger(directory: Path) -> Iterator[sqlite3.Connection]:
    """Open the ledger, creating its table on first use."""
    connection = sqlite3.connect(directory / "ledger.db", timeout=5)
    try:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS effects "
            "(id INTEGER PRIMARY KEY, idempotency_key TEXT, what TEXT, pid INTEGER)"
        )
        yield connection
    finally:
        connection.close()


def _halt(job: Job, point: str) -> None:
    """Stop at a kill point: tell the test, then wait for SIGKILL (or, for holds, a release)."""
    job.path("halted.tmp").write_text(point)
    job.path("halted.tmp").replace(job.path("halted"))  # atomic: the test never reads it half
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if point in ("write:hold", job.stall_at) and job.path("release").exists():
            return
        time.sleep(0.005)
    os._exit(3)  # never killed: the test is broken; never continue past a kill point


def _record_effect(job: Job, what: str, ctx: ToolContext) -> dict[str, str]:
    if job.kill_at == "write:before_commit":
        _halt(job, job.kill_at)
    with _ledger(Path(job.directory)) as ledger:
        ledger.execute(
            "INSERT INTO effects (idempotency_key, what, pid) VALUES (?, ?, ?)",
            (ctx.idempotency_key, what, os.getpid()),
        )
        ledger.commit()
    if job.kill_at in ("write:after_commit", "write:hold"):
        _halt(job, job.kill_at)
    return {"done": what}


def _lookup(job: Job) -> Any:
    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        keys = {key for key, _ in ledger_rows(job.directory)}
        return (
            Confirmed({"done": arguments["name"]}) if ctx.idempotency_key in keys else NotApplied()
        )

    return lookup


def build_registry(job: Job) -> ToolRegistry:
    """Return the worker's tools: a read, a journaled write and a write needing approval."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search_orders(query: str) -> list[dict[str, str]]:
        """Find orders.

        Args:
            query: Keywords.
        """
        return [{"id": f"order-{query}", "title": query}]

    @registry.tool(effect="write", reconcile=_lookup(job) if job.reconcile else None)
    def export(name: str, ctx: ToolContext) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        return _record_effect(job, f"export:{name}", ctx)

    @registry.tool(effect="write", requires_approval=True)
    def refund(order_id: str, amount: int, ctx: ToolContext) -> dict[str, str]:
        """Refund an order.

        Args:
            order_id: The order.
            amount: Cents.
            ctx: Injected by the runtime.
        """
        return _record_effect(job, f"refund:{order_id}:{amount}", ctx)

    return registry


class PausingStore:
    """Delegates to a store and halts right after the operation named by the job's kill point."""

    def __init__(self, store: RunStore, job: Job) -> None:
        self._store, self._job, self._saves = store, job, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _after(self, point: str) -> None:
        if point in (self._job.kill_at, self._job.stall_at):
            _halt(self._job, point)

    async def save(
        self, snapshot: RunSnapshot, *, expected_version: int | None, **options: Any
    ) -> int:
        """Save, then halt if this is the kill point's save (``save:N`` counts from 1).

        The options (the lease, and ``kept`` for a store that takes a checkpoint's changes
        alone) are forwarded, so the crashes are those of the path a plain store takes.
        """
        version = await self._store.save(snapshot, expected_version=expected_version, **options)
        self._saves += 1
        self._after(f"save:{self._saves}")
        return version

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        """Journal the intent, then halt at ``intent``."""
        await self._store.record_intent(intent, lease=lease)
        self._after("intent")

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        """Journal the receipt, then halt at ``receipt``."""
        await self._store.record_receipt(run_id, call_id, receipt, lease=lease)
        self._after("receipt")


async def _played(store: RunStore, job: Job) -> int:
    """How many script steps the stored run has played (its assistant messages)."""
    stored = await store.get(job.run_id)
    if stored is None:
        return 0
    return sum(isinstance(message, AssistantMessage) for message in stored.snapshot.messages)


def make_agent(job: Job, store: RunStore, played: int = 0) -> Agent:
    """Return the worker's agent, its model scripted from step ``played`` on."""
    return Agent(
        ScriptedModel(SCRIPTS[job.scenario][played:]),
        build_registry(job),
        policy=allow_writes("export", "refund"),
        store=store,
        worker_id=job.worker_id,
        lease_ttl_s=job.lease_ttl_s,
    )


def summary(result: RunResult) -> dict[str, Any]:
    """Return what the test checks of a result."""
    return {
        "status": result.status.value,
        "stop_reason": result.stop_reason.value,
        "output": result.output,
        "approvals": [(a.approver, a.approved, a.reason) for a in result.approvals],
        "requests": [request.id for request in result.approval_requests],
        "pending": [operation.call_id for operation in result.pending],
    }


async def _work(job: Job) -> dict[str, Any]:
    store = open_store(job)
    try:
        played = await _played(store, job)
        agent = make_agent(job, PausingStore(store, job), played)
        if job.start_file is not None:
            while not Path(job.start_file).exists():
                await asyncio.sleep(0.002)
        try:
            if job.mode == "run":
                result = await agent.run("export the q3 report", run_id=job.run_id)
            else:
                result = await agent.resume(job.run_id)
        except Exception as error:  # reported to the test, which asserts on it
            return {"error": type(error).__name__, "message": str(error)}
        if result.status.value == "completed":
            agent.model.assert_complete()  # type: ignore[attr-defined]
        return summary(result)
    finally:
        await store.close()


def work(job: Job) -> None:
    """The worker process's entry point: do the job and write its report atomically."""
    report = asyncio.run(_work(job))
    partial = job.path(f"{job.label or job.worker_id}.{job.mode}.tmp")
    partial.write_text(json.dumps(report))
    partial.replace(job.path(f"{job.label or job.worker_id}.{job.mode}.json"))


def start(job: Job) -> BaseProcess:
    """Start a worker process for the job."""
    process = _CONTEXT.Process(target=work, args=(job,), name=f"{job.worker_id}-{job.mode}")
    process.start()
    return process


def report(job: Job) -> dict[str, Any]:
    """Return the report a finished worker wrote."""
    name = job.label or job.worker_id
    data: dict[str, Any] = json.loads(job.path(f"{name}.{job.mode}.json").read_text())
    return data


JOB_VARIABLE = "OWNLOOP_TEST_JOB"


def cli_agent() -> Agent:
    """The factory ``ownloop resume --agent tests.durable_worker:cli_agent`` loads.

    The job comes from the ``OWNLOOP_TEST_JOB`` environment variable (its fields as JSON).
    """
    job = Job(**json.loads(os.environ[JOB_VARIABLE]))
    store = open_store(job)
    return make_agent(job, store, asyncio.run(_played(store, job)))


def job_environment(job: Job) -> dict[str, str]:
    """Return this process's environment plus the job, for a CLI subprocess."""
    return {**os.environ, JOB_VARIABLE: json.dumps(job.__dict__)}
