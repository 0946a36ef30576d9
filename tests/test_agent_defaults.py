"""Defaults that do what their declaration says: approval-declared writes, warnings, resumes."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ownloop import Agent, Approval, ConfigurationError, Limits, RunStatus, StopReason, ToolRegistry
from ownloop.contracts import Actor, ConfigurationChanged, ToolSpec
from ownloop.policy import (
    Allow,
    Deny,
    RequireApproval,
    allow_tools,
    allow_writes,
    default_policy,
    require_role,
)
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.validators import requires_check_before


def _registry(executed: Counter[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look(order_id: str) -> str:
        """Read an order.

        Args:
            order_id: The order.
        """
        return order_id

    @registry.tool(effect="write", requires_approval=True)
    def refund(order_id: str) -> dict[str, str]:
        """Refund an order once a person approves.

        Args:
            order_id: The order.
        """
        executed[order_id] += 1
        return {"refunded": order_id}

    return registry


def _refund_run(executed: Counter[str], **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([tool_call("refund", "c1", order_id="o-1"), final("done")])
    return Agent(model, _registry(executed), **options), model  # type: ignore[arg-type]


def _resumer(executed: Counter[str], **options: object) -> Agent:
    """A new agent for a paused refund run: its model only has the final answer left to give."""
    return Agent(ScriptedModel([final("done")]), _registry(executed), **options)  # type: ignore[arg-type]


def test_a_write_declared_requires_approval_is_offered_and_waits_for_an_exact_approval() -> None:
    """Under the default policy the declared write is offered, pauses, and runs once approved."""
    executed = Counter[str]()
    agent, model = _refund_run(executed)
    paused = agent.run_sync("refund o-1")
    assert [spec.name for spec in model.requests[0].tools] == ["look", "refund"]
    assert (paused.status, paused.stop_reason) == (RunStatus.PAUSED, StopReason.APPROVAL_REQUIRED)
    assert executed == Counter()
    request = paused.approval_requests[0]
    assert (request.tool, request.arguments) == ("refund", {"order_id": "o-1"})
    done = agent.resume_sync(
        paused, approvals=[Approval(request_id=request.id, approved=True, approver="ann")]
    )
    assert done.status is RunStatus.COMPLETED
    assert executed == Counter({"o-1": 1})


def test_a_denied_approval_never_runs_the_declared_write() -> None:
    """A person's 'no' ends the run without the write, as with any approval."""
    executed = Counter[str]()
    agent, _ = _refund_run(executed)
    paused = agent.run_sync("refund o-1")
    request = paused.approval_requests[0]
    denied = agent.resume_sync(
        paused, approvals=[Approval(request_id=request.id, approved=False, approver="ann")]
    )
    assert denied.status is RunStatus.FAILED
    assert executed == Counter()


def test_explicit_policies_keep_full_control_over_declared_writes() -> None:
    """allow_writes() without the tool denies it; allow_tools('refund') still asks approval."""
    executed = Counter[str]()
    agent, model = _refund_run(executed, policy=allow_writes())
    denied = agent.run_sync("refund o-1")
    assert [spec.name for spec in model.requests[0].tools] == ["look"]
    assert denied.stop_reason is StopReason.TOOL_DENIED
    agent, model = _refund_run(executed, policy=allow_tools("refund"))
    paused = agent.run_sync("refund o-1")
    assert [spec.name for spec in model.requests[0].tools] == ["refund"]
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    assert executed == Counter()


@given(
    effect=st.sampled_from(["read", "write"]),
    requires_approval=st.booleans(),
    offering=st.booleans(),
)
def test_the_default_policy_follows_the_declaration(
    effect: str, requires_approval: bool, offering: bool
) -> None:
    """Reads allowed; approval-declared writes need approval; other writes denied, always."""
    spec = ToolSpec(
        name="t",
        description="d",
        parameters={
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        },
        effect=effect,
        requires_approval=requires_approval,
    )
    decision = default_policy().decide(None, spec, None if offering else {})
    if effect == "read":
        assert decision == Allow()
    elif requires_approval:
        assert decision == RequireApproval("the tool requires approval", "default_policy()")
    else:
        assert isinstance(decision, Deny)
        assert decision.rule == "default_policy()"


# ----------------------------------------------------------------------------- never offered


@pytest.fixture(autouse=True)
def _fresh_warning_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no tool reported yet."""
    monkeypatch.setattr("ownloop._agent_checks._warned", set())


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_tool_the_policy_never_offers_is_named_in_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An undeclared write under the default policy: one warning naming the tool and the rule."""
    registry = _registry(Counter())

    @registry.tool(effect="write")
    def cancel(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id: The order.
        """
        return order_id

    with caplog.at_level(logging.WARNING, logger="ownloop"):
        Agent(ScriptedModel([]), registry)
        Agent(ScriptedModel([]), registry)  # once per process, not once per agent
    assert _warnings(caplog) == [
        "tool 'cancel' is registered but the policy never offers it (rule default_policy(): "
        "write tool 'cancel' is not explicitly allowed; declare it requires_approval=True to run "
        "it once a person approves, or allow it with allow_writes('cancel')); "
        'if it only reads, declare @registry.tool(effect="read")'
    ]


def test_each_never_offered_tool_names_the_rule_that_refuses_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """allow_tools('look') leaves 'refund' unoffered: the warning names allow_tools('look')."""
    with caplog.at_level(logging.WARNING, logger="ownloop"):
        Agent(ScriptedModel([]), _registry(Counter()), policy=allow_tools("look"))
    (warning,) = _warnings(caplog)
    assert warning.startswith("tool 'refund' is registered but the policy never offers it")
    assert "rule allow_tools('look')" in warning


def test_tools_offered_to_some_actor_or_at_all_raise_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A role-guarded tool may be offered to an actor with the role; default tools all run."""
    with caplog.at_level(logging.WARNING, logger="ownloop"):
        Agent(ScriptedModel([]), _registry(Counter()))
        Agent(ScriptedModel([]), _registry(Counter()), policy=require_role("admin"))

        def picky(actor: Actor | None, spec: ToolSpec, _args: object) -> Allow:
            _ = actor.roles[0]  # type: ignore[union-attr] - fails on the probe: decided at run time
            return Allow()

        from ownloop.policy import Policy

        Agent(ScriptedModel([]), _registry(Counter()), policy=Policy(picky, "picky"))
    assert _warnings(caplog) == []


# ----------------------------------------------------------------------------- resume


def _paused(limits: Limits | None = None) -> tuple[Agent, object]:
    agent, _ = _refund_run(Counter(), limits=limits)
    return agent, agent.run_sync("refund o-1", run_id="run-r")


def _approve(paused: object) -> list[Approval]:
    request = paused.approval_requests[0]  # type: ignore[attr-defined]
    return [Approval(request_id=request.id, approved=True, approver="ann")]


def test_resume_under_other_limits_is_refused_naming_them() -> None:
    """A resume whose limits differ from the recorded ones is refused and says which limits."""
    _, paused = _paused()
    other, _ = _refund_run(Counter(), limits=Limits(max_steps=3))
    with pytest.raises(ConfigurationError, match=r"limits \(max_steps\) differ") as raised:
        other.resume_sync(paused, approvals=_approve(paused))  # type: ignore[arg-type]
    assert "accept_changes=True" in str(raised.value)


def test_resume_with_other_tools_names_the_tools_added_and_removed() -> None:
    """Offering a tool more (or less) than the run started with is named in the refusal."""
    _, paused = _paused()
    registry = _registry(Counter())

    @registry.tool(effect="read")
    def extra() -> str:
        """One tool more."""
        return "x"

    other = Agent(ScriptedModel([final("done")]), registry)
    with pytest.raises(ConfigurationError, match=r"offered tools \(added extra\) differ"):
        other.resume_sync(paused, approvals=_approve(paused))  # type: ignore[arg-type]
    fewer = Agent(ScriptedModel([final("done")]), _registry(Counter()), policy=allow_tools("look"))
    with pytest.raises(ConfigurationError, match=r"offered tools \(removed refund\)"):
        fewer.resume_sync(paused, approvals=_approve(paused))  # type: ignore[arg-type]


def test_resume_under_another_policy_alone_names_the_policy() -> None:
    """Same limits and tools, another policy expression: the refusal names the policy."""
    _, paused = _paused()
    other, _ = _refund_run(Counter(), policy=allow_tools("look", "refund"))
    with pytest.raises(ConfigurationError, match="the policy, the validators or the registered"):
        other.resume_sync(paused, approvals=_approve(paused))  # type: ignore[arg-type]


def test_accepted_changes_continue_and_are_recorded_in_the_trace() -> None:
    """accept_changes=True continues the run and records a configuration_changed event."""
    _, paused = _paused()
    executed = Counter[str]()
    other = _resumer(executed, limits=Limits(max_steps=3))
    done = other.resume_sync(paused, approvals=_approve(paused), accept_changes=True)  # type: ignore[arg-type]
    assert done.status is RunStatus.COMPLETED
    assert executed == Counter({"o-1": 1})
    (changed,) = [event for event in done.trace if isinstance(event, ConfigurationChanged)]
    assert changed.changes == ("limits (max_steps)",)
    assert changed.recorded_digest == paused.versions.policy_digest  # type: ignore[attr-defined]
    assert changed.digest == done.versions.policy_digest != changed.recorded_digest


@pytest.mark.parametrize("on_denied", ["fail", "observe"])
def test_a_paused_call_the_new_policy_denies_leaves_no_request_waiting(on_denied: str) -> None:
    """A paused write denied on resume ends its request: the result lists no approval to give."""
    _, paused = _paused()
    executed = Counter[str]()
    other = _resumer(executed, policy=allow_tools("look"), on_denied=on_denied)
    done = other.resume_sync(paused, approvals=_approve(paused), accept_changes=True)  # type: ignore[arg-type]
    expected = RunStatus.FAILED if on_denied == "fail" else RunStatus.COMPLETED
    assert (done.status, done.approval_requests, executed) == (expected, (), Counter())


def test_a_paused_call_a_new_precondition_rejects_leaves_no_request_waiting() -> None:
    """A paused write that a precondition now rejects is refused and waits for no approval."""
    _, paused = _paused()
    executed = Counter[str]()
    other = _resumer(executed, preconditions=[requires_check_before(tool="refund", check="look")])
    done = other.resume_sync(paused, approvals=_approve(paused), accept_changes=True)  # type: ignore[arg-type]
    assert (done.status, done.approval_requests, executed) == (RunStatus.COMPLETED, (), Counter())


def test_an_identical_configuration_resumes_without_an_event() -> None:
    """A new agent built the same way resumes silently: nothing changed."""
    _, paused = _paused()
    same = _resumer(Counter())
    done = same.resume_sync(paused, approvals=_approve(paused))  # type: ignore[arg-type]
    assert done.status is RunStatus.COMPLETED
    assert not any(isinstance(event, ConfigurationChanged) for event in done.trace)


def test_a_stored_run_refuses_a_changed_configuration_until_accepted(tmp_path: Path) -> None:
    """From a store too: refused with the difference named, accepted on request."""

    async def scenario() -> tuple[str, RunStatus]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            first, _ = _refund_run(Counter(), store=store)
            paused = await first.run("refund o-1", run_id="stored-1")
            other = _resumer(Counter(), store=store, limits=Limits(max_tool_calls=5))
            with pytest.raises(ConfigurationError) as refused:
                await other.resume("stored-1", approvals=_approve(paused))
            done = await other.resume("stored-1", approvals=_approve(paused), accept_changes=True)
            return str(refused.value), done.status

    message, status = asyncio.run(scenario())
    assert "run stored-1 was recorded with another configuration" in message
    assert "limits (max_tool_calls) differ" in message
    assert status is RunStatus.COMPLETED
