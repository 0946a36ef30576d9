"""The browser view's app, through HTTP (httpx's ASGI transport): access, pages, decisions, SSE."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownloop import Agent, Approval, RunStatus, StopReason
from ownloop.contracts import utc_now
from ownloop.store import PostgresRunStore, RunStore, SqliteRunStore
from ownloop.testing import ScriptedModel, final
from ownloop.ui import (
    UiApp,
    address,
    cookie_name,
    create_app,
    csrf_value,
    is_loopback,
    stop_resuming,
)
from ownloop.ui._views import age
from tests.durable_support import fresh_schema, postgres_dsn
from tests.ui_support import IMAGE, SCRIPT, pause, refund_agent

OPENAI_KEY = "sk-proj-Canary0penAIkey1234567890abcdEF"
TOKEN = "test-token-0123456789abcdef"
RUNS = {
    "r-approve": f"refund o-1 500 {SCRIPT} thanks",
    "r-deny": "refund o-2 700 sorry",
    "r-secret": f"refund o-3 900 {IMAGE} key {OPENAI_KEY}",
}


@asynccontextmanager
async def opened(store_kind: str, tmp_path: Path) -> AsyncIterator[RunStore]:
    """A fresh store of the kind named."""
    if store_kind == "sqlite":
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            yield store
    else:
        # A schema no other run of the suite uses: the test database can outlive one session
        # (mutation testing runs the suite many times in one process and its forks).
        async with PostgresRunStore(postgres_dsn(), schema=fresh_schema()) as store:
            yield store


def client(app: UiApp, *, token: str | None = TOKEN) -> httpx.AsyncClient:
    """A client of the app; with the token's cookie unless ``token`` is None."""
    cookies = {cookie_name(TOKEN): token} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app.asgi),
        base_url="http://127.0.0.1:8765",
        cookies=cookies,
    )


def form(app: UiApp, digest: str, decision: str, reason: str = "ok") -> dict[str, str]:
    """A decision form as the page posts it."""
    return {"csrf": csrf_value(app.token), "digest": digest, "decision": decision, "reason": reason}


async def waiting(store: RunStore, run_id: str) -> tuple[str, str]:
    """The id and digest of the request the run waits for."""
    stored = await store.get(run_id)
    assert stored is not None
    (request,) = stored.snapshot.approval_requests
    return request.id, request.digest


def test_every_request_without_the_token_is_refused(tmp_path: Path) -> None:
    """No token, a wrong token or a wrong cookie: 403 on pages, events, static files and POSTs."""

    async def scenario() -> None:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            app = create_app(store, approver="alice", token=TOKEN)
            paths = ["/", "/approvals", "/runs/r-approve", "/events", "/static/style.css"]
            for token in (None, "wrong-token"):
                async with client(app, token=token) as http:
                    for path in paths:
                        response = await http.get(path)
                        assert response.status_code == 403, path
                        assert "access token" in response.text
                        assert TOKEN not in response.text
                    response = await http.get("/", params={"token": "wrong-token"})
                    assert response.status_code == 403
                    request_id, digest = await waiting(store, "r-approve")
                    posted = await http.post(
                        f"/runs/r-approve/requests/{request_id}", data=form(app, digest, "approve")
                    )
                    assert posted.status_code == 403
            assert await store.submitted_approvals("r-approve") == []

    asyncio.run(scenario())


def test_the_token_in_the_url_becomes_a_strict_cookie_and_leaves_the_address(
    tmp_path: Path,
) -> None:
    """The printed URL sets an HttpOnly SameSite=Strict cookie and redirects without the token."""

    async def scenario() -> None:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            app = create_app(store, approver="alice", token=TOKEN)
            assert address(app, "127.0.0.1", 8765) == f"http://127.0.0.1:8765/?token={TOKEN}"
            async with client(app, token=None) as http:
                entered = await http.get("/approvals", params={"token": TOKEN, "x": "1"})
                assert entered.status_code == 303
                assert entered.headers["location"] == "/approvals?x=1"
                cookie = entered.headers["set-cookie"].lower()
                assert cookie.startswith(f"{cookie_name(TOKEN)}={TOKEN}".lower())
                assert cookie_name(TOKEN) != cookie_name("another launch")
                assert "httponly" in cookie
                assert "samesite=strict" in cookie
                page = await http.get("/approvals")
                assert page.status_code == 200
                policy = page.headers["content-security-policy"]
                assert "script-src 'self'" in policy
                assert "unsafe-inline" not in policy
                assert page.headers["x-frame-options"] == "DENY"
                assert page.headers["referrer-policy"] == "same-origin"

    asyncio.run(scenario())


def test_pages_escape_every_value_and_show_no_secret(tmp_path: Path) -> None:
    """A <script> in a task, argument or tool output is shown as text; a key is redacted."""

    async def scenario() -> list[str]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, RUNS)
            app = create_app(store, approver="alice", token=TOKEN)
            async with client(app) as http:
                return [
                    (await http.get(path)).text
                    for path in ("/", "/approvals", "/runs/r-approve", "/runs/r-secret")
                ]

    pages = asyncio.run(scenario())
    approvals, run, secret = pages[1], pages[2], pages[3]
    for page in pages:
        assert "<script>window" not in page
        assert "<img src=x" not in page
        assert OPENAI_KEY not in page
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/live.js" defer>']
    assert "&lt;script&gt;window.__pwned = 1; alert(1)&lt;/script&gt;" in approvals
    assert "&lt;script&gt;" in run
    assert "&lt;img src=x onerror=" in secret
    assert "[redacted:" in secret


def test_the_approvals_page_shows_each_exact_call(tmp_path: Path) -> None:
    """Each pending request shows its tool, redacted arguments, revision and digest, with a form."""

    async def scenario() -> tuple[str, list[tuple[str, str]]]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, RUNS)
            app = create_app(store, approver="alice", token=TOKEN)
            async with client(app) as http:
                page = (await http.get("/approvals")).text
            return page, [await waiting(store, run_id) for run_id in RUNS]

    page, requests = asyncio.run(scenario())
    for request_id, digest in requests:
        assert f'id="request-{request_id}"' in page
        assert digest in page
        assert f'value="{digest}"' in page
    assert page.count('name="decision" value="approve"') == 3
    assert "refund" in page
    assert "not tracked" in page  # the revision, when the app tracks none
    assert "&#34;amount&#34;: 500" in page or "&quot;amount&quot;: 500" in page


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_approving_binds_to_the_request_and_resumes_the_run_once(
    store_kind: str, tmp_path: Path
) -> None:
    """A decision binds to the request and digest, names the approver; the run does one write."""
    if store_kind == "postgres":
        postgres_dsn()  # skip (or fail in CI) before anything starts

    async def scenario() -> tuple[Any, list[str], list[Approval], tuple[str, str]]:
        ledger: list[str] = []
        async with opened(store_kind, tmp_path) as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            agent = refund_agent(store, ledger)
            app = create_app(store, approver="alice", token=TOKEN, resume=agent.resume)
            request_id, digest = await waiting(store, "r-approve")
            path = f"/runs/r-approve/requests/{request_id}"
            async with client(app) as http:
                answer = await http.post(path, data=form(app, digest, "approve", "order checked"))
                assert answer.status_code == 303
                assert answer.headers["location"] == "/runs/r-approve"
                again = await http.post(path, data=form(app, digest, "approve"))
                assert again.status_code == 409
                await asyncio.gather(*app.resuming.values())
            stored = await store.get("r-approve")
            assert stored is not None
            submitted = await store.submitted_approvals("r-approve")
            return stored.snapshot, ledger, submitted, (request_id, digest)
        raise AssertionError("unreachable")

    snapshot, ledger, submitted, (request_id, digest) = asyncio.run(scenario())
    assert ledger == ["o-1:500"]
    assert snapshot.state == "finished"
    assert snapshot.result.status is RunStatus.COMPLETED
    (approval,) = submitted
    (applied,) = snapshot.approvals
    assert applied == approval
    assert (approval.approved, approval.approver, approval.reason) == (
        True,
        "alice",
        "order checked",
    )
    assert (approval.request_id, approval.digest) == (request_id, digest)


def test_denying_ends_the_run_without_a_write(tmp_path: Path) -> None:
    """A denial with a reason is recorded; the resumed run fails with approval_denied, no write."""

    async def scenario() -> tuple[Any, list[str], str]:
        ledger: list[str] = []
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-deny": RUNS["r-deny"]})
            agent = refund_agent(store, ledger)
            app = create_app(store, approver="bob", token=TOKEN, resume=agent.resume)
            request_id, digest = await waiting(store, "r-deny")
            async with client(app) as http:
                answer = await http.post(
                    f"/runs/r-deny/requests/{request_id}",
                    data=form(app, digest, "deny", "not eligible"),
                )
                assert answer.status_code == 303
                await asyncio.gather(*app.resuming.values())
                page = (await http.get("/runs/r-deny")).text
            stored = await store.get("r-deny")
            assert stored is not None
            return stored.snapshot, ledger, page

    snapshot, ledger, page = asyncio.run(scenario())
    assert ledger == []
    assert snapshot.result.stop_reason is StopReason.APPROVAL_DENIED
    (approval,) = snapshot.approvals
    assert (approval.approved, approval.approver, approval.reason) == (False, "bob", "not eligible")
    assert "denied by <strong>bob</strong>" in page
    assert "Last resume from this page: failed (approval_denied)" in page


def test_forged_stale_or_malformed_decisions_change_nothing(tmp_path: Path) -> None:
    """Forged, cross-site, stale, misaddressed or malformed decisions are refused, none stored."""

    async def scenario() -> list[int]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            app = create_app(store, approver="alice", token=TOKEN)
            request_id, digest = await waiting(store, "r-approve")
            path = f"/runs/r-approve/requests/{request_id}"
            good = form(app, digest, "approve")
            statuses = []
            async with client(app) as http:
                for data, headers, where in (
                    ({**good, "csrf": "forged"}, {}, path),
                    ({k: v for k, v in good.items() if k != "csrf"}, {}, path),
                    (good, {"origin": "http://evil.example"}, path),
                    (good, {"origin": "null"}, path),
                    ({**good, "digest": "0" * 64}, {}, path),
                    (good, {}, "/runs/r-approve/requests/apr-unknown"),
                    (good, {}, f"/runs/no-such-run/requests/{request_id}"),
                    ({**good, "decision": "maybe"}, {}, path),
                    ({**good, "reason": "x" * 1025}, {}, path),
                    ({**good, "reason": "x" * 20_000}, {}, path),
                ):
                    answer = await http.post(where, data=data, headers=headers)
                    statuses.append(answer.status_code)
                same_site = await http.post(
                    path, data=good, headers={"origin": "http://127.0.0.1:8765"}
                )
                statuses.append(same_site.status_code)
            assert len(await store.submitted_approvals("r-approve")) == 1
            return statuses

    assert asyncio.run(scenario()) == [403, 403, 403, 403, 409, 409, 409, 400, 400, 413, 303]


def test_the_runs_list_filters_by_state_status_and_id(tmp_path: Path) -> None:
    """Filters narrow the list; a finished run shows its status and stop reason."""

    async def scenario() -> dict[str, str]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-deny": RUNS["r-deny"], "r-approve": RUNS["r-approve"]})
            request_id, _ = await waiting(store, "r-deny")
            await store.submit_approval(
                "r-deny", Approval(request_id=request_id, approved=False, approver="bob")
            )
            await refund_agent(store, []).resume("r-deny")
            app = create_app(store, approver="alice", token=TOKEN)
            assert TOKEN not in repr(app.asgi)
            async with client(app) as http:
                finished = await http.post(
                    f"/runs/r-deny/requests/{request_id}", data=form(app, "d", "approve")
                )
                assert finished.status_code == 409
                assert "is not waiting for request" in finished.text
                return {
                    query: (await http.get(f"/{query}")).text
                    for query in ("", "?state=paused", "?status=failed", "?q=appr", "?q=zzz")
                }

    pages = asyncio.run(scenario())
    assert "r-approve" in pages[""]
    assert "approval_denied" in pages[""]
    assert "r-approve" in pages["?state=paused"]
    assert "/runs/r-deny" not in pages["?state=paused"]
    assert "/runs/r-deny" in pages["?status=failed"]
    assert "/runs/r-approve" not in pages["?status=failed"]
    assert "/runs/r-approve" in pages["?q=appr"]
    assert "/runs/r-deny" not in pages["?q=appr"]
    assert "No runs match." in pages["?q=zzz"]


def test_the_run_page_shows_timeline_receipts_journal_and_budgets(tmp_path: Path) -> None:
    """A finished run's page holds its trace timeline, receipts, journal and budget bars."""

    async def scenario() -> tuple[str, str]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            request_id, _ = await waiting(store, "r-approve")
            await store.submit_approval(
                "r-approve",
                Approval(request_id=request_id, approved=True, approver="carol"),
            )
            await refund_agent(store, []).resume("r-approve")
            app = create_app(store, approver="alice", token=TOKEN)
            async with client(app) as http:
                return (await http.get("/runs/r-approve")).text, (await http.get("/runs/nope")).text

    page, missing = asyncio.run(scenario())
    assert 'id="run-status">completed' in page
    for text in ("Timeline", "model attempt 1", "refund [c1]", "ok/applied", "Write journal"):
        assert text in page
    assert page.count('class="write"') == 1
    assert "<meter" in page
    assert "tool calls" in page
    assert "approved by <strong>carol</strong>" in page
    assert "No run <code>nope</code>" in missing


def test_live_events_say_when_the_page_is_stale(tmp_path: Path) -> None:
    """The event stream answers at once for a stale page, and waits for a change otherwise."""

    async def scenario() -> tuple[str, str, bool]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            app = create_app(store, approver="alice", token=TOKEN, poll_s=0.02, heartbeat_s=0.05)
            async with client(app) as http:
                stale = (await http.get("/runs/r-approve/events", params={"since": "0.0"})).text
                page = (await http.get("/runs/r-approve")).text
                since = re.search(r"events\?since=([^\"&]+)", page)
                assert since is not None
                waiting_for_change = asyncio.create_task(
                    http.get("/runs/r-approve/events", params={"since": since.group(1)})
                )
                await asyncio.sleep(0.2)
                still_waiting = not waiting_for_change.done()
                request_id, _ = await waiting(store, "r-approve")
                await store.submit_approval(
                    "r-approve", Approval(request_id=request_id, approved=True, approver="x")
                )
                changed = (await asyncio.wait_for(waiting_for_change, 10)).text
                listed = (await http.get("/events", params={"since": "stale"})).text
            return stale, changed, still_waiting and "event: changed" in listed

    stale, changed, list_ok = asyncio.run(scenario())
    assert "event: changed" in stale
    assert "event: changed\ndata: " in changed
    assert ": still here" in changed  # a quiet stream is kept alive
    assert list_ok


def test_a_page_rendered_while_resuming_reloads_when_the_resume_ends(tmp_path: Path) -> None:
    """A page rendered after the run's last save, before its resume returned, still updates."""

    async def scenario() -> tuple[str, bool, str]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            agent, release = refund_agent(store, []), asyncio.Event()

            async def resume(run_id: str) -> Any:
                result = await agent.resume(run_id)
                await release.wait()  # stored as finished; the resume has not returned yet
                return result

            app = create_app(store, approver="alice", token=TOKEN, resume=resume, poll_s=0.02)
            request_id, digest = await waiting(store, "r-approve")
            async with client(app) as http:
                await http.post(
                    f"/runs/r-approve/requests/{request_id}", data=form(app, digest, "approve")
                )
                stored = await store.get("r-approve")
                while stored is None or stored.snapshot.state != "finished":
                    await asyncio.sleep(0.01)
                    stored = await store.get("r-approve")
                page = (await http.get("/runs/r-approve")).text
                since = re.search(r"events\?since=([^\"&]+)", page)
                assert since is not None
                pending = asyncio.create_task(
                    http.get("/runs/r-approve/events", params={"since": since.group(1)})
                )
                await asyncio.sleep(0.2)
                waited = not pending.done()
                release.set()
                changed = (await asyncio.wait_for(pending, 10)).text
            return page, waited, changed

    page, waited, changed = asyncio.run(scenario())
    assert 'id="resuming"' in page
    assert waited  # nothing changed yet: no reload
    assert "event: changed" in changed  # the resume ended: the page reloads without the notice


def test_a_resume_that_fails_is_reported_and_shutdown_cancels_resumes(tmp_path: Path) -> None:
    """A resume error is shown on the run page; stopping the app cancels a resume in progress."""

    async def scenario() -> tuple[str, bool]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"], "r-deny": RUNS["r-deny"]})
            cancelled = asyncio.Event()

            async def broken(run_id: str) -> Any:
                raise RuntimeError("worker unavailable")

            async def forever(run_id: str) -> Any:
                try:
                    await asyncio.sleep(60)
                finally:
                    cancelled.set()

            failing = create_app(store, approver="alice", token=TOKEN, resume=broken)
            hanging = create_app(store, approver="alice", token=TOKEN, resume=forever)
            for app, run_id in ((failing, "r-approve"), (hanging, "r-deny")):
                request_id, digest = await waiting(store, run_id)
                async with client(app) as http:
                    await http.post(
                        f"/runs/{run_id}/requests/{request_id}", data=form(app, digest, "approve")
                    )
            await asyncio.gather(*failing.resuming.values())
            async with client(failing) as http:
                page = (await http.get("/runs/r-approve")).text
            async with client(hanging) as http:
                resuming = (await http.get("/runs/r-deny")).text
            assert "Resuming with the decisions" in resuming
            await stop_resuming(hanging)
            return page, cancelled.is_set()

    page, cancelled = asyncio.run(scenario())
    assert "resume failed: RuntimeError: worker unavailable" in page
    assert cancelled


def test_without_a_resume_the_page_says_who_continues_the_run(tmp_path: Path) -> None:
    """With no agent, a decision is stored and the page says who applies it."""

    async def scenario() -> str:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            app = create_app(store, approver="alice", token=TOKEN)
            request_id, digest = await waiting(store, "r-approve")
            async with client(app) as http:
                await http.post(
                    f"/runs/r-approve/requests/{request_id}", data=form(app, digest, "approve")
                )
                return (await http.get("/runs/r-approve")).text

    page = asyncio.run(scenario())
    assert "Approved by alice" in page
    assert "applied when the run resumes" in page
    assert "ownloop resume" in page
    assert "Resuming" not in page


def test_small_helpers() -> None:
    """Loopback detection and ages read as expected."""
    assert [
        is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "example.org")
    ] == [
        True,
        True,
        True,
        False,
        False,
    ]
    now = utc_now()
    assert [age(now - timedelta(seconds=s), now) for s in (5, 125, 7300, 200_000)] == [
        "5s",
        "2m",
        "2h",
        "2d",
    ]
    assert json.loads(json.dumps({"ok": True}))


def test_a_run_waiting_for_two_calls_resumes_only_once_both_are_decided(tmp_path: Path) -> None:
    """With two requests pending, the first decision is stored and the run waits for the second."""

    async def scenario() -> tuple[list[str], list[str]]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            stored = await store.get("r-approve")
            assert stored is not None
            (first,) = stored.snapshot.approval_requests
            second = first.model_copy(update={"id": "apr-second", "digest": "f" * 64})
            await store.save(
                stored.snapshot.model_copy(update={"approval_requests": (first, second)}),
                expected_version=stored.version,
            )
            started: list[str] = []

            async def resume(run_id: str) -> Any:
                started.append(run_id)
                raise RuntimeError("not needed here")

            app = create_app(store, approver="alice", token=TOKEN, resume=resume)
            async with client(app) as http:
                for request in (first, second):
                    await http.post(
                        f"/runs/r-approve/requests/{request.id}",
                        data=form(app, request.digest, "approve", ""),
                    )
                    await asyncio.gather(*app.resuming.values())
                    started.append("|")
            submitted = await store.submitted_approvals("r-approve")
            return started, [str(item.reason) for item in submitted]

    started, reasons = asyncio.run(scenario())
    assert started == ["|", "r-approve", "|"]
    assert reasons == ["None", "None"]  # an empty reason is recorded as none


class _RivalDecides(SqliteRunStore):
    """A real store on which another decider stores its decision right after the UI looked."""

    rival: Approval | None = None

    async def submitted_approvals(self, run_id: str) -> list[Approval]:
        seen = await super().submitted_approvals(run_id)
        if self.rival is not None:
            async with SqliteRunStore(self.path) as elsewhere:  # another process, in effect
                await elsewhere.submit_approval(run_id, self.rival)
            self.rival = None
        return seen


def test_a_decision_by_digest_from_elsewhere_refuses_the_pages_decision(tmp_path: Path) -> None:
    """A request decided by digest elsewhere, before or while the page decides, is refused."""

    async def scenario() -> tuple[list[tuple[int, str]], list[Approval]]:
        async with _RivalDecides(tmp_path / "runs.db") as store:
            await pause(store, {"r-approve": RUNS["r-approve"]})
            app = create_app(store, approver="alice", token=TOKEN)
            request_id, digest = await waiting(store, "r-approve")
            path = f"/runs/r-approve/requests/{request_id}"
            answers = []
            async with client(app) as http:
                store.rival = Approval(digest=digest, approved=False, approver="bob")
                answers.append(await http.post(path, data=form(app, digest, "approve")))
                answers.append(await http.post(path, data=form(app, digest, "approve")))
                page = (await http.get("/approvals")).text
                assert '<p class="decided denied">' in page  # shown as decided, by digest
                assert "Denied by bob" in page
            return [(a.status_code, a.text) for a in answers], await store.submitted_approvals(
                "r-approve"
            )

    answers, submitted = asyncio.run(scenario())
    (raced, text), (later, again) = answers
    assert (raced, later) == (409, 409)
    assert "was already decided: denied by bob" in text
    assert "was already decided" in again
    assert [(a.approver, a.approved, a.request_id) for a in submitted] == [("bob", False, None)]


class _WithoutThreads:
    """A custom store that keeps no threads: its thread pages are empty."""

    def __init__(self, inner: RunStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("append_to_thread", "thread_runs"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_thread_shows_its_runs_as_one_timeline(tmp_path: Path) -> None:
    """The thread page lists each run of a conversation in order; a run page links its thread."""

    async def scenario() -> tuple[str, str, str, int]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            for number, task in enumerate(("first <b>question</b>", "follow-up"), start=1):
                agent = Agent(ScriptedModel([final(f"answer {number}")]), store=store)
                await agent.run(task, thread_id="chat<1>", run_id=f"turn-{number}")
            app = create_app(store, approver="alice", token=TOKEN)
            async with client(app) as http:
                thread = await http.get("/threads/chat%3C1%3E")
                run = await http.get("/runs/turn-2")
                missing = await http.get("/threads/none")
            async with client(
                create_app(_WithoutThreads(store), approver="a", token=TOKEN)
            ) as http:
                assert (await http.get("/threads/chat%3C1%3E")).status_code == 404
            with sqlite3.connect(tmp_path / "runs.db") as raw:  # pruned: the thread row stays
                raw.execute("DELETE FROM runs WHERE run_id = 'turn-1'")
            async with client(app) as http:
                pruned = (await http.get("/threads/chat%3C1%3E")).text
            assert "turn-1" not in pruned
            assert 'Turn 1: run <a href="/runs/turn-2">' in pruned
            return thread.text, run.text, missing.text, missing.status_code

    thread, run, missing, status = asyncio.run(scenario())
    assert thread.index("Turn 1: run") < thread.index("turn-1") < thread.index("Turn 2: run")
    assert thread.index("answer 1") < thread.index("answer 2")
    assert "first &lt;b&gt;question&lt;/b&gt;" in thread
    assert "Thread <code>chat&lt;1&gt;</code>" in thread
    assert thread.count('class="timeline"') == 2
    assert 'Part of thread <a href="/threads/chat%3C1%3E"><code>chat&lt;1&gt;</code></a>' in run
    assert (status, "No runs in this thread." in missing) == (404, True)
