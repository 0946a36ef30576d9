"""`RunStream`: drives one run in a task and hands its events to an ``async for`` as they happen.

The run's trace recorder gets one more sink that puts every event on a queue; streaming adapters
report reply text through a context variable the run's task listens to. Leaving the iteration
early (``break`` inside ``async with``, `RunStream.aclose`, or cancelling the task that iterates)
cancels the run: a write already started stays journaled without a receipt, so a durable resume
treats its effect as unknown, as after a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, cast

from typing_extensions import TypeVar

from ownloop.contracts import (
    BudgetWarning,
    Limits,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunResult,
    StreamEnded,
    StreamEvent,
    TextDelta,
    ToolProposed,
    ToolStarted,
    TraceEvent,
)
from ownloop.exceptions import ConfigurationError
from ownloop.loop import RunState
from ownloop.models import listen_to_text_deltas
from ownloop.redaction import StreamRedactor

__all__ = ["RunStream"]

Drive = Callable[[RunState], Awaitable[RunResult[Any]]]

OutputT = TypeVar("OutputT", default=str)

# (Limits field, readable name), as `ownloop.tracing.budget_use` names them.
_BUDGETS = (
    ("max_steps", "steps"),
    ("max_model_attempts", "model attempts"),
    ("max_tool_calls", "tool calls"),
    ("max_tool_attempts", "tool attempts"),
    ("max_total_tokens", "tokens"),
    ("deadline_s", "deadline (s)"),
)


class _Failed:
    """Carries an exception the run raised to the iterating side."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _BudgetWatch:
    """Counts budget use from the events as they come (as `budget_use` counts a stored trace).

    Incremental, so a long run pays a few additions per event rather than a recount.
    """

    def __init__(self, limits: Limits, warn_at: float) -> None:
        self._warn_at = warn_at
        self._limits = limits
        self._first: datetime | None = None
        self._used = dict.fromkeys((budget for budget, _ in _BUDGETS), 0.0)
        self._warned: set[str] = set()

    def see(self, event: TraceEvent) -> list[tuple[str, str, float, float]]:
        """Count one event; return the budgets that just passed the threshold.

        The deadline is measured at every event, as `budget_use` measures it in a stored trace.
        """
        used = self._used
        if self._first is None:
            self._first = event.at
        match event:
            case ModelRequested(step=step):
                used["max_steps"] = max(used["max_steps"], step)
                used["max_model_attempts"] += 1
            case ModelResponded(usage=usage):
                used["max_total_tokens"] += usage.total_tokens
            case ToolProposed():
                used["max_tool_calls"] += 1
            case ToolStarted():
                used["max_tool_attempts"] += 1
        used["deadline_s"] = (event.at - self._first).total_seconds()
        return self._crossed()

    def _crossed(self) -> list[tuple[str, str, float, float]]:
        crossed = []
        for budget, name in _BUDGETS:
            limit = float(getattr(self._limits, budget))
            if budget not in self._warned and self._used[budget] >= self._warn_at * limit:
                self._warned.add(budget)
                crossed.append((budget, name, self._used[budget], limit))
        return crossed


class RunStream(Generic[OutputT]):
    """The events of one run, as an async iterator; the last one is `StreamEnded`.

    Create it with `Agent.run_stream`. The run starts at the first ``__anext__`` and runs in its
    own task, so a slow reader never stalls it (events wait in an unbounded deque, whose size
    the run's budgets bound). Use it inside ``async with`` so that leaving early cancels the run.

    Args:
        state: The run's state, built by the agent.
        drive: Drives that state to a result (the agent's own driver, with its store and lease).
        limits: The run's budgets, which the warnings measure against.
        warn_at: The share of a budget at which one `BudgetWarning` is emitted (0-1];
            `Agent.run_stream` passes its own (0.8 by default).

    Raises:
        ConfigurationError: If ``warn_at`` is not in (0, 1].
    """

    def __init__(self, state: RunState, drive: Drive, *, limits: Limits, warn_at: float) -> None:
        if not 0 < warn_at <= 1:
            raise ConfigurationError(f"warn_at must be in (0, 1], not {warn_at!r}")
        self.run_id = state.run_id
        self._state = state
        self._drive = drive
        self._warn_at = warn_at
        # events wait here; the reader, when it found none, waits on `_waiter` (an asyncio.Queue
        # costs more per event: task counts, an event, a list of getters)
        self._items: deque[StreamEvent | _Failed] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._budgets = _BudgetWatch(limits, warn_at)
        self._step = 1
        # read the redactor at each piece: protect() replaces it when the run learns a secret
        self._text = StreamRedactor(lambda: state.trace.redactor)
        self._finished = False
        self.result: RunResult[OutputT] | None = None
        """The run's result, once the stream has handed out `StreamEnded`."""

    def __aiter__(self) -> RunStream[OutputT]:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._task is None:
            self._state.trace.add_sink(self._on_event)
            self._task = asyncio.create_task(self._run(), name=f"ownloop-run-{self.run_id}")
        items = self._items
        while not items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            except asyncio.CancelledError:
                await self.aclose()
                raise
        item = items.popleft()
        if isinstance(item, _Failed):
            self._finished = True
            raise item.error
        if isinstance(item, StreamEnded):
            self._finished = True
            self.result = cast("RunResult[OutputT]", item.result)
        return item

    async def aclose(self) -> None:
        """Stop reading; a run still going is cancelled and awaited (its lease released)."""
        self._finished = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> RunStream[OutputT]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self) -> None:
        try:
            with listen_to_text_deltas(self._on_text):
                result = await self._drive(self._state)
        except Exception as error:  # handed to the reader, who raised the run
            self._put(_Failed(error))
            return
        self._put(StreamEnded(run_id=self.run_id, result=result))

    def _put(self, item: StreamEvent | _Failed) -> None:
        self._items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_text(self, text: str) -> None:
        released = self._text.feed(text)
        if released:
            # validated: pydantic-core checks three fields faster than `model_construct` skips them
            self._put(TextDelta(run_id=self.run_id, step=self._step, text=released))

    def _on_event(self, event: TraceEvent) -> None:
        if isinstance(event, ModelResponded | ModelFailed):
            self._on_text_end()
        elif isinstance(event, ModelRequested):
            self._step = event.step
        self._put(event)
        for budget, name, used, limit in self._budgets.see(event):
            self._put(
                BudgetWarning(
                    run_id=self.run_id,
                    budget=budget,
                    name=name,
                    used=used,
                    limit=limit,
                    ratio=round(used / limit, 4),
                )
            )

    def _on_text_end(self) -> None:
        rest = self._text.end()
        if rest:
            self._put(TextDelta(run_id=self.run_id, step=self._step, text=rest))

    def __repr__(self) -> str:
        state = "ended" if self._finished else "running" if self._task else "not started"
        return f"RunStream(run_id={self.run_id!r}, {state}, warn_at={self._warn_at})"
