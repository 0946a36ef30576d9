"""A worker process for the identity tests: starts or resumes one run in a fresh interpreter.

Run as ``python -m tests.identity_worker JOB_JSON`` with the ``PYTHONHASHSEED`` the test chose, so
the resumed run lives in another process under another hash seed. The job names its store: a
SQLite file (``db``) or a PostgreSQL schema (``dsn`` and ``schema``), opened by `open_store`. Its
one write tool, ``ship``, takes a ``set[str]`` and appends each effect to a ledger file with the
idempotency key it ran under (flushed to disk before it returns); its reconcile lookup reads that
ledger by key. A job may crash the process (``os._exit``; in-process, `SegmentDied`) right after
the effect is on disk, or right after the store recorded the write's receipt. It prints one JSON
line: the result's status, or the error's type.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from ownloop import Agent
from ownloop.contracts import AssistantMessage, Lease, Receipt
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry

ITEMS = ["pear", "apple", "fig", "banana", "kiwi", "plum", "cherry", "lime"]
SCRIPT = [tool_call("ship", "c1", order="o-1", items=ITEMS), final("Shipped o-1.")]


def ledger(path: Path) -> list[dict[str, Any]]:
    """Return every effect the ledger file holds."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _registry(job: dict[str, Any]) -> ToolRegistry:
    path = Path(job["ledger"])
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        done = [row for row in ledger(path) if row["key"] == ctx.idempotency_key]
        return Confirmed({"shipped": done[0]["order"]}) if done else NotApplied()

    def apply(order: str, items: set[str], ctx: ToolContext) -> dict[str, str]:
        row = {"key": ctx.idempotency_key, "order": order, "items": sorted(items)}
        with path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(row) + "\n")
            file.flush()
            os.fsync(file.fileno())
        if job.get("crash") == "after_apply":
            die(job, 17)  # the backend applied it; the process dies before any receipt
        return {"shipped": order}

    if job.get("version", 1) == 1:

        @registry.tool(effect="write", reconcile=lookup)
        def ship(order: str, items: set[str], ctx: ToolContext) -> dict[str, str]:
            """Ship an order's items."""
            return apply(order, items, ctx)

    else:  # a deploy between crash and resume: a new optional parameter

        @registry.tool(name="ship", effect="write", reconcile=lookup)
        def ship_v2(
            order: str, items: set[str], ctx: ToolContext, note: str = ""
        ) -> dict[str, str]:
            """Ship an order's items, with a note."""
            return apply(order, items, ctx)

    return registry


class SegmentDied(BaseException):
    """An in-process segment dies here (``job["in_process"]``): nothing below it runs."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def die(job: dict[str, Any], code: int) -> None:
    """End the segment at once: the process exits, or an in-process segment raises."""
    if job.get("in_process"):
        raise SegmentDied(code)
    os._exit(code)


class _CrashAfterReceipt:
    """A store whose process dies right after the write's receipt is stored."""

    def __init__(self, store: RunStore, job: dict[str, Any]) -> None:
        self._store = store
        self._job = job

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        await self._store.record_receipt(run_id, call_id, receipt, lease=lease)
        die(self._job, 18)  # the receipt is stored; the checkpoint after it never happens


def open_store(job: dict[str, Any], store: RunStore | None = None) -> tuple[RunStore, Any]:
    """Open the job's store (or take ``store``); return it and what the agent writes through."""
    if store is None and "dsn" in job:
        store = PostgresRunStore(job["dsn"], schema=job["schema"])
    elif store is None:
        store = SqliteRunStore(job["db"])
    return store, _CrashAfterReceipt(store, job) if job.get("crash") == "after_receipt" else store


async def _played(store: RunStore, run_id: str) -> int:
    stored = await store.get(run_id)
    if stored is None:
        return 0
    return sum(isinstance(message, AssistantMessage) for message in stored.snapshot.messages)


async def _work(job: dict[str, Any]) -> dict[str, Any]:
    store, through = open_store(job)
    played = await _played(store, job["run_id"])
    agent = Agent(
        ScriptedModel(SCRIPT[played:]),
        _registry(job),
        policy=allow_writes("ship"),
        store=through,
    )
    try:
        if job["action"] == "start":
            result = await agent.run("Ship o-1.", run_id=job["run_id"])
        else:
            result = await agent.resume(job["run_id"], accept_changes=job.get("accept", False))
    except Exception as error:  # reported to the test, which checks its type and message
        return {"error": type(error).__name__, "message": str(error)}
    finally:
        await store.close()
    return {"status": result.status.value, "output": result.output}


def main() -> None:
    """Run the job given as the first argument and print its outcome as one JSON line."""
    job = json.loads(sys.argv[1])
    print(json.dumps(asyncio.run(_work(job))), flush=True)


if __name__ == "__main__":
    main()
