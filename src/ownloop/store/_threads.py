"""Threads: the runs of one conversation, in order, so a follow-up continues the last one.

A thread is a list of run ids. `ThreadStore.append_to_thread` records the next run only while the
thread's last run is still the one the follow-up read (a compare-and-set on the thread's end, in
one transaction of the store), so of two follow-ups continuing the same point exactly one is
recorded and the other gets `ThreadBusy`: never two runs continuing the same point. The memory,
SQLite and PostgreSQL stores implement it (store schema 5 adds the ``threads`` table); a custom
`RunStore` may leave it out, and then ``agent.run(task, thread_id=...)`` is refused.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ownloop._text import clean_text
from ownloop.contracts import MAX_ID_CHARS
from ownloop.exceptions import InputRejected, ThreadBusy

__all__ = [
    "MemoryThreads",
    "ThreadStore",
    "already_threaded",
    "check_thread_id",
    "thread_moved",
]


@runtime_checkable
class ThreadStore(Protocol):
    """A store that records threads (the memory, SQLite and PostgreSQL stores do)."""

    async def append_to_thread(self, thread_id: str, run_id: str, *, after: str | None) -> int:
        """Record ``run_id`` as the thread's next run, if its last run is still ``after``.

        Args:
            thread_id: The thread (created by its first run).
            run_id: The new run.
            after: The run the new one continues: the last run the caller read from the thread
                (``None`` for a thread with no runs yet).

        Returns:
            The new run's position in the thread (1 for the first run).

        Raises:
            ThreadBusy: If the thread's last run is no longer ``after`` (another follow-up was
                recorded first), or the run is already in a thread.
            InputRejected: If the thread id is not 1-128 characters.
        """
        ...

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Return the ids of the thread's runs, first to last (empty for an unknown thread)."""
        ...


def check_thread_id(thread_id: object) -> str:
    """Return a usable thread id, or refuse it.

    Args:
        thread_id: The id the application gave.

    Raises:
        InputRejected: If it is not a string of 1-128 characters that UTF-8 can encode.
    """
    if not isinstance(thread_id, str) or not 0 < len(thread_id) <= MAX_ID_CHARS:
        raise InputRejected(f"thread_id must be a string of 1-{MAX_ID_CHARS} characters")
    if clean_text(thread_id) is not thread_id:
        raise InputRejected("thread_id holds text UTF-8 cannot encode (an unpaired surrogate)")
    return thread_id


def already_threaded(run_id: str, thread_id: str) -> ThreadBusy:
    """Return the error of a run recorded in a thread a second time."""
    return ThreadBusy(f"run {run_id} is already in thread {thread_id}: a run belongs to one thread")


def thread_moved(thread_id: str, run_id: str, after: str | None, last: str | None) -> ThreadBusy:
    """Return the error of a follow-up whose thread moved on since it was read."""
    point = f"run {after}" if after is not None else "its start"
    now = f"run {last}" if last is not None else "no run"
    return ThreadBusy(
        f"thread {thread_id} moved on: run {run_id} was to continue {point}, but its last run "
        f"is now {now} (another follow-up was recorded first). Load the thread again"
    )


class MemoryThreads:
    """Threads kept in the process (mixed into `MemoryRunStore`)."""

    _threads: dict[str, list[str]]
    _thread_of: dict[str, str]

    async def append_to_thread(self, thread_id: str, run_id: str, *, after: str | None) -> int:
        """Record the thread's next run if its last is still ``after`` (see `ThreadStore`)."""
        check_thread_id(thread_id)
        if run_id in self._thread_of:
            raise already_threaded(run_id, self._thread_of[run_id])
        runs = self._threads.setdefault(thread_id, [])
        last = runs[-1] if runs else None
        if last != after:
            raise thread_moved(thread_id, run_id, after, last)
        runs.append(run_id)
        self._thread_of[run_id] = thread_id
        return len(runs)

    async def thread_runs(self, thread_id: str) -> list[str]:
        """Return the ids of the thread's runs, first to last (see `ThreadStore`)."""
        return list(self._threads.get(thread_id, ()))
