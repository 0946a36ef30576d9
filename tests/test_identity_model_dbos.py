"""The identity state machine on DBOS: every segment a DBOS worker in a fresh interpreter.

The machine of `tests.fencing_identity` (generated argument types, crashes after the effect or the
receipt, a deploy, decisions by id or digest, repeated) drives one run whose segments are
executed by `ownloop.dbos.DbosRunner` workers (`tests.identity_dbos_worker`), each a new
interpreter under a random ``PYTHONHASHSEED`` on the throwaway PostgreSQL: a dead worker's segment
is recovered by the next worker of its executor id, and each decision is submitted with
``DbosRunner.approve`` from this process, which enqueues the segment that continues the pause.
The deploy happens while the run is paused (a segment DBOS holds pending replays the version that
started it, see docs/scale-out.md), and the decision's segment accepts the change.

Invariants as on the other stores: each approved write executes at most once, never without its
own decision, and the run ends finished or paused on a request a decision resumes.
``OWNLOOP_IDENTITY_EXAMPLES`` examples (default ``OWNLOOP_FENCING_EXAMPLES / 700``, at least 2; a
DBOS segment costs a few seconds, an example up to a dozen segments).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import precondition, rule

from ownloop import Approval
from tests.dbos_support import system_url
from tests.durable_support import postgres_dsn
from tests.fencing_identity import IdentityMachine, spawn
from tests.identity_dbos_worker import make_runner

BASE = int(os.environ.get("OWNLOOP_FENCING_EXAMPLES", "2000"))
EXAMPLES = int(os.environ.get("OWNLOOP_IDENTITY_EXAMPLES", str(max(BASE // 700, 2))))


class DbosIdentity(IdentityMachine):
    """The identity machine with every segment a DBOS worker in a fresh interpreter."""

    backend = "postgres"

    def __init__(self) -> None:
        super().__init__()
        self.job.update(
            system_url=system_url("ownloop-identity"),
            run_id=f"identity-{uuid.uuid4().hex[:8]}",  # DBOS workflow ids are global to its db
            queue=f"q-{uuid.uuid4().hex[:8]}",
            executor=f"exec-{uuid.uuid4().hex[:8]}",  # one executor: a new worker recovers its own
        )
        self.crashed = False

    def _segment(self, seed: int, crash: str | None) -> dict[str, Any]:
        job = {**self.job, "crash": crash}
        self.segments += 1
        done = spawn("tests.identity_dbos_worker", job, seed)
        self.crashed = done.returncode in (17, 18)
        if self.crashed:
            return {"crashed": done.returncode}
        assert done.returncode == 0, done.stderr[-3000:]
        outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        assert "error" not in outcome, outcome
        assert outcome["state"] in ("paused", "finished"), f"a stranded run: {outcome}"
        self.finished = outcome["state"] == "finished"
        return outcome

    @precondition(lambda self: not self.finished and not self.crashed and self.job["version"] == 1)
    @rule()
    def deploy(self) -> None:
        """A new release of the tool adds an optional parameter while no segment is pending."""
        self.job["version"] = 2

    async def _decide(self, by: str, approved: bool, times: int) -> None:
        runner = make_runner(self.job)
        try:
            stored = await runner.store.get(self.job["run_id"])
            if stored is None or not stored.snapshot.approval_requests:
                return
            request = stored.snapshot.approval_requests[0]
            named = {"request_id": request.id} if by == "id" else {"digest": request.digest}
            decision = Approval(approved=approved, approver="alice", **named)
            accept = self.job["version"] == 2
            for _ in range(times):
                try:
                    await runner.approve(self.job["run_id"], decision, accept_changes=accept)
                except Exception:
                    continue
        finally:
            runner.close()
            await runner.store.close()


def test_a_calls_identity_survives_dbos_workers_in_fresh_interpreters() -> None:
    """Generated argument types, hash seeds, worker deaths, a deploy, decisions: none runs twice."""
    if EXAMPLES == 0:
        pytest.skip("OWNLOOP_IDENTITY_EXAMPLES=0 (the mutation gate: its segments are processes)")
    postgres_dsn()  # skip (or fail in CI) without a server
    DbosIdentity.TestCase.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=5,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking re-runs processes
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    DbosIdentity.TestCase().runTest()
