"""Approvals: bound to the exact call and revision, consumed, default deny, resumable."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Annotated

import pytest

from ownloop import (
    Actor,
    Agent,
    Approval,
    ApprovalRequest,
    ConfigurationError,
    Limits,
    RunStatus,
    Sensitive,
    StopReason,
    UnknownApprovalRequest,
)
from ownloop.policy import allow_writes, approval_digest, deny_all
from ownloop.store import MemoryRunStore
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry

ALICE = Actor(id="alice", tenant="acme", roles=("support",))


def _registry(executed: Counter[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def refund(
        order_id: str, amount: int, note: Annotated[str, Sensitive()] = ""
    ) -> dict[str, str]:
        """Refund part of an order.

        Args:
            order_id: The order.
            amount: Cents to refund.
            note: A private note for the ledger.
        """
        executed[f"{order_id}:{amount}"] += 1
        return {"refunded": order_id}

    return registry


def _agent(model: object, executed: Counter[str], **options: object) -> Agent:
    return Agent(model, _registry(executed), policy=allow_writes("refund"), **options)  # type: ignore[arg-type]


def _yes(request: ApprovalRequest, approved: bool = True) -> Approval:
    return Approval(
        request_id=request.id, approved=approved, approver="reviewer-1", reason="checked"
    )


def test_missing_approval_pauses_with_a_bound_request() -> None:
    """A call needing approval pauses the run; the request binds tool, arguments and revision."""
    executed = Counter[str]()
    clock = FakeClock()
    model = ScriptedModel(
        [tool_call("refund", "c1", order_id="o-1", amount=500, note="secret-note")]
    )
    result = _agent(model, executed, clock=clock, revision=lambda: "rev-1").run_sync(
        "refund", actor=ALICE, run_id="run-a"
    )
    assert (result.status, result.stop_reason) == (RunStatus.PAUSED, StopReason.APPROVAL_REQUIRED)
    assert executed == Counter()
    (request,) = result.approval_requests
    assert (request.call_id, request.tool, request.revision, request.actor) == (
        "c1",
        "refund",
        "rev-1",
        ALICE,
    )
    assert request.arguments["order_id"] == "o-1"
    assert request.arguments["note"].startswith("[redacted:")
    canonical = {"amount": 500, "note": "secret-note", "order_id": "o-1"}
    assert request.digest == approval_digest("refund", canonical, "rev-1")
    assert request.requested_at == clock.now()
    assert result.resume is not None
    assert [call.id for call in result.resume.queue] == ["c1"]


def test_resume_with_approval_runs_the_call_once_and_keeps_the_trace() -> None:
    """Resuming with an approval executes the call exactly once and continues the same trace."""
    executed = Counter[str]()
    model = ScriptedModel(
        [tool_call("refund", "c1", order_id="o-1", amount=500), final("Refunded.")]
    )
    agent = _agent(model, executed)
    paused = agent.run_sync("refund")
    done = agent.resume_sync(paused, approvals=[_yes(paused.approval_requests[0])])
    assert (done.status, done.output) == (RunStatus.COMPLETED, "Refunded.")
    assert executed == Counter({"o-1:500": 1})
    assert [event.seq for event in done.trace] == list(range(1, len(done.trace) + 1))
    kinds = [event.kind for event in done.trace]
    assert kinds.count("run_finished") == 2
    assert (
        kinds.index("run_resumed") < kinds.index("approval_decided") < kinds.index("tool_started")
    )
    assert [(a.approver, a.approved) for a in done.approvals] == [("reviewer-1", True)]
    assert done.approval_requests == ()
    assert (done.usage.tool_calls, done.usage.tool_attempts) == (1, 1)


def test_an_approval_is_consumed_by_the_call_it_admits() -> None:
    """The same call proposed again needs a new approval; the first one does not carry over."""
    executed = Counter[str]()
    model = ScriptedModel(
        [
            tool_call("refund", "c1", order_id="o-1", amount=5),
            tool_call("refund", "c2", order_id="o-1", amount=5),
        ]
    )
    agent = _agent(model, executed)
    paused = agent.run_sync("refund twice")
    first = _yes(paused.approval_requests[0])
    again = agent.resume_sync(paused, approvals=[first])
    assert again.status is RunStatus.PAUSED
    assert again.approval_requests[0].call_id == "c2"
    assert executed == Counter({"o-1:5": 1})
    with pytest.raises(ConfigurationError, match="not waiting for"):
        agent.resume_sync(again, approvals=[first])


def test_up_front_approval_matches_only_its_exact_arguments() -> None:
    """An approval given up front by digest admits its exact call and no other."""
    executed = Counter[str]()
    exact = approval_digest("refund", {"amount": 5, "note": "", "order_id": "o-1"}, None)
    approval = Approval(digest=exact, approved=True, approver="manager")
    matching = _agent(
        ScriptedModel([tool_call("refund", order_id="o-1", amount=5), final("ok")]), executed
    )
    assert matching.run_sync("q", approvals=[approval]).status is RunStatus.COMPLETED
    other = _agent(ScriptedModel([tool_call("refund", order_id="o-1", amount=50_000)]), executed)
    assert other.run_sync("q", approvals=[approval]).status is RunStatus.PAUSED
    assert executed == Counter({"o-1:5": 1})


def test_approval_for_another_revision_does_not_match() -> None:
    """If the state changed while paused, the old approval does not admit the call."""
    executed = Counter[str]()
    revision = ["rev-1"]
    model = ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)])
    agent = _agent(model, executed, revision=lambda: revision[0])
    paused = agent.run_sync("q")
    revision[0] = "rev-2"
    again = agent.resume_sync(paused, approvals=[_yes(paused.approval_requests[0])])
    assert again.status is RunStatus.PAUSED
    assert again.approval_requests[0].revision == "rev-2"
    assert again.approval_requests[0].id != paused.approval_requests[0].id
    assert executed == Counter()


def test_denial_fails_the_run_or_is_observed() -> None:
    """A denied approval ends the run approval_denied, or informs the model in observe mode."""
    executed = Counter[str]()
    model = ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)])
    agent = _agent(model, executed)
    paused = agent.run_sync("q")
    denied = agent.resume_sync(
        paused, approvals=[_yes(paused.approval_requests[0], approved=False)]
    )
    assert (denied.status, denied.stop_reason) == (RunStatus.FAILED, StopReason.APPROVAL_DENIED)
    assert "reviewer-1" in denied.detail
    observing = _agent(
        ScriptedModel(
            [tool_call("refund", "c1", order_id="o-1", amount=5), final("Not refunded.")]
        ),
        executed,
        on_approval_denied="observe",
    )
    paused = observing.run_sync("q")
    done = observing.resume_sync(
        paused, approvals=[_yes(paused.approval_requests[0], approved=False)]
    )
    assert done.status is RunStatus.COMPLETED
    assert executed == Counter()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_inline_approver_decides_without_pausing(asynchronous: bool) -> None:
    """A configured approver (sync or async) decides at once and the run never pauses."""
    executed = Counter[str]()
    seen: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> Approval:
        seen.append(request)
        return _yes(request)

    async def decide_async(request: ApprovalRequest) -> Approval:
        return decide(request)

    model = ScriptedModel([tool_call("refund", order_id="o-1", amount=5), final("done")])
    agent = _agent(model, executed, approver=decide_async if asynchronous else decide)
    result = agent.run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert executed == Counter({"o-1:5": 1})
    decided = next(event for event in result.trace if event.kind == "approval_decided")
    assert decided.source == "approver"
    assert len(seen) == 1


def test_approver_that_declines_or_fails_pauses_the_run() -> None:
    """An approver returning None, answering another request, or raising leaves the run paused."""
    executed = Counter[str]()

    def boom(request: ApprovalRequest) -> Approval:
        raise RuntimeError("approval service down")

    def wrong(request: ApprovalRequest) -> Approval:
        return Approval(request_id="apr-someone-else", approved=True, approver="x")

    for approver in (lambda request: None, boom, wrong):
        model = ScriptedModel([tool_call("refund", order_id="o-1", amount=5)])
        assert _agent(model, executed, approver=approver).run_sync("q").status is RunStatus.PAUSED
    assert executed == Counter()


def test_pause_time_does_not_count_against_the_deadline() -> None:
    """Hours spent waiting for an approval do not use up the run's deadline."""
    executed = Counter[str]()
    clock = FakeClock()
    model = ScriptedModel([tool_call("refund", order_id="o-1", amount=5), final("done")])
    agent = _agent(model, executed, clock=clock, limits=Limits(deadline_s=60))
    paused = agent.run_sync("q")
    clock.advance(6 * 3600)
    done = agent.resume_sync(paused, approvals=[_yes(paused.approval_requests[0])])
    assert done.status is RunStatus.COMPLETED
    resumed = next(event for event in done.trace if event.kind == "run_resumed")
    assert resumed.elapsed_s < 60


def test_a_run_denied_on_resume_keeps_no_request_in_its_result_or_store() -> None:
    """Resumed under a policy that now refuses the call, the failed run waits for nothing."""
    executed = Counter[str]()
    store = MemoryRunStore()
    model = ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("done")])
    paused = _agent(model, executed, store=store).run_sync("refund", actor=ALICE, run_id="r-1")
    (request,) = paused.approval_requests
    refusing = Agent(model, _registry(executed), policy=deny_all(), store=store)
    failed = refusing.resume_sync(paused, approvals=[_yes(request)], accept_changes=True)
    assert (failed.status, failed.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_DENIED)
    stored = asyncio.run(store.get("r-1"))
    assert stored is not None
    assert (failed.approval_requests, stored.snapshot.approval_requests) == ((), ())
    with pytest.raises(UnknownApprovalRequest, match="run r-1 has finished"):
        asyncio.run(store.submit_approval("r-1", _yes(request)))
    assert executed == Counter()


def test_only_paused_runs_resume() -> None:
    """Resuming a finished run is a configuration error."""
    executed = Counter[str]()
    agent = _agent(ScriptedModel([final("done")]), executed)
    finished = agent.run_sync("q")
    with pytest.raises(ConfigurationError, match="not paused"):
        agent.resume_sync(finished)


def test_approval_must_name_a_request_or_a_digest() -> None:
    """An approval naming neither a request nor a digest is refused when built."""
    with pytest.raises(ValueError, match="request_id or a digest"):
        Approval(approved=True, approver="x")


def test_resume_is_awaitable_and_refuses_a_running_loop() -> None:
    """resume_sync inside a running loop raises; awaiting resume works."""
    executed = Counter[str]()
    model = FunctionModel(
        lambda request: (
            tool_call("refund", "c1", order_id="o", amount=1) if request.step == 1 else final("ok")
        )
    )
    agent = _agent(model, executed)

    async def inside() -> None:
        paused = await agent.run("q")
        with pytest.raises(ConfigurationError, match=r"await agent\.resume"):
            agent.resume_sync(paused)
        done = await agent.resume(paused, approvals=[_yes(paused.approval_requests[0])])
        assert done.status is RunStatus.COMPLETED

    asyncio.run(inside())


def test_the_request_id_is_stable_within_a_run_and_differs_across_runs() -> None:
    """The same call in the same run gets the same request id; another run gets another id."""
    ids = []
    for run_id in ("run-a", "run-a", "run-b"):
        model = ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=500)])
        result = _agent(model, Counter()).run_sync("refund", actor=ALICE, run_id=run_id)
        (request,) = result.approval_requests
        ids.append((request.id, request.digest))
    assert ids[0] == ids[1]
    assert ids[0][1] == ids[2][1]
    assert ids[0][0] != ids[2][0]
