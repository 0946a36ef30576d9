"""Approvals and the gateway at their exact edges: pinned digests, reasons, events, messages."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest

from ownloop import (
    Actor,
    Agent,
    Approval,
    ApprovalRequest,
    Limits,
    Receipt,
    RunStatus,
    StopReason,
)
from ownloop.policy import (
    allow_writes,
    approval_digest,
    approval_request_id,
    deny_tools,
    legacy_approval_digest,
    matching_approval,
    require_approval_for,
)
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from ownloop.validators import requires_check_before

ALICE = Actor(id="alice", tenant="acme", roles=("support",))


def _registry(executed: Counter[str], *, requires_approval: bool = True) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=requires_approval)
    def refund(order_id: str, amount: int) -> dict[str, str]:
        """Refund part of an order.

        Args:
            order_id: The order.
            amount: Cents to refund.
        """
        executed[f"{order_id}:{amount}"] += 1
        return {"refunded": order_id}

    @registry.tool(effect="read")
    def check(order_id: str) -> dict[str, bool]:
        """Check an order.

        Args:
            order_id: The order.
        """
        return {"passed": False}

    return registry


def _events(result: Any, kind: str) -> list[Any]:
    return [event for event in result.trace if event.kind == kind]


def test_the_approval_digest_encoding_is_pinned() -> None:
    """The digest is SHA-256 of the canonical text: sorted, compact JSON, non-ASCII kept."""
    arguments = {"note": "café ☕", "amount": 5}
    payload = (
        '{"approval":1,"arguments":{"amount":5,"note":"café ☕"},"revision":"rev-1",'
        '"tool":"refund"}'
    )
    expected = hashlib.sha256(payload.encode()).hexdigest()
    assert approval_digest("refund", arguments, "rev-1") == expected


def test_a_digest_of_a_non_json_value_uses_its_stated_form() -> None:
    """A value JSON has no type for is digested in its canonical form (a Decimal's text, tagged)."""
    payload = json.dumps(
        {"approval": 1, "arguments": {"when": {"$decimal": "1.50"}}, "revision": None,
         "tool": "refund"},
        sort_keys=True,
        separators=(",", ":"),
    )  # fmt: skip
    assert (
        approval_digest("refund", {"when": Decimal("1.50")}, None)
        == hashlib.sha256(payload.encode()).hexdigest()
    )


def test_the_request_id_is_pinned() -> None:
    """The request id is apr- and 24 hex digits of SHA-256 over run, call and digest."""
    raw = b"run-a\x1fc1\x1fabc"
    assert approval_request_id("run-a", "c1", "abc") == (
        f"apr-{hashlib.sha256(raw).hexdigest()[:24]}"
    )
    assert approval_request_id("run-a", "c1", "abc") == "apr-315eb5297be9e0d903c4f6d4"


def test_matching_prefers_the_first_approval_naming_the_request_or_digest() -> None:
    """The first approval naming the request id or carrying its digest matches; others do not."""
    request = ApprovalRequest(
        id="apr-1",
        call_id="c1",
        tool="refund",
        arguments={},
        digest="d1",
        reason="r",
        requested_at=FakeClock().now(),
    )
    by_digest = Approval(digest="d1", approved=True, approver="a")
    by_id = Approval(request_id="apr-1", approved=False, approver="b")
    other = Approval(request_id="apr-2", digest="d2", approved=True, approver="c")
    assert matching_approval(request, [other, by_digest, by_id]) is by_digest
    assert matching_approval(request, [other, by_id, by_digest]) is by_id
    assert matching_approval(request, [other]) is None
    assert matching_approval(request, []) is None
    id_only_other = Approval(request_id="apr-9", approved=True, approver="d")
    assert matching_approval(request, [id_only_other]) is None


def test_a_policy_approval_reason_reaches_the_request_and_the_event() -> None:
    """The reason a policy's RequireApproval gives is the request's reason and the event's."""
    executed = Counter[str]()
    policy = allow_writes("refund") & require_approval_for("refund", reason="over the limit")
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)]),
        _registry(executed, requires_approval=False),
        policy=policy,
        revision=lambda: "rev-7",
    )
    result = agent.run_sync("q", run_id="run-r")
    (request,) = result.approval_requests
    assert request.reason == "over the limit"
    (event,) = _events(result, "approval_requested")
    assert (event.request_id, event.call_id, event.tool, event.digest) == (
        request.id,
        "c1",
        "refund",
        approval_digest("refund", {"amount": 5, "order_id": "o-1"}, "rev-7"),
    )
    assert (event.revision, event.reason) == ("rev-7", "over the limit")
    assert result.detail == f"'refund' needs an approval (request {request.id}): over the limit"


def test_a_tool_requiring_approval_gives_the_default_reason() -> None:
    """A tool declared requires_approval asks with 'the tool requires approval'."""
    executed = Counter[str]()
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)]),
        _registry(executed),
        policy=allow_writes("refund"),
    )
    (request,) = agent.run_sync("q").approval_requests
    assert request.reason == "the tool requires approval"


def test_a_long_approval_reason_is_cut_to_1024_characters() -> None:
    """The request's reason is bounded to 1024 characters."""
    executed = Counter[str]()
    policy = allow_writes("refund") & require_approval_for("refund", reason="x" * 2000)
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)]),
        _registry(executed, requires_approval=False),
        policy=policy,
    )
    (request,) = agent.run_sync("q").approval_requests
    assert request.reason == "x" * 1024


@pytest.mark.parametrize("answer", [True, "yes", {"approved": True}, 1])
def test_an_approver_answering_something_other_than_a_decision_pauses(answer: object) -> None:
    """An approver returning anything but an Approval has not approved: the run pauses."""
    executed = Counter[str]()
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)]),
        _registry(executed),
        policy=allow_writes("refund"),
        approver=lambda request: answer,
    )
    result = agent.run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.PAUSED, StopReason.APPROVAL_REQUIRED)
    assert executed == Counter()
    assert _events(result, "approval_decided") == []


def test_the_decided_event_carries_request_approver_reason_and_source() -> None:
    """approval_decided names request, call, decision, approver, reason and where it came from."""
    executed = Counter[str]()

    def approve(request: ApprovalRequest) -> Approval:
        return Approval(request_id=request.id, approved=True, approver="rev-1", reason="ok by me")

    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("done")]),
        _registry(executed),
        policy=allow_writes("refund"),
        approver=approve,
    )
    result = agent.run_sync("q")
    (requested,) = _events(result, "approval_requested")
    (decided,) = _events(result, "approval_decided")
    assert (decided.request_id, decided.call_id, decided.approved) == (
        requested.request_id,
        "c1",
        True,
    )
    assert (decided.approver, decided.reason, decided.source) == ("rev-1", "ok by me", "approver")
    assert [(a.approver, a.reason) for a in result.approvals] == [("rev-1", "ok by me")]


def test_a_supplied_approval_is_recorded_as_supplied_without_a_request_event() -> None:
    """An approval given to the run admits the call without asking: source supplied, no request."""
    executed = Counter[str]()
    digest = approval_digest("refund", {"amount": 5, "order_id": "o-1"}, None)
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("done")]),
        _registry(executed),
        policy=allow_writes("refund"),
        approver=lambda request: None,
    )
    result = agent.run_sync(
        "q", approvals=[Approval(digest=digest, approved=True, approver="boss")]
    )
    assert result.status is RunStatus.COMPLETED
    assert _events(result, "approval_requested") == []
    (decided,) = _events(result, "approval_decided")
    assert (decided.source, decided.approver, decided.reason) == ("supplied", "boss", None)
    assert executed == Counter({"o-1:5": 1})


def test_a_denied_approval_says_who_denied_and_why() -> None:
    """A denial ends the run naming the approver and the reason, or tells the model the same."""
    executed = Counter[str]()

    def deny(request: ApprovalRequest) -> Approval:
        return Approval(request_id=request.id, approved=False, approver="boss", reason="too much")

    def agent(**options: Any) -> Agent:
        return Agent(
            ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("no")]),
            _registry(executed),
            policy=allow_writes("refund"),
            approver=deny,
            **options,
        )

    failed = agent().run_sync("q")
    assert (failed.status, failed.stop_reason) == (RunStatus.FAILED, StopReason.APPROVAL_DENIED)
    assert failed.detail == "boss denied 'refund': too much"
    observed = agent(on_approval_denied="observe").run_sync("q")
    assert observed.status is RunStatus.COMPLETED
    tool_messages = [m for m in observed.messages if m.role == "tool"]
    assert [m.content for m in tool_messages] == ["Approval denied by boss: too much"]
    assert executed == Counter()


def test_a_denial_without_a_reason_says_so() -> None:
    """A denial with no reason reads 'no reason given'."""
    executed = Counter[str]()
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)]),
        _registry(executed),
        policy=allow_writes("refund"),
        approver=lambda r: Approval(request_id=r.id, approved=False, approver="boss"),
    )
    assert agent.run_sync("q").detail == "boss denied 'refund': no reason given"


def test_a_policy_denial_is_an_event_and_a_message() -> None:
    """A denied call emits tool_denied with the rule and reason; observe mode tells the model."""
    executed = Counter[str]()
    policy = deny_tools("refund")
    registry = _registry(executed, requires_approval=False)
    agent = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("ok")]),
        registry,
        policy=policy,
        on_denied="observe",
    )
    result = agent.run_sync("q")
    (denied,) = _events(result, "tool_denied")
    decision = policy.decide(None, registry.get("refund").spec, {})  # type: ignore[union-attr]
    assert (denied.call_id, denied.tool, denied.reason, denied.rule) == (
        "c1",
        "refund",
        decision.reason,  # type: ignore[union-attr]
        decision.rule,  # type: ignore[union-attr]
    )
    (message,) = [m for m in result.messages if m.role == "tool"]
    assert message.content == f"Tool call denied by policy: {decision.reason}"  # type: ignore[union-attr]
    failing = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5)]),
        _registry(executed, requires_approval=False),
        policy=policy,
    ).run_sync("q")
    assert failing.detail == f"'refund' denied: {decision.reason}"  # type: ignore[union-attr]
    assert executed == Counter()


def test_an_unmet_precondition_is_rejected_with_check_required() -> None:
    """A write without a current passing check is rejected (check_required) and not executed."""
    executed = Counter[str]()
    agent = Agent(
        ScriptedModel(
            [
                tool_call("check", "c0", order_id="o-1"),
                tool_call("refund", "c1", order_id="o-1", amount=5),
                final("not yet"),
            ]
        ),
        _registry(executed, requires_approval=False),
        policy=allow_writes("refund"),
        preconditions=[requires_check_before(tool="refund", check="check")],
        limits=Limits(max_steps=5),
    )
    result = agent.run_sync("q")
    problem = (
        "refund needs a current passing check: the last check did not pass; fix the state and "
        "run it again"
    )
    (rejected,) = _events(result, "tool_rejected")
    assert (rejected.call_id, rejected.tool, rejected.code, rejected.reason) == (
        "c1",
        "refund",
        "check_required",
        problem,
    )
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert contents[-1] == f"check_required: {problem}"
    assert executed == Counter()


def test_an_approval_is_removed_from_the_supplied_ones_once_used() -> None:
    """A supplied approval admits one call; the identical second call pauses for a new one."""
    executed = Counter[str]()
    digest = approval_digest("refund", {"amount": 5, "order_id": "o-1"}, None)
    agent = Agent(
        ScriptedModel(
            [
                tool_call("refund", "c1", order_id="o-1", amount=5),
                tool_call("refund", "c2", order_id="o-1", amount=5),
            ]
        ),
        _registry(executed),
        policy=allow_writes("refund"),
    )
    result = agent.run_sync("q", approvals=[Approval(digest=digest, approved=True, approver="b")])
    assert result.status is RunStatus.PAUSED
    assert result.approval_requests[0].call_id == "c2"
    assert executed == Counter({"o-1:5": 1})
    assert [r.status for r in result.receipts] == ["ok"]
    assert isinstance(result.receipts[0], Receipt)


def test_what_the_model_is_told_is_labelled_by_its_source() -> None:
    """Denials, unmet checks and refused approvals reach the model labelled by their source."""
    executed = Counter[str]()
    denied = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("ok")]),
        _registry(executed, requires_approval=False),
        policy=deny_tools("refund"),
        on_denied="observe",
    ).run_sync("q")
    checked = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("ok")]),
        _registry(executed, requires_approval=False),
        policy=allow_writes("refund"),
        preconditions=[requires_check_before(tool="refund", check="check")],
    ).run_sync("q")
    refused = Agent(
        ScriptedModel([tool_call("refund", "c1", order_id="o-1", amount=5), final("ok")]),
        _registry(executed),
        policy=allow_writes("refund"),
        approver=lambda r: Approval(request_id=r.id, approved=False, approver="b"),
        on_approval_denied="observe",
    ).run_sync("q")
    sources = [
        [(e.call_id, e.source) for e in _events(result, "observation_added") if e.call_id]
        for result in (denied, checked, refused)
    ]
    assert sources == [
        [("c1", "denied")],
        [("c1", "check_required")],
        [("c1", "approval_denied")],
    ]
    assert executed == Counter()


def test_the_legacy_approval_digest_is_pinned() -> None:
    """The old formula (recognising requests paused before the canonical encoding) is pinned."""
    payload = '{"arguments":{"note":"café"},"revision":"r","tool":"refund"}'
    expected = hashlib.sha256(payload.encode()).hexdigest()
    assert legacy_approval_digest("refund", {"note": "café"}, "r") == expected
