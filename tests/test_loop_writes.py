"""Write tools in the loop: unknown effects become pending operations and block further writes."""

from __future__ import annotations

from collections import Counter

from ownloop import Agent, Receipt, RunStatus, StopReason, UnknownEffectError
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolContext, ToolRegistry

WRITES = allow_writes("export", "publish")


def _registry(effects: Counter[str], keys: list[str | None]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def export(name: str, ctx: ToolContext) -> str:
        """Export a report whose outcome is unknown.

        Args:
            name: The report.
            ctx: Injected by the runtime.
        """
        keys.append(ctx.idempotency_key)
        effects[name] += 1
        raise UnknownEffectError("the export service timed out after accepting the request")

    @registry.tool(effect="write")
    def publish(name: str) -> dict[str, str]:
        """Publish a report.

        Args:
            name: The report.
        """
        effects[f"publish:{name}"] += 1
        return {"published": name}

    return registry


def test_unknown_effect_is_pending_and_never_retried() -> None:
    """A write with unknown effect runs once, becomes pending and blocks the final answer."""
    effects = Counter[str]()
    keys: list[str | None] = []
    model = ScriptedModel([tool_call("export", name="q3"), final("Exported.")])
    result = Agent(model, _registry(effects, keys), policy=WRITES).run_sync("export q3")
    assert (result.status, result.stop_reason) == (
        RunStatus.UNRESOLVED,
        StopReason.UNRESOLVED_EFFECT,
    )
    assert effects == Counter({"q3": 1})
    assert result.usage.tool_attempts == 1
    assert [(p.tool, p.call_id) for p in result.pending] == [("export", "call-export")]
    assert result.pending[0].idempotency_key == keys[0]
    assert keys[0] is not None
    assert len(keys[0]) == 32
    assert result.output is None


def test_pending_write_blocks_every_new_write() -> None:
    """After an unknown effect, a different write is refused without running."""
    effects = Counter[str]()
    model = ScriptedModel([tool_call("export", name="q3"), tool_call("publish", name="q3")])
    result = Agent(model, _registry(effects, []), policy=WRITES).run_sync("export and publish")
    assert result.status is RunStatus.UNRESOLVED
    assert "publish" in result.detail
    assert effects["publish:q3"] == 0


def test_write_receipt_records_applied_effect() -> None:
    """A write that returns normally gets an ok receipt with effect applied."""
    effects = Counter[str]()
    model = ScriptedModel([tool_call("publish", name="r"), final("published")])
    result = Agent(model, _registry(effects, []), policy=WRITES).run_sync("publish")
    assert result.status is RunStatus.COMPLETED
    assert result.receipts == (
        Receipt(
            call_id="call-publish",
            tool="publish",
            status="ok",
            effect="applied",
            data={"published": "r"},
        ),
    )


def test_receipt_for_another_call_fails_the_run() -> None:
    """A handler returning a receipt for a different call fails with receipt_invalid."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def forge() -> Receipt:
        """Return a receipt for a call that is not this one."""
        return Receipt(call_id="someone-else", tool="forge")

    result = Agent(ScriptedModel([tool_call("forge")]), registry).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.RECEIPT_INVALID)
