"""One segment of a run for the identity state machine, in a fresh interpreter.

``python -m tests.identity_model_worker JOB_JSON`` (under the ``PYTHONHASHSEED`` the machine drew)
starts the run, or resumes it from its store (a SQLite file or a PostgreSQL schema, see
`tests.identity_worker.open_store`). Its write tool ``ship`` takes one argument
``x`` of the drawn kind (a set, a frozenset of large ints, a nested model, a factory default, a
secret, a float, a datetime with an offset, a large int, text in one Unicode normal form); version
2 of the tool adds ``note: str = ""`` (a deploy). Every effect is appended to a ledger file with the
call's id, its idempotency key and the canonical text of the ``x`` the handler received, flushed
before the handler goes on. A segment may die right after the effect, or after its receipt.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, SecretStr

from ownloop import Agent
from ownloop.contracts import AssistantMessage
from ownloop.identity import canonical_text, encode
from ownloop.policy import allow_writes
from ownloop.store import RunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry
from tests.identity_worker import SegmentDied, die, open_store


class Parcel(BaseModel):
    """A nested model argument."""

    street: str
    tags: frozenset[str] = frozenset()


KINDS: dict[str, Any] = {
    "set": set[str],
    "frozenset": frozenset[int],
    "model": Parcel,
    "factory": Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
    "secret": SecretStr,
    "float": float,
    "datetime": datetime,
    "bigint": int,
    "text": str,
}


def ledger(path: Path) -> list[dict[str, Any]]:
    """Return every effect the ledger file holds."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _registry(job: dict[str, Any]) -> ToolRegistry:
    path = Path(job["ledger"])
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
        done = any(row["key"] == ctx.idempotency_key for row in ledger(path))
        return Confirmed({"shipped": True}) if done else NotApplied()

    def apply(x: Any, ctx: ToolContext) -> dict[str, bool]:
        row = {"call": ctx.call_id, "key": ctx.idempotency_key, "x": canonical_text(encode(x))}
        with path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(row) + "\n")
            file.flush()
            os.fsync(file.fileno())
        if job.get("crash") == "after_apply":
            die(job, 17)
        return {"shipped": True}

    def ship_v1(x: Any, ctx: ToolContext) -> dict[str, bool]:
        """Ship x."""
        return apply(x, ctx)

    def ship_v2(x: Any, ctx: ToolContext, note: str = "") -> dict[str, bool]:
        """Ship x, with a note."""
        return apply(x, ctx)

    ship = ship_v2 if job.get("version", 1) == 2 else ship_v1
    ship.__annotations__ = {**ship.__annotations__, "x": KINDS[job["kind"]]}
    registry.tool(name="ship", effect="write", requires_approval=job["approval"], reconcile=lookup)(
        ship
    )
    return registry


async def segment(job: dict[str, Any], store: RunStore | None = None) -> dict[str, Any]:
    """Start or resume the run; in-process (``store`` given) a death is the outcome ``crashed``."""
    store, through = open_store(job, store)
    stored = await store.get(job["run_id"])
    played = 0
    if stored is not None:
        played = sum(isinstance(m, AssistantMessage) for m in stored.snapshot.messages)
    script = [tool_call("ship", call_id, **job["arguments"]) for call_id in job["calls"]]
    agent = Agent(
        ScriptedModel([*script, final("Shipped.")][played:]),
        _registry(job),
        policy=allow_writes("ship"),
        store=through,
    )
    try:
        if stored is None:
            result = await agent.run("Ship it.", run_id=job["run_id"])
        else:  # in one process the dead segment's lease is still held by a live pid: take it
            accept, take_over = job.get("accept", False), bool(job.get("in_process"))
            result = await agent.resume(job["run_id"], accept_changes=accept, take_over=take_over)
    except SegmentDied as died:
        return {"crashed": died.code}
    except Exception as error:  # reported to the machine, which checks it
        return {"error": type(error).__name__, "message": str(error)}
    finally:
        if not job.get("in_process"):
            await store.close()
    return {"status": result.status.value}


def main() -> None:
    """Run the job given as the first argument and print its outcome as one JSON line."""
    print(json.dumps(asyncio.run(segment(json.loads(sys.argv[1])))), flush=True)


if __name__ == "__main__":
    main()
