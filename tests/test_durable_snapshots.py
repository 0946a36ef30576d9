"""Stored v1 snapshots (tests/fixtures/snapshots) still load and resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ownloop import Agent, Approval, ConfigurationError, RunResult
from ownloop.contracts import RunSnapshot
from ownloop.policy import allow_writes, legacy_approval_digest
from ownloop.store import SqliteRunStore, check_schema
from ownloop.testing import ScriptedModel
from tests.durable_worker import SCRIPTS, Job, build_registry, ledger_rows, make_agent

SAMPLES = Path(__file__).parent / "fixtures" / "snapshots"


def _load(name: str) -> RunSnapshot:
    return RunSnapshot.model_validate_json((SAMPLES / f"v1_{name}.json").read_text())


@pytest.mark.parametrize("name", ["running", "paused", "finished"])
def test_v1_sample_loads_and_round_trips_through_a_store(name: str, tmp_path: Path) -> None:
    """Each v1 sample validates, passes the schema check and survives a SQLite round trip."""
    sample = _load(name)
    check_schema(sample)
    assert (sample.schema_version, sample.state) == (1, name)

    async def round_trip() -> RunSnapshot | None:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await store.save(sample, expected_version=None)
            stored = await store.get(sample.run_id)
        return stored.snapshot if stored else None

    assert asyncio.run(round_trip()) == sample


def _resume(name: str, tmp_path: Path, scenario: str, approve: bool = False) -> RunResult:
    sample = _load(name)
    job = Job(run_id=sample.run_id, directory=str(tmp_path), database="-", scenario=scenario)

    async def scenario_run() -> RunResult:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await store.save(sample, expected_version=None)
            if approve:
                request = sample.approval_requests[0].id
                await store.submit_approval(
                    sample.run_id, Approval(request_id=request, approved=True, approver="alice")
                )
            played = sum(message.role == "assistant" for message in sample.messages)
            return await make_agent(job, store, played).resume(sample.run_id)

    return asyncio.run(scenario_run())


def test_v1_running_sample_resumes_to_completion(tmp_path: Path) -> None:
    """A v1 checkpoint of a crashed run resumes, runs its export once and completes."""
    result = _resume("running", tmp_path, "export")
    assert result.status.value == "completed"
    assert [what for _, what in ledger_rows(tmp_path)] == ["export:q3"]


def test_v1_paused_sample_resumes_with_an_approval(tmp_path: Path) -> None:
    """A v1 run paused for approval resumes with a stored decision and completes."""
    result = _resume("paused", tmp_path, "refund", approve=True)
    assert result.status.value == "completed"
    assert [a.approver for a in result.approvals] == ["alice"]
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]


def test_v1_finished_sample_cannot_be_resumed(tmp_path: Path) -> None:
    """A v1 finished run loads but resuming it is refused."""
    with pytest.raises(ConfigurationError, match="completed, not paused"):
        _resume("finished", tmp_path, "export")


def test_a_v1_request_paused_under_a_revision_is_recognised_by_its_old_digest(
    tmp_path: Path,
) -> None:
    """A v1 request bound to revision r7 by the old formula is the one the resumed call waits on."""
    sample = _load("paused")
    (request,) = sample.approval_requests
    old = legacy_approval_digest(request.tool, dict(request.arguments), "r7")
    paused = sample.model_copy(
        update={
            "approval_requests": (request.model_copy(update={"revision": "r7", "digest": old}),)
        }
    )
    job = Job(run_id=sample.run_id, directory=str(tmp_path), database="-", scenario="refund")

    async def scenario_run() -> RunResult:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            await store.save(paused, expected_version=None)
            decision = Approval(request_id=request.id, approved=True, approver="alice")
            await store.submit_approval(sample.run_id, decision)
            played = sum(message.role == "assistant" for message in sample.messages)
            agent = Agent(
                ScriptedModel(SCRIPTS["refund"][played:]),
                build_registry(job),
                policy=allow_writes("refund"),
                store=store,
                revision=lambda: "r7",
            )
            return await agent.resume(sample.run_id, accept_changes=True)

    result = asyncio.run(scenario_run())
    assert result.status.value == "completed", result.stop_reason
    assert [(a.request_id, a.approver) for a in result.approvals] == [(request.id, "alice")]
    assert [what for _, what in ledger_rows(tmp_path)] == ["refund:o-1:500"]
