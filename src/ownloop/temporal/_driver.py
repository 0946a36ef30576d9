"""The Temporal driver: every effect of the loop core performed as a local activity.

An effect (a validated tool call with its context, a model request with its budget) is a live
object of the worker that replays the run, not a value a payload converter could carry to another
machine. So each step is a *local activity*: Temporal runs it in the very worker whose workflow
code asked for it, and records its JSON output in the run's history. The work itself waits in
this process's table of pending steps (`PENDING`), under a key naming the workflow run and the
step; the activity only receives that key.

Temporal records a local activity's output when the workflow task completes. So before a step
that changes the store or the world (a checkpoint, a receipt, a write, stored decisions), if any
step ran since, the workflow runs a no-op activity (``ownloop_flush``), which completes the task:
every output that step depends on is in the history, and a worker that dies re-runs only steps
that may run again (model calls, reads, and the changing step itself, with the same inputs, which
is idempotent). A write's output is recorded at once (a re-run would find its own intent and
answer "unknown"). Steps that do the run's work (model calls, tools, writes) run once
(``maximum_attempts=1``: ownloop's attempt budget and unknown-effect rules own retrying); an
activity that does not finish in time (its timeout is the run's remaining deadline, capped by
``step_timeout_s``) is a timeout, and for a write an *unknown* effect, never a second execution.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeout

from ownloop.clock import Clock
from ownloop.engines import EngineDriver, Json, StepClock, encode_outcome, timed
from ownloop.exceptions import ConfigurationError, OwnloopError, UnknownEffectError
from ownloop.loop import (
    CallModel,
    Effect,
    Failure,
    InvokeTool,
    Outcome,
    Reconcile,
    Summarize,
    run_deadline,
    set_run_deadline,
)
from ownloop.runtime import Driver
from ownloop.store import RunStore

__all__ = [
    "FLUSH_ACTIVITY",
    "PENDING",
    "RUNNERS",
    "STEP_ACTIVITY",
    "SegmentRunner",
    "TemporalDriver",
    "VersionRefused",
    "durable_sleep",
    "ownloop_flush",
    "ownloop_step",
    "runner_for",
    "workflow_clock",
]

logger = logging.getLogger("ownloop.temporal")

STEP_ACTIVITY = "ownloop_step"
"""The local activity every step runs as."""

FLUSH_ACTIVITY = "ownloop_flush"
"""The no-op activity after each step that has the step's output recorded before the next."""

PENDING: dict[str, Callable[[], Awaitable[Json]]] = {}
"""The work of the steps this process's workflows asked for, by step key, until each is done."""


class VersionRefused(OwnloopError):
    """A worker refused to replay a segment another version of the workflow code started."""


class SegmentRunner(Protocol):
    """What the workflow needs of a runner: running one segment of a run."""

    async def segment(
        self, agent_name: str, run_id: str, start: Json, decisions: list[Json]
    ) -> Json:
        """Run one segment of a run (workflow code)."""
        ...


RUNNERS: dict[str, SegmentRunner] = {}
"""The runner serving each task queue in this process (set when its worker is built)."""


def runner_for(task_queue: str) -> SegmentRunner:
    """Return the runner this process serves ``task_queue`` with.

    Raises:
        ConfigurationError: If this process built no worker for it (the workflow task fails and
            Temporal retries it, on any worker of the queue).
    """
    runner = RUNNERS.get(task_queue)
    if runner is None:
        raise ConfigurationError(f"no ownloop runner serves task queue {task_queue!r} here")
    return runner


_EFFECTFUL = frozenset({"persist", "receipt", "write", "decisions"})
"""Steps that change the store or the world: every step before one is recorded first."""
_WORK_KINDS = frozenset({"model", "summarize", "tool", "tools", "write", "approver", "reconcile"})
_BOOKKEEPING = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=5,
)
_ONCE = RetryPolicy(maximum_attempts=1)
_GRACE_S = 1.0  # the inner driver ends a call at the deadline itself; this is the backstop


@activity.defn(name=STEP_ACTIVITY)
async def ownloop_step(key: str) -> Json:
    """Run the pending step ``key`` of a workflow in this process; return its output and end time.

    Args:
        key: The step's key in `PENDING`.

    Returns:
        ``{"value": ..., "mono": ..., "wall": ...}``.

    Raises:
        ApplicationError: If no workflow of this process waits for that step.
    """
    work = PENDING.get(key)
    if work is None:
        raise ApplicationError(
            f"no pending ownloop step {key!r} in this worker", non_retryable=True
        )
    return await work()


async def durable_sleep(seconds: float) -> None:
    """Sleep on a durable workflow timer (a replay does not sleep again)."""
    if seconds > 0:
        await workflow.sleep(seconds)


def workflow_clock() -> StepClock:
    """Return a step clock that sleeps on a durable workflow timer."""
    return StepClock(durable_sleep)


def _now() -> Json:
    """The workflow's time (deterministic): what a step that did not finish ends at."""
    now = workflow.now()
    return {"mono": now.timestamp(), "wall": now.isoformat()}


class TemporalDriver(EngineDriver):
    """Performs a run's effects as Temporal local activities (workflow code).

    Args:
        inner: The agent's driver, which performs each effect inside its activity.
        store: The run store (snapshots and the write journal).
        clock: The run's step clock (`workflow_clock`).
        run_id: The run.
        agent_clock: The clock the inner driver reads (the run's deadline is set on it).
        step_timeout_s: The longest any one step may take.
        flush_timeout_s: How long the no-op activity after a step may take on the worker that
            took it (a dead worker's is retried elsewhere after this).
    """

    def __init__(
        self,
        inner: Driver,
        store: RunStore,
        clock: StepClock,
        run_id: str,
        *,
        agent_clock: Clock,
        step_timeout_s: float,
        flush_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(inner, store, clock, run_id)
        self._agent_clock = agent_clock
        self.step_timeout_s = step_timeout_s
        self.flush_timeout_s = flush_timeout_s
        self._label = ""
        self._unrecorded = False  # a step ran since the history last recorded the outputs

    async def perform(self, effect: Effect) -> Outcome:
        """Perform one effect; its activity id names the run, the step and the call.

        Args:
            effect: What the core asked for.

        Returns:
            Its outcome.
        """
        if isinstance(effect, InvokeTool | Reconcile):
            context = effect.context
            self._label = f"{context.tool}:{context.call_id}:{context.attempt}"
        elif isinstance(effect, CallModel | Summarize):
            self._label = f"step{effect.request.step}"
        try:
            return await super().perform(effect)
        finally:
            self._label = ""

    async def step(self, kind: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work`` as one local activity; record its output before the next step starts.

        Args:
            kind: The step kind.
            work: Returns the step's JSON value.

        Returns:
            The value (the recorded one on a replay).

        Raises:
            ApplicationError: If a bookkeeping step (checkpoint, receipt, load) keeps failing.
        """
        self.seq += 1
        info = workflow.info()
        key = f"{info.workflow_id}/{info.run_id}/{self.seq}"
        deadline = run_deadline()
        remaining = None if deadline is None else max(deadline - self.clock.monotonic(), 0.0)
        timeout = self.step_timeout_s
        if remaining is not None and kind in _WORK_KINDS:
            timeout = min(timeout, remaining + _GRACE_S)
        agent_clock = self._agent_clock

        async def run() -> Json:
            if remaining is not None:  # the activity runs in its own task: give it the deadline
                set_run_deadline(agent_clock.monotonic() + remaining)
            return await timed(work)

        if kind in _EFFECTFUL and self._unrecorded:
            await self._record(f"ownloop:{self.run_id}:{self.seq}:flush")
        PENDING[key] = run
        label = f":{self._label}" if self._label else ""
        try:
            result: Json = await workflow.execute_local_activity(
                ownloop_step,
                key,
                activity_id=f"ownloop:{self.run_id}:{self.seq}:{kind}{label}",
                start_to_close_timeout=timedelta(seconds=timeout),
                retry_policy=_ONCE if kind in _WORK_KINDS else _BOOKKEEPING,
            )
        except (ActivityError, ApplicationError, TemporalTimeout) as error:
            if kind not in _WORK_KINDS:
                cause = error.cause if isinstance(error, ActivityError) else error
                raise ApplicationError(
                    f"ownloop step {kind} of run {self.run_id} failed: {cause}",
                    non_retryable=True,
                ) from error
            result = {"value": encode_outcome(Failure(_unfinished(kind, timeout))), **_now()}
        finally:
            PENDING.pop(key, None)
        self._unrecorded = True
        if kind == "write":  # a re-run would answer "unknown": record it before anything else
            await self._record(f"ownloop:{self.run_id}:{self.seq}:recorded")
        self.clock.adopt(result)
        return result["value"]

    async def _record(self, activity_id: str) -> None:
        await _flush(activity_id, self.flush_timeout_s)
        self._unrecorded = False

    async def sleep(self, seconds: float) -> None:
        """Sleep on a durable workflow timer (a replay does not sleep again)."""
        await durable_sleep(seconds)


async def _flush(activity_id: str, timeout_s: float) -> None:
    """End the workflow task, so the history records the local activity it ran.

    A no-op activity: the workflow task completes with the local activity's marker and the
    command to schedule it, and the next step starts when it completes. (A durable timer would
    do the same, but a development server fires timers about a second late.)
    """
    await workflow.execute_activity(
        ownloop_flush,
        activity_id=activity_id,
        start_to_close_timeout=timedelta(seconds=timeout_s),
        retry_policy=_BOOKKEEPING,
    )


@activity.defn(name=FLUSH_ACTIVITY)
async def ownloop_flush() -> None:
    """Do nothing: a step's end (see `TemporalDriver.step`)."""


def _unfinished(kind: str, timeout_s: float) -> Exception:
    """The failure the core sees for a work step whose activity did not finish."""
    if kind == "write":
        return UnknownEffectError(
            f"the write's activity did not finish within {timeout_s:g}s: whether it took effect "
            "is unknown; it is not executed again"
        )
    return TimeoutError(f"the {kind} activity did not finish within {timeout_s:g}s")
