"""Live updates: server-sent events telling a page that what it shows has changed.

A page is rendered with a fingerprint of what it shows and opens ``EventSource`` on its events
address with ``?since=FINGERPRINT``. The server compares the store's current fingerprint with it
every ``poll_s`` seconds and sends one ``changed`` event when they differ (at once, if the store
changed between the render and the connection), after which the page reloads. Reading the store,
rather than one process's memory, shows progress made by any worker, on SQLite or PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ownloop.store import RunStore

__all__ = ["list_fingerprint", "live_list", "live_run", "run_fingerprint"]

_HEARTBEAT_S = 15.0


async def run_fingerprint(store: RunStore, run_id: str, local: str = "") -> str:
    """Return what identifies the run page's content: the snapshot version and decisions.

    Args:
        store: The store.
        run_id: The run.
        local: What this process alone knows and the page shows (a resume it runs, its outcome):
            a page rendered while resuming reloads when the resume ends, even if the store had
            already reached its final version when the page was rendered.
    """
    stored = await store.get(run_id)
    version = stored.version if stored else 0
    return f"{version}.{len(await store.submitted_approvals(run_id))}.{local}"


async def list_fingerprint(store: RunStore) -> str:
    """Return what identifies the runs list: the most recently saved runs' ids and versions.

    Every save moves its run to the top of the listing, so the first page changes whenever any
    run does; reading one page keeps the poll as cheap at 100,000 runs as at 100.

    Args:
        store: The store.
    """
    rows = await store.list_runs(limit=50)
    text = "|".join(f"{row.run_id}:{row.version}" for row in rows)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def live_run(
    request: Request,
    store: RunStore,
    poll_s: float,
    heartbeat_s: float = _HEARTBEAT_S,
    local: Callable[[str], str] = lambda run_id: "",
) -> StreamingResponse:
    """Answer a run page's event stream.

    Args:
        request: The request (``since`` in its query).
        store: The store.
        poll_s: Seconds between checks.
        heartbeat_s: Seconds of quiet after which a comment line is sent.
        local: This process's own state of a run, by run id (see `run_fingerprint`).
    """
    run_id = request.path_params["run_id"]
    return _stream(
        request, lambda: run_fingerprint(store, run_id, local(run_id)), poll_s, heartbeat_s
    )


def live_list(
    request: Request, store: RunStore, poll_s: float, heartbeat_s: float = _HEARTBEAT_S
) -> StreamingResponse:
    """Answer the runs list's (and approvals page's) event stream.

    Args:
        request: The request (``since`` in its query).
        store: The store.
        poll_s: Seconds between checks.
        heartbeat_s: Seconds of quiet after which a comment line is sent.
    """
    return _stream(request, lambda: list_fingerprint(store), poll_s, heartbeat_s)


def _stream(
    request: Request, current: Callable[[], Awaitable[str]], poll_s: float, heartbeat_s: float
) -> StreamingResponse:
    since = request.query_params.get("since", "")

    async def events() -> AsyncIterator[str]:
        # Starlette cancels this generator when the client goes away, so it can loop until then.
        yield "retry: 2000\n\n"
        quiet = 0.0
        while True:
            now = await current()
            if now != since:
                yield f"event: changed\ndata: {now}\n\n"
                return
            await asyncio.sleep(poll_s)
            quiet += poll_s
            if quiet >= heartbeat_s:  # a comment line keeps proxies from closing a quiet stream
                quiet = 0.0
                yield ": still here\n\n"

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"cache-control": "no-store"}
    )
