"""Shared by the store and durable-run tests: the PostgreSQL test database and record builders.

PostgreSQL tests read the server's DSN from ``OWNLOOP_TEST_POSTGRES_DSN``. Without it they skip
locally and fail in CI (``CI=true``): CI must never pass without having run them. Each test session
creates a fresh database on that server and drops it when the session ends.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import RunResult, RunSnapshot, RunStatus, StopReason, Versions

DSN_VARIABLE = "OWNLOOP_TEST_POSTGRES_DSN"
VERSIONS = Versions(ownloop="0.0.0", python="3.11")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def postgres_dsn() -> str:
    """Return the DSN of this session's fresh test database, or skip (fail in CI) without one."""
    server = os.environ.get(DSN_VARIABLE)
    in_ci = os.environ.get("CI", "").lower() == "true"
    try:
        import psycopg  # noqa: F401 - only to know whether the extra is installed
    except ImportError:
        _unavailable("psycopg is not installed (pip install -e '.[postgres]')", in_ci)
    if not server:
        _unavailable(
            f"{DSN_VARIABLE} is not set (./scripts/test starts a throwaway server when PostgreSQL"
            " is installed or installable; or export the DSN of a server you run)",
            in_ci,
        )
    return _session_database(str(server))


def _unavailable(reason: str, in_ci: bool) -> None:
    if in_ci:
        pytest.fail(f"PostgreSQL tests must run in CI, but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def fresh_database() -> str:
    """Return the DSN of a new, empty database of its own (dropped at exit), or skip without one.

    For code that uses the default schema (``ownloop``, as the CLI does), where ``fresh_schema()``
    cannot apply: the test then owns that schema, whichever tests ran before it in this process.
    """
    postgres_dsn()
    return _new_database(str(os.environ[DSN_VARIABLE]))


@functools.cache
def _session_database(server: str) -> str:
    return _new_database(server)


def _new_database(server: str) -> str:
    import psycopg
    from psycopg.conninfo import make_conninfo

    # The process id and a random part: pytest-xdist workers share the server.
    name = f"ownloop_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    atexit.register(drop)
    return make_conninfo(server, dbname=name)


def fresh_schema() -> str:
    """Return a schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:12]}"


def snapshot(
    run_id: str = "run-1",
    *,
    state: str = "running",
    status: RunStatus | None = None,
    at: int = 0,
    task: str = "task",
) -> RunSnapshot:
    """Return a small snapshot saved ``at`` seconds after T0, finished when ``status`` is given."""
    result = None
    if status is not None:
        result = RunResult(
            run_id=run_id,
            status=status,
            stop_reason=StopReason.APPROVAL_REQUIRED
            if status is RunStatus.PAUSED
            else StopReason.FINAL_OUTPUT,
            versions=VERSIONS,
        )
    return RunSnapshot.model_validate(
        {
            "run_id": run_id,
            "state": state,
            "task": task,
            "versions": VERSIONS,
            "result": result,
            "saved_at": T0 + timedelta(seconds=at),
        }
    )


def write_snapshot_samples(directory: Path) -> None:
    """Write the v1 snapshot corpus (run once; the files are kept, never regenerated).

    Args:
        directory: Where ``v1_running.json``, ``v1_paused.json`` and ``v1_finished.json`` go.
    """
    from ownloop import Agent
    from ownloop.policy import allow_writes
    from ownloop.store import MemoryRunStore
    from ownloop.testing import FakeClock, ScriptedModel
    from tests.durable_worker import SCRIPTS, Job, build_registry

    class Recording(MemoryRunStore):
        def __init__(self) -> None:
            super().__init__()
            self.saved: list[RunSnapshot] = []

        async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
            self.saved.append(snapshot)
            return await super().save(snapshot, **options)

    samples: dict[str, RunSnapshot] = {}
    scratch = tempfile.mkdtemp()  # the tools' ledger; not part of the corpus
    for scenario, run_id in (("export", "sample-export"), ("refund", "sample-refund")):
        job = Job(run_id=run_id, directory=scratch, database="-", scenario=scenario)
        store = Recording()
        agent = Agent(
            ScriptedModel(SCRIPTS[scenario]),
            build_registry(job),
            policy=allow_writes("export", "refund"),
            clock=FakeClock(),
            store=store,
            worker_id="sample-worker",
        )
        asyncio.run(agent.run("export the q3 report", run_id=run_id))
        if scenario == "export":
            samples["running"], samples["finished"] = store.saved[3], store.saved[-1]
        else:
            samples["paused"] = store.saved[-1]
    for name, sample in samples.items():
        (directory / f"v1_{name}.json").write_text(sample.model_dump_json(indent=2) + "\n")
