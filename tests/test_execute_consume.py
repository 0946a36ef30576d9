"""A decision the journal records is spent whichever path admitted its call (issue 23)."""

from __future__ import annotations

from ownloop.contracts import Approval
from ownloop.loop._execute import consume_decision
from ownloop.loop.state import RunState
from ownloop.testing import FakeClock
from ownloop.tracing import TraceRecorder


def _decision(request_id: str | None = None, digest: str | None = None) -> Approval:
    return Approval(request_id=request_id, digest=digest, approved=True, approver="alice")


def _state(*approvals: Approval) -> RunState:
    state = RunState(
        run_id="r", task="t", actor=None, started_at=0.0, trace=TraceRecorder("r", FakeClock())
    )
    state.approvals.extend(approvals)
    return state


def test_every_supplied_decision_naming_the_request_or_digest_is_spent_and_no_other() -> None:
    """By request id, by digest or equal: spent; a decision for another request stays usable."""
    journaled = _decision("req-1", "digest-1")
    by_id = _decision("req-1")
    by_digest = _decision(digest="digest-1")
    other = _decision("req-2", "digest-2")
    state = _state(by_id, other, by_digest, journaled)
    consume_decision(state, journaled)
    assert state.approvals == [other]
    assert state.decisions == [journaled]


def test_a_decision_is_recorded_in_the_audit_trail_once() -> None:
    """Consuming the same journaled decision twice leaves one entry in the audit trail."""
    journaled = _decision("req-1")
    unrelated = _decision(digest="digest-9")
    state = _state(unrelated)
    consume_decision(state, journaled)
    consume_decision(state, journaled)
    assert state.decisions == [journaled]
    assert state.approvals == [unrelated]
