"""`call_in_thread`: reused daemon threads, never delayed by an abandoned call, fork-safe."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import threading
import time

import pytest

from ownloop.tools import _threads, call_in_thread

LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("LABEL", default="unset")


def ident() -> int:
    """The calling thread's identity."""
    return threading.get_ident()


def test_sequential_calls_reuse_a_few_daemon_threads() -> None:
    """A hundred calls one after another run on a handful of threads, all daemons, none the loop."""

    async def main() -> set[int]:
        return {await call_in_thread(ident) for _ in range(100)}

    before = sum(thread.name == "ownloop-worker" for thread in threading.enumerate())
    used = asyncio.run(main())
    assert threading.get_ident() not in used
    # Workers left by earlier tests take turns; a new thread starts only if a call races ahead
    # of a worker going back to wait, which is rare: without reuse this would be 100.
    assert 1 <= len(used) <= before + 10
    daemons = {thread.ident: thread.daemon for thread in threading.enumerate()}
    assert all(daemons.get(thread, True) for thread in used)


def test_concurrent_calls_each_get_a_thread_and_keep_their_context() -> None:
    """Calls that block together overlap (one thread each) and see the caller's context."""
    arrived = threading.Barrier(20, timeout=10)

    def meet(label: str) -> tuple[str, str]:
        arrived.wait()  # only returns once all 20 calls run at the same time
        return label, LABEL.get()

    async def one(label: str) -> tuple[str, str]:
        LABEL.set(label)
        return await call_in_thread(meet, label)

    async def main() -> list[tuple[str, str]]:
        return await asyncio.gather(*(one(str(i)) for i in range(20)))

    for label, seen in asyncio.run(main()):
        assert seen == label


def test_an_abandoned_call_never_delays_the_next_one() -> None:
    """A call whose caller gave up keeps its thread; the next call runs at once on another."""
    release = threading.Event()

    async def main() -> tuple[int, int, float]:
        stuck = await call_in_thread(ident)  # this thread now waits for work: reuse it first
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(call_in_thread(release.wait, 30), 0.1)
        started = time.perf_counter()
        free = await call_in_thread(ident)
        return stuck, free, time.perf_counter() - started

    try:
        _, free, took = asyncio.run(main())
    finally:
        release.set()
    assert free != threading.get_ident()
    assert took < 1.0


def test_errors_reach_the_caller_and_the_thread_is_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception is raised in the awaiting task; the thread that raised it takes later calls."""
    # A pool of its own: idle workers left by earlier tests would take the calls in its place.
    monkeypatch.setattr("ownloop.tools._threads._workers", _threads._Workers())

    def boom() -> None:
        raise ValueError(f"boom in {threading.get_ident()}")

    async def main() -> tuple[str, set[int]]:
        with pytest.raises(ValueError, match="boom in") as raised:
            await call_in_thread(boom)
        await asyncio.sleep(0.05)  # the worker is back waiting before the next calls
        # Waiting threads take calls in turn (oldest first), and threads left idle by earlier
        # tests wait too: one call more than there are threads is sure to reach it.
        calls = threading.active_count() + 1
        return str(raised.value), {await call_in_thread(ident) for _ in range(calls)}

    message, after = asyncio.run(main())
    assert message.removeprefix("boom in ") in {str(thread) for thread in after}


def test_idle_threads_end_after_the_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker with nothing to do for IDLE_S seconds ends; the next call starts a new one."""
    monkeypatch.setattr("ownloop.tools._threads.IDLE_S", 0.05)

    async def main() -> int:
        return await call_in_thread(ident)

    first = asyncio.run(main())
    deadline = time.monotonic() + 5
    while any(t.ident == first for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(thread.ident != first for thread in threading.enumerate())
    assert asyncio.run(main()) != threading.get_ident()


def _child(results: multiprocessing.Queue[int]) -> None:
    async def main() -> int:
        return int(await call_in_thread(lambda: 7))

    results.put(asyncio.run(main()))


def test_a_forked_child_does_not_wait_for_its_parents_threads() -> None:
    """Waiting workers do not survive a fork: a child's call starts its own thread and returns."""

    async def warm() -> None:
        await call_in_thread(ident)  # leaves a worker waiting in the parent

    asyncio.run(warm())
    time.sleep(0.2)  # the worker has finished and waits for the next call when the fork happens
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[int] = context.Queue()
    child = context.Process(target=_child, args=(results,), daemon=True)
    child.start()
    try:
        assert results.get(timeout=10) == 7
    finally:
        child.join(5)
        if child.is_alive():  # pragma: no cover - only when the child hangs (the bug)
            child.kill()
            child.join()
    assert child.exitcode == 0
