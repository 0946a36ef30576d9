"""Receipts and effects: checked receipts, unknown writes, reconciliation, idempotency keys."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from ownloop import (
    Agent,
    Receipt,
    RunStatus,
    StopReason,
    ToolContext,
    ToolDefinitionError,
    TransientToolError,
    UnknownEffectError,
)
from ownloop.policy import allow_writes
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, StillUnknown, ToolRegistry


class Ledger:
    """An external system with writes the agent cannot always confirm."""

    def __init__(self, fail_first: int = 0, uncertain: int = 0) -> None:
        self.exports: list[str] = []
        self.keys: list[str | None] = []
        self.fail_first = fail_first
        self.uncertain = uncertain

    def export(self, name: str, ctx: ToolContext) -> dict[str, str]:
        """Record an export, failing or losing the confirmation as configured."""
        self.keys.append(ctx.idempotency_key)
        if self.fail_first:
            self.fail_first -= 1
            raise TransientToolError("busy")
        self.exports.append(name)
        if self.uncertain:
            self.uncertain -= 1
            raise UnknownEffectError("accepted, then the connection dropped")
        return {"exported": name}


def _agent(
    ledger: Ledger, reconcile: Any = None, steps: list[Any] | None = None, **options: Any
) -> Agent:
    registry = ToolRegistry()

    @registry.tool(effect="write", reconcile=reconcile)
    def export(name: str, ctx: ToolContext) -> dict[str, str]:
        """Export a report.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        return ledger.export(name, ctx)

    model = ScriptedModel(steps or [tool_call("export", "c1", name="q3"), final("Exported q3.")])
    return Agent(model, registry, policy=allow_writes("export"), clock=FakeClock(), **options)


def test_idempotency_key_is_stable_across_retries() -> None:
    """A write retried after transient failures keeps one idempotency key and runs once."""
    ledger = Ledger(fail_first=2)
    result = _agent(ledger).run_sync("export")
    assert result.status is RunStatus.COMPLETED
    assert ledger.exports == ["q3"]
    assert len(set(ledger.keys)) == 1
    assert len(ledger.keys) == 3


def test_unknown_without_lookup_stays_unresolved() -> None:
    """An unknown effect with no declared lookup blocks the answer: unresolved, ran once."""
    ledger = Ledger(uncertain=1)
    result = _agent(ledger).run_sync("export")
    assert (result.status, result.stop_reason) == (
        RunStatus.UNRESOLVED,
        StopReason.UNRESOLVED_EFFECT,
    )
    assert ledger.exports == ["q3"]
    assert [p.call_id for p in result.pending] == ["c1"]


def test_confirmed_lookup_settles_the_write_without_repeating_it() -> None:
    """A lookup confirming the effect records it as applied and the run completes."""
    ledger = Ledger(uncertain=1)

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed:
        assert ctx.idempotency_key == ledger.keys[0]
        return Confirmed({"found": arguments["name"] in ledger.exports})

    result = _agent(ledger, reconcile=lookup).run_sync("export")
    assert result.status is RunStatus.COMPLETED
    assert ledger.exports == ["q3"]
    assert result.pending == ()
    assert [(r.status, r.effect) for r in result.receipts] == [
        ("unknown", "unknown"),
        ("ok", "applied"),
    ]
    reconciled = next(event for event in result.trace if event.kind == "effect_reconciled")
    assert reconciled.outcome == "confirmed"


def test_not_applied_lookup_retries_with_the_same_key() -> None:
    """A lookup saying the write did not happen clears it for one retry with the same key."""
    ledger = Ledger(uncertain=1)
    ledger_before: list[str] = []

    async def lookup(arguments: dict[str, Any], ctx: ToolContext) -> NotApplied:
        ledger_before.extend(ledger.exports)
        ledger.exports.clear()  # the remote side rolled the export back
        return NotApplied()

    result = _agent(ledger, reconcile=lookup).run_sync("export")
    assert result.status is RunStatus.COMPLETED
    assert ledger_before == ["q3"]
    assert ledger.exports == ["q3"]
    assert len(set(ledger.keys)) == 1


@pytest.mark.parametrize(
    "verdict", [StillUnknown("index is eventually consistent"), "not-a-verdict"]
)
def test_non_authoritative_lookup_leaves_the_write_pending(verdict: object) -> None:
    """A lookup that cannot tell (or answers nonsense) leaves the write pending: unresolved."""
    ledger = Ledger(uncertain=1)
    result = _agent(ledger, reconcile=lambda arguments, ctx: verdict).run_sync("export")
    assert result.status is RunStatus.UNRESOLVED
    assert ledger.exports == ["q3"]
    assert any(
        event.kind == "effect_reconciled" and event.outcome == "unknown" for event in result.trace
    )


def test_failing_lookup_settles_nothing() -> None:
    """A lookup that raises leaves the write pending."""
    ledger = Ledger(uncertain=1)

    def broken(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed:
        raise ConnectionError("lookup service down")

    assert _agent(ledger, reconcile=broken).run_sync("export").status is RunStatus.UNRESOLVED


def test_write_timeout_is_an_unknown_effect() -> None:
    """A write that exceeds its timeout may have happened: it becomes pending, never retried."""
    registry = ToolRegistry()
    calls = Counter[str]()

    @registry.tool(effect="write", timeout_s=0.01)
    async def slow_export(name: str) -> str:
        """Export slowly.

        Args:
            name: The report.
        """
        calls[name] += 1
        await asyncio.sleep(1)
        return "done"

    model = ScriptedModel([tool_call("slow_export", name="q3"), final("done")])
    result = Agent(model, registry, policy=allow_writes("slow_export")).run_sync("q")
    assert result.status is RunStatus.UNRESOLVED
    assert calls == Counter({"q3": 1})
    assert result.receipts[0].status == "unknown"


@pytest.mark.parametrize(
    ("receipt", "problem"),
    [
        (Receipt(call_id="c1", tool="check", status="transient", effect="applied"), "incoherent"),
        (Receipt(call_id="c1", tool="check", status="ok", effect="applied"), "claims an applied"),
        (
            Receipt(call_id="c1", tool="check", status="unknown", effect="unknown"),
            "claims an unknown",
        ),
        (Receipt(call_id="c1", tool="check", status="ok", revision="rev-old"), "not the current"),
        (Receipt(call_id="zz", tool="check"), "expected call"),
    ],
)
def test_invalid_receipts_fail_the_run(receipt: Receipt, problem: str) -> None:
    """An incoherent, overclaiming, stale or misaddressed receipt ends the run receipt_invalid."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def check() -> Receipt:
        """Return a forged receipt."""
        return receipt

    model = ScriptedModel([tool_call("check", "c1")])
    result = Agent(model, registry, revision=lambda: "rev-now").run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.RECEIPT_INVALID)
    assert problem in result.detail


def test_invalid_receipt_from_a_write_leaves_it_pending() -> None:
    """A write whose receipt cannot be believed may have happened: it is recorded as pending."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def publish() -> Receipt:
        """Return a receipt for another call."""
        return Receipt(call_id="other", tool="publish", effect="applied")

    model = ScriptedModel([tool_call("publish", "c1")])
    result = Agent(model, registry, policy=allow_writes("publish")).run_sync("q")
    assert result.stop_reason is StopReason.RECEIPT_INVALID
    assert [p.call_id for p in result.pending] == ["c1"]


def test_receipts_carry_the_revision_after_the_tool() -> None:
    """Plain return values become receipts stamped with the revision after execution."""
    state = {"value": 1}
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def bump() -> int:
        """Increase the value."""
        state["value"] += 1
        return state["value"]

    model = ScriptedModel([tool_call("bump"), final("bumped")])
    agent = Agent(
        model, registry, policy=allow_writes("bump"), revision=lambda: f"rev-{state['value']}"
    )
    result = agent.run_sync("q")
    assert [(r.revision, r.effect) for r in result.receipts] == [("rev-2", "applied")]


def test_reconcile_is_only_for_write_tools() -> None:
    """Declaring a lookup on a read tool is a definition error."""
    registry = ToolRegistry()
    with pytest.raises(ToolDefinitionError, match="reconcile"):

        @registry.tool(effect="read", reconcile=lambda arguments, ctx: Confirmed())
        def read() -> str:
            """Read."""
            return "x"


def test_a_pending_write_from_an_invalid_receipt_keeps_its_journal_and_idempotency_keys() -> None:
    """The pending entry names the call's journal key and the idempotency key its handler saw."""
    registry = ToolRegistry()
    seen: list[str | None] = []

    @registry.tool(effect="write")
    def publish(ctx: ToolContext) -> Receipt:
        """Return a receipt for another call."""
        seen.append(ctx.idempotency_key)
        return Receipt(call_id="other", tool="publish", effect="applied")

    model = ScriptedModel([tool_call("publish", "c1")])
    result = Agent(model, registry, policy=allow_writes("publish")).run_sync("q")
    assert result.stop_reason is StopReason.RECEIPT_INVALID
    (pending,) = result.pending
    assert (pending.journal_key, pending.idempotency_key) == ("call#1", seen[0])
