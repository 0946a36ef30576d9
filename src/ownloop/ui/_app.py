"""The ASGI application: runs list, run page, pending approvals, decisions and live updates.

Only this package imports the web stack (starlette, jinja2). The app reads a `RunStore` and writes
one thing to it: an approver's decision on a request a paused run waits for, bound to that
request's id and digest. Given a ``resume`` callable (``ownloop ui --agent``), it continues a run
in the background once every request of it is decided; otherwise a worker or ``ownloop resume``
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ownloop.contracts import Approval, RunResult
from ownloop.exceptions import ConfigurationError, RunNotFound, UnknownApprovalRequest
from ownloop.redaction import Redactor
from ownloop.store import RunStore
from ownloop.store._rules import decided_requests, standing_decision, usable_decisions
from ownloop.ui._live import list_fingerprint, live_list, live_run, run_fingerprint
from ownloop.ui._security import AccessGuard, csrf_value, new_token
from ownloop.ui._threads import thread_pages
from ownloop.ui._views import find_request, pending_requests, run_page, run_rows

__all__ = ["UiApp", "address", "create_app", "stop_resuming"]

Resume = Callable[[str], Awaitable[RunResult]]

_MAX_FORM_BYTES = 16_384
_MAX_REASON_CHARS = 1024


@dataclass
class UiApp:
    """The app's state: its store, identity, token, and the runs it is resuming.

    Attributes:
        store: Where runs are read and decisions written.
        approver: The identity recorded on every decision made through this app.
        token: The per-launch access token.
        redactor: What no page ever shows.
        resume: Continues a run once every request of it is decided, if given.
        poll_s: How often live views look for changes.
        heartbeat_s: Seconds of quiet after which a live view gets a comment line.
        asgi: The guarded ASGI application to serve.
        resuming: Background resumes in progress, by run id.
        outcomes: How background resumes ended (a status, or an error), by run id.
    """

    store: RunStore
    approver: str
    token: str
    redactor: Redactor
    resume: Resume | None
    poll_s: float
    heartbeat_s: float = 15.0
    asgi: Any = None
    resuming: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)


def create_app(
    store: RunStore,
    *,
    approver: str,
    token: str | None = None,
    redactor: Redactor | None = None,
    resume: Resume | None = None,
    poll_s: float = 0.5,
    heartbeat_s: float = 15.0,
) -> UiApp:
    """Build the browser view over a store.

    Args:
        store: The run store (SQLite or PostgreSQL) to show and decide in.
        approver: Who decides through this app (recorded on every decision).
        token: The access token; a fresh random one by default.
        redactor: Extra redaction rules; the built-in rules by default.
        resume: Continues a run by id (``agent.resume``) once all its requests are decided.
        poll_s: How often live views check the store for changes.
        heartbeat_s: Seconds of quiet after which a live view gets a comment line.

    Returns:
        The app; serve ``app.asgi`` (every request needs the token) and print `address`.
    """
    app = UiApp(
        store=store,
        approver=approver,
        token=token or new_token(),
        redactor=redactor if redactor is not None else Redactor(),
        resume=resume,
        poll_s=poll_s,
        heartbeat_s=heartbeat_s,
    )
    templates = Environment(
        loader=PackageLoader("ownloop.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["as_json"] = _as_json
    pages = _Pages(app, templates)
    routes = [
        Route("/", pages.runs),
        Route("/approvals", pages.approvals),
        Route("/favicon.ico", lambda _: Response(status_code=204)),
        Route("/events", pages.list_events),
        Route("/runs/{run_id}", pages.run),
        Route("/runs/{run_id}/events", pages.run_events),
        Route("/runs/{run_id}/requests/{request_id}", pages.decide, methods=["POST"]),
        Route("/threads/{thread_id}", pages.thread),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await stop_resuming(app)

    app.asgi = AccessGuard(Starlette(routes=routes, lifespan=lifespan), app.token)
    return app


def address(app: UiApp, host: str, port: int) -> str:
    """Return the URL to open: the app's address with its access token.

    Args:
        app: The app.
        host: The host it listens on.
        port: The port.
    """
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={app.token}"


async def stop_resuming(app: UiApp) -> None:
    """Cancel and await the background resumes still going (at shutdown).

    Args:
        app: The app.
    """
    tasks = list(app.resuming.values())
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _next_page(query: Mapping[str, str], after: str | None) -> str | None:
    """The query string of the next page: the same filters, after this page's last run."""
    if after is None:
        return None
    kept = {name: value for name, value in query.items() if name not in ("after", "token")}
    return urlencode({**kept, "after": after})


def _as_json(value: Any) -> str:
    """JSON as a person reads it (escaped by the template, like every other value)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class _Pages:
    """The route handlers, sharing the app's state and templates."""

    def __init__(self, app: UiApp, templates: Environment) -> None:
        self._app = app
        self._templates = templates
        self._csrf = csrf_value(app.token)

    def _render(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        page = self._templates.get_template(name).render(
            csrf=self._csrf, approver=self._app.approver, **values
        )
        return HTMLResponse(page, status_code=status)

    async def runs(self, request: Request) -> Response:
        query = request.query_params
        try:
            rows, after = await run_rows(
                self._app.store,
                state=query.get("state"),
                status=query.get("status"),
                text=query.get("q", "").strip() or None,
                actor=query.get("actor", "").strip(),
                agent=query.get("agent", "").strip(),
                after=query.get("after"),
            )
        except ConfigurationError:
            return PlainTextResponse("that page cursor is not valid", status_code=400)
        fingerprint = await list_fingerprint(self._app.store)
        return self._render(
            "runs.html",
            rows=rows,
            query=query,
            fingerprint=fingerprint,
            next_page=_next_page(query, after),
        )

    async def approvals(self, request: Request) -> Response:
        try:
            found, after = await pending_requests(
                self._app.store, self._app.redactor, after=request.query_params.get("after")
            )
        except ConfigurationError:
            return PlainTextResponse("that page cursor is not valid", status_code=400)
        fingerprint = await list_fingerprint(self._app.store)
        return self._render(
            "approvals.html",
            requests=found,
            fingerprint=fingerprint,
            next_page=_next_page({}, after),
        )

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            page = await run_page(self._app.store, run_id, self._app.redactor)
        except RunNotFound:
            return self._render("missing.html", status=404, run_id=run_id)
        fingerprint = await run_fingerprint(self._app.store, run_id, self._local(run_id))
        return self._render(
            "run.html",
            page=page,
            fingerprint=fingerprint,
            resuming=run_id in self._app.resuming,
            outcome=self._app.outcomes.get(run_id),
            can_resume=self._app.resume is not None,
        )

    async def thread(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        pages = await thread_pages(self._app.store, thread_id, self._app.redactor)
        return self._render(
            "thread.html", status=200 if pages else 404, thread_id=thread_id, pages=pages
        )

    async def run_events(self, request: Request) -> Response:
        app = self._app
        return live_run(request, app.store, app.poll_s, app.heartbeat_s, self._local)

    def _local(self, run_id: str) -> str:
        """This process's part of a run page: a resume in progress, or the outcome of one."""
        if run_id in self._app.resuming:
            return "resuming"
        return "resumed" if run_id in self._app.outcomes else ""

    async def list_events(self, request: Request) -> Response:
        return live_list(request, self._app.store, self._app.poll_s, self._app.heartbeat_s)

    async def decide(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        request_id = request.path_params["request_id"]
        body = await request.body()
        if len(body) > _MAX_FORM_BYTES:
            return PlainTextResponse("the form is too large", status_code=413)
        form = dict(parse_qsl(body.decode("utf-8", errors="replace")))
        if not hmac.compare_digest(form.get("csrf", "").encode(), self._csrf.encode()):
            return PlainTextResponse("forbidden: the form's CSRF value is wrong", status_code=403)
        decision = form.get("decision")
        reason = form.get("reason", "").strip()
        if decision not in {"approve", "deny"} or len(reason) > _MAX_REASON_CHARS:
            return PlainTextResponse(
                f"a decision is 'approve' or 'deny', with a reason of at most "
                f"{_MAX_REASON_CHARS} characters",
                status_code=400,
            )
        refusal = await self._submit(run_id, request_id, form.get("digest", ""), decision, reason)
        if refusal is not None:
            return self._render("refused.html", status=409, run_id=run_id, message=refusal)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def _submit(
        self, run_id: str, request_id: str, digest: str, decision: str, reason: str
    ) -> str | None:
        """Store the decision if the run still waits for exactly that call; else say why not."""
        store = self._app.store
        stored = await store.get(run_id)
        waiting = find_request(stored.snapshot, request_id) if stored else None
        if stored is None or waiting is None:
            return f"run {run_id} is not waiting for request {request_id} (any more)"
        if not hmac.compare_digest(digest.encode(), waiting.digest.encode()):
            return "the request changed since the page was shown: reload and decide again"
        snapshot = stored.snapshot
        if standing_decision(snapshot, await store.submitted_approvals(run_id), {request_id}):
            return f"request {request_id} was already decided"
        approval = Approval(
            request_id=request_id,
            digest=waiting.digest,
            approved=decision == "approve",
            approver=self._app.approver,
            reason=reason or None,
        )
        try:  # the store's rule: one decision per request, named by its id or by its digest
            await store.submit_approval(run_id, approval)
        except UnknownApprovalRequest as refused:
            return str(refused)
        usable = usable_decisions(snapshot, await store.submitted_approvals(run_id))
        decided = {name for item in usable for name in decided_requests(snapshot, item)}
        if all(request.id in decided for request in snapshot.approval_requests):
            self._start_resume(run_id)
        return None

    def _start_resume(self, run_id: str) -> None:
        resume = self._app.resume
        if resume is None or run_id in self._app.resuming:
            return

        async def proceed() -> None:
            try:
                result = await resume(run_id)
                self._app.outcomes[run_id] = f"{result.status.value} ({result.stop_reason.value})"
            except Exception as error:  # shown on the run page; the run stays as stored
                self._app.outcomes[run_id] = f"resume failed: {type(error).__name__}: {error}"
            finally:
                self._app.resuming.pop(run_id, None)

        self._app.resuming[run_id] = asyncio.create_task(proceed(), name=f"ui-resume-{run_id}")
