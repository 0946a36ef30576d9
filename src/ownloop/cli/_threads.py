"""``ownloop runs list --thread T``: the runs of one conversation, first to last.

``ownloop runs show`` says what a run continues (`describe`).

A thread's runs are listed in the thread's order (not by update time), one summary line each,
read from the store's thread record.
"""

from __future__ import annotations

import argparse
from typing import cast

from ownloop.contracts import Conversation, RunSummary
from ownloop.store import RunStore, ThreadStore, summarize

__all__ = ["add_thread_option", "describe", "thread_summaries"]


def add_thread_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--thread`` to ``runs list``.

    Args:
        parser: The ``runs list`` parser.
    """
    parser.add_argument(
        "--thread",
        metavar="THREAD_ID",
        help="only the runs of this conversation thread, first to last",
    )


async def thread_summaries(
    store: RunStore, thread_id: str, arguments: argparse.Namespace
) -> list[RunSummary]:
    """Return the listing lines of a thread's runs, in the thread's order.

    Args:
        store: The store.
        thread_id: The thread.
        arguments: The command line (``--state``, ``--status`` and ``--limit`` apply).

    Returns:
        At most ``--limit`` lines, the first runs first; a run that is no longer stored is
        left out.
    """
    threads = cast("ThreadStore", store)  # the command opens SQLite or PostgreSQL: both keep them
    lines: list[RunSummary] = []
    for run_id in await threads.thread_runs(thread_id):
        stored = await store.get(run_id)
        if stored is None:
            continue
        line = summarize(stored.snapshot, stored.version)
        if arguments.state not in (None, line.state) or arguments.status not in (
            None,
            line.status,
        ):
            continue
        lines.append(line)
    return lines[: arguments.limit]


def describe(conversation: Conversation) -> str:
    """Say what a run continues, for ``runs show``.

    Args:
        conversation: The run's conversation record.

    Returns:
        For example ``run r-1 in thread chat-42 (6 earlier messages, 1 evidence item)``.
    """
    source = f"run {conversation.continues}" if conversation.continues else "earlier messages"
    if conversation.continues is None and conversation.earlier_messages == 0:
        source = "nothing yet (the thread's first run)"
    thread = f" in thread {conversation.thread_id}" if conversation.thread_id else ""
    return (
        f"{source}{thread} ({conversation.earlier_messages} earlier messages, "
        f"{conversation.earlier_evidence} evidence items)"
    )
