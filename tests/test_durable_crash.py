"""The crash matrix: a worker SIGKILLed at every step boundary and mid-write, then resumed.

Each case runs the export task (search, export, answer) in a real worker process with a SQLite or
PostgreSQL store, kills it with SIGKILL at one point, waits for its lease to expire, and resumes
the run by id in a new process. In every case the ledger holds no effect twice, and the run ends
completed when the write's receipt was journaled (or a lookup confirmed it), and unresolved when
the write started but its outcome was never recorded.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.durable_support import fresh_schema, postgres_dsn
from tests.durable_worker import Job, ledger_rows, open_store, report, start

EXPORT = "export:q3"

# kill point -> (status after resume, effects in the ledger)
MATRIX = {
    "save:1": ("completed", 1),  # run started
    "save:2": ("completed", 1),  # the model proposed the search
    "save:3": ("completed", 1),  # the search ran
    "save:4": ("completed", 1),  # the model proposed the export
    "intent": ("unresolved", 0),  # the export's intent is journaled; it never ran
    "write:before_commit": ("unresolved", 0),  # the export runs; nothing committed yet
    "write:after_commit": ("unresolved", 1),  # the export committed; no receipt
    "receipt": ("completed", 1),  # the receipt is journaled; no checkpoint yet
    "save:5": ("completed", 1),  # the export's checkpoint
    "save:6": ("finished", 1),  # the finished snapshot: nothing left to resume
}

# with a lookup that reads the ledger authoritatively
RECONCILED = {
    "intent": ("completed", 1),  # not applied -> retried once with the same key
    "write:before_commit": ("completed", 1),
    "write:after_commit": ("completed", 1),  # confirmed -> never executed again
}


def wait_for_halt(job: Job, process: Any, timeout: float = 10.0) -> str:
    """Wait until the worker stops at its kill point; return the point."""
    deadline = time.monotonic() + timeout
    while not job.path("halted").exists():
        if not process.is_alive() and not job.path("halted").exists():
            reports = sorted(job.path("").glob("*.json"))
            said = "; ".join(f"{r.name}: {r.read_text()}" for r in reports) or "no report"
            raise AssertionError(f"worker exited ({process.exitcode}) before {job.kill_at}: {said}")
        assert time.monotonic() < deadline, f"worker never reached {job.kill_at}"
        time.sleep(0.002)
    return job.path("halted").read_text()


def kill(process: Any) -> None:
    """SIGKILL the worker and reap it."""
    os.kill(process.pid, signal.SIGKILL)
    process.join(5)
    assert process.exitcode == -signal.SIGKILL


def finish(job: Job, process: Any) -> dict[str, Any]:
    """Wait for a worker to exit cleanly and return its report."""
    process.join(20)
    assert process.exitcode == 0, f"{job.worker_id} exited with {process.exitcode}"
    return report(job)


def crash_and_resume(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
    """Kill the job's worker at its kill point, resume in a new process; return the outcome."""
    worker = start(job)
    assert wait_for_halt(job, worker) == job.kill_at
    kill(worker)  # and resume at once: a dead holder on this host does not block its run
    resumer = replace(job, mode="resume", worker_id="worker-2", kill_at=None)
    outcome = finish(resumer, start(resumer))
    stored = asyncio.run(_stored(job))
    return outcome, stored


async def _stored(job: Job) -> dict[str, Any]:
    store = open_store(job)
    try:
        found = await store.get(job.run_id)
        journal = await store.journal(job.run_id)
    finally:
        await store.close()
    assert found is not None
    result = found.snapshot.result
    return {
        "state": found.snapshot.state,
        "status": result.status.value if result else None,
        "receipts": [(e.intent.call_id, e.receipt.status if e.receipt else None) for e in journal],
    }


def check(job: Job, expected: tuple[str, int]) -> None:
    """Crash, resume and assert the terminal state and that no effect happened twice."""
    status, effects = expected
    outcome, stored = crash_and_resume(job)
    rows = ledger_rows(job.directory)
    keys = [key for key, _ in rows]
    assert len(keys) == len(set(keys)), f"an effect happened twice: {rows}"
    assert [what for _, what in rows] == [EXPORT] * effects
    if status == "finished":
        assert outcome["error"] == "ConfigurationError"
        assert "completed, not paused" in outcome["message"]
        assert (stored["state"], stored["status"]) == ("finished", "completed")
        return
    assert outcome["status"] == status, outcome
    assert (stored["state"], stored["status"]) == ("finished", status)
    if status == "unresolved":
        assert outcome["stop_reason"] == "unresolved_effect"
        assert outcome["pending"] == ["c2"]
    else:
        assert outcome["output"] == "Exported q3."


def _cases(matrix: dict[str, tuple[str, int]], reconcile: bool) -> list[Any]:
    cases = []
    for point, expected in matrix.items():
        marks: list[Any] = []
        label = f"{point}{'+lookup' if reconcile else ''}"
        cases.append(pytest.param(point, reconcile, expected, id=label, marks=marks))
    return cases


CASES = _cases(MATRIX, reconcile=False) + _cases(RECONCILED, reconcile=True)


@pytest.mark.parametrize(("kill_at", "reconcile", "expected"), CASES)
def test_sqlite_worker_killed_then_resumed(
    tmp_path: Path, kill_at: str, reconcile: bool, expected: tuple[str, int]
) -> None:
    """A SQLite-backed run killed at this point resumes without repeating a write."""
    job = Job(
        run_id="crash",
        directory=str(tmp_path),
        database=str(tmp_path / "runs.db"),
        kill_at=kill_at,
        reconcile=reconcile,
    )
    check(job, expected)


@pytest.mark.parametrize(("kill_at", "reconcile", "expected"), CASES)
def test_postgres_worker_killed_then_resumed(
    tmp_path: Path, kill_at: str, reconcile: bool, expected: tuple[str, int]
) -> None:
    """A PostgreSQL-backed run killed at this point resumes without repeating a write."""
    job = Job(
        run_id="crash",
        directory=str(tmp_path),
        database=postgres_dsn(),
        schema=fresh_schema(),
        kill_at=kill_at,
        reconcile=reconcile,
    )
    check(job, expected)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_uninterrupted_run_writes_once(tmp_path: Path, backend: str) -> None:
    """Without a crash the same worker completes and the ledger holds the export once."""
    job = Job(run_id="calm", directory=str(tmp_path), database=str(tmp_path / "runs.db"))
    if backend == "postgres":
        job = replace(job, database=postgres_dsn(), schema=fresh_schema())
    outcome = finish(job, start(job))
    assert (outcome["status"], outcome["output"]) == ("completed", "Exported q3.")
    assert [what for _, what in ledger_rows(tmp_path)] == [EXPORT]
