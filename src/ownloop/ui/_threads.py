"""The thread page: a conversation's runs as one timeline, first run first.

Each run of the thread is shown as the run page shows it (task, outcome, timeline), read from
the store's thread record; a run that is no longer stored is left out. Reads only.
"""

from __future__ import annotations

from ownloop.exceptions import RunNotFound
from ownloop.redaction import Redactor
from ownloop.store import RunStore, ThreadStore
from ownloop.ui._views import RunPage, run_page

__all__ = ["thread_pages"]


async def thread_pages(store: RunStore, thread_id: str, redactor: Redactor) -> list[RunPage]:
    """Return the page of each stored run of the thread, in the thread's order.

    Args:
        store: The store (one that keeps threads; a store without them shows none).
        thread_id: The thread.
        redactor: What must never be shown.
    """
    if not isinstance(store, ThreadStore):
        return []
    pages: list[RunPage] = []
    for run_id in await store.thread_runs(thread_id):
        try:
            pages.append(await run_page(store, run_id, redactor))
        except RunNotFound:  # pruned since it was recorded in the thread
            continue
    return pages
