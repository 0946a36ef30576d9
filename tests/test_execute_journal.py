"""A journaled write's retry and its unbelievable receipt: fencing and the journal key, pinned."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tenacity import wait_none

from ownloop import Agent, Receipt, RunStatus, StopReason, ToolContext, TransientToolError
from ownloop.exceptions import RunLeased
from ownloop.policy import allow_writes
from ownloop.retry import RetryPolicy
from ownloop.store import MemoryRunStore
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry


@pytest.mark.parametrize("failures", [1, 2])
def test_a_write_is_not_retried_by_a_worker_that_lost_the_run(failures: int) -> None:
    """Taken over while its write failed transiently, the worker never attempts it again."""
    store = MemoryRunStore()
    registry = ToolRegistry()
    attempts: list[int] = []

    @registry.tool(effect="write")
    async def send(to: str, ctx: ToolContext) -> str:
        """Send; fail transiently, and lose the run to another worker on the last failure.

        Args:
            to: Whom.
            ctx: Injected by the runtime.
        """
        attempts.append(ctx.attempt)
        if ctx.attempt < failures:
            raise TransientToolError("busy")
        if ctx.attempt == failures:
            await store.acquire_lease(ctx.run_id, "other-worker", 30.0, take_over=True)
            raise TransientToolError("busy, and the run was taken over meanwhile")
        return "sent"

    agent = Agent(
        ScriptedModel([tool_call("send", "c1", to="a"), final("sent")]),
        registry,
        policy=allow_writes("send"),
        store=store,
        retry=RetryPolicy(wait=wait_none()),
        clock=FakeClock(),
    )
    with pytest.raises(RunLeased):
        agent.run_sync("send it", run_id="r1")
    assert attempts == list(range(1, failures + 1))  # the retry after the take-over never ran


def test_an_unbelievable_write_receipt_is_pending_under_its_journal_key() -> None:
    """The pending write names the journal key and the idempotency key its handler was given."""
    registry = ToolRegistry()
    seen: list[ToolContext] = []

    @registry.tool(effect="write")
    def publish(ctx: ToolContext) -> Receipt:
        """Return a receipt for another call.

        Args:
            ctx: Injected by the runtime.
        """
        seen.append(ctx)
        return Receipt(call_id="other", tool="publish", effect="applied")

    agent = Agent(
        ScriptedModel([tool_call("publish", "c1")]),
        registry,
        policy=allow_writes("publish"),
        store=MemoryRunStore(),
        clock=FakeClock(),
    )
    result = agent.run_sync("q", run_id="r2")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.RECEIPT_INVALID)
    (pending,) = result.pending
    assert pending.journal_key == "call#1"
    assert pending.idempotency_key == seen[0].idempotency_key
    journal: list[Any] = asyncio.run(agent.store.journal("r2"))  # type: ignore[union-attr]
    assert [entry.intent.idempotency_key for entry in journal] == [pending.idempotency_key]
