"""Threads for the `Agent` facade: a follow-up loads the thread's last run and claims its place.

``agent.run(task, thread_id=...)`` reads the thread's last run from the store; only a finished run
without unknown effects is continued (a paused run first needs its decision and a resume). The new
run's state is built from it, then recorded in the thread with a compare-and-set on the thread's
end, before it runs: of two follow-ups that read the same last run, the second is refused with
`ThreadBusy` and never runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ownloop.contracts import RunResult
from ownloop.exceptions import ConfigurationError, ThreadBusy
from ownloop.loop import RunState
from ownloop.store import RunStore, StoredRun, ThreadStore
from ownloop.store._threads import check_thread_id

__all__ = ["thread_state"]


async def thread_state(
    store: RunStore | None,
    thread_id: str,
    history: object,
    build: Callable[[RunResult[Any] | None], RunState],
) -> RunState:
    """Build a follow-up's state from the thread's last run and record it in the thread.

    Args:
        store: The agent's store.
        thread_id: The thread.
        history: The ``history`` argument of the run (must be ``None`` with a thread).
        build: Builds the new run's state from the thread's last result (``None`` for a new
            thread).

    Returns:
        The state, already recorded as the thread's last run.

    Raises:
        ConfigurationError: If the agent has no store, the store keeps no threads, or a
            history is given too.
        ThreadBusy: If the thread's last run is paused, running or unresolved, or another
            follow-up was recorded first.
        InputRejected: If the thread id is not acceptable.
    """
    if store is None:
        raise ConfigurationError("a run in a thread needs Agent(store=...): threads are stored")
    if not isinstance(store, ThreadStore):
        raise ConfigurationError(
            f"{store!r} keeps no threads (it has no append_to_thread/thread_runs); use the "
            "memory, SQLite or PostgreSQL store, or pass history= yourself"
        )
    if history is not None:
        raise ConfigurationError(
            "give history= or thread_id=, not both: a thread continues its own last run"
        )
    thread_id = check_thread_id(thread_id)
    runs = await store.thread_runs(thread_id)
    last = runs[-1] if runs else None
    previous = None if last is None else _continuable(thread_id, last, await store.get(last))
    state = build(previous)
    await store.append_to_thread(thread_id, state.run_id, after=last)
    return state


def _continuable(thread_id: str, run_id: str, stored: StoredRun | None) -> RunResult[Any]:
    """The thread's last result, if a follow-up may continue it now."""
    snapshot = stored.snapshot if stored is not None else None
    result = snapshot.result if snapshot is not None else None
    if snapshot is None:
        raise ThreadBusy(
            f"thread {thread_id}: its last run {run_id} is not stored yet (another follow-up "
            "is starting it) or was pruned; try again once it has finished"
        )
    if snapshot.state == "paused" and result is not None:
        requests = ", ".join(request.id for request in result.approval_requests) or "none"
        raise ThreadBusy(
            f"thread {thread_id}: its last run {run_id} is paused waiting for approval "
            f"(request {requests}); decide it (ownloop approve {run_id} ...) and resume run "
            f"{run_id} before a follow-up"
        )
    if snapshot.state != "finished" or result is None:
        raise ThreadBusy(
            f"thread {thread_id}: its last run {run_id} is still running; wait for it to "
            "finish (or resume it, if its worker died) before a follow-up"
        )
    if result.pending:
        raise ThreadBusy(
            f"thread {thread_id}: its last run {run_id} has writes whose effect is unknown; "
            "settle them before a follow-up (a follow-up could repeat them)"
        )
    return result
