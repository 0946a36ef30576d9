"""A write's identity survives a fresh interpreter: another hash seed, a crash, a deploy.

Each test runs real processes (``python -m tests.identity_worker``) over one SQLite file, each
under its own ``PYTHONHASHSEED``: the first ships an order whose ``items`` is a ``set[str]`` and
dies (after the effect, or after its receipt); the next resumes the run. The ledger file counts
real effects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


def _job(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    return {
        "db": str(tmp_path / "runs.db"),
        "ledger": str(tmp_path / "ledger.jsonl"),
        "run_id": "ship-run",
        **fields,
    }


@pytest.mark.parametrize("crash", ["after_apply", "after_receipt"])
def test_a_set_argument_write_resumed_under_another_hash_seed_runs_once(
    tmp_path: Path, crash: str
) -> None:
    """A set[str] write crashed after it applied resumes in a fresh interpreter, ends, ran once."""
    crashed = _work(_job(tmp_path, action="start", crash=crash), seed=1)
    assert crashed.returncode in (17, 18), crashed.stderr
    assert len(ledger(tmp_path / "ledger.jsonl")) == 1
    resumed = _outcome(_work(_job(tmp_path, action="resume"), seed=2))
    assert resumed == {"status": "completed", "output": "Shipped o-1."}
    rows = ledger(tmp_path / "ledger.jsonl")
    assert len(rows) == 1
    assert rows[0]["items"] == sorted(ITEMS)


def test_a_deploy_between_crash_and_resume_is_refused_then_the_recorded_call_rules(
    tmp_path: Path,
) -> None:
    """A changed signature refuses the resume; accepted, the journaled call never ships twice."""
    crashed = _work(_job(tmp_path, action="start", crash="after_apply"), seed=3)
    assert crashed.returncode == 17, crashed.stderr
    refused = _outcome(_work(_job(tmp_path, action="resume", version=2), seed=4))
    assert refused["error"] == "ConfigurationError"
    assert "tool 'ship' signature" in refused["message"]
    accepted = _work(_job(tmp_path, action="resume", version=2, accept=True), seed=5)
    assert _outcome(accepted) == {"status": "completed", "output": "Shipped o-1."}
    assert len(ledger(tmp_path / "ledger.jsonl")) == 1
