"""A parent agent delegating a refund to a payments agent, both on one SQLite store.

Used in-process by ``test_delegation_durable.py`` and as a worker process:
``python -m tests.delegation_worker DB LEDGER PHASE [handoff]`` runs (``start``, ``crash``) or
resumes (``resume`` after ``start``, ``recover`` after ``crash``) the parent and prints the
result's status, stop reason and request ids as JSON. With ``handoff`` the payments agent is a
handoff: its answer is the parent's, and the parent's model is never asked again. In ``crash``
the refund writes its ledger line and the process SIGKILLs itself before the write returns.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ownloop import Agent, ToolRegistry
from ownloop.policy import allow_writes, require_approval_for
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, ToolContext

RUN_ID = "parent-1"


def build(
    store: SqliteRunStore, ledger: Path, phase: str, *, handoff: bool = False
) -> Agent[None, str]:
    """Build the parent for one phase (each phase's scripts hold only what it will be asked)."""

    def applied(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        lines = ledger.read_text().splitlines() if ledger.exists() else []
        found = f"refund {arguments['order']}" in lines
        return Confirmed(f"refunded {arguments['order']}") if found else NotApplied()

    registry = ToolRegistry()

    @registry.tool(effect="write", reconcile=applied)
    def refund(order: str, ctx: ToolContext) -> str:
        """Refund an order.

        Args:
            order: The order id.
            ctx: The call's context.
        """
        with ledger.open("a") as file:
            file.write(f"refund {order}\n")
        if phase == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"refunded {order}"

    first = phase in ("start", "crash")
    child_steps = [tool_call("refund", "r1", order="A1")] if first else [final("refunded A1")]
    parent_steps = [tool_call("payments", "p1", task="refund A1")] if first else [final("done")]
    if handoff and not first:
        parent_steps = []  # the child answers for the parent
    approval = phase in ("start", "resume")  # crash and recover: no approval needed
    child_policy = allow_writes("refund")
    if approval:
        child_policy = child_policy & require_approval_for("refund")
    child = Agent(ScriptedModel(child_steps), registry, policy=child_policy, store=store)
    parent_registry = ToolRegistry()
    parent_registry.register(
        child.as_tool(
            name="payments", description="Refunds orders.", effect="write", handoff=handoff
        )
    )
    return Agent(
        ScriptedModel(parent_steps),
        parent_registry,
        policy=allow_writes("payments", "refund"),
        store=store,
    )


def summary(result: Any) -> dict[str, Any]:
    """The parts of a result a test checks."""
    return {
        "status": result.status.value,
        "stop_reason": result.stop_reason.value,
        "requests": [request.id for request in result.approval_requests],
        "reasons": [request.reason for request in result.approval_requests],
        "output": result.output,
        "steps": result.usage.steps,
        "detail": result.detail,
    }


async def _main(database: str, ledger: str, phase: str, *mode: str) -> dict[str, Any]:
    async with SqliteRunStore(database) as store:
        parent = build(store, Path(ledger), phase, handoff=mode == ("handoff",))
        if phase in ("resume", "recover"):
            return summary(await parent.resume(RUN_ID))
        return summary(await parent.run("refund the customer", run_id=RUN_ID))


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(*sys.argv[1:]))))
