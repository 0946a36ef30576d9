"""The `RunStore` promises, proven against every store: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ownloop import Approval, Receipt, RunStatus
from ownloop.contracts import (
    Actor,
    ApprovalRequest,
    Lease,
    RunSnapshot,
    Usage,
    UserMessage,
    WriteIntent,
)
from ownloop.exceptions import (
    ConfigurationError,
    RunLeased,
    RunNotFound,
    SchemaVersionError,
    StaleCheckpoint,
    StoreError,
    UnknownApprovalRequest,
)
from ownloop.store import (
    MemoryRunStore,
    PostgresRunStore,
    Retention,
    RunStats,
    RunStore,
    SqliteRunStore,
    run_cursor,
)
from ownloop.testing import FakeClock
from tests.durable_support import T0, fresh_schema, postgres_dsn, snapshot

Run = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture
def run() -> Iterator[Run]:
    """One event loop per test, so a store keeps its connection for the whole test."""
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    loop.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, run: Run) -> Iterator[RunStore]:
    """Each store, empty."""
    if request.param == "memory":
        yield MemoryRunStore()
        return
    durable: SqliteRunStore | PostgresRunStore
    if request.param == "sqlite":
        durable = SqliteRunStore(tmp_path / "runs.db")
    else:
        durable = PostgresRunStore(postgres_dsn(), schema=fresh_schema())
    yield durable
    run(durable.close())


def _intent(call_id: str, run_id: str = "run-1") -> WriteIntent:
    return WriteIntent(
        run_id=run_id,
        call_id=call_id,
        tool="export",
        idempotency_key=f"key-{call_id}",
        arguments_digest="d" * 64,
        recorded_at=T0,
    )


def _receipt(call_id: str) -> Receipt:
    return Receipt(call_id=call_id, tool="export", status="ok", effect="applied", data={"n": 1})


def _approval(request_id: str, approver: str = "alice") -> Approval:
    return Approval(
        request_id=request_id, approved=True, approver=approver, reason="checked", decided_at=T0
    )


def test_unknown_run_is_none(store: RunStore, run: Run) -> None:
    """Getting a run that was never saved returns None."""
    assert run(store.get("missing")) is None


def test_save_then_get_round_trips_the_snapshot(store: RunStore, run: Run) -> None:
    """A saved snapshot comes back equal, field for field, with its version."""
    original = snapshot(task="naïve ünïcode \x00 and a NUL", status=RunStatus.COMPLETED)
    assert run(store.save(original, expected_version=None)) == 1
    stored = run(store.get("run-1"))
    assert stored is not None
    assert (stored.snapshot, stored.version) == (original, 1)


def test_versions_increase_by_one_per_save(store: RunStore, run: Run) -> None:
    """Each compare-and-set save returns the next version."""
    version = run(store.save(snapshot(), expected_version=None))
    for expected in (2, 3, 4):
        version = run(store.save(snapshot(at=expected), expected_version=version))
        assert version == expected
    stored = run(store.get("run-1"))
    assert stored is not None
    assert (stored.version, stored.snapshot.saved_at) == (4, snapshot(at=4).saved_at)


def test_stale_save_is_refused_and_changes_nothing(store: RunStore, run: Run) -> None:
    """A writer that saw an older version gets StaleCheckpoint; the stored snapshot stays."""
    run(store.save(snapshot(), expected_version=None))
    run(store.save(snapshot(task="newer"), expected_version=1))
    with pytest.raises(StaleCheckpoint, match="another writer"):
        run(store.save(snapshot(task="stale"), expected_version=1))
    stored = run(store.get("run-1"))
    assert stored is not None
    assert (stored.snapshot.task, stored.version) == ("newer", 2)


def test_creating_an_existing_run_is_stale(store: RunStore, run: Run) -> None:
    """Saving a new run (expected version None) whose id exists is refused."""
    run(store.save(snapshot(), expected_version=None))
    with pytest.raises(StaleCheckpoint):
        run(store.save(snapshot(task="again"), expected_version=None))
    stored = run(store.get("run-1"))
    assert stored is not None
    assert stored.snapshot.task == "task"


def test_expecting_a_version_of_an_unknown_run_is_stale(store: RunStore, run: Run) -> None:
    """Saving with an expected version for a run never stored is refused."""
    with pytest.raises(StaleCheckpoint):
        run(store.save(snapshot(), expected_version=3))
    assert run(store.get("run-1")) is None


def test_newer_schema_version_is_refused_on_save(store: RunStore, run: Run) -> None:
    """A snapshot of a schema version this ownloop does not know is not stored."""
    newer = snapshot().model_copy(update={"schema_version": 99})
    with pytest.raises(SchemaVersionError, match="schema version 99"):
        run(store.save(newer, expected_version=None))
    assert run(store.get("run-1")) is None


def test_lease_is_exclusive_until_it_expires(store: RunStore, run: Run) -> None:
    """A second worker gets RunLeased naming the holder; after expiry it takes the run over."""
    first = run(store.acquire_lease("run-1", "worker-a", 0.2))
    assert (first.owner, first.run_id) == ("worker-a", "run-1")
    with pytest.raises(RunLeased, match="worker-a"):
        run(store.acquire_lease("run-1", "worker-b", 60))
    time.sleep(0.25)
    second = run(store.acquire_lease("run-1", "worker-b", 60))
    assert second.owner == "worker-b"
    assert second.token != first.token
    assert second.expires_at > first.expires_at


def test_a_lease_belongs_to_one_acquisition_not_to_an_owner(store: RunStore, run: Run) -> None:
    """A second acquisition under the same owner name is refused while the first is current."""
    first = run(store.acquire_lease("run-1", "worker-a", 60))
    with pytest.raises(RunLeased, match="worker-a"):
        run(store.acquire_lease("run-1", "worker-a", 60))
    run(store.save(snapshot(), expected_version=None, lease=first))


def test_the_holder_renews_its_lease_and_keeps_its_token(store: RunStore, run: Run) -> None:
    """Renewal pushes the expiry on and keeps the token; a lost lease cannot be renewed."""
    first = run(store.acquire_lease("run-1", "worker-a", 0.3))
    renewed = run(store.renew_lease(first, 60))
    assert renewed.token == first.token
    assert renewed.expires_at > first.expires_at
    time.sleep(0.35)  # past the first expiry, within the renewed one
    with pytest.raises(RunLeased):
        run(store.acquire_lease("run-1", "worker-b", 60))
    run(store.save(snapshot(), expected_version=None, lease=renewed))
    run(store.release_lease(renewed))
    with pytest.raises(RunLeased, match="was lost"):
        run(store.renew_lease(renewed, 60))


def test_leases_are_per_run(store: RunStore, run: Run) -> None:
    """A lease on one run does not block another run."""
    run(store.acquire_lease("run-1", "worker-a", 60))
    assert run(store.acquire_lease("run-2", "worker-b", 60)).owner == "worker-b"


def test_released_lease_frees_the_run(store: RunStore, run: Run) -> None:
    """After release another worker takes the run at once."""
    lease = run(store.acquire_lease("run-1", "worker-a", 60))
    run(store.release_lease(lease))
    assert run(store.acquire_lease("run-1", "worker-b", 60)).owner == "worker-b"


def test_releasing_a_lost_lease_keeps_the_new_holders(store: RunStore, run: Run) -> None:
    """A worker whose lease was taken over cannot release the new holder's lease."""
    old = run(store.acquire_lease("run-1", "worker-a", 0.05))
    time.sleep(0.1)
    run(store.acquire_lease("run-1", "worker-b", 60))
    run(store.release_lease(old))
    with pytest.raises(RunLeased, match="worker-b"):
        run(store.acquire_lease("run-1", "worker-c", 60))


def test_save_with_the_held_lease_succeeds(store: RunStore, run: Run) -> None:
    """A worker holding the run's lease saves new and existing runs."""
    lease = run(store.acquire_lease("run-1", "worker-a", 60))
    assert run(store.save(snapshot(), expected_version=None, lease=lease)) == 1
    assert run(store.save(snapshot(at=1), expected_version=1, lease=lease)) == 2


def test_save_after_losing_the_lease_is_refused(store: RunStore, run: Run) -> None:
    """Once another worker took the lease over, the old holder's saves fail with RunLeased."""
    old = run(store.acquire_lease("run-1", "worker-a", 0.05))
    run(store.save(snapshot(), expected_version=None, lease=old))
    time.sleep(0.1)
    new = run(store.acquire_lease("run-1", "worker-b", 60))
    with pytest.raises(RunLeased, match="lost"):
        run(store.save(snapshot(task="old worker"), expected_version=1, lease=old))
    assert run(store.save(snapshot(task="new worker"), expected_version=1, lease=new)) == 2


def test_save_with_a_released_lease_is_refused(store: RunStore, run: Run) -> None:
    """A lease given back no longer authorizes saves, not even of a new run."""
    lease = run(store.acquire_lease("run-1", "worker-a", 60))
    run(store.release_lease(lease))
    with pytest.raises(RunLeased):
        run(store.save(snapshot(), expected_version=None, lease=lease))
    assert run(store.get("run-1")) is None


def test_journal_keeps_intents_in_order_with_their_receipts(store: RunStore, run: Run) -> None:
    """Intents come back in recording order; a receipt attaches to its intent only."""
    for call_id in ("c3", "c1", "c2"):
        run(store.record_intent(_intent(call_id)))
    run(store.record_receipt("run-1", "c1", _receipt("c1")))
    entries = run(store.journal("run-1"))
    assert [entry.intent.call_id for entry in entries] == ["c3", "c1", "c2"]
    assert [entry.receipt for entry in entries] == [None, _receipt("c1"), None]
    assert entries[0].intent == _intent("c3")


def test_journal_is_per_run(store: RunStore, run: Run) -> None:
    """A run's journal holds only its own writes; an unknown run's journal is empty."""
    run(store.record_intent(_intent("c1", run_id="run-1")))
    run(store.record_intent(_intent("c1", run_id="run-2")))
    run(store.record_receipt("run-2", "c1", _receipt("c1")))
    assert [entry.receipt for entry in run(store.journal("run-1"))] == [None]
    assert run(store.journal("missing")) == []


def test_receipt_without_intent_records_nothing(store: RunStore, run: Run) -> None:
    """A receipt for a call that has no intent does not invent a journal entry."""
    run(store.record_receipt("run-1", "ghost", _receipt("ghost")))
    assert run(store.journal("run-1")) == []


def test_intent_for_a_write_with_a_receipt_is_refused(store: RunStore, run: Run) -> None:
    """A worker with a stale view cannot journal (and so execute) a write that already ended."""
    run(store.record_intent(_intent("c1")))
    run(store.record_receipt("run-1", "c1", _receipt("c1")))
    with pytest.raises(StaleCheckpoint, match="already has a receipt"):
        run(store.record_intent(_intent("c1")))
    assert [entry.receipt for entry in run(store.journal("run-1"))] == [_receipt("c1")]


def _waiting(store: RunStore, run: Run, run_id: str, *request_ids: str) -> None:
    """Store a run paused for the named approval requests."""
    requests = [
        ApprovalRequest(id=name, call_id="c1", tool="export", arguments={}, digest=f"dg-{name}")
        for name in request_ids
    ]
    paused = snapshot(run_id, state="paused", status=RunStatus.PAUSED)
    run(
        store.save(
            paused.model_copy(update={"approval_requests": tuple(requests)}),
            expected_version=None,
        )
    )


def test_submitted_approvals_wait_in_order(store: RunStore, run: Run) -> None:
    """Decisions submitted for a run come back in submission order, and only for that run."""
    _waiting(store, run, "run-1", "req-1", "req-2")
    _waiting(store, run, "run-2", "req-9")
    run(store.submit_approval("run-1", _approval("req-2", "bob")))
    run(store.submit_approval("run-2", _approval("req-9")))
    run(store.submit_approval("run-1", _approval("req-1")))
    assert run(store.submitted_approvals("run-1")) == [
        _approval("req-2", "bob"),
        _approval("req-1"),
    ]
    assert run(store.submitted_approvals("missing")) == []


def _four_runs(store: RunStore, run: Run) -> None:
    run(
        store.save(
            snapshot("old-done", state="finished", status=RunStatus.COMPLETED, at=1),
            expected_version=None,
        )
    )
    run(
        store.save(
            snapshot("paused", state="paused", status=RunStatus.PAUSED, at=4), expected_version=None
        )
    )
    run(store.save(snapshot("running", at=3), expected_version=None))
    run(
        store.save(
            snapshot("new-done", state="finished", status=RunStatus.COMPLETED, at=2),
            expected_version=None,
        )
    )


def test_list_runs_newest_first(store: RunStore, run: Run) -> None:
    """Runs are listed by last update, newest first, with their state, status and version."""
    _four_runs(store, run)
    lines = run(store.list_runs())
    assert [line.run_id for line in lines] == ["paused", "running", "new-done", "old-done"]
    paused = lines[0]
    assert (paused.state, paused.status, paused.stop_reason, paused.version) == (
        "paused",
        "paused",
        "approval_required",
        1,
    )
    assert paused.updated_at == snapshot(at=4).saved_at
    assert (lines[1].status, lines[1].stop_reason) == (None, None)


def test_list_runs_filters_by_state_and_status(store: RunStore, run: Run) -> None:
    """State and status filters combine; an unmatched filter lists nothing."""
    _four_runs(store, run)
    finished = run(store.list_runs(state="finished"))
    assert [line.run_id for line in finished] == ["new-done", "old-done"]
    assert [line.run_id for line in run(store.list_runs(status="paused"))] == ["paused"]
    assert run(store.list_runs(state="running", status="completed")) == []


def test_list_runs_limit_is_bounded(store: RunStore, run: Run) -> None:
    """The limit caps the listing and is clamped to at least one run."""
    _four_runs(store, run)
    assert [line.run_id for line in run(store.list_runs(limit=2))] == ["paused", "running"]
    assert len(run(store.list_runs(limit=0))) == 1
    assert len(run(store.list_runs(limit=10_000))) == 4


def test_list_runs_shows_the_latest_save(store: RunStore, run: Run) -> None:
    """A run's listing line follows its latest snapshot and version."""
    run(store.save(snapshot(at=1), expected_version=None))
    run(
        store.save(snapshot(state="finished", status=RunStatus.COMPLETED, at=9), expected_version=1)
    )
    (line,) = run(store.list_runs())
    assert (line.state, line.status, line.version) == ("finished", "completed", 2)


def test_snapshot_type_is_kept(store: RunStore, run: Run) -> None:
    """What comes back is a RunSnapshot, not a dict."""
    run(store.save(snapshot(), expected_version=None))
    stored = run(store.get("run-1"))
    assert stored is not None
    assert isinstance(stored.snapshot, RunSnapshot)


def test_misaddressed_approval_is_refused_at_submission(store: RunStore, run: Run) -> None:
    """A decision naming no request the run waits for is refused and nothing is stored."""
    _waiting(store, run, "run-1", "req-1")
    with pytest.raises(UnknownApprovalRequest, match="not waiting for request 'req-typo'"):
        run(store.submit_approval("run-1", _approval("req-typo")))
    with pytest.raises(RunNotFound):
        run(store.submit_approval("missing", _approval("req-1")))
    digest_only = Approval(digest="dg-req-1", approved=True, approver="alice", decided_at=T0)
    run(store.submit_approval("run-1", digest_only))
    assert run(store.submitted_approvals("run-1")) == [digest_only]


def test_a_second_decision_for_a_request_is_refused_until_withdrawn(
    store: RunStore, run: Run
) -> None:
    """The first stored decision stands (a repeat is a no-op); withdrawn, another is stored."""
    _waiting(store, run, "run-1", "req-1")
    run(store.submit_approval("run-1", _approval("req-1", "alice")))
    run(store.submit_approval("run-1", _approval("req-1", "alice")))  # a repeated click
    with pytest.raises(UnknownApprovalRequest, match="was already decided"):
        run(store.submit_approval("run-1", _approval("req-1", "bob")))
    assert run(store.withdraw_approvals("run-1", "req-1")) == 1
    assert run(store.withdraw_approvals("run-1", "req-1")) == 0
    run(store.submit_approval("run-1", _approval("req-1", "bob")))
    assert run(store.submitted_approvals("run-1")) == [_approval("req-1", "bob")]


def test_journal_writes_are_fenced_by_the_lease(store: RunStore, run: Run) -> None:
    """After a take-over the old holder can journal neither an intent nor a receipt."""
    old = run(store.acquire_lease("run-1", "worker-a", 60))
    run(store.record_intent(_intent("c1"), lease=old))
    new = run(store.acquire_lease("run-1", "worker-b", 60, take_over=True))
    assert new.taken_over_from == "worker-a"
    with pytest.raises(RunLeased):
        run(store.record_intent(_intent("c2"), lease=old))
    with pytest.raises(RunLeased):
        run(store.record_receipt("run-1", "c1", _receipt("c1"), lease=old))
    with pytest.raises(RunLeased):
        run(store.save(snapshot(), expected_version=None, lease=old))
    assert [entry.intent.call_id for entry in run(store.journal("run-1"))] == ["c1"]
    run(store.record_receipt("run-1", "c1", _receipt("c1"), lease=new))
    run(store.record_intent(_intent("c2"), lease=new))
    assert [e.receipt for e in run(store.journal("run-1"))] == [_receipt("c1"), None]


def test_an_expired_lease_writes_nothing_even_before_a_take_over(store: RunStore, run: Run) -> None:
    """A stalled holder whose lease ran out is refused although nobody took the run yet."""
    lease = run(store.acquire_lease("run-1", "worker-a", 0.05))
    time.sleep(0.1)
    with pytest.raises(RunLeased):
        run(store.record_intent(_intent("c1"), lease=lease))
    with pytest.raises(RunLeased):
        run(store.save(snapshot(), expected_version=None, lease=lease))
    with pytest.raises(RunLeased):
        run(store.renew_lease(lease, 60))
    assert run(store.journal("run-1")) == []
    assert run(store.acquire_lease("run-1", "worker-b", 60)).taken_over_from is None


def test_a_dead_holder_on_this_host_is_taken_over_at_once(store: RunStore, run: Run) -> None:
    """A lease whose holder process has ended on this host does not block a new worker."""
    dead = subprocess.Popen([sys.executable, "-c", "import ownloop.store"])
    dead.wait()

    async def held_by_the_dead_process() -> Lease:
        lease = await store.acquire_lease("run-1", "worker-dead", 60)
        await _pretend_holder(store, lease, dead.pid)
        return lease

    old = run(held_by_the_dead_process())
    new = run(store.acquire_lease("run-1", "worker-b", 60))
    assert (new.taken_over_from, new.pid) == ("worker-dead", os.getpid())
    with pytest.raises(RunLeased):
        run(store.record_intent(_intent("c1"), lease=old))


async def _pretend_holder(store: RunStore, lease: Lease, pid: int) -> None:
    """Rewrite the stored holder's process id (as if another process had taken the lease)."""
    if isinstance(store, MemoryRunStore):
        store._leases[lease.run_id] = lease.model_copy(update={"pid": pid})
    elif isinstance(store, SqliteRunStore):
        store._db.execute("UPDATE leases SET pid = ? WHERE run_id = ?", (pid, lease.run_id))
    else:
        assert isinstance(store, PostgresRunStore)
        connection = await store._connect()
        await connection.execute(
            f"UPDATE {store.schema}.leases SET pid = %s WHERE run_id = %s",
            (pid, lease.run_id),
        )


def test_concurrent_acquisitions_have_exactly_one_winner(store: RunStore, run: Run) -> None:
    """Many acquisitions of one run at once, even under one owner name: exactly one wins."""

    async def race() -> list[Lease | BaseException]:
        return await asyncio.gather(
            *(store.acquire_lease("run-1", "same-worker", 60) for _ in range(8)),
            return_exceptions=True,
        )

    outcomes = run(race())
    assert sum(isinstance(item, Lease) for item in outcomes) == 1
    assert all(isinstance(item, Lease | RunLeased) for item in outcomes)


def test_a_fenced_receipt_without_its_intent_records_nothing(store: RunStore, run: Run) -> None:
    """Under a current lease, a receipt for a call never journaled adds no entry."""
    lease = run(store.acquire_lease("run-1", "worker-a", 60))
    run(store.record_receipt("run-1", "ghost", _receipt("ghost"), lease=lease))
    assert run(store.journal("run-1")) == []


def test_a_write_whose_receipt_is_unknown_may_be_journaled_again(store: RunStore, run: Run) -> None:
    """A lookup that cleared an unknown write lets its intent be recorded again (same key)."""
    run(store.record_intent(_intent("c1")))
    unknown = Receipt(call_id="c1", tool="export", status="unknown", effect="unknown")
    run(store.record_receipt("run-1", "c1", unknown))
    run(store.record_intent(_intent("c1")))
    assert [entry.receipt for entry in run(store.journal("run-1"))] == [None]


def test_lease_errors_say_who_holds_the_run_and_what_to_do(store: RunStore, run: Run) -> None:
    """A held run names its holder and the ways on; a lost lease says nothing more is recorded."""
    held = run(store.acquire_lease("run-1", "worker-a", 60))
    with pytest.raises(RunLeased) as busy:
        run(store.acquire_lease("run-1", "worker-b", 60))
    message = str(busy.value)
    assert message.startswith("run run-1 is being executed by worker-a until ")
    assert message.endswith(
        "; resume it after that worker finishes or its lease expires, or take it over "
        "(resume(..., take_over=True), ownloop runs unlock) if that worker is dead"
    )
    run(store.release_lease(held))
    with pytest.raises(RunLeased) as lost:
        run(store.save(snapshot(), expected_version=None, lease=held))
    assert str(lost.value) == (
        "the lease on run run-1 was lost: it expired or another worker took the run over, "
        "so this worker records nothing more for it"
    )


def test_an_intent_for_a_finished_write_says_the_view_is_stale(store: RunStore, run: Run) -> None:
    """A second intent for a write with a receipt is refused, saying it will not run again."""
    run(store.record_intent(_intent("c1")))
    run(store.record_receipt("run-1", "c1", _receipt("c1")))
    with pytest.raises(StaleCheckpoint) as stale:
        run(store.record_intent(_intent("c1")))
    assert str(stale.value) == (
        "write c1 of run run-1 already has a receipt: this worker's view of the run is stale, "
        "so the write is not executed again"
    )


def test_a_misaddressed_decision_lists_what_the_run_waits_for(store: RunStore, run: Run) -> None:
    """A decision for no stored run, or for a request the run does not wait for, names both."""
    with pytest.raises(RunNotFound) as missing:
        run(store.submit_approval("missing", _approval("req-1")))
    assert str(missing.value) == "no run 'missing' is stored: there is nothing to approve"
    _waiting(store, run, "run-1", "req-2", "req-1")
    with pytest.raises(UnknownApprovalRequest) as unknown:
        run(store.submit_approval("run-1", _approval("req-9")))
    assert str(unknown.value) == (
        "run run-1 is not waiting for request 'req-9' (waiting: req-1, req-2); nothing was stored"
    )
    _waiting(store, run, "run-2")
    with pytest.raises(UnknownApprovalRequest) as idle:
        run(store.submit_approval("run-2", _approval("req-1")))
    assert "(waiting: none); nothing was stored" in str(idle.value)
    assert run(store.submitted_approvals("run-1")) == []


def test_a_finished_run_takes_no_decision_even_one_that_lists_a_request(
    store: RunStore, run: Run
) -> None:
    """A finished run (stored by an older ownloop with its request kept) refuses any decision."""
    request = ApprovalRequest(id="req-1", call_id="c1", tool="export", arguments={}, digest="dg")
    failed = snapshot("run-1", state="finished", status=RunStatus.FAILED)
    run(
        store.save(
            failed.model_copy(update={"approval_requests": (request,)}), expected_version=None
        )
    )
    with pytest.raises(UnknownApprovalRequest) as ended:
        run(store.submit_approval("run-1", _approval("req-1")))
    assert str(ended.value) == (
        "run run-1 has finished: it waits for no decision; nothing was stored"
    )
    assert run(store.submitted_approvals("run-1")) == []


def test_a_repeated_decision_is_stored_once_after_decisions_for_other_requests(
    store: RunStore, run: Run
) -> None:
    """A repeated click is found among the decisions stored for the run's other requests."""
    _waiting(store, run, "run-1", "req-1", "req-2")
    run(store.submit_approval("run-1", _approval("req-1")))
    run(store.submit_approval("run-1", _approval("req-2")))
    run(store.submit_approval("run-1", _approval("req-2")))
    assert [a.request_id for a in run(store.submitted_approvals("run-1"))] == ["req-1", "req-2"]


# Retention: pruning removes what a retention matches, and spares what it must.


def _finished(run_id: str, at: int, status: RunStatus = RunStatus.COMPLETED) -> RunSnapshot:
    """A finished run with conversation items (item rows in the SQL stores)."""
    done = snapshot(run_id, state="finished", status=status, at=at)
    talk = (UserMessage(content=f"task of {run_id}"), UserMessage(content="more"))
    return done.model_copy(update={"messages": talk})


def _store_all(store: RunStore, run: Run, *snapshots: RunSnapshot) -> None:
    for item in snapshots:
        run(store.save(item, expected_version=None))


_OLD = Retention(older_than=timedelta(days=1))


def test_prune_removes_old_finished_runs_with_all_they_own(store: RunStore, run: Run) -> None:
    """A pruned run's snapshot, journal and decisions are gone; a running run is never pruned."""
    _store_all(store, run, _finished("done-2", 2), _finished("done-1", 1), snapshot("live", at=0))
    run(store.record_intent(_intent("c1", run_id="done-1")))
    run(store.record_receipt("done-1", "c1", _receipt("c1")))
    report = run(store.prune_runs(_OLD))
    assert (report.run_ids, report.dry_run, report.more, report.spared) == (
        ("done-1", "done-2"),
        False,
        False,
        {},
    )
    assert [line.run_id for line in run(store.list_runs())] == ["live"]
    assert run(store.get("done-1")) is None
    assert run(store.journal("done-1")) == []
    fresh = snapshot("done-1", at=5)  # the id stored anew holds nothing of the pruned run
    run(store.save(fresh, expected_version=None))
    stored = run(store.get("done-1"))
    assert stored is not None
    assert (stored.snapshot, stored.version) == (fresh, 1)


def test_prune_spares_a_paused_run_unless_told(store: RunStore, run: Run) -> None:
    """A paused run and its waiting decisions stay unless the retention includes paused runs."""
    _waiting(store, run, "waiting", "req-1")
    run(store.submit_approval("waiting", _approval("req-1")))
    report = run(store.prune_runs(_OLD))
    assert (report.run_ids, report.spared) == ((), {"paused": 1})
    assert run(store.submitted_approvals("waiting")) == [_approval("req-1")]
    forced = run(store.prune_runs(_OLD.model_copy(update={"include_paused": True})))
    assert forced.run_ids == ("waiting",)
    assert run(store.submitted_approvals("waiting")) == []


def test_prune_spares_a_run_with_an_unknown_effect_unless_told(store: RunStore, run: Run) -> None:
    """Unresolved runs, open intents and unknown receipts keep their run and its journal."""
    _store_all(
        store,
        run,
        _finished("unresolved", 1, RunStatus.UNRESOLVED),
        _finished("open-intent", 2),
        _finished("unknown-receipt", 3),
        _finished("settled", 4),
    )
    run(store.record_intent(_intent("c1", run_id="open-intent")))
    run(store.record_intent(_intent("c2", run_id="unknown-receipt")))
    unknown = Receipt(call_id="c2", tool="export", status="unknown", effect="unknown")
    run(store.record_receipt("unknown-receipt", "c2", unknown))
    run(store.record_intent(_intent("c3", run_id="settled")))
    run(store.record_receipt("settled", "c3", _receipt("c3")))
    report = run(store.prune_runs(_OLD))
    assert (report.run_ids, report.spared) == (("settled",), {"unknown_effect": 3})
    assert [entry.intent.call_id for entry in run(store.journal("open-intent"))] == ["c1"]
    forced = run(store.prune_runs(_OLD.model_copy(update={"include_unknown_effects": True})))
    assert forced.run_ids == ("unresolved", "open-intent", "unknown-receipt")
    assert run(store.journal("open-intent")) == []


def test_prune_spares_a_leased_run_unless_told(store: RunStore, run: Run) -> None:
    """A run a worker holds stays; pruned anyway, the holder's next write is refused."""
    _store_all(store, run, _finished("held", 1), _finished("free", 2))
    lease = run(store.acquire_lease("held", "worker-a", 60))
    expired = run(store.acquire_lease("free", "worker-b", 0.01))
    while datetime.now(UTC) <= expired.expires_at + timedelta(milliseconds=5):
        time.sleep(0.005)  # until that lease has expired: an expired lease protects nothing
    report = run(store.prune_runs(_OLD))
    assert (report.run_ids, report.spared) == (("free",), {"leased": 1})
    forced = run(store.prune_runs(_OLD.model_copy(update={"include_leased": True})))
    assert forced.run_ids == ("held",)
    with pytest.raises(RunLeased):
        run(store.record_intent(_intent("c1", run_id="held"), lease=lease))


def test_a_run_is_counted_under_its_first_reason_to_be_spared(store: RunStore, run: Run) -> None:
    """A paused, leased run with an open intent counts once, as paused."""
    _waiting(store, run, "waiting", "req-1")
    run(store.record_intent(_intent("c1", run_id="waiting")))
    run(store.acquire_lease("waiting", "worker-a", 60))
    assert run(store.prune_runs(_OLD)).spared == {"paused": 1}
    unpaused = _OLD.model_copy(update={"include_paused": True})
    assert run(store.prune_runs(unpaused)).spared == {"unknown_effect": 1}
    everything = unpaused.model_copy(update={"include_unknown_effects": True})
    assert run(store.prune_runs(everything, dry_run=True)).spared == {"leased": 1}


def test_prune_keeps_the_latest_runs_of_the_statuses_named(store: RunStore, run: Run) -> None:
    """keep_latest counts the newest runs covered; statuses limit what is covered."""
    _store_all(
        store,
        run,
        *(_finished(f"ok-{n}", n) for n in range(1, 5)),
        _finished("failed-1", 0, RunStatus.FAILED),
        _finished("new", 10**9),  # saved in the future: never old enough
    )
    keep_two = Retention(keep_latest=2, statuses=(RunStatus.COMPLETED,))
    assert run(store.prune_runs(keep_two)).run_ids == ("ok-1", "ok-2", "ok-3")
    assert {line.run_id for line in run(store.list_runs())} == {"failed-1", "ok-4", "new"}
    either = Retention(older_than=timedelta(days=1), keep_latest=5)
    assert run(store.prune_runs(either)).run_ids == ("failed-1", "ok-4")
    assert run(store.prune_runs(Retention(keep_latest=0))).run_ids == ("new",)


def test_a_dry_run_reports_without_removing(store: RunStore, run: Run) -> None:
    """A dry run names what would go and changes nothing."""
    _store_all(store, run, _finished("done", 1))
    _waiting(store, run, "waiting")
    report = run(store.prune_runs(_OLD, dry_run=True))
    assert (report.run_ids, report.dry_run, report.spared) == (("done",), True, {"paused": 1})
    assert len(run(store.list_runs())) == 2


def test_prune_removes_a_bounded_batch_per_call(store: RunStore, run: Run) -> None:
    """A batch caps one call; ``more`` says another call has work, oldest runs first."""
    _store_all(store, run, *(_finished(f"done-{n}", n) for n in range(5)))
    batch = _OLD.model_copy(update={"batch": 2})
    first = run(store.prune_runs(batch))
    assert (first.run_ids, first.more) == (("done-0", "done-1"), True)
    assert run(store.prune_runs(batch, dry_run=True)).run_ids == ("done-2", "done-3")
    run(store.prune_runs(batch))
    last = run(store.prune_runs(batch))
    assert (last.run_ids, last.more) == (("done-4",), False)


def test_a_retention_needs_an_age_or_a_count() -> None:
    """A retention naming neither an age nor a count, or a negative age, is refused."""
    with pytest.raises(ValidationError, match="older_than, keep_latest, or both"):
        Retention()
    with pytest.raises(ValidationError, match="must not be negative"):
        Retention(older_than=timedelta(seconds=-1))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def retaining(request: pytest.FixtureRequest, tmp_path: Path, run: Run) -> Iterator[RunStore]:
    """Each store, with a policy keeping the two latest completed runs, pruning at every finish."""
    policy = Retention(keep_latest=2, statuses=(RunStatus.COMPLETED,), batch=1, interval_s=0)
    if request.param == "memory":
        yield MemoryRunStore(retention=policy)
        return
    durable: SqliteRunStore | PostgresRunStore
    if request.param == "sqlite":
        durable = SqliteRunStore(tmp_path / "runs.db", retention=policy)
    else:
        durable = PostgresRunStore(postgres_dsn(), schema=fresh_schema(), retention=policy)
    yield durable
    run(durable.close())


def test_a_store_with_a_retention_prunes_as_runs_finish(retaining: RunStore, run: Run) -> None:
    """Each finished save prunes one batch; running saves and spared runs are left alone."""
    run(retaining.save(_finished("unresolved", 0, RunStatus.UNRESOLVED), expected_version=None))
    for n in range(1, 5):
        run(retaining.save(_finished(f"ok-{n}", n), expected_version=None))
        run(retaining.save(snapshot(f"live-{n}", at=n), expected_version=None))
    listed = {line.run_id for line in run(retaining.list_runs())}
    assert listed == {"unresolved", "ok-3", "ok-4", *(f"live-{n}" for n in range(1, 5))}
    assert getattr(retaining, "retention_error", None) is None


def test_automatic_prunes_wait_for_the_interval(tmp_path: Path, run: Run) -> None:
    """With an interval, one prune runs and the next finished saves within it prune nothing."""
    policy = Retention(keep_latest=0, interval_s=3600)
    store = MemoryRunStore(retention=policy)
    for n in range(3):
        run(store.save(_finished(f"ok-{n}", n), expected_version=None))
    assert [line.run_id for line in run(store.list_runs())] == ["ok-2", "ok-1"]


# Listings: keyset pages in a stable order, and filters an index serves.


def _listed(
    run_id: str, at: int, *, actor: str | None = None, agent: str | None = None
) -> RunSnapshot:
    base = snapshot(run_id, state="finished", status=RunStatus.COMPLETED, at=at)
    versions = base.versions.model_copy(update={"policy_digest": agent})
    return base.model_copy(
        update={"actor": Actor(id=actor) if actor else None, "versions": versions}
    )


def _pages(store: RunStore, run: Run, size: int, **filters: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    after = None
    while True:
        lines = run(store.list_runs(limit=size, after=after, **filters))
        if not lines:
            return pages
        pages.append([line.run_id for line in lines])
        after = run_cursor(lines[-1])


def test_pages_follow_one_another_newest_first_ties_by_run_id(store: RunStore, run: Run) -> None:
    """Cursor pages list every run once: by last save, then run id, both descending."""
    for run_id, at in (("a", 1), ("b", 2), ("c", 2), ("d", 2), ("e", 3), ("f", 0), ("g", 2)):
        run(store.save(_listed(run_id, at), expected_version=None))
    assert _pages(store, run, 3) == [["e", "g", "d"], ["c", "b", "a"], ["f"]]
    assert _pages(store, run, 1000) == [["e", "g", "d", "c", "b", "a", "f"]]


def test_pages_follow_runs_whose_ids_hold_the_cursor_separator(store: RunStore, run: Run) -> None:
    """A run id may hold ``|``: the cursor's time is what comes before its first one."""
    for run_id in ("a|1", "a|2", "b||3"):
        run(store.save(_listed(run_id, 1), expected_version=None))
    assert _pages(store, run, 1) == [["b||3"], ["a|2"], ["a|1"]]


def test_listings_filter_by_agent_actor_and_time(store: RunStore, run: Run) -> None:
    """Agent, actor and save-time filters combine with each other and with pages."""
    for n in range(6):
        actor = "alice" if n % 2 else "bob"
        agent = "agent-x" if n < 3 else "agent-y"
        run(store.save(_listed(f"run-{n}", n, actor=actor, agent=agent), expected_version=None))
    run(store.save(snapshot("anonymous", at=9), expected_version=None))
    assert _pages(store, run, 2, actor="alice") == [["run-5", "run-3"], ["run-1"]]
    assert _pages(store, run, 5, agent="agent-x") == [["run-2", "run-1", "run-0"]]
    assert _pages(store, run, 5, agent="agent-y", actor="bob") == [["run-4"]]
    window = {"since": T0 + timedelta(seconds=1), "until": T0 + timedelta(seconds=4)}
    assert _pages(store, run, 2, **window) == [["run-3", "run-2"], ["run-1"]]
    assert _pages(store, run, 5, status="completed", actor="carol") == []
    (line,) = run(store.list_runs(actor="bob", agent="agent-y"))
    assert (line.actor, line.agent) == ("bob", "agent-y")
    (anonymous,) = run(store.list_runs(state="running"))
    assert (anonymous.actor, anonymous.agent) == (None, None)


@pytest.mark.parametrize(
    "cursor",
    [
        "nonsense",
        "2026-01-01T00:00:00|",
        "2026-01-01T00:00:00|x",
        "2026-01-01T00:00:00+00:00|",
        "not a time|x",
    ],
)
def test_a_listing_refuses_what_is_not_a_cursor(store: RunStore, run: Run, cursor: str) -> None:
    """A cursor without a valid time, a run id, or a time zone is refused."""
    with pytest.raises(ConfigurationError, match="is not a listing cursor"):
        run(store.list_runs(after=cursor))


def test_run_stats_sum_up_the_store(store: RunStore, run: Run) -> None:
    """Runs by state, status and reason, the oldest paused run, open writes, leases, usage."""
    empty = run(store.run_stats())
    assert (empty.runs, empty.oldest_paused_at, set(empty.usage.values())) == ({}, None, {0.0})
    used = Usage(steps=3, model_attempts=4, tool_attempts=2, input_tokens=100, output_tokens=7)
    done = _finished("done", 5).model_copy(update={"usage": used.model_copy(update={"cost": 0.5})})
    _store_all(store, run, done, _finished("lost", 6, RunStatus.UNRESOLVED), snapshot("live"))
    _waiting(store, run, "waiting-1")
    run(
        store.save(
            snapshot("waiting-2", state="paused", status=RunStatus.PAUSED, at=-5),
            expected_version=None,
        )
    )
    run(store.record_intent(_intent("c1", run_id="lost")))
    run(store.record_intent(_intent("c2", run_id="done")))
    run(store.record_receipt("done", "c2", _receipt("c2")))
    run(store.acquire_lease("live", "worker-a", 60))
    stats = run(store.run_stats())
    assert stats.runs == {"finished": 2, "paused": 2, "running": 1}
    assert stats.statuses == {"completed": 1, "unresolved": 1, "paused": 2}
    assert stats.stop_reasons == {"final_output": 2, "approval_required": 2}
    assert stats.oldest_paused_at == T0 - timedelta(seconds=5)
    assert (stats.unknown_effects, stats.leased) == (1, 1)
    assert stats.usage == {
        "steps": 3.0,
        "model_attempts": 4.0,
        "tool_attempts": 2.0,
        "input_tokens": 100.0,
        "output_tokens": 7.0,
        "cost": 0.5,
    }
    assert stats.paused_age_s(T0) == 5.0
    assert RunStats().paused_age_s(T0) == 0.0


def test_a_prune_taking_every_risk_spares_nothing(store: RunStore, run: Run) -> None:
    """With every risk named, a paused, unknown-effect, leased run goes and nothing is spared."""
    _waiting(store, run, "waiting", "req-1")
    run(store.record_intent(_intent("c1", run_id="waiting")))
    run(store.acquire_lease("waiting", "worker-a", 60))
    everything = _OLD.model_copy(
        update={"include_paused": True, "include_unknown_effects": True, "include_leased": True}
    )
    report = run(store.prune_runs(everything))
    assert (report.run_ids, report.spared) == (("waiting",), {})


class _FailingPrune:
    """Makes a store's automatic prune fail, as a busy or broken database would."""

    failing = True

    async def prune_runs(self, retention: Retention, *, dry_run: bool = False) -> Any:
        if self.failing:
            raise StoreError("the database is busy")
        return await super().prune_runs(retention, dry_run=dry_run)  # type: ignore[misc]


class _FailingSqlite(_FailingPrune, SqliteRunStore):
    pass


class _FailingPostgres(_FailingPrune, PostgresRunStore):
    pass


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_failed_automatic_prune_never_fails_the_save(kind: str, tmp_path: Path, run: Run) -> None:
    """The save stands, the error is kept in retention_error, and the next prune clears it."""
    policy = Retention(keep_latest=0, interval_s=0)
    durable: _FailingSqlite | _FailingPostgres
    if kind == "sqlite":
        durable = _FailingSqlite(tmp_path / "runs.db", retention=policy)
    else:
        durable = _FailingPostgres(postgres_dsn(), schema=fresh_schema(), retention=policy)
    try:
        assert run(durable.save(_finished("done-1", 1), expected_version=None)) == 1
        assert str(durable.retention_error) == "the database is busy"
        assert run(durable.get("done-1")) is not None
        durable.failing = False
        run(durable.save(_finished("done-2", 2), expected_version=None))
        assert durable.retention_error is None
        assert run(durable.list_runs()) == []
    finally:
        run(durable.close())


def test_automatic_prunes_run_again_once_the_interval_has_passed(run: Run) -> None:
    """A finished save prunes again exactly when the interval has passed, not a moment before."""
    clock = FakeClock(start=T0)
    store = MemoryRunStore(clock=clock, retention=Retention(keep_latest=0, interval_s=60))
    run(store.save(_finished("ok-0", 0), expected_version=None))  # pruned at once: keep none
    clock.advance(59.999)
    run(store.save(_finished("ok-1", 1), expected_version=None))
    clock.advance(0.001)
    run(store.save(snapshot("live", at=2), expected_version=None))  # a running save: no prune
    assert [line.run_id for line in run(store.list_runs())] == ["live", "ok-1"]
    run(store.save(_finished("ok-2", 3), expected_version=None))
    assert [line.run_id for line in run(store.list_runs())] == ["live"]


def _by_digest(request_id: str, approver: str = "alice", approved: bool = True) -> Approval:
    """A decision naming the request ``_waiting`` stored by its digest only."""
    return Approval(digest=f"dg-{request_id}", approved=approved, approver=approver, decided_at=T0)


@pytest.mark.parametrize("first_by", ["id", "digest"])
def test_one_decision_per_request_whether_named_by_id_or_by_digest(
    store: RunStore, run: Run, first_by: str
) -> None:
    """A request decided by id refuses a decision by digest, and the other way round."""
    _waiting(store, run, "run-1", "req-1")
    denial = _approval("req-1", "bob").model_copy(update={"approved": False})
    if first_by == "id":
        first, second, named = _approval("req-1"), _by_digest("req-1", "bob", False), "req-1"
    else:
        first, second, named = _by_digest("req-1"), denial, "dg-req-1"
    run(store.submit_approval("run-1", first))
    with pytest.raises(UnknownApprovalRequest) as refused:
        run(store.submit_approval("run-1", second))
    assert str(refused.value) == (
        f"request 'req-1' of run run-1 was already decided: approved by alice (named by "
        f"{named!r}); one decision per request, however it names the request: withdraw it "
        "first (ownloop runs withdraw run-1 req-1)"
    )
    assert run(store.submitted_approvals("run-1")) == [first]


def test_the_same_verdict_named_the_other_way_is_a_repeated_click(
    store: RunStore, run: Run
) -> None:
    """The same approver's same verdict by digest after one by id stores nothing more."""
    _waiting(store, run, "run-1", "req-1")
    run(store.submit_approval("run-1", _approval("req-1")))
    run(store.submit_approval("run-1", _by_digest("req-1")))
    assert run(store.submitted_approvals("run-1")) == [_approval("req-1")]


def test_a_decision_carrying_another_requests_digest_conflicts_with_it(
    store: RunStore, run: Run
) -> None:
    """A decision naming one request and carrying another's digest decides both."""
    _waiting(store, run, "run-1", "req-1", "req-2")
    run(store.submit_approval("run-1", _approval("req-2")))
    mixed = _approval("req-1", "bob").model_copy(update={"digest": "dg-req-2"})
    with pytest.raises(UnknownApprovalRequest, match="request 'req-2' of run run-1 was already"):
        run(store.submit_approval("run-1", mixed))
    run(store.submit_approval("run-1", _by_digest("req-1", "bob")))
    assert len(run(store.submitted_approvals("run-1"))) == 2


def test_a_digest_given_as_a_request_id_is_refused(store: RunStore, run: Run) -> None:
    """A request id must be a request's id: a digest passed as one names no request."""
    _waiting(store, run, "run-1", "req-1")
    with pytest.raises(UnknownApprovalRequest, match="not waiting for request 'dg-req-1'"):
        run(store.submit_approval("run-1", _approval("dg-req-1")))
    assert run(store.submitted_approvals("run-1")) == []


@pytest.mark.parametrize("first_by", ["id", "digest"])
def test_withdrawing_by_either_name_removes_the_decision(
    store: RunStore, run: Run, first_by: str
) -> None:
    """A decision stored by id is withdrawn by digest and the other way round; then one is free."""
    _waiting(store, run, "run-1", "req-1")
    first = _approval("req-1") if first_by == "id" else _by_digest("req-1")
    other_name = "dg-req-1" if first_by == "id" else "req-1"
    run(store.submit_approval("run-1", first))
    assert run(store.withdraw_approvals("run-1", "req-9")) == 0
    assert run(store.withdraw_approvals("run-1", other_name)) == 1
    assert run(store.submitted_approvals("run-1")) == []
    run(store.submit_approval("run-1", _by_digest("req-1", "bob", approved=False)))
    assert run(store.withdraw_approvals("missing", "req-1")) == 0


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], RunStore]:
    """Opens stores on one durable database, as separate processes would."""
    if request.param == "sqlite":
        return lambda: SqliteRunStore(tmp_path / "runs.db", busy_timeout_s=120)
    dsn, schema = postgres_dsn(), fresh_schema()  # skips (or fails in CI) here, not in a thread
    return lambda: PostgresRunStore(dsn, schema=schema)


def test_concurrent_deciders_of_one_request_have_exactly_one_winner(
    opener: Callable[[], RunStore],
) -> None:
    """Eight threads, each with its own store, decide one request by id or by digest: one wins."""
    first = opener()
    asyncio.run(_save_waiting(first))
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def decide(index: int) -> None:
        decision = (
            _approval("req-1", f"approver-{index}")
            if index % 2
            else _by_digest("req-1", f"approver-{index}", approved=index % 4 == 0)
        )

        async def go() -> str:
            store = opener()
            try:
                barrier.wait(timeout=60)
                await store.submit_approval("run-1", decision)
                return "stored"
            except UnknownApprovalRequest as refused:
                return "refused" if "was already decided" in str(refused) else str(refused)
            finally:
                await store.close()  # type: ignore[attr-defined]

        outcomes.append(asyncio.run(go()))

    threads = [threading.Thread(target=decide, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(outcomes) == ["refused"] * 7 + ["stored"]
    assert len(asyncio.run(_submitted(opener()))) == 1


async def _save_waiting(store: RunStore) -> None:
    request = ApprovalRequest(
        id="req-1", call_id="c1", tool="export", arguments={}, digest="dg-req-1"
    )
    paused = snapshot("run-1", state="paused", status=RunStatus.PAUSED)
    await store.save(
        paused.model_copy(update={"approval_requests": (request,)}), expected_version=None
    )
    await store.close()  # type: ignore[attr-defined]


async def _submitted(store: RunStore) -> list[Approval]:
    try:
        return await store.submitted_approvals("run-1")
    finally:
        await store.close()  # type: ignore[attr-defined]


def test_withdrawing_from_a_run_no_longer_stored_goes_by_the_decisions_name() -> None:
    """Without the run's snapshot, a withdrawal removes only decisions naming what it names."""
    from ownloop.store._rules import withdrawn

    assert withdrawn(None, _approval("req-1"), "req-1")
    assert withdrawn(None, _by_digest("req-1"), "dg-req-1")
    assert not withdrawn(None, _by_digest("req-1"), "req-1")


def test_a_resume_applies_the_first_unapplied_decision_deciding_each_waiting_request() -> None:
    """Decisions for no waiting request, applied ones and later ones for a decided request drop."""
    from ownloop.store._rules import usable_decisions

    request = ApprovalRequest(
        id="req-2", call_id="c1", tool="export", arguments={}, digest="dg-req-2"
    )
    applied = _approval("req-2", "carol")
    paused = snapshot("run-1", state="paused", status=RunStatus.PAUSED).model_copy(
        update={"approval_requests": (request,), "approvals": (applied,)}
    )
    elsewhere, first, later = _approval("req-1"), _by_digest("req-2"), _approval("req-2", "bob")
    assert usable_decisions(paused, [elsewhere, applied, first, later]) == [first]
    assert usable_decisions(paused, [later, first]) == [later]
