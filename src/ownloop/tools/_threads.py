"""Running a synchronous callable so that the event loop can stop waiting for it.

A thread cannot be stopped. `call_in_thread` runs the callable in a daemon thread, not in the
event loop's default executor: when the awaiting task is cancelled (a timeout, the run's
deadline) the caller stops waiting at once, and the thread is *abandoned* — it runs to its end in
the background, its result is dropped, and ``asyncio.run`` does not wait for it when it shuts
down (it joins the default executor's threads, never these).

The daemon threads are reused: a thread that finished its call waits up to `IDLE_S` seconds for
the next one before it ends, and a call that finds no waiting thread starts a new one, so a
thread busy with an abandoned call never delays another call. Starting a thread per call cost
about a third of the loop's CPU time under 100 concurrent runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["IDLE_S", "call_in_thread", "start_in_thread"]

IDLE_S = 10.0
"""Seconds a finished worker thread waits for another call before it ends."""

Job = Callable[[], None]


class _Workers:
    """Daemon threads kept for reuse; a call that finds none waiting starts one.

    One lock guards the queue and the count of waiting threads, and a job is queued only while
    more threads wait than jobs are queued, so every queued job has a thread to take it: a
    thread leaves only when it finds the queue empty.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every thread: a new lock, no job queued, no thread waiting."""
        self.ready = threading.Condition(threading.Lock())
        self.jobs: deque[Job] = deque()
        self.waiting = 0

    def submit(self, job: Job) -> None:
        """Hand ``job`` to a waiting thread, or start a thread for it."""
        with self.ready:
            if self.waiting > len(self.jobs):
                self.jobs.append(job)
                self.ready.notify()
                return
        threading.Thread(target=self._work, args=(job,), name="ownloop-worker", daemon=True).start()

    def _work(self, job: Job | None) -> None:
        while job is not None:
            job()
            job = self._next()

    def _next(self) -> Job | None:
        """The next job, or ``None`` after `IDLE_S` seconds without one."""
        with self.ready:
            self.waiting += 1
            self.ready.wait_for(lambda: self.jobs, timeout=IDLE_S)
            self.waiting -= 1
            return self.jobs.popleft() if self.jobs else None


_workers = _Workers()


# A forked child has none of its parent's threads: it starts with no waiting worker.
os.register_at_fork(after_in_child=_workers.reset)


def start_in_thread(
    function: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> asyncio.Future[Any]:
    """Start ``function(*args, **kwargs)`` in a (reused) daemon thread now; return its future.

    The thread is handed the call before this returns, so the call runs even if nobody ever awaits
    the future. The caller's context variables are copied into the thread, as ``asyncio.to_thread``
    does. Cancelling the future abandons the thread (see the module docstring): its outcome is
    dropped.

    Args:
        function: The synchronous callable.
        *args: Its positional arguments.
        **kwargs: Its keyword arguments.

    Returns:
        A future of the running loop, settled with what the callable returned or raised.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: Any) -> None:
        if future.done():  # the caller stopped waiting: the outcome is dropped
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        error: BaseException | None = None
        value: Any = None
        try:
            value = context.run(function, *args, **kwargs)
        except BaseException as raised:  # delivered to the awaiting task, not lost in the thread
            error = raised
        # RuntimeError: the event loop closed while the thread ran, and nobody is waiting.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, error, value)

    _workers.submit(work)
    return future


async def call_in_thread(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``function(*args, **kwargs)`` in a (reused) daemon thread and await its result.

    The caller's context variables are copied into the thread, as ``asyncio.to_thread`` does.
    Cancelling the await abandons the thread (see the module docstring).

    Args:
        function: The synchronous callable.
        *args: Its positional arguments.
        **kwargs: Its keyword arguments.

    Returns:
        What the callable returned.

    Raises:
        Exception: Whatever the callable raised.
    """
    return await start_in_thread(function, *args, **kwargs)
