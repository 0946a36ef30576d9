"""Test-side helpers for the DBOS worker tests: the system database, waits and DBOS's view of runs.

The worker processes themselves live in ``tests/dbos_worker.py``; this module is what the test
process uses to set them up and to look at what they did.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import signal
import time
import uuid
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from tests.dbos_worker import Spec
from tests.durable_support import DSN_VARIABLE, fresh_schema, postgres_dsn


@functools.cache
def system_url(application: str = "ownloop-test") -> str:
    """A fresh DBOS system database name on the test server (DBOS creates it), dropped at exit.

    One per DBOS application name and test process: DBOS refuses a second application that
    registers the same application version in one system database.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    postgres_dsn()  # skips (or fails in CI) without a server
    server = os.environ[DSN_VARIABLE]
    where = conninfo_to_dict(server)
    tag = "".join(c for c in application if c.isalnum())[:20]
    name = f"ownloop_dbos_{tag}_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    atexit.register(drop)
    user = where.get("user", "postgres")
    password = f":{where['password']}" if where.get("password") else ""
    host, port = where.get("host", "127.0.0.1"), where.get("port", "5432")
    return f"postgresql://{user}{password}@{host}:{port}/{name}"


def new_spec(tmp_path: Path) -> Spec:
    """A spec with its own store schema, queue and executor id."""
    return Spec(
        directory=str(tmp_path),
        dsn=postgres_dsn(),
        schema=fresh_schema(),
        system_url=system_url(),
        executor_id=f"exec-{uuid.uuid4().hex[:8]}",
        queue=f"q-{uuid.uuid4().hex[:8]}",
    )


def stop(spec: Spec, *workers: BaseProcess) -> None:
    """Ask the workers to shut down and exit; check they exited cleanly."""
    spec.path("stop").write_text("stop")
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0, f"{worker.name} exited with {worker.exitcode}"
    spec.path("stop").unlink()


def wait_halted(spec: Spec, worker: BaseProcess) -> None:
    """Wait until the worker halts at its kill point."""
    deadline = time.monotonic() + 20
    while not spec.path("halted").exists():
        assert worker.is_alive(), f"the worker exited with {worker.exitcode}"
        assert time.monotonic() < deadline, "the worker never halted"
        time.sleep(0.005)


def kill_when_halted(spec: Spec, worker: BaseProcess) -> None:
    """Wait until the worker halts at its kill point, then SIGKILL it."""
    wait_halted(spec, worker)
    os.kill(worker.pid or 0, signal.SIGKILL)
    worker.join(5)
    assert worker.exitcode == -signal.SIGKILL


def stored(spec: Spec, run_ids: list[str], *, until: str, timeout: float = 30.0) -> list[Any]:
    """Wait until every run's snapshot is in state ``until``; return the snapshots."""

    async def poll() -> list[Any]:
        from ownloop.store import PostgresRunStore

        store = PostgresRunStore(spec.dsn, schema=spec.schema)
        deadline = time.monotonic() + timeout
        try:
            while True:
                found = [await store.get(run_id) for run_id in run_ids]
                if all(item is not None and item.snapshot.state == until for item in found):
                    return [item.snapshot for item in found if item is not None]
                assert time.monotonic() < deadline, f"runs not {until}: {found}"
                await asyncio.sleep(0.05)
        finally:
            await store.close()

    return asyncio.run(poll())


def workflows(spec: Spec, **where: Any) -> list[tuple[str, str, str | None]]:
    """Return ``(workflow id, status, executor id)`` of the DBOS workflows matching ``where``."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=spec.system_url)
    try:
        found = client.list_workflows(load_input=False, load_output=False, **where)
    finally:
        client.destroy()
    return sorted((status.workflow_id, status.status, status.executor_id) for status in found)


def segments(spec: Spec, run_id: str) -> list[tuple[str, str]]:
    """Return ``(workflow id, status)`` of every DBOS workflow of the run."""
    return [
        (wid, status) for wid, status, _ in workflows(spec, workflow_id_prefix=f"ownloop:{run_id}:")
    ]


def wait_for_segments(
    spec: Spec, run_ids: list[str], status: str, *, executor: str | None = None
) -> None:
    """Wait until every run's start segment has ``status`` (under ``executor``, if named)."""
    wanted = {f"ownloop:{run_id}:start" for run_id in run_ids}
    deadline = time.monotonic() + 20
    while True:
        found = {
            wid
            for wid, state, owner in workflows(spec, workflow_ids=sorted(wanted))
            if state == status and executor in (None, owner)
        }
        if found == wanted:
            return
        assert time.monotonic() < deadline, f"segments not {status}: {sorted(wanted - found)}"
        time.sleep(0.05)
