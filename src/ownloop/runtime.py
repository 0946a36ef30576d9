"""The driver: performs the effects the loop core decides, and feeds the outcomes back.

This is the only place a run touches the outside world — the model port, tool handlers, the
application's revision callable, the approver and reconcile lookups, the clock. Failures become
`Failure` outcomes for the core to classify; the driver itself decides nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

from ownloop._text import safe_str
from ownloop.budgets import send_budget
from ownloop.clock import Clock
from ownloop.contracts import (
    Approval,
    ApprovalRequest,
    Lease,
    ModelRequest,
    ModelResponse,
    RunResult,
)
from ownloop.exceptions import OwnloopError, RunLeased
from ownloop.loop import (
    AskApprover,
    CallModel,
    ConfirmLease,
    Decided,
    Effect,
    Failure,
    InvokeTool,
    InvokeTools,
    LoopGenerator,
    Outcome,
    Persist,
    ReadRevision,
    Reconcile,
    RecordIntent,
    RecordReceipt,
    Revision,
    Sleep,
    Summarize,
    ToolResults,
    ToolReturn,
    run_deadline,
)
from ownloop.models import AgentModel
from ownloop.store import ChangeStore, RunStore
from ownloop.tools import call_in_thread, write_settled

__all__ = ["Approver", "Driver", "RevisionSource", "RunSession"]

Approver = Callable[[ApprovalRequest], "Approval | Awaitable[Approval | None] | None"]
"""Decides an approval request inline (a CLI prompt, a chat button); ``None`` means "not now"."""

RevisionSource = Callable[[], "str | Awaitable[str | None] | None"]
"""Returns a digest of the state writes change, so approvals and checks bind to it."""


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    """Call an application callable so that the run's deadline can stop the wait.

    A coroutine function is awaited; a sync one runs in a daemon thread (`call_in_thread`), and an
    awaitable it returns is awaited.
    """
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    value = await call_in_thread(function, *args)
    return await value if inspect.isawaitable(value) else value


async def _lookup(lookup: Callable[..., Any], effect: Reconcile) -> Any:
    """Ask a write's reconcile lookup, once no attempt of that write still runs in this process.

    An attempt this process stopped waiting for (a take-over, the deadline) may still be about to
    take effect; asking before it ends could answer "not applied" and let the write run twice.
    """
    await write_settled(effect.context.idempotency_key)
    return await _call(lookup, effect.call.arguments, effect.context)


class RunSession:
    """The durable side of one run segment: its store, its lease and the version last saved.

    Every record is written under the lease (fencing): once the lease expired or another worker
    took the run over, the store refuses this worker's intents, receipts and checkpoints with
    `RunLeased`, so it executes no further write. While the segment runs, `heartbeat` renews the
    lease every ``ttl_s / 3`` seconds, so a healthy run is never taken over however long it is.

    Args:
        store: Where the run is checkpointed and journaled.
        lease: The lease this worker holds on the run.
        version: The stored version this worker last saw (``None`` for a new run).
        ttl_s: The lease's time to live: how long the store waits without a heartbeat.
    """

    def __init__(
        self, store: RunStore, lease: Lease | None, version: int | None, *, ttl_s: float = 30.0
    ) -> None:
        self.store = store
        self.lease = lease
        self.version = version
        self.ttl_s = ttl_s
        self.lost = False
        self._renewed_at = time.monotonic()

    async def perform(self, effect: Persist | RecordIntent | RecordReceipt | ConfirmLease) -> None:
        """Save a checkpoint or a journal record, or confirm the lease, under the lease.

        Args:
            effect: What to record.

        Raises:
            RunLeased: If this worker no longer holds the run.
        """
        if self.lease is not None and time.monotonic() - self._renewed_at >= self.ttl_s / 3:
            await self._renew(self.lease)  # a segment that never yielded to the heartbeat
        lease = self.lease
        if isinstance(effect, ConfirmLease):
            if lease is not None:  # raises RunLeased when another worker holds the run now
                self.lease = await self.store.renew_lease(lease, self.ttl_s)
                self._renewed_at = time.monotonic()
        elif isinstance(effect, Persist):
            if effect.kept is not None:
                saver = cast("ChangeStore", self.store)  # the agent checked `saves_changes`
                self.version = await saver.save(
                    effect.snapshot, expected_version=self.version, lease=lease, kept=effect.kept
                )
            else:
                self.version = await self.store.save(
                    effect.snapshot, expected_version=self.version, lease=lease
                )
        elif isinstance(effect, RecordIntent):
            await self.store.record_intent(effect.intent, lease=lease)
        else:
            await self.store.record_receipt(
                effect.run_id, effect.call_id, effect.receipt, lease=lease
            )

    @contextlib.asynccontextmanager
    async def heartbeat(self) -> AsyncIterator[None]:
        """Renew the lease in the background while the block runs (no-op without a lease)."""
        if self.lease is None:
            yield
            return
        beating = asyncio.create_task(
            self._beat(self.lease), name=f"ownloop-lease-{self.lease.run_id}"
        )
        try:
            yield
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _renew(self, lease: Lease) -> None:
        """Renew the lease now; a lost lease stays lost (its writes are refused)."""
        try:
            self.lease = await self.store.renew_lease(lease, self.ttl_s)
        except RunLeased:
            self.lost = True  # the next record is refused: the run stops writing
            return
        except OwnloopError:  # a failed renewal is retried at the next beat
            return
        self._renewed_at = time.monotonic()

    async def _beat(self, lease: Lease) -> None:
        while not self.lost:
            await asyncio.sleep(self.ttl_s / 3)
            await self._renew(self.lease or lease)


class Driver:
    """Performs a run's effects.

    Args:
        model: The model port.
        clock: The clock to sleep on.
        approver: Decides approval requests inline, if configured.
        revision: Reads the application's state revision, if tracked.
        summarizer: Condenses turns removed from the context, if configured.
    """

    def __init__(
        self,
        model: AgentModel,
        clock: Clock,
        approver: Approver | None = None,
        revision: RevisionSource | None = None,
        summarizer: AgentModel | None = None,
    ) -> None:
        self._model = model
        self._summarizer = summarizer
        self._clock = clock
        self._approver = approver
        self._revision = revision

    async def drive(self, loop: LoopGenerator, session: RunSession | None = None) -> RunResult:
        """Run the core to its end, performing every effect it yields.

        Args:
            loop: The core's generator.
            session: The run's store and lease, when it is durable.

        Returns:
            The run's result.
        """
        perform = self.perform
        try:
            effect = next(loop)
            while True:
                if isinstance(effect, Persist | RecordIntent | RecordReceipt | ConfirmLease):
                    if session is not None:
                        await session.perform(effect)
                    effect = loop.send(None)
                    continue
                effect = loop.send(await perform(effect))
        except StopIteration as finished:
            result: RunResult = finished.value
            return result

    async def perform(self, effect: Effect) -> Outcome:  # noqa: PLR0911 - one return per effect
        """Perform one effect; every callable it awaits ends by the run's deadline.

        What the deadline does to each (see ``docs/concepts/budgets.md``): a model or summarizer
        call is cancelled (a `Failure`); a tool attempt or a reconcile lookup is cancelled when
        async and abandoned when sync (it runs on in its daemon thread, nothing waits for it) and
        becomes a `Failure` the core classifies (a write's effect is then unknown); an approver is
        treated as "not now" (the run pauses); a revision read ends the run at its deadline.

        Args:
            effect: What the core asked for.

        Returns:
            Its outcome.
        """
        if isinstance(effect, CallModel):
            with send_budget(effect.budget):
                return await self._call_model(
                    self._model, effect.request, max(effect.timeout_s, 0.0)
                )
        if isinstance(effect, Summarize):
            if self._summarizer is None:
                return None
            return await self._call_model(self._summarizer, effect.request, effect.timeout_s)
        if isinstance(effect, InvokeTool):
            return await self._invoke(effect)
        if isinstance(effect, InvokeTools):
            return await self._invoke_together(effect)
        if isinstance(effect, ReadRevision):
            if self._revision is None:
                return Revision(None)
            try:
                value = await self._bounded(_call(self._revision), "the revision source")
            except TimeoutError as error:  # only the deadline's: a failing source fails the run
                return Failure(error)
            return Revision(None if value is None else safe_str(value))
        if isinstance(effect, AskApprover):
            return await self._ask(effect.request)
        if isinstance(effect, Reconcile):
            lookup = effect.call.tool.reconcile
            if lookup is None:
                return ToolReturn(None)
            return await self._guarded(_lookup(lookup, effect), "the reconcile lookup")
        if isinstance(effect, Sleep):
            await self._clock.sleep(effect.seconds)
        return None  # durable records are the session's (see drive)

    async def _invoke(self, effect: InvokeTool) -> ToolReturn | Failure:
        return await self._guarded(
            effect.call.tool.invoke(effect.call.arguments, effect.context), "the tool"
        )

    async def _invoke_together(self, effect: InvokeTools) -> ToolResults:
        """Run the attempts concurrently, at most ``effect.limit`` at once, each to the deadline.

        A task group owns them: when the run is cancelled, every attempt still running is
        cancelled with it (a sync handler's thread is abandoned, as at the deadline).
        """
        slots = asyncio.Semaphore(max(effect.limit, 1))

        async def attempt(member: InvokeTool) -> tuple[ToolReturn | Failure, float]:
            async with slots:
                started = self._clock.monotonic()
                outcome = await self._invoke(member)
                return outcome, max(self._clock.monotonic() - started, 0.0)

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(attempt(member)) for member in effect.calls]
        ended = [task.result() for task in tasks]
        return ToolResults(
            outcomes=tuple(outcome for outcome, _ in ended),
            durations_s=tuple(duration for _, duration in ended),
        )

    def _remaining(self) -> float | None:
        deadline = run_deadline()
        return None if deadline is None else max(deadline - self._clock.monotonic(), 0.0)

    async def _bounded(self, work: Awaitable[Any], what: str) -> Any:
        """Await ``work`` until the run's deadline; past it, cancel (or abandon) it.

        Raises:
            TimeoutError: The deadline (or the callable's own timeout) passed; the message names
                ``what`` was awaited.
        """
        remaining = self._remaining()
        try:
            async with asyncio.timeout(remaining):
                return await work
        except TimeoutError as error:
            if remaining is not None and self._remaining() == 0.0:
                raise TimeoutError(
                    f"the run's deadline passed while waiting {remaining:.3g}s for {what}"
                ) from error
            raise

    async def _guarded(self, work: Awaitable[Any], what: str) -> ToolReturn | Failure:
        try:
            return ToolReturn(await self._bounded(work, what))
        except Exception as error:  # the core classifies every tool and lookup failure
            return Failure(error)

    async def _ask(self, request: ApprovalRequest) -> Decided:
        if self._approver is None:
            return Decided(None)
        try:
            decision = await self._bounded(_call(self._approver, request), "the approver")
        except Exception:  # an approver that fails, or overruns the deadline, has not approved
            return Decided(None)
        return Decided(decision if isinstance(decision, Approval) else None)

    async def _call_model(
        self, model: AgentModel, request: ModelRequest, timeout_s: float
    ) -> Outcome:
        try:
            async with asyncio.timeout(timeout_s):
                response: object = await model.respond(request)
        except Exception as error:  # the core classifies every model failure
            return Failure(error)
        if not isinstance(response, ModelResponse):
            return Failure(
                TypeError(f"the model returned {type(response).__name__}, not a ModelResponse")
            )
        return response
