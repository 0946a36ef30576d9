"""Approval across processes: pause in one, approve with the CLI in a second, resume in a third."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ownloop import Approval
from ownloop.cli import main
from ownloop.store import SqliteRunStore
from tests.durable_support import fresh_database
from tests.durable_worker import (
    Job,
    job_environment,
    ledger_rows,
    make_agent,
    open_store,
    report,
    start,
)

ROOT = Path(__file__).resolve().parents[1]


def ownloop(*arguments: str, job: Job) -> subprocess.CompletedProcess[str]:
    """Run the ``ownloop`` command in a new process."""
    return subprocess.run(
        [sys.executable, "-m", "ownloop.cli", *arguments],
        cwd=ROOT,
        env=job_environment(job),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _job(backend: str, tmp_path: Path) -> tuple[Job, list[str]]:
    job = Job(
        run_id=f"approval-{backend}",
        directory=str(tmp_path),
        database=str(tmp_path / "runs.db"),
        scenario="refund",
        mode="run",
    )
    if backend == "postgres":
        dsn = fresh_database()  # the CLI uses the default schema
        return replace(job, database=dsn, schema="ownloop"), ["--dsn", dsn]
    return job, ["--db", job.database]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_pause_approve_resume_in_three_processes(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's approval reaches a run paused in another process; a third resumes it once."""
    job, where = _job(backend, tmp_path)
    first = start(job)
    first.join(20)
    paused = report(job)
    assert (paused["status"], paused["stop_reason"]) == ("paused", "approval_required")
    (request_id,) = paused["requests"]
    assert ledger_rows(tmp_path) == []

    decided = ownloop(
        "approve",
        job.run_id,
        request_id,
        "--approver",
        "alice",
        "--reason",
        "checked",
        *where,
        job=job,
    )
    assert decided.returncode == 0, decided.stderr
    assert f"approved request {request_id} of run {job.run_id} as alice" in decided.stdout

    resumed = ownloop("resume", job.run_id, "--agent", "tests.durable_worker:cli_agent", job=job)
    assert resumed.returncode == 0, resumed.stderr
    assert "status:      completed (final_output)" in resumed.stdout
    assert f"{request_id} approved by alice" in resumed.stdout

    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]
    stored = asyncio.run(_stored(job))
    assert stored is not None
    assert stored.snapshot.state == "finished"
    result = stored.snapshot.result
    assert result is not None
    for trail in (stored.snapshot.approvals, result.approvals):
        assert [(a.request_id, a.approver, a.approved, a.reason) for a in trail] == [
            (request_id, "alice", True, "checked")
        ]
    assert main(["runs", "show", job.run_id, *where]) == 0
    assert f"decided:     {request_id} approved by alice" in capsys.readouterr().out


async def _stored(job: Job) -> object:
    store = open_store(job)
    try:
        return await store.get(job.run_id)
    finally:
        await store.close()


def test_second_pause_resumes_with_its_own_stored_approval(tmp_path: Path) -> None:
    """A run paused twice resumes each time with the decision submitted for that pause."""
    job = Job(run_id="twice", directory=str(tmp_path), database="-", scenario="two_refunds")

    async def scenario() -> list[str]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            result = await make_agent(job, store).run("refund both", run_id="twice")
            statuses = []
            for played in (1, 2):
                request = result.approval_requests[0].id
                await store.submit_approval(
                    "twice", Approval(request_id=request, approved=True, approver="alice")
                )
                result = await make_agent(job, store, played).resume("twice")
                statuses.append(result.status.value)
            return statuses

    assert asyncio.run(scenario()) == ["paused", "completed"]
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500", "refund:o-2:700"]
