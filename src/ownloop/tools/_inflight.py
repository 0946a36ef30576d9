"""Writes in flight in this process, by idempotency key: a later attempt waits for the earlier.

A worker can stop waiting for a write it started: the run's deadline passed, or another worker took
the run over. The write itself may go on — a synchronous handler's thread cannot be stopped, and
it runs to its end in the background. If another worker of this process then asked the write's
reconcile lookup whether it happened, the lookup could answer "not applied" a moment before the
effect lands, and the write would run twice.

So every attempt of a write that carries an idempotency key is registered here from the moment it
starts until its handler truly ends (its thread returns, its coroutine unwinds), and a new attempt
or a reconcile lookup of the same key first waits for the attempts still in flight (bounded by
the run's deadline, like any other wait). Across processes the idempotency key, sent to the
backend, is what makes a repeat harmless.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future

__all__ = ["write_settled", "write_started"]

_lock = threading.Lock()
_running: dict[str, list[Future[None]]] = {}


def _nothing() -> None:
    """End nothing: an attempt without an idempotency key is not tracked."""


def write_started(key: str | None) -> Callable[[], None]:
    """Register an attempt of the write ``key`` as started; call the result when it has ended.

    Args:
        key: The write's idempotency key; ``None`` (a read) tracks nothing.

    Returns:
        ``end()``: marks the attempt ended and wakes whoever waits for it. Calling it again does
        nothing; it may be called from any thread.
    """
    if key is None:
        return _nothing
    ended: Future[None] = Future()
    ended.set_running_or_notify_cancel()  # a waiter that is cancelled cannot cancel it
    with _lock:
        _running.setdefault(key, []).append(ended)

    def end() -> None:
        with _lock:
            attempts = _running.get(key, [])
            if ended in attempts:
                attempts.remove(ended)
            if not attempts:
                _running.pop(key, None)
        if not ended.done():
            ended.set_result(None)

    return end


async def write_settled(key: str | None) -> None:
    """Wait until every attempt of the write ``key`` started in this process has ended.

    Args:
        key: The write's idempotency key; ``None`` returns at once.
    """
    if key is None:
        return
    with _lock:
        attempts = list(_running.get(key, ()))
    for ended in attempts:
        await asyncio.wrap_future(ended)
