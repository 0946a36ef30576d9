"""The browser view in a real headless Chromium, as a person uses it (Playwright drives it).

Debian's ``chromium`` is driven through Playwright's own protocol driver (``pip install
playwright``; its browser downloads are never used). The tests skip, with one line saying why,
only where that browser is not installed. Set ``OWNLOOP_UPDATE_SCREENSHOTS=1`` to refresh the
screenshots in ``docs/assets/ui/``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui_support import IMAGE, SCRIPT, live_server, pause_sqlite

CHROMIUM = os.environ.get("OWNLOOP_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "assets" / "ui"
RUNS = {
    "refund-approve": f"refund o-1 500 {SCRIPT} thanks",
    "refund-deny": "refund o-2 700 goodwill",
    "refund-later": f"refund o-3 900 {IMAGE}",
}

if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"browser tests skipped: no Chromium at {CHROMIUM} (scripts/setup_ui.sh installs it)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="browser tests skipped: playwright is not installed"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) and page, recording dialogs and page errors."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    opened.dialogs = []
    opened.on("dialog", lambda dialog: (opened.dialogs.append(dialog.message), dialog.dismiss()))
    yield opened
    context.close()


def screenshot(page: Any, name: str, tmp_path: Path) -> None:
    """Save a full-page screenshot (into the docs when asked to refresh them)."""
    target = tmp_path / f"{name}.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 10_000
    if os.environ.get("OWNLOOP_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(target, SCREENSHOTS / f"{name}.png")


def wait_until(condition: Callable[[], bool], page: Any, timeout_s: float = 20.0) -> None:
    """Let the page's events arrive until ``condition`` holds (or the bound passes)."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # runs the browser's event loop: pending events are delivered


def card(page: Any, run_id: str) -> Any:
    """The pending-request card of a run on the approvals page."""
    return page.locator("section.request", has=page.locator(f'a[href="/runs/{run_id}"]'))


def test_approve_and_deny_in_the_browser(page: Any, tmp_path: Path) -> None:
    """Approve one paused run (it resumes live and writes once), deny another (no write)."""
    database = tmp_path / "runs.db"
    paused = pause_sqlite(database, RUNS)
    digest = paused["refund-approve"].approval_requests[0].digest
    expect = sync_api.expect
    with live_server(database, approver="alice", hold_answers=True) as server:
        page.goto(server.address("/approvals"))
        assert page.url == f"{server.base}/approvals"  # the token left the address bar
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        expect(page.locator("section.request")).to_have_count(3)
        approve = card(page, "refund-approve")
        expect(approve.locator("pre.arguments")).to_contain_text(SCRIPT)
        expect(approve.locator("code.digest")).to_have_text(digest)
        screenshot(page, "approvals", tmp_path)

        loads: list[str] = []
        page.on("load", lambda loaded: loads.append(loaded.url))
        approve.locator("input[name=reason]").fill("order checked by phone")
        approve.locator("button.approve").click()
        page.wait_for_url(f"{server.base}/runs/refund-approve")
        expect(page.locator("#resuming")).to_be_visible()  # the model's answer is held
        server.release_answers()
        expect(page.locator("#run-status")).to_have_text("completed", timeout=20_000)
        expect(page.locator("#resuming")).to_have_count(0, timeout=20_000)  # the resume ended
        # nobody navigated: the page reloaded itself when the stored run changed. The new
        # document can be queried before its load event reaches this process: wait for that.
        page.wait_for_load_state("load")
        wait_until(lambda: loads.count(f"{server.base}/runs/refund-approve") >= 2, page)
        assert loads.count(f"{server.base}/runs/refund-approve") >= 2
        expect(page.locator("pre.output")).to_contain_text(SCRIPT)
        expect(page.locator("tr.write")).to_have_count(1)
        expect(page.locator("ul.decisions")).to_contain_text("approved by alice")
        expect(page.locator("ul.decisions")).to_contain_text("order checked by phone")
        screenshot(page, "run", tmp_path)
        assert server.ledger == ["o-1:500"]

        page.goto(f"{server.base}/approvals")
        deny = card(page, "refund-deny")
        deny.locator("input[name=reason]").fill("not eligible")
        deny.locator("button.deny").click()
        page.wait_for_url(f"{server.base}/runs/refund-deny")
        expect(page.locator("#run-status")).to_have_text("failed", timeout=20_000)
        expect(page.locator("#resuming")).to_have_count(0, timeout=20_000)  # no reload pending
        expect(page.locator("ul.decisions")).to_contain_text("denied by alice")
        assert server.ledger == ["o-1:500"]

        page.goto(f"{server.base}/")
        expect(page.locator("table.runs tbody tr")).to_have_count(3)
        screenshot(page, "runs", tmp_path)

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.dialogs == []


def test_injected_markup_never_runs(page: Any, tmp_path: Path) -> None:
    """A <script> or onerror payload in a task, argument or output shows as text and never runs."""
    database = tmp_path / "runs.db"
    pause_sqlite(database, RUNS)
    with live_server(database) as server:
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text))
        for path in ("/", "/approvals", "/runs/refund-approve", "/runs/refund-later"):
            page.goto(server.address(path))
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert page.locator("img").count() == 0
        assert IMAGE in page.locator("pre.task").inner_text()
        assert 'onerror=\\"window.__pwned = 2\\"' in page.locator("pre.arguments").inner_text()
    assert page.dialogs == []
    assert not [text for text in errors if "Content Security Policy" in text]


def test_a_request_without_the_token_is_refused(page: Any, tmp_path: Path) -> None:
    """Opening any page without the launch's token (or with a wrong one) gets 403 and no data."""
    database = tmp_path / "runs.db"
    pause_sqlite(database, {"refund-approve": RUNS["refund-approve"]})
    with live_server(database) as server:
        for address in (
            f"{server.base}/",
            f"{server.base}/approvals",
            f"{server.base}/runs/refund-approve",
            f"{server.base}/?token=wrong",
        ):
            response = page.goto(address)
            assert response is not None
            assert response.status == 403
            assert "access token" in page.content()
            assert "refund-approve" not in page.content()
        assert server.ledger == []
