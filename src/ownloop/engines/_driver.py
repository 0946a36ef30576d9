"""What every durable engine's driver does: the journal rules, the step clock, the step outputs.

A durable engine (DBOS, Temporal) replays a run's workflow code after a crash and hands it the
outputs its steps recorded. `EngineDriver` holds what does not depend on the engine: which
effect is which kind of step, how an outcome becomes the step's JSON value (``_codec``), how a
write journals its intent and refuses to run again when its own earlier attempt was cut
mid-flight, how a checkpoint survives being saved twice. An engine supplies `EngineDriver.step`
(run a callable as one recorded step) and `EngineDriver.sleep` (a durable sleep).

Step outputs carry the time measured when the step ended (`timed`), which the `StepClock`
adopts: between steps the loop reads a frozen clock, so a replay reads exactly the times the first
execution did.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ownloop.contracts import RunResult
from ownloop.engines._codec import decode_outcome, encode_outcome
from ownloop.exceptions import StaleCheckpoint, UnknownEffectError
from ownloop.loop import (
    ConfirmLease,
    Effect,
    Failure,
    InvokeTool,
    LoopGenerator,
    Outcome,
    Persist,
    ReadRevision,
    RecordIntent,
    RecordReceipt,
    Sleep,
)
from ownloop.runtime import Driver
from ownloop.store import RunStore

__all__ = ["STEP_KINDS", "EngineDriver", "Json", "StepClock", "nothing", "reading", "timed"]

Json = dict[str, Any]

logger = logging.getLogger("ownloop.engines")

STEP_KINDS = {
    "CallModel": "model",
    "Summarize": "summarize",
    "InvokeTool": "tool",
    "InvokeTools": "tools",
    "ReadRevision": "revision",
    "AskApprover": "approver",
    "Reconcile": "reconcile",
}
"""The step kind of each effect the inner driver performs (``write`` for a journaled write)."""


def reading() -> Json:
    """Return the time now, as a step output carries it (``mono``: epoch seconds, ``wall``)."""
    now = datetime.now(UTC)
    return {"mono": now.timestamp(), "wall": now.isoformat()}


async def timed(work: Callable[[], Awaitable[Any]]) -> Json:
    """Run a step's work; return its value with the time it ended (what the engine records)."""
    value = await work()
    return {"value": value, **reading()}


class StepClock:
    """A clock that only moves when a step completes: replays read the same times.

    Its monotonic reading is wall-clock seconds (comparable across the machines a run may move
    between), never going backwards within a segment.

    Args:
        sleeper: The engine's durable sleep (the loop core never sleeps on it: a driver
            performs its `Sleep` effects).
    """

    def __init__(self, sleeper: Callable[[float], Awaitable[None]] | None = None) -> None:
        self._mono = 0.0
        self._wall = datetime.fromtimestamp(0, UTC)
        self._sleeper = sleeper

    def adopt(self, reading: Mapping[str, Any]) -> None:
        """Take the times a step measured at its end.

        Args:
            reading: The step's ``mono`` and ``wall`` readings.
        """
        self._mono = max(self._mono, float(reading["mono"]))
        self._wall = max(self._wall, datetime.fromisoformat(str(reading["wall"])))

    def monotonic(self) -> float:
        """Return the monotonic reading of the last completed step."""
        return self._mono

    def now(self) -> datetime:
        """Return the wall-clock time of the last completed step."""
        return self._wall

    async def sleep(self, seconds: float) -> None:
        """Sleep durably on the engine (the clock moves with the next step)."""
        if self._sleeper is not None:
            await self._sleeper(seconds)

    def __repr__(self) -> str:
        return f"StepClock(now={self._wall.isoformat()})"


class EngineDriver(ABC):
    """Performs a run's effects as an engine's recorded steps, under the journal rules.

    Args:
        inner: The agent's driver, which performs each effect inside its step.
        store: The run store (snapshots and the write journal).
        clock: The run's step clock.
        run_id: The run.
        version: The stored version the segment starts from (``None`` for a new run).
    """

    def __init__(
        self,
        inner: Driver,
        store: RunStore,
        clock: StepClock,
        run_id: str,
        version: int | None = None,
    ) -> None:
        self._inner = inner
        self._store = store
        self.clock = clock
        self.run_id = run_id
        self.version = version
        self.seq = 0
        self._intents: dict[str, RecordIntent] = {}

    @abstractmethod
    async def step(self, kind: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work`` as one recorded step of kind ``kind``; adopt the times it ended at.

        Args:
            kind: The step kind (``model``, ``write``, ``persist``...).
            work: Returns the step's JSON value.

        Returns:
            The value (the recorded one on a replay).
        """

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Sleep durably (a replay does not sleep again)."""

    async def drive(self, loop: LoopGenerator) -> RunResult:
        """Run the core to its end, performing every effect as a step.

        Args:
            loop: The core's generator.

        Returns:
            The run's result.
        """
        try:
            effect = next(loop)
            while True:
                effect = loop.send(await self.perform(effect))
        except StopIteration as finished:
            result: RunResult = finished.value
            return result

    async def perform(self, effect: Effect) -> Outcome:
        """Perform one effect as a step (journal intents are folded into the write's step).

        Args:
            effect: What the core asked for.

        Returns:
            Its outcome.
        """
        if isinstance(effect, ConfirmLease):
            return None  # the engine runs a workflow on one worker at a time: no lease to confirm
        if isinstance(effect, RecordIntent):
            self._intents[effect.intent.idempotency_key] = effect
            return None
        if isinstance(effect, Persist):
            self.version = await self.step("persist", lambda: self._persist(effect))
            return None
        if isinstance(effect, RecordReceipt):
            await self.step("receipt", lambda: self._receipt(effect))
            return None
        if isinstance(effect, Sleep):
            await self.sleep(max(effect.seconds, 0.0))
            await self.step("sleep", nothing)
            return None
        if self.is_write(effect):
            encoded = await self.step("write", lambda: self._write(effect))
        else:
            kind = STEP_KINDS.get(type(effect).__name__, "effect")
            encoded = await self.step(kind, lambda: self._outcome(effect))
        outcome = decode_outcome(encoded)
        if isinstance(effect, ReadRevision) and isinstance(outcome, Failure):
            raise outcome.error  # as with the plain driver: a failing revision source fails the run
        return outcome

    def is_write(self, effect: Effect) -> bool:
        """Whether ``effect`` is a journaled write (its intent was recorded just before)."""
        return isinstance(effect, InvokeTool) and effect.context.idempotency_key in self._intents

    async def _outcome(self, effect: Effect) -> Json:
        try:
            return encode_outcome(await self._inner.perform(effect))
        except Exception as error:  # steps never raise: the engine never serialises exceptions
            return encode_outcome(Failure(error))

    async def _persist(self, effect: Persist) -> int:
        try:
            return await self._store.save(effect.snapshot, expected_version=self.version)
        except StaleCheckpoint:
            # At-least-once: this very step may have saved before its process died.
            stored = await self._store.get(self.run_id)
            mine = effect.snapshot.model_dump(mode="json")
            if stored is None or stored.snapshot.model_dump(mode="json") != mine:
                raise
            return stored.version

    async def _receipt(self, effect: RecordReceipt) -> None:
        await self._store.record_receipt(effect.run_id, effect.call_id, effect.receipt)

    async def _write(self, effect: Effect) -> Json:
        """Journal the intent and run the write once; never run it again after a crash."""
        assert isinstance(effect, InvokeTool)
        recorded = self._intents[str(effect.context.idempotency_key)].intent
        call_id = recorded.call_id  # the journal key, not the model's id
        # Each attempt's intent carries the step's start time: a replay of the same step has
        # the same one (the clock only moves when a step completes), a later attempt does not.
        intent = recorded.model_copy(update={"recorded_at": self.clock.now()})
        try:
            journal = await self._store.journal(self.run_id)
            entry = next((e for e in journal if e.intent.call_id == call_id), None)
            if entry is not None and entry.receipt is None and entry.intent == intent:
                raise UnknownEffectError(
                    "the worker stopped after this write started and before its outcome was "
                    "recorded; it is not executed again"
                )
            await self._store.record_intent(intent)
        except Exception as error:  # whatever failed, the handler has not run (again)
            return encode_outcome(Failure(error))
        return await self._outcome(effect)


async def nothing() -> None:
    """Do nothing: a step whose only output is the time it ended."""
    return None
