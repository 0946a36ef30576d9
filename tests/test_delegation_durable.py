"""Nested exact approvals and crashes: a child's write pauses the parent and runs once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from ownloop import Approval
from ownloop.cli import main
from ownloop.store import SqliteRunStore
from tests.delegation_worker import RUN_ID, build, summary

ROOT = Path(__file__).resolve().parents[1]


def _worker(database: Path, ledger: Path, phase: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.delegation_worker", str(database), str(ledger), phase],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _run(database: Path, ledger: Path, phase: str, approvals: tuple[Approval, ...] = ()) -> dict:
    async def go() -> dict:
        async with SqliteRunStore(database) as store:
            parent = build(store, ledger, phase)
            if phase == "resume":
                return summary(await parent.resume(RUN_ID, approvals=approvals))
            return summary(await parent.run("refund the customer", run_id=RUN_ID))

    return asyncio.run(go())


def test_a_childs_write_pauses_the_parent_and_names_the_path(tmp_path: Path) -> None:
    """The parent pauses on the child's request; it names the parent call and the child call."""
    paused = _run(tmp_path / "runs.db", tmp_path / "ledger", "start")
    assert (paused["status"], paused["stop_reason"]) == ("paused", "approval_required")
    (reason,) = paused["reasons"]
    assert "delegated: payments call p1 -> refund call r1" in reason
    assert not (tmp_path / "ledger").exists()


def test_approve_then_resume_runs_the_childs_write_once(tmp_path: Path) -> None:
    """An approval given to the parent's resume admits the child's write, which runs once."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    paused = _run(database, ledger, "start")
    decision = Approval(request_id=paused["requests"][0], approved=True, approver="ops")
    done = _run(database, ledger, "resume", (decision,))
    assert (done["status"], done["output"]) == ("completed", "done")
    assert ledger.read_text().splitlines() == ["refund A1"]


def test_a_resume_without_the_decision_stays_paused(tmp_path: Path) -> None:
    """Without a decision the resumed parent pauses again on the same request; nothing runs."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    paused = _run(database, ledger, "start")
    again = _run(database, ledger, "resume")
    assert again["requests"] == paused["requests"]
    assert not ledger.exists()


def test_cli_approval_and_resume_in_another_process(tmp_path: Path, capsys) -> None:
    """`ownloop approve` decides the nested request; a new process resumes; the write runs once."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    paused = _run(database, ledger, "start")
    assert main(["approve", RUN_ID, paused["requests"][0], "--db", str(database)]) == 0
    capsys.readouterr()
    resumed = _worker(database, ledger, "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert ledger.read_text().splitlines() == ["refund A1"]


def test_sigkill_during_the_childs_write_then_resume_runs_it_once(tmp_path: Path) -> None:
    """A worker killed inside the child's write is resumed elsewhere; the write is not repeated."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    crashed = _worker(database, ledger, "crash")
    assert crashed.returncode == -9
    assert ledger.read_text().splitlines() == ["refund A1"]
    resumed = _worker(database, ledger, "recover")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert ledger.read_text().splitlines() == ["refund A1"]


def test_a_decision_by_digest_reaches_the_waiting_child(tmp_path: Path) -> None:
    """A decision naming the child's call by digest alone admits it; the write runs once."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    _run(database, ledger, "start")

    async def digest() -> str:
        async with SqliteRunStore(database) as store:
            stored = await store.get(RUN_ID)
            assert stored is not None
            return stored.snapshot.approval_requests[0].digest

    decision = Approval(digest=asyncio.run(digest()), approved=True, approver="ops")
    done = _run(database, ledger, "resume", (decision,))
    assert (done["status"], done["output"]) == ("completed", "done")
    assert ledger.read_text().splitlines() == ["refund A1"]
