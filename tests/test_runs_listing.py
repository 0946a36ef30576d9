"""Run listings page by page: ``ownloop runs list`` and the UI's run and approval lists."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from ownloop import RunStatus
from ownloop.cli import main
from ownloop.contracts import Actor, ApprovalRequest, RunSnapshot
from ownloop.store import MemoryRunStore, RunStore, SqliteRunStore
from ownloop.ui import cookie_name, create_app
from tests.durable_support import T0, snapshot

TOKEN = "test-token-0123456789abcdef"


def _run(run_id: str, at: int, actor: str, *, paused: bool = False) -> RunSnapshot:
    state, status = ("paused", RunStatus.PAUSED) if paused else ("finished", RunStatus.COMPLETED)
    base = snapshot(run_id, state=state, status=status, at=at)
    requests = (
        (
            ApprovalRequest(
                id=f"req-{run_id}", call_id="c1", tool="refund", arguments={}, digest=f"dg-{run_id}"
            ),
        )
        if paused
        else ()
    )
    versions = base.versions.model_copy(update={"policy_digest": "agent-x"})
    return base.model_copy(
        update={"actor": Actor(id=actor), "versions": versions, "approval_requests": requests}
    )


async def _fill(store: RunStore) -> None:
    for n in range(5):
        await store.save(_run(f"run-{n}", n, "alice" if n % 2 else "bob"), expected_version=None)
    for n in range(3):
        await store.save(_run(f"wait-{n}", 10 + n, "carol", paused=True), expected_version=None)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A SQLite store of five finished runs and three paused ones."""
    path = tmp_path / "runs.db"

    async def fill() -> None:
        async with SqliteRunStore(path) as store:
            await _fill(store)

    asyncio.run(fill())
    return path


def _ids(out: str) -> list[str]:
    return re.findall(r"^((?:run|wait)-\d)", out, re.MULTILINE)


def test_runs_list_pages_and_says_how_to_get_the_next(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full page ends with its cursor; the cursor prints the next page, in order."""
    argv = ["runs", "list", "--db", str(database), "--limit", "3"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert _ids(first) == ["wait-2", "wait-1", "wait-0"]
    cursor = re.search(r"^next page: --after '(.+)'$", first, re.MULTILINE)
    assert cursor is not None
    assert main([*argv, "--after", cursor.group(1)]) == 0
    assert _ids(capsys.readouterr().out) == ["run-4", "run-3", "run-2"]
    assert main([*argv, "--limit", "20"]) == 0
    assert "next page" not in capsys.readouterr().out


def test_runs_list_filters_by_actor_agent_and_time(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--actor, --agent, --since and --until narrow the listing; ages and ISO times both work."""
    argv = ["runs", "list", "--db", str(database)]
    assert main([*argv, "--actor", "alice", "--agent", "agent-x"]) == 0
    assert _ids(capsys.readouterr().out) == ["run-3", "run-1"]
    since, until = (T0 + timedelta(seconds=2)).isoformat(), "2026-01-01T00:00:04"
    assert main([*argv, "--since", since, "--until", until]) == 0
    assert _ids(capsys.readouterr().out) == ["run-3", "run-2"]
    assert main([*argv, "--since", "1d"]) == 0  # every run was saved long before
    assert _ids(capsys.readouterr().out) == []
    assert main([*argv, "--until", "1d", "--agent", "other"]) == 0
    assert _ids(capsys.readouterr().out) == []


def test_runs_list_refuses_a_time_it_cannot_read(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A time that is neither ISO 8601 nor an age, or a bad cursor, is a usage error."""
    assert main(["runs", "list", "--db", str(database), "--since", "yesterday"]) == 2
    assert "a time is ISO 8601 (2026-11-30T12:00:00+00:00) or an age (2d), not 'yesterday'" in (
        capsys.readouterr().err
    )
    assert main(["runs", "list", "--db", str(database), "--after", "nowhere"]) == 2
    assert "is not a listing cursor" in capsys.readouterr().err


def _client(store: RunStore) -> httpx.AsyncClient:
    app = create_app(store, approver="alice", token=TOKEN)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app.asgi),
        base_url="http://127.0.0.1:8765",
        cookies={cookie_name(TOKEN): TOKEN},
    )


def _listed(page: str) -> list[str]:
    return re.findall(r'href="/runs/((?:run|wait)-\d+)"', page)


def test_the_ui_lists_pages_of_runs_with_their_filters() -> None:
    """The runs list is paged by cursor; the next-page link keeps the filters."""

    async def browse() -> None:
        store = MemoryRunStore()
        await _fill(store)
        async with _client(store) as browser:
            page = (await browser.get("/", params={"state": "finished"})).text
            assert _listed(page) == ["run-4", "run-3", "run-2", "run-1", "run-0"]
            assert 'rel="next"' not in page
            for n in range(5, 60):
                await store.save(_run(f"run-{n}", n, "bob"), expected_version=None)
            page = (await browser.get("/", params={"actor": "bob", "agent": "agent-x"})).text
            assert len(_listed(page)) == 50
            link = re.search(r'rel="next" href="/\?([^"]+)"', page)
            assert link is not None
            following = httpx.QueryParams(link.group(1).replace("&amp;", "&"))
            assert (following["actor"], following["agent"]) == ("bob", "agent-x")
            rest = (await browser.get("/", params=following)).text
            assert _listed(rest) == [
                "run-9",
                "run-8",
                "run-7",
                "run-6",
                "run-5",
                "run-4",
                "run-2",
                "run-0",
            ]
            refused = await browser.get("/", params={"after": "nowhere"})
            assert refused.status_code == 400

    asyncio.run(browse())


def test_the_ui_lists_pending_approvals_a_page_of_paused_runs_at_a_time() -> None:
    """The approvals page shows fifty paused runs' requests and links to the next fifty."""

    async def browse() -> None:
        store = MemoryRunStore()
        for n in range(52):
            await store.save(_run(f"wait-{n}", n, "carol", paused=True), expected_version=None)
        async with _client(store) as browser:
            page = (await browser.get("/approvals")).text
            assert set(re.findall(r"req-(wait-\d+)", page)) == {f"wait-{n}" for n in range(2, 52)}
            link = re.search(r'rel="next" href="/approvals\?([^"]+)"', page)
            assert link is not None
            following = httpx.QueryParams(link.group(1).replace("&amp;", "&"))
            rest = (await browser.get("/approvals", params=following)).text
            assert set(re.findall(r"req-(wait-\d+)", rest)) == {"wait-1", "wait-0"}
            assert 'rel="next"' not in rest
            refused = await browser.get("/approvals", params={"after": "nowhere"})
            assert refused.status_code == 400

    asyncio.run(browse())
