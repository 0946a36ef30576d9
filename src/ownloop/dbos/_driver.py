"""The DBOS driver: every effect of the loop core performed as a checkpointed DBOS step.

A group of overlapping reads (`InvokeTools`) is one step: its calls run concurrently inside it,
and the step's output holds every outcome in proposal order, so a replay is deterministic. Like
any step it is at-least-once: a crash during it runs its reads again, which reads allow. Writes
never join a group; each stays its own journaled step.

What does not depend on DBOS (the journal rules, the step outputs with their end time, the
codec) is the shared `ownloop.engines.EngineDriver`; this module runs its steps with
``DBOS.run_step_async`` and sleeps with ``DBOS.sleep_async``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from dbos import DBOS, StepOptions

from ownloop.engines import EngineDriver, Json, nothing, timed
from ownloop.engines import StepClock as _EngineClock

__all__ = ["DbosDriver", "Json", "StepClock", "nothing"]


logger = logging.getLogger("ownloop.dbos")


class StepClock(_EngineClock):
    """A clock that only moves when a step completes: replays read the same times.

    Its monotonic reading is wall-clock seconds (comparable across the machines a run may move
    between), never going backwards within a segment. It sleeps with ``DBOS.sleep_async``.
    """

    def __init__(self) -> None:
        super().__init__(DBOS.sleep_async)


class DbosDriver(EngineDriver):
    """Performs a run's effects as DBOS steps.

    Args:
        inner: The agent's driver, which performs each effect inside its step.
        store: The run store (snapshots and the write journal).
        clock: The run's step clock.
        run_id: The run.
        version: The stored version the segment starts from (``None`` for a new run).
    """

    async def step(self, kind: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work`` as one checkpointed step named ``ownloop.<kind>``; adopt its times.

        Args:
            kind: The step kind.
            work: Returns the step's JSON value.

        Returns:
            The value (the checkpointed one on a replay).
        """
        self.seq += 1
        logger.debug("run %s step %d: %s", self.run_id, self.seq, kind)

        async def run_step() -> Json:
            return await timed(work)

        result: Json = await DBOS.run_step_async(StepOptions(name=f"ownloop.{kind}"), run_step)
        self.clock.adopt(result)
        return result["value"]

    async def sleep(self, seconds: float) -> None:
        """Sleep durably (a DBOS sleep: a recovered workflow sleeps only what is left)."""
        await DBOS.sleep_async(seconds)
