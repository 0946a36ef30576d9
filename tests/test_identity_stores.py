"""A call's identity is decided once, on every store: the issue's counterexamples, per store.

Each test is one of the cases where recomputing a call's identity used to run a write twice, or
admit the wrong one: a ``set[str]`` argument, a ``default_factory`` parameter, a deploy between a
crash and its resume, a ``SecretStr`` digest, and a decision consumed on the journal-replay path.
Each runs in-process on the memory store, a SQLite file and PostgreSQL (a schema of its own); a
"crash" is an exception no handler catches, after which a fresh `Agent` takes the run over. The
same cases across real processes under other hash seeds are in `tests/test_identity_processes.py`,
and on DBOS in `tests/test_dbos_identity.py`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field, SecretStr

from ownloop import Agent, Approval, RunStatus
from ownloop.contracts import Lease, Receipt
from ownloop.exceptions import ConfigurationError, UnknownApprovalRequest
from ownloop.identity import encode
from ownloop.policy import allow_writes, approval_digest
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry
from tests.durable_support import fresh_schema, postgres_dsn

ITEMS = ["pear", "apple", "fig", "banana", "kiwi", "plum", "cherry", "lime"]
Stores = Callable[[], RunStore]
Ledger = list[dict[str, Any]]


class Crash(BaseException):
    """The worker dies here: nothing below it runs, its lease stays held."""


class _CrashAfterReceipt:
    """A store whose worker dies right after the write's receipt is stored."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        await self._store.record_receipt(run_id, call_id, receipt, lease=lease)
        raise Crash


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    """Open the same store again for each worker: one memory store, or one SQLite file or schema."""
    if request.param == "memory":
        shared = MemoryRunStore()
        return lambda: shared
    if request.param == "sqlite":
        return lambda: SqliteRunStore(tmp_path / "runs.db")
    dsn, schema = postgres_dsn(), fresh_schema()
    return lambda: PostgresRunStore(dsn, schema=schema)


async def _closing(opened: list[RunStore], body: Callable[[], Awaitable[None]]) -> None:
    try:
        await body()
    finally:
        for store in opened:
            if not isinstance(store, MemoryRunStore):
                await store.close()


def _lookup(ledger: Ledger) -> Any:
    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        done = any(row["key"] == ctx.idempotency_key for row in ledger)
        return Confirmed({"done": True}) if done else NotApplied()

    return lookup


def _shipping(ledger: Ledger, crash: list[bool], *, version: int = 1) -> ToolRegistry:
    """``ship(order, items: set[str])``; version 2 adds ``note: str = ""`` (a deploy)."""
    registry = ToolRegistry()

    def apply(order: str, items: set[str], ctx: ToolContext) -> dict[str, str]:
        ledger.append({"key": ctx.idempotency_key, "order": order, "items": sorted(items)})
        if crash and crash.pop():
            raise Crash
        return {"shipped": order}

    if version == 1:

        @registry.tool(effect="write", reconcile=_lookup(ledger))
        def ship(order: str, items: set[str], ctx: ToolContext) -> dict[str, str]:
            """Ship an order's items."""
            return apply(order, items, ctx)

    else:

        @registry.tool(name="ship", effect="write", reconcile=_lookup(ledger))
        def ship_v2(
            order: str, items: set[str], ctx: ToolContext, note: str = ""
        ) -> dict[str, str]:
            """Ship an order's items, with a note."""
            return apply(order, items, ctx)

    return registry


def _agent(steps: list[Any], registry: ToolRegistry, store: Any, tool: str = "ship") -> Agent:
    return Agent(ScriptedModel(steps), registry, policy=allow_writes(tool), store=store)


@pytest.mark.parametrize("crash", ["after_apply", "after_receipt"])
def test_a_set_argument_write_crashed_mid_write_resumes_and_ships_once(
    stores: Stores, crash: str
) -> None:
    """A set[str] write dead after its effect (or receipt) is taken over, ends, and ran once."""
    ledger: Ledger = []
    opened = [stores(), stores()]

    async def body() -> None:
        first = _shipping(ledger, [True] if crash == "after_apply" else [])
        store = _CrashAfterReceipt(opened[0]) if crash == "after_receipt" else opened[0]
        with pytest.raises(Crash):
            await _agent([tool_call("ship", "c1", order="o-1", items=ITEMS)], first, store).run(
                "Ship o-1.", run_id="ship-run"
            )
        again = _agent([final("Shipped.")], _shipping(ledger, []), opened[1])
        result = await again.resume("ship-run", take_over=True)
        assert result.status is RunStatus.COMPLETED
        (entry,) = await opened[1].journal("ship-run")
        assert entry.intent.arguments == encode({"order": "o-1", "items": set(ITEMS)})
        assert [row["key"] for row in ledger] == [entry.intent.idempotency_key]

    asyncio.run(_closing(opened, body))


def test_a_factory_default_is_approved_in_the_store_and_runs_once_with_its_value(
    stores: Stores,
) -> None:
    """A default_factory value is fixed at proposal: approved by digest, crashed, it runs once."""
    ledger: Ledger = []
    crash = [True]
    opened = [stores(), stores(), stores()]

    def tickets() -> ToolRegistry:
        registry = ToolRegistry()

        @registry.tool(effect="write", requires_approval=True, reconcile=_lookup(ledger))
        def open_ticket(
            title: str,
            ctx: ToolContext,
            ticket_id: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
        ) -> str:
            """Open a ticket."""
            ledger.append({"key": ctx.idempotency_key, "ticket_id": ticket_id})
            if crash and crash.pop():
                raise Crash
            return ticket_id

        return registry

    async def body() -> None:
        proposing = [tool_call("open_ticket", "c1", title="Disk full")]
        paused = await _agent(proposing, tickets(), opened[0], "open_ticket").run(
            "Open a ticket.", run_id="ticket-run"
        )
        (request,) = paused.approval_requests
        decision = Approval(digest=request.digest, approved=True, approver="alice")
        await opened[0].submit_approval("ticket-run", decision)
        with pytest.raises(Crash):
            await _agent([], tickets(), opened[1], "open_ticket").resume("ticket-run")
        again = _agent([final("Opened.")], tickets(), opened[2], "open_ticket")
        result = await again.resume("ticket-run", take_over=True)
        assert result.status is RunStatus.COMPLETED
        assert [row["ticket_id"] for row in ledger] == [request.arguments["ticket_id"]]
        (entry,) = await opened[2].journal("ticket-run")  # journaled as it was approved
        assert entry.intent.digest_version == 1
        assert entry.intent.approval is not None
        assert entry.intent.approval.digest == request.digest

    asyncio.run(_closing(opened, body))


def test_a_deploy_between_crash_and_resume_is_refused_then_the_journaled_call_rules(
    stores: Stores,
) -> None:
    """A new optional parameter refuses the resume; accepted, the crashed write never reruns."""
    ledger: Ledger = []
    opened = [stores(), stores(), stores()]

    async def body() -> None:
        with pytest.raises(Crash):
            await _agent(
                [tool_call("ship", "c1", order="o-1", items=ITEMS)],
                _shipping(ledger, [True]),
                opened[0],
            ).run("Ship o-1.", run_id="deploy-run")
        deployed = _shipping(ledger, [], version=2)
        with pytest.raises(ConfigurationError, match="tool 'ship' signature"):
            await _agent([], deployed, opened[1]).resume("deploy-run", take_over=True)
        accepted = _agent([final("Shipped.")], deployed, opened[2])
        result = await accepted.resume("deploy-run", take_over=True, accept_changes=True)
        assert result.status is RunStatus.COMPLETED
        assert len(ledger) == 1

    asyncio.run(_closing(opened, body))


def test_a_secret_is_approved_by_its_real_value_in_the_store(stores: Stores) -> None:
    """A stored decision for password "hunter2" is refused for a call that sets another one."""
    changed: list[str] = []
    opened = [stores(), stores()]
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def set_password(user: str, password: SecretStr) -> str:
        """Set a user's password."""
        changed.append(password.get_secret_value())
        return "set"

    digest = approval_digest(
        "set_password", {"user": "bob", "password": SecretStr("hunter2")}, None
    )
    decision = Approval(digest=digest, approved=True, approver="alice")

    async def body() -> None:
        for run_id, password in (("attacked", "attacker-chosen"), ("meant", "hunter2")):
            proposing = [tool_call("set_password", "c1", user="bob", password=password)]
            await _agent(proposing, registry, opened[0], "set_password").run(
                "Set it.", run_id=run_id
            )
        with pytest.raises(UnknownApprovalRequest, match="is not waiting for request"):
            await opened[0].submit_approval("attacked", decision)
        await opened[0].submit_approval("meant", decision)
        for run_id, status in (("attacked", RunStatus.PAUSED), ("meant", RunStatus.COMPLETED)):
            agent = _agent([final("Done.")], registry, opened[1], "set_password")
            assert (await agent.resume(run_id)).status is status
        assert changed == ["hunter2"]

    asyncio.run(_closing(opened, body))


def test_a_stored_decision_is_consumed_when_its_write_is_replayed_from_the_journal(
    stores: Stores,
) -> None:
    """A decision that admitted a crashed write admits nothing more after the replay."""
    ledger: Ledger = []
    opened = [stores(), stores(), stores()]

    def refunds(crash: list[bool]) -> ToolRegistry:
        registry = ToolRegistry()

        @registry.tool(effect="write", requires_approval=True, reconcile=_lookup(ledger))
        def refund(order_id: str, ctx: ToolContext) -> dict[str, str]:
            """Refund an order."""
            ledger.append({"key": ctx.idempotency_key, "order_id": order_id})
            if crash and crash.pop():
                raise Crash
            return {"refunded": order_id}

        return registry

    async def body() -> None:
        first = _agent(
            [tool_call("refund", "c1", order_id="o-1")], refunds([]), opened[0], "refund"
        )
        (request,) = (await first.run("Refund o-1.", run_id="replay")).approval_requests
        decision = Approval(digest=request.digest, approved=True, approver="alice")
        await opened[0].submit_approval("replay", decision)
        with pytest.raises(Crash):
            await _agent([], refunds([True]), opened[1], "refund").resume("replay")
        twin = [tool_call("refund", "c2", order_id="o-1")]
        result = await _agent(twin, refunds([]), opened[2], "refund").resume(
            "replay", take_over=True
        )
        assert len(ledger) == 1
        assert result.status is RunStatus.PAUSED  # the identical second refund needs its own
        assert result.approval_requests[0].call_id == "c2"
        assert [a.digest for a in result.approvals] == [request.digest]

    asyncio.run(_closing(opened, body))
