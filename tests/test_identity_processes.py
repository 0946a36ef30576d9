"""A write's identity survives a fresh interpreter: another hash seed, a crash, a deploy.

Each test runs real processes (``python -m tests.identity_worker``) over one store, a SQLite file
or a PostgreSQL schema of its own, each process under its own ``PYTHONHASHSEED``: the first ships
an order whose ``items`` is a ``set[str]`` and dies (after the effect, or after its receipt); the
next resumes the run. The ledger file counts real effects. Processes are slow (seconds each), so
PostgreSQL runs the one case a hash seed decides; every case runs in-process on every store in
`tests/test_identity_stores.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.durable_support import fresh_schema, postgres_dsn
from tests.identity_worker import ITEMS, ledger

ROOT = Path(__file__).resolve().parent.parent


def _work(job: dict[str, Any], seed: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    return subprocess.run(
        [sys.executable, "-m", "tests.identity_worker", json.dumps(job)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _outcome(process: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert process.returncode == 0, process.stderr
    outcome: dict[str, Any] = json.loads(process.stdout.strip().splitlines()[-1])
    return outcome


@pytest.fixture(params=["sqlite"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The store every process of the test opens: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return {"db": str(tmp_path / "runs.db")}
    return {"dsn": postgres_dsn(), "schema": fresh_schema()}


def _job(tmp_path: Path, where: dict[str, str], **fields: Any) -> dict[str, Any]:
    return {**where, "ledger": str(tmp_path / "ledger.jsonl"), "run_id": "ship-run", **fields}


@pytest.mark.parametrize(
    ("where", "crash"),
    [("sqlite", "after_apply"), ("sqlite", "after_receipt"), ("postgres", "after_apply")],
    indirect=["where"],
)
def test_a_set_argument_write_resumed_under_another_hash_seed_runs_once(
    tmp_path: Path, where: dict[str, str], crash: str
) -> None:
    """A set[str] write crashed after it applied resumes in a fresh interpreter, ends, ran once."""
    crashed = _work(_job(tmp_path, where, action="start", crash=crash), seed=1)
    assert crashed.returncode in (17, 18), crashed.stderr
    assert len(ledger(tmp_path / "ledger.jsonl")) == 1
    resumed = _outcome(_work(_job(tmp_path, where, action="resume"), seed=2))
    assert resumed == {"status": "completed", "output": "Shipped o-1."}
    rows = ledger(tmp_path / "ledger.jsonl")
    assert len(rows) == 1
    assert rows[0]["items"] == sorted(ITEMS)


def test_a_deploy_between_crash_and_resume_is_refused_then_the_recorded_call_rules(
    tmp_path: Path, where: dict[str, str]
) -> None:
    """A changed signature refuses the resume; accepted, the journaled call never ships twice."""
    crashed = _work(_job(tmp_path, where, action="start", crash="after_apply"), seed=3)
    assert crashed.returncode == 17, crashed.stderr
    refused = _outcome(_work(_job(tmp_path, where, action="resume", version=2), seed=4))
    assert refused["error"] == "ConfigurationError"
    assert "tool 'ship' signature" in refused["message"]
    accepted = _work(_job(tmp_path, where, action="resume", version=2, accept=True), seed=5)
    assert _outcome(accepted) == {"status": "completed", "output": "Shipped o-1."}
    assert len(ledger(tmp_path / "ledger.jsonl")) == 1
