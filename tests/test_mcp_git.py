"""Writes through the unmodified ``mcp-server-git``: denied, paused for approval, never twice."""

from __future__ import annotations

import asyncio
import os
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ownloop import Agent, Approval, RunStatus, StopReason
from ownloop.mcp import MCPToolset
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel, tool_call
from tests.mcp_git_worker import LEASE_TTL_S, work
from tests.mcp_support import ROOT, commit_count, git, git_server, make_repo


def _approve(database: Path, run_id: str, *, approved: bool = True) -> None:
    async def submit() -> None:
        store = SqliteRunStore(database)
        try:
            stored = await store.get(run_id)
            assert stored is not None
            (request,) = stored.snapshot.approval_requests
            assert request.tool == "git_commit"
            decision = Approval(request_id=request.id, approved=approved, approver="reviewer")
            await store.submit_approval(run_id, decision)
        finally:
            await store.close()

    asyncio.run(submit())


def test_git_writes_are_denied_by_default(tmp_path: Path) -> None:
    """git_add has readOnlyHint false: a write the default policy denies; nothing is staged."""
    repo = make_repo(tmp_path / "repo")
    with MCPToolset(git_server(repo)) as tools:
        assert {s.name: s.effect for s in tools.specs()}["git_commit"] == "write"
        model = ScriptedModel([tool_call("git_add", repo_path=str(repo), files=["new.txt"])])
        result = Agent(model, tools).run_sync("stage it")
    assert result.stop_reason is StopReason.TOOL_DENIED
    assert git(repo, "status", "--porcelain") == "?? new.txt\n"


def test_a_commit_waits_for_approval_then_happens_exactly_once(tmp_path: Path) -> None:
    """No commit while paused; one commit after approval; resuming again repeats nothing."""
    repo = make_repo(tmp_path / "repo")
    database = tmp_path / "runs.db"
    paused = asyncio.run(work(repo, database, "git-1", "run"))
    assert (paused.status, paused.stop_reason) == (RunStatus.PAUSED, StopReason.APPROVAL_REQUIRED)
    assert commit_count(repo) == 1
    assert git(repo, "status", "--porcelain") == "A  new.txt\n"  # git_add ran: it is allowed

    still = asyncio.run(work(repo, database, "git-1", "resume"))
    assert still.status is RunStatus.PAUSED  # no decision yet: still no commit
    assert commit_count(repo) == 1

    _approve(database, "git-1")
    done = asyncio.run(work(repo, database, "git-1", "resume"))
    assert done.status is RunStatus.COMPLETED
    assert commit_count(repo) == 2
    assert git(repo, "log", "-1", "--format=%s").strip() == "Add new.txt"
    with pytest.raises(Exception, match="not paused"):
        asyncio.run(work(repo, database, "git-1", "resume"))
    assert commit_count(repo) == 2


def test_a_denied_commit_never_happens(tmp_path: Path) -> None:
    """A denial ends the run without a commit."""
    repo = make_repo(tmp_path / "repo")
    database = tmp_path / "runs.db"
    asyncio.run(work(repo, database, "git-2", "run"))
    _approve(database, "git-2", approved=False)
    result = asyncio.run(work(repo, database, "git-2", "resume"))
    assert result.stop_reason is StopReason.APPROVAL_DENIED
    assert commit_count(repo) == 1


def test_a_worker_killed_during_the_commit_never_commits_twice(tmp_path: Path) -> None:
    """Killed mid-commit, the resumed run reports an unknown effect and does not commit again."""
    repo = make_repo(tmp_path / "repo")
    database = tmp_path / "runs.db"
    marker = tmp_path / "committed"
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 60\n", encoding="utf-8")
    hook.chmod(0o755)
    asyncio.run(work(repo, database, "git-3", "run"))
    _approve(database, "git-3")
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_git_worker", str(repo), str(database), "git-3", "resume"],
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert worker.poll() is None, "the worker exited before committing"
            assert time.monotonic() < deadline, "the commit never started"
            time.sleep(0.1)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker, the git server and the hook
        worker.wait()
    assert commit_count(repo) == 2
    hook.unlink()
    time.sleep(LEASE_TTL_S + 0.5)  # the dead worker's lease expires
    result = asyncio.run(work(repo, database, "git-3", "resume"))
    assert (result.status, result.stop_reason) == (
        RunStatus.UNRESOLVED,
        StopReason.UNRESOLVED_EFFECT,
    )
    assert [operation.tool for operation in result.pending] == ["git_commit"]
    assert commit_count(repo) == 2


def test_the_example_commits_once_after_approval(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/mcp_git.py pauses the commit, approves it and ends with one commit."""
    runpy.run_path(str(ROOT / "examples" / "mcp_git.py"), run_name="__main__")
    output = capsys.readouterr().out
    assert "paused: approval_required: git_commit" in output
    assert "commits so far: 0" in output
    assert "finished: completed" in output
    assert "Add release notes" in output.rsplit("commits now:", 1)[1]
