"""A call's identity on DBOS: fixed where the call was proposed, read back by every later segment.

The agent's approval-gated ``ship`` takes a ``set[str]`` and a ``default_factory`` parameter
(``tests.dbos_worker.identity_agent``). A run paused in a worker process is approved by digest and
continued by DBOS in this process (another interpreter, with its own hash seed); and an approved
write whose worker is SIGKILLed after its effect is recovered, its decision spent on the replay
path, so the model's identical second call needs an approval of its own. The memory, SQLite and
PostgreSQL stores have the same cases in `tests/test_identity_stores.py`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ownloop.contracts import Approval, RunSnapshot
from ownloop.dbos import segment_id
from tests.dbos_support import kill_when_halted, new_spec, segments, stop, stored
from tests.dbos_worker import APP_NAME, IDENTITY_ITEMS, Spec, enqueue_many, make_runner, start
from tests.durable_worker import ledger_rows


@pytest.fixture(autouse=True)
def _fresh_dbos_logger() -> Iterator[None]:
    """Drop DBOS's console handler after each test: it holds the stderr pytest captured then."""
    yield
    logger = logging.getLogger("dbos")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[Spec]:
    """A spec with its own store schema, queue and executor id; stops its workers at the end."""
    made = new_spec(tmp_path)
    yield made
    made.path("stop").write_text("stop")


def _approve(spec: Spec, run_id: str, digest: str) -> str:
    """Approve by digest from this process (no DBOS launched here): store it, enqueue the next."""

    async def go() -> str:
        runner = make_runner(spec)
        try:
            return str(
                await runner.approve(run_id, Approval(digest=digest, approved=True, approver="ops"))
            )
        finally:
            runner.close()
            await runner.store.close()

    return asyncio.run(go())


def _paused_anew(spec: Spec, run_id: str, seen: set[str]) -> RunSnapshot:
    """Wait until the run is paused on a request not in ``seen``."""

    async def poll() -> RunSnapshot:
        runner = make_runner(spec)
        deadline = time.monotonic() + 30
        try:
            while True:
                found = await runner.store.get(run_id)
                waiting = {r.id for r in found.snapshot.approval_requests} if found else set()
                if found and found.snapshot.state == "paused" and waiting - seen:
                    return found.snapshot
                assert time.monotonic() < deadline, f"run {run_id} never paused anew: {found}"
                await asyncio.sleep(0.05)
        finally:
            runner.close()
            await runner.store.close()

    return asyncio.run(poll())


def _effect(run_id: str, ref: Any) -> str:
    return f"{run_id}:ship:o-1:{','.join(sorted(IDENTITY_ITEMS))}:{ref}"


def test_a_call_paused_in_one_interpreter_is_approved_by_digest_and_run_in_another(
    spec: Spec,
) -> None:
    """A set/factory call paused by a worker runs here once, with the value its digest covers."""
    from dbos import DBOS

    from ownloop.dbos import worker_config

    worker = start(replace(spec, name="pauser"))
    (run_id,) = enqueue_many(spec, "ship", 1)
    (paused,) = stored(spec, [run_id], until="paused")
    stop(spec, worker)
    (request,) = paused.approval_requests
    DBOS(config=worker_config(APP_NAME, spec.system_url, spec.executor_id, log_level="WARNING"))
    runner = make_runner(spec)
    runner.register(worker=True)
    DBOS.launch()
    runner.start()
    try:
        assert _approve(spec, run_id, request.digest) == segment_id(paused)
        (finished,) = stored(spec, [run_id], until="finished")
    finally:
        assert runner.shutdown(drain_s=10, destroy_registry=True) == []
        runner.close()
        asyncio.run(runner.store.close())
    assert finished.result.output == "Shipped."
    hashes = {path.name: path.read_text() for path in Path(spec.directory).glob("hash-*")}
    assert len(set(hashes.values())) == 2, hashes  # the two interpreters hash strings differently
    assert [what for _, what in ledger_rows(spec.directory)] == [
        _effect(run_id, request.arguments["ref"])  # type: ignore[index]
    ]


def test_an_approved_write_killed_after_its_effect_spends_its_decision_on_recovery(
    spec: Spec,
) -> None:
    """Recovered from the journal, the write's decision admits nothing more: its twin waits."""
    run_id = f"ship-twice-{uuid.uuid4().hex[:8]}"  # DBOS workflow ids are global to its database
    doomed = replace(spec, name="doomed", kill_run=run_id, kill_at="write:after_commit")
    worker = start(doomed)
    enqueue_many(spec, "ship_twice", 1, run_ids=[run_id])
    first = _paused_anew(spec, run_id, set())
    (request,) = first.approval_requests
    _approve(spec, run_id, request.digest)
    kill_when_halted(spec, worker)
    rescuer = start(replace(spec, name="rescuer"))  # the same executor id: it recovers the segment
    second = _paused_anew(spec, run_id, {request.id})
    (twin,) = second.approval_requests
    assert (twin.call_id, twin.digest) == ("c2", request.digest)
    assert len(ledger_rows(spec.directory)) == 1
    _approve(spec, run_id, twin.digest)
    (finished,) = stored(spec, [run_id], until="finished")
    stop(spec, rescuer)
    assert finished.result.output == "Shipped."
    assert [a.digest for a in finished.result.approvals] == [request.digest] * 2
    rows = ledger_rows(spec.directory)
    assert len({key for key, _ in rows}) == 2, rows
    assert [what for _, what in rows] == [_effect(run_id, "r-1")] * 2
    assert len(segments(spec, run_id)) == 3
