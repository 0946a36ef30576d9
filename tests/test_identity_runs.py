"""A call's identity is decided once: approvals bind it, resumes and replays read it back.

Each test is a case where recomputing the identity (digest, idempotency key, arguments) used to
admit a call twice, or never: a factory default, a secret, the same decision passed again, and
the same paused result resumed twice without a store. The cases that involve a store (a decision
spent on the replay path among them) run on every store in `tests/test_identity_stores.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field, SecretStr

from ownloop import Agent, Approval, RunResult, RunStatus
from ownloop.contracts import CallIdentity, Lease, WriteIntent
from ownloop.exceptions import ConfigurationError
from ownloop.policy import allow_writes, approval_digest
from ownloop.store import MemoryRunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry


class Crash(BaseException):
    """The worker dies here: nothing below it runs, its lease stays held."""


def _approve(result: RunResult, approver: str = "alice") -> Approval:
    (request,) = result.approval_requests
    return Approval(request_id=request.id, approved=True, approver=approver)


def _refunds(ledger: list[dict[str, Any]], *, approval: bool, crash: list[bool]) -> ToolRegistry:
    """A refund write that records each effect (by key) in ``ledger``; a lookup reads it."""
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        done = [row for row in ledger if row["key"] == ctx.idempotency_key]
        return Confirmed({"refunded": arguments["order_id"]}) if done else NotApplied()

    @registry.tool(effect="write", requires_approval=approval, reconcile=lookup)
    def refund(order_id: str, ctx: ToolContext) -> dict[str, str]:
        """Refund an order."""
        ledger.append({"key": ctx.idempotency_key, "order_id": order_id})
        if crash and crash.pop():
            raise Crash
        return {"refunded": order_id}

    return registry


def test_a_factory_default_is_approved_as_proposed_and_runs_with_that_value() -> None:
    """A default_factory value is fixed once: the approval admits it and the handler receives it."""
    registry = ToolRegistry()
    received: list[str] = []

    @registry.tool(effect="write", requires_approval=True)
    def open_ticket(
        title: str, ticket_id: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)]
    ) -> str:
        """Open a ticket."""
        received.append(ticket_id)
        return ticket_id

    model = ScriptedModel([tool_call("open_ticket", "c1", title="Disk full"), final("Opened.")])
    agent = Agent(model, registry, policy=allow_writes("open_ticket"))
    paused = agent.run_sync("Open a ticket.")
    (request,) = paused.approval_requests
    resumed = agent.resume_sync(paused, approvals=[_approve(paused)])
    assert resumed.status is RunStatus.COMPLETED
    assert received == [request.arguments["ticket_id"]]  # type: ignore[index]


def test_a_factory_default_write_crashed_after_it_applied_never_runs_twice(tmp_path: Path) -> None:
    """A write with a factory default crashed mid-write resumes under its recorded value and key."""
    ledger: list[dict[str, Any]] = []
    store = SqliteRunStore(tmp_path / "runs.db")
    crash = [True]

    def make(steps: list[Any]) -> Agent:
        registry = ToolRegistry()

        def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
            done = any(row["key"] == ctx.idempotency_key for row in ledger)
            return Confirmed({"created": arguments["ref"]}) if done else NotApplied()

        @registry.tool(effect="write", reconcile=lookup)
        def create(ref: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
                   ctx: ToolContext) -> str:  # fmt: skip
            """Create a record under a fresh reference."""
            ledger.append({"key": ctx.idempotency_key, "ref": ref})
            if crash and crash.pop():
                raise Crash
            return ref

        return Agent(ScriptedModel(steps), registry, policy=allow_writes("create"), store=store)

    with pytest.raises(Crash):
        make([tool_call("create", "c1")]).run_sync("Create one.", run_id="factory")
    result = make([final("Created.")]).resume_sync("factory", take_over=True)
    assert result.status is RunStatus.COMPLETED
    assert len(ledger) == 1


def test_a_secret_argument_is_approved_by_its_real_value() -> None:
    """An approval for set_password(bob, "hunter2") never admits set_password(bob, "other")."""
    registry = ToolRegistry()
    changed: list[str] = []

    @registry.tool(effect="write", requires_approval=True)
    def set_password(user: str, password: SecretStr) -> str:
        """Set a user's password."""
        changed.append(password.get_secret_value())
        return "set"

    digest = approval_digest(
        "set_password", {"user": "bob", "password": SecretStr("hunter2")}, None
    )
    approval = Approval(digest=digest, approved=True, approver="alice")

    def attempt(password: str) -> RunResult:
        model = ScriptedModel(
            [tool_call("set_password", "c1", user="bob", password=password), final("Done.")]
        )
        agent = Agent(model, registry, policy=allow_writes("set_password"))
        return agent.run_sync("Set it.", approvals=[approval])

    attacked = attempt("attacker-chosen")
    assert attacked.status is RunStatus.PAUSED
    assert changed == []
    shown = [*attacked.approval_requests, *attacked.trace]
    assert all("attacker-chosen" not in item.model_dump_json() for item in shown)
    assert attempt("hunter2").status is RunStatus.COMPLETED
    assert changed == ["hunter2"]


def test_the_same_decision_passed_to_resume_again_is_refused() -> None:
    """A decision already applied, passed to resume again, is refused naming what it decided."""
    ledger: list[dict[str, Any]] = []
    model = ScriptedModel(
        [tool_call("refund", "c1", order_id="o-1"), tool_call("refund", "c2", order_id="o-1")]
    )
    agent = Agent(model, _refunds(ledger, approval=True, crash=[]), policy=allow_writes("refund"))
    paused = agent.run_sync("Refund o-1.")
    approval = Approval(digest=paused.approval_requests[0].digest, approved=True, approver="al")
    again = agent.resume_sync(paused, approvals=[approval])
    assert again.status is RunStatus.PAUSED
    with pytest.raises(ConfigurationError, match=f"request {approval.digest} was already applied"):
        agent.resume_sync(again, approvals=[approval])
    assert len(ledger) == 1


def test_a_paused_result_resumed_twice_without_a_store_is_refused() -> None:
    """Resuming one paused result a second time on a store-less agent never writes again."""
    ledger: list[dict[str, Any]] = []
    model = ScriptedModel(
        [tool_call("refund", "c1", order_id="o-1"), final("Refunded."), final("Refunded.")]
    )
    agent = Agent(model, _refunds(ledger, approval=True, crash=[]), policy=allow_writes("refund"))
    paused = agent.run_sync("Refund o-1.")
    assert agent.resume_sync(paused, approvals=[_approve(paused)]).status is RunStatus.COMPLETED
    request = paused.approval_requests[0].id
    with pytest.raises(
        ConfigurationError, match=f"already resumed from this pause .request {request}"
    ):
        agent.resume_sync(paused, approvals=[_approve(paused, "bob")])
    assert len(ledger) == 1


class _OlderRelease:
    """A store as a release before journaled identities wrote it: intents without arguments."""

    def __init__(self, store: MemoryRunStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        text = json.dumps({"order_id": "o-1"}, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(f"refund:{text}".encode()).hexdigest()  # the old formula
        raw = f"{intent.run_id}\x1f{intent.call_id}\x1f{digest}".encode()
        legacy = WriteIntent(
            run_id=intent.run_id,
            call_id=intent.call_id,
            tool=intent.tool,
            idempotency_key=hashlib.sha256(raw).hexdigest()[:32],
            arguments_digest=digest,
            recorded_at=intent.recorded_at,
            provider_call_id=intent.provider_call_id,
        )
        await self._store.record_intent(legacy, lease=lease)


def test_a_write_journaled_by_an_older_release_keeps_its_recorded_key() -> None:
    """An intent without arguments is recognised by its old digest; its recorded key is asked."""
    store = MemoryRunStore()
    asked: list[str | None] = []
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed:
        asked.append(ctx.idempotency_key)
        return Confirmed({"refunded": arguments["order_id"]})

    @registry.tool(effect="write", reconcile=lookup)
    def refund(order_id: str) -> str:
        """Refund an order."""
        raise Crash

    older = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1")]),
        registry,
        policy=allow_writes("refund"),
        store=_OlderRelease(store),  # type: ignore[arg-type]
    )
    with pytest.raises(Crash):
        older.run_sync("Refund o-1.", run_id="legacy")
    (entry,) = asyncio.run(store.journal("legacy"))
    newer = Agent(ScriptedModel([final("Refunded.")]), registry, policy=allow_writes("refund"),
                  store=store)  # fmt: skip
    result = newer.resume_sync("legacy", take_over=True)
    assert result.status is RunStatus.COMPLETED
    assert asked == [entry.intent.idempotency_key]


def test_a_changed_tool_effect_is_named_when_the_resume_is_refused() -> None:
    """A tool whose effect changed since the pause refuses the resume, naming tool and change."""

    def build(effect: Literal["read", "write"]) -> Agent:
        registry = ToolRegistry()

        @registry.tool(effect=effect, requires_approval=True)
        def archive(name: str) -> str:
            """Archive a document."""
            return name

        return Agent(
            ScriptedModel([tool_call("archive", "c1", name="q3")]),
            registry,
            policy=allow_writes("archive"),
        )

    paused = build("read").run_sync("Archive q3.")
    with pytest.raises(ConfigurationError, match=r"tool 'archive' effect \(read -> write\)"):
        build("write").resume_sync(paused, approvals=[_approve(paused)])


def _identities(result: RunResult) -> tuple[CallIdentity, ...]:
    assert result.resume is not None
    return result.resume.identities


def _with_identities(result: RunResult, *identities: CallIdentity) -> RunResult:
    assert result.resume is not None
    resume = result.resume.model_copy(update={"identities": identities})
    return result.model_copy(update={"resume": resume})


def _gated(kind: Literal["read", "write"], received: list[Any]) -> ToolRegistry:
    """One approval-gated tool ``refund`` of the given effect, recording what it receives."""
    registry = ToolRegistry()

    @registry.tool(effect=kind, requires_approval=True)
    def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        received.append((order_id, ctx.idempotency_key))
        return order_id

    return registry


def test_a_paused_write_carries_the_key_it_then_runs_under_and_a_read_none() -> None:
    """The identity fixed at the pause holds a write's idempotency key; a read has no key."""
    for kind in ("write", "read"):
        received: list[Any] = []
        model = ScriptedModel([tool_call("refund", "c1", order_id="o-1"), final("Done.")])
        agent = Agent(model, _gated(kind, received), policy=allow_writes("refund"))
        paused = agent.run_sync("Refund o-1.")
        (identity,) = _identities(paused)
        assert (identity.call_id, identity.tool, identity.digest_version) == ("c1", "refund", 1)
        assert agent.resume_sync(paused, approvals=[_approve(paused)]).status is RunStatus.COMPLETED
        if kind == "write":
            assert identity.idempotency_key is not None
        assert received == [("o-1", identity.idempotency_key)]


@pytest.mark.parametrize("forged", [{"call_id": "c9"}, {"tool": "other"}])
def test_a_recorded_identity_of_another_call_is_never_taken_for_this_one(
    forged: dict[str, str],
) -> None:
    """A paused result whose identity names another call id or tool runs the model's own call."""
    received: list[Any] = []
    model = ScriptedModel([tool_call("refund", "c1", order_id="o-1"), final("Done.")])
    agent = Agent(model, _gated("write", received), policy=allow_writes("refund"))
    paused = agent.run_sync("Refund o-1.")
    (identity,) = _identities(paused)
    other = identity.model_copy(update={**forged, "arguments": {"order_id": "o-forged"}})
    tampered = _with_identities(paused, other)
    assert agent.resume_sync(tampered, approvals=[_approve(paused)]).status is RunStatus.COMPLETED
    assert [order for order, _ in received] == ["o-1"]


class _DiesAtIntent:
    """A store whose worker dies as it journals a write, before the intent is stored."""

    def __init__(self, store: MemoryRunStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        raise Crash


def _refund_once(received: list[Any], crash: list[bool], *, lookup: bool = True) -> ToolRegistry:
    """A write whose lookup (if any) says "not applied"; it dies before its effect when asked."""
    registry = ToolRegistry()

    def not_applied(arguments: dict[str, Any], ctx: ToolContext) -> NotApplied:
        return NotApplied()

    @registry.tool(effect="write", reconcile=not_applied if lookup else None)
    def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        if crash and crash.pop():
            raise Crash
        received.append((order_id, ctx.idempotency_key))
        return order_id

    return registry


@pytest.mark.parametrize("forged", [{"provider_call_id": "c9"}, {"tool": "other"}])
def test_a_journaled_intent_of_another_call_is_never_taken_for_this_one(
    forged: dict[str, str],
) -> None:
    """An intent under the call's key naming another call id or tool is not this call's."""
    asyncio.run(_journaled_other(forged))


async def _journaled_other(forged: dict[str, str]) -> None:
    store = MemoryRunStore()
    received: list[Any] = []
    steps = [tool_call("refund", "c1", order_id="o-1"), final("Done.")]
    dying = Agent(ScriptedModel(steps), _refund_once(received, [], lookup=False),
                  policy=allow_writes("refund"), store=_DiesAtIntent(store))  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(Crash):
        await dying.run("Refund o-1.", run_id="forged")
    fields = {"tool": "refund", "provider_call_id": "c1", **forged}
    await store.record_intent(  # another call's intent under this call's key
        WriteIntent(
            run_id="forged",
            call_id="call#1",
            idempotency_key="k" * 32,
            arguments_digest="d" * 64,
            recorded_at=datetime.now(UTC),
            arguments={"order_id": "o-forged"},
            digest_version=1,
            **fields,
        )
    )
    again = Agent(ScriptedModel(steps[1:]), _refund_once(received, [], lookup=False),
                  policy=allow_writes("refund"), store=store)  # fmt: skip
    result = await again.resume("forged", take_over=True)
    assert received == []  # never run with the other call's arguments
    (receipt,) = result.receipts
    assert receipt.status == "unknown"
    assert "records other arguments than this call" in str(receipt.message)


def test_a_write_dead_before_its_effect_is_retried_under_its_journaled_identity() -> None:
    """Resumed from its intent alone and cleared by its lookup, it reruns as journaled."""
    asyncio.run(_retried_from_the_journal())


async def _retried_from_the_journal() -> None:
    store = MemoryRunStore()
    received: list[Any] = []
    steps = [tool_call("refund", "c1", order_id="o-1"), final("Done.")]
    first = Agent(ScriptedModel(steps), _refund_once(received, [True]),
                  policy=allow_writes("refund"), store=store)  # fmt: skip
    with pytest.raises(Crash):
        await first.run("Refund o-1.", run_id="retried")
    (journaled,) = await store.journal("retried")
    again = Agent(ScriptedModel(steps[1:]), _refund_once(received, []),
                  policy=allow_writes("refund"), store=store)  # fmt: skip
    assert (await again.resume("retried", take_over=True)).status is RunStatus.COMPLETED
    (entry,) = await store.journal("retried")
    assert received == [("o-1", journaled.intent.idempotency_key)]
    assert (entry.intent.arguments, entry.intent.digest_version) == ({"order_id": "o-1"}, 1)
    assert entry.intent.idempotency_key == journaled.intent.idempotency_key


def test_a_legacy_write_cleared_by_its_lookup_is_journaled_again_under_its_legacy_identity() -> (
    None
):
    """A write an older release journaled, retried after its lookup, keeps its key and version 0."""
    asyncio.run(_legacy_retried())


async def _legacy_retried() -> None:
    store = MemoryRunStore()
    asked: list[str | None] = []
    ran: list[str | None] = []
    crashes = [False, True, True]  # the older release, then the first newer one, die in the write
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> NotApplied:
        asked.append(ctx.idempotency_key)
        return NotApplied()

    @registry.tool(effect="write", reconcile=lookup)
    def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        if crashes.pop():
            raise Crash
        ran.append(ctx.idempotency_key)
        return order_id

    older = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1")]),
        registry,
        policy=allow_writes("refund"),
        store=_OlderRelease(store),  # type: ignore[arg-type]
    )
    with pytest.raises(Crash):
        await older.run("Refund o-1.", run_id="legacy")
    (legacy,) = await store.journal("legacy")

    def newer() -> Agent:
        model = ScriptedModel([final("Refunded.")])
        return Agent(model, registry, policy=allow_writes("refund"), store=store)

    with pytest.raises(Crash):  # it dies again, in the write it journaled again
        await newer().resume("legacy", take_over=True)
    await _journaled_under(store, legacy.intent)
    result = await newer().resume("legacy", take_over=True)
    assert result.status is RunStatus.COMPLETED, result
    await _journaled_under(store, legacy.intent)
    assert asked == [legacy.intent.idempotency_key] * 2
    assert ran == [legacy.intent.idempotency_key]


async def _journaled_under(store: MemoryRunStore, legacy: WriteIntent) -> None:
    """The run's one write is journaled with its arguments, the legacy key and version 0."""
    (entry,) = await store.journal("legacy")
    assert entry.intent.arguments == {"order_id": "o-1"}
    assert (entry.intent.idempotency_key, entry.intent.digest_version) == (
        legacy.idempotency_key,
        0,
    )


class _KeyedByProviderId(_OlderRelease):
    """A store as a release before journal keys wrote it: intents keyed by the model's call id."""

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        moved = intent.model_copy(update={"call_id": intent.provider_call_id})
        await super().record_intent(moved, lease=lease)


def test_a_write_journaled_under_its_provider_id_by_an_older_release_is_recognised() -> None:
    """An intent keyed by the model's id with the old digest is this call's, never "other"."""
    store = MemoryRunStore()
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def refund(order_id: str) -> str:
        """Refund an order."""
        raise Crash

    older = Agent(ScriptedModel([tool_call("refund", "c1", order_id="o-1")]), registry,
                  policy=allow_writes("refund"), store=_KeyedByProviderId(store))  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(Crash):
        older.run_sync("Refund o-1.", run_id="keyed")
    newer = Agent(ScriptedModel([final("Refunded.")]), registry, policy=allow_writes("refund"),
                  store=store)  # fmt: skip
    result = newer.resume_sync("keyed", take_over=True)
    (receipt,) = result.receipts
    assert receipt.status == "unknown"
    assert "process stopped after this write started" in str(receipt.message)


def test_a_paused_call_keeps_the_request_id_it_paused_with() -> None:
    """A request stored under another id (an earlier release's naming) is still the one decided."""
    ledger: list[dict[str, Any]] = []
    model = ScriptedModel([tool_call("refund", "c1", order_id="o-1"), final("Refunded.")])
    agent = Agent(model, _refunds(ledger, approval=True, crash=[]), policy=allow_writes("refund"))
    paused = agent.run_sync("Refund o-1.")
    (request,) = paused.approval_requests
    renamed = request.model_copy(update={"id": "apr-named-by-an-earlier-release"})
    earlier = paused.model_copy(update={"approval_requests": (renamed,)})
    decision = Approval(request_id=renamed.id, approved=True, approver="alice")
    resumed = agent.resume_sync(earlier, approvals=[decision])
    assert resumed.status is RunStatus.COMPLETED, resumed.stop_reason
    assert [a.request_id for a in resumed.approvals] == [renamed.id]
    assert len(ledger) == 1
