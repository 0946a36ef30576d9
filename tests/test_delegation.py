"""Agents as tools: the child's answer, one budget, one policy, and how a child's stop is told."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from ownloop import Actor, Agent, Approval, Limits, RunStatus, StopReason, ToolRegistry
from ownloop.clock import FakeClock
from ownloop.contracts import ModelResponse, ToolCall, Usage
from ownloop.delegation import child_limits, child_run_id
from ownloop.exceptions import ConfigurationError
from ownloop.policy import allow_all, allow_writes, deny_tools, require_approval_for
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import CallerRun, ToolContext


class Refund(BaseModel):
    """A typed answer of the child."""

    order: str
    refunded: bool


def _reader(ledger: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order id.
        """
        ledger.append(f"lookup {order}")
        return f"order {order}: paid"

    @registry.tool(effect="write")
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: The order id.
        """
        ledger.append(f"refund {order}")
        return f"refunded {order}"

    return registry


def _observation(result: Any) -> Any:
    return next(m for m in result.messages if getattr(m, "role", "") == "tool")


def _parent(child_tool: Any, steps: list[Any], **options: Any) -> Agent[None, str]:
    registry = ToolRegistry()
    registry.register(child_tool)
    return Agent(ScriptedModel(steps), registry, **options)


def test_the_childs_typed_answer_is_the_observation() -> None:
    """The parent's model sees the child's typed output, serialised, as the tool's observation."""
    ledger: list[str] = []
    child = Agent(
        ScriptedModel(
            [tool_call("lookup", order="A1"), final('{"order": "A1", "refunded": true}')]
        ),
        _reader(ledger),
        output_type=Refund,
        output_mode="prompted",
    )
    tool = child.as_tool(name="payments", description="Handles payments.", effect="read")
    assert tool.spec.parameters["required"] == ["task"]
    assert tool.spec.effect == "read"
    parent = _parent(tool, [tool_call("payments", task="refund A1"), final("done")])
    result = parent.run_sync("help the customer")
    assert result.status is RunStatus.COMPLETED
    observation = _observation(result)
    assert '"refunded": true' in observation.content or '"refunded":true' in observation.content
    assert ledger == ["lookup A1"]


def test_the_parents_usage_includes_the_childs() -> None:
    """Steps, model calls and tool calls of the child are counted in the parent's usage."""
    child = Agent(ScriptedModel([tool_call("lookup", order="A1"), final("paid")]), _reader([]))
    tool = child.as_tool(name="payments", description="Payments.", effect="read")
    parent = _parent(tool, [tool_call("payments", task="check A1"), final("done")])
    usage = parent.run_sync("go").usage
    assert (usage.steps, usage.model_requests) == (2 + 2, 2 + 2)
    assert (usage.tool_calls, usage.tool_attempts) == (1 + 1, 1 + 1)


def test_a_looping_child_stops_at_the_parents_remaining_steps() -> None:
    """A child that would loop gets only the steps the parent has left, not its own budget."""
    looping = [tool_call("lookup", f"c{n}", order=f"A{n}") for n in range(20)]
    child = Agent(ScriptedModel(looping), _reader([]), limits=Limits(max_steps=20))
    tool = child.as_tool(name="payments", description="Payments.", effect="read")
    parent = _parent(
        tool, [tool_call("payments", task="loop"), final("gave up")], limits=Limits(max_steps=4)
    )
    result = parent.run_sync("go")
    assert result.status is RunStatus.STOPPED
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.usage.steps == 4  # one of the parent's, three of the child's: never more


def test_a_cap_lowers_the_childs_budget_below_the_parents() -> None:
    """``as_tool(limits=...)`` caps the child lower than the parent has left."""
    looping = [tool_call("lookup", f"c{n}", order=f"A{n}") for n in range(5)]
    child = Agent(ScriptedModel(looping), _reader([]))
    tool = child.as_tool(
        name="payments", description="Payments.", effect="read", limits=Limits(max_steps=2)
    )
    parent = _parent(tool, [tool_call("payments", task="loop"), final("it stopped")])
    result = parent.run_sync("go")
    assert result.status is RunStatus.COMPLETED
    observation = _observation(result)
    assert "ended stopped (max_steps)" in observation.content
    assert result.usage.steps == 2 + 2


def test_a_childs_stop_can_end_the_parent() -> None:
    """With ``on_stop="end"`` the parent ends with the child's status and stop reason."""
    looping = [tool_call("lookup", f"c{n}", order=f"A{n}") for n in range(5)]
    child = Agent(ScriptedModel(looping), _reader([]))
    tool = child.as_tool(
        name="payments",
        description="Payments.",
        effect="read",
        limits=Limits(max_steps=2),
        on_stop="end",
    )
    parent = _parent(tool, [tool_call("payments", task="loop")])
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_STEPS)
    assert "delegated agent 'payments'" in result.detail


def test_no_budget_left_is_a_stop_and_the_child_never_runs() -> None:
    """A call made when the parent has no model attempts left never starts the child."""
    child_model = ScriptedModel([])
    child = Agent(child_model, _reader([]))
    tool = child.as_tool(name="payments", description="Payments.", effect="read")
    parent = _parent(
        tool,
        [tool_call("payments", task="go"), final("done")],
        limits=Limits(max_model_attempts=1),
    )
    result = parent.run_sync("go")
    assert result.stop_reason is StopReason.MAX_MODEL_ATTEMPTS  # the parent's next turn
    observation = _observation(result)
    assert "did not run: no max_model_attempts left" in observation.content
    assert child_model.requests == []


def test_the_child_acts_for_the_parents_actor() -> None:
    """The child's tools see the parent run's actor."""
    seen: list[str | None] = []
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def whoami(ctx: ToolContext) -> str:
        """Say who the run acts for."""
        seen.append(ctx.actor.id if ctx.actor else None)
        return "ok"

    child = Agent(ScriptedModel([tool_call("whoami"), final("ok")]), registry)
    tool = child.as_tool(name="helper", description="Helps.", effect="read")
    parent = _parent(tool, [tool_call("helper", task="who"), final("done")])
    parent.run_sync("go", actor=Actor(id="alice"))
    assert seen == ["alice"]


def test_a_child_write_denied_by_the_parents_policy_is_denied() -> None:
    """The child's authority is the parent's policy intersected with its own: it cannot widen it."""
    ledger: list[str] = []
    child = Agent(
        ScriptedModel([tool_call("refund", order="A1")]),
        _reader(ledger),
        policy=allow_writes("refund"),  # the child alone would refund
    )
    tool = child.as_tool(name="payments", description="Payments.", effect="write")
    parent = _parent(
        tool,
        [tool_call("payments", task="refund A1"), final("could not")],
        policy=allow_writes("payments") & deny_tools("refund"),
    )
    result = parent.run_sync("go")
    assert ledger == []
    observation = _observation(result)
    assert "tool_denied" in observation.content
    assert result.status is RunStatus.COMPLETED


def test_a_read_delegation_denies_the_childs_writes() -> None:
    """``effect="read"`` restricts the child to reads, whatever its own policy allows."""
    ledger: list[str] = []
    child = Agent(
        ScriptedModel([tool_call("refund", order="A1")]),
        _reader(ledger),
        policy=allow_writes("refund"),
    )
    tool = child.as_tool(name="payments", description="Payments.", effect="read")
    parent = _parent(
        tool,
        [tool_call("payments", task="refund A1"), final("no")],
        policy=allow_writes("refund"),  # the parent would allow it too: the effect decides
    )
    parent.run_sync("go")
    assert ledger == []


def test_bad_options_are_refused() -> None:
    """An unknown effect or on_stop is a configuration error, named."""
    child = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="effect"):
        child.as_tool(name="x", description="x", effect="delete")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="on_stop"):
        child.as_tool(name="x", description="x", effect="read", on_stop="ignore")  # type: ignore[arg-type]


def test_a_child_run_id_is_bounded() -> None:
    """A child run's id derives from the call's key, and stays within the id limit."""
    assert child_run_id("run", "k1", "payments") == "run/payments/k1"
    assert len(child_run_id("r" * 128, "k1", "payments")) <= 128


def _waiting_child(name: str, arrived: dict[str, asyncio.Event]) -> Agent[None, str]:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def gather(topic: str) -> str:
        """Gather facts, once every other child has started too.

        Args:
            topic: What to gather.
        """
        arrived[name].set()
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in arrived.values())), 30)
        return f"facts on {topic}"

    looping = [tool_call("gather", f"{name}{n}", topic=f"t{n}") for n in range(3)]
    return Agent(ScriptedModel([*looping, final(f"{name} done")]), registry)


def test_two_children_run_in_parallel_and_split_what_is_left() -> None:
    """Two read delegations of one turn overlap, and together never exceed the parent's budget."""
    arrived = {"a": asyncio.Event(), "b": asyncio.Event()}
    registry = ToolRegistry()
    for name in arrived:
        child = _waiting_child(name, arrived)
        registry.register(child.as_tool(name=f"ask_{name}", description="Asks.", effect="read"))
    turn = ScriptedModel(
        [
            ModelResponse(
                tool_calls=(
                    ToolCall(id="pa", name="ask_a", arguments={"task": "x"}),
                    ToolCall(id="pb", name="ask_b", arguments={"task": "y"}),
                )
            ),
            final("both answered"),
        ]
    )
    parent = Agent(turn, registry, limits=Limits(max_steps=8, max_parallel_tools=2))
    result = parent.run_sync("go")
    assert all(event.is_set() for event in arrived.values())
    finished = [e for e in result.trace if e.kind == "tool_finished"]
    assert [e.status for e in finished] == ["error", "error"]  # each got 3 of the 7 steps left
    assert result.usage.steps == 1 + 3 + 3 + 1  # the parent's last turn fits: never more
    assert result.status is RunStatus.COMPLETED


def _caller(limits: Limits, usage: Usage, elapsed_s: float = 0.0, share: int = 1) -> CallerRun:
    return CallerRun(limits, usage, elapsed_s, allow_all(), "call#1", share=share)


def test_child_limits_never_exceed_what_the_caller_has_left() -> None:
    """Every budget is the lowest of the child's own, the cap and the caller's remainder."""
    parent = Limits(max_steps=10, max_total_tokens=1_000, deadline_s=100.0, max_cost=1.0)
    spent = Usage(steps=4, tool_calls=2, input_tokens=300, output_tokens=100, cost=0.25)
    own = Limits(max_steps=20, max_tool_calls=3, deadline_s=300.0)
    limits = child_limits(own, Limits(max_total_tokens=500), _caller(parent, spent, 40.0), 5.0)
    assert isinstance(limits, Limits)
    assert (limits.max_steps, limits.max_tool_calls) == (6, 3)
    assert limits.max_total_tokens == 500  # the cap, below the 600 left
    assert limits.max_cost == 0.75
    assert limits.deadline_s == 5.0 + 60.0  # the child's time so far, plus the caller's rest
    halves = child_limits(own, None, _caller(parent, spent, 40.0, share=2), 0.0)
    assert isinstance(halves, Limits)
    assert (halves.max_steps, halves.max_total_tokens, halves.max_cost) == (3, 300, 0.375)


def test_child_limits_name_the_budget_the_caller_has_spent() -> None:
    """With nothing left of a budget, the child does not start: the budget is named."""
    parent = Limits(max_steps=5, max_total_tokens=100, deadline_s=10.0, max_cost=1.0)
    own = Limits()
    assert child_limits(own, None, _caller(parent, Usage(steps=5)), 0.0) == "max_steps"
    spent_tokens = Usage(steps=1, input_tokens=60, output_tokens=40)
    assert child_limits(own, None, _caller(parent, spent_tokens), 0.0) == "max_total_tokens"
    assert child_limits(own, None, _caller(parent, Usage(steps=1, cost=1.0)), 0.0) == "max_cost"
    assert child_limits(own, None, _caller(parent, Usage(steps=1), 10.0), 0.0) == "deadline"


def test_a_finished_child_is_replayed_from_the_store_not_run_again(tmp_path: Any) -> None:
    """Calling a delegation again for a call whose child finished answers from the store."""

    async def go() -> None:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            model = ScriptedModel([final("answered")])  # one answer: a second run would fail
            child = Agent(model, store=store)
            tool = child.as_tool(name="helper", description="Helps.", effect="read")
            context = ToolContext(run_id="top", call_id="c1", tool="helper")
            first = await tool.invoke({"task": "go"}, context)
            again = await tool.invoke({"task": "go"}, context)
            assert first.result.output == again.result.output == "answered"
            assert len(model.requests) == 1

    asyncio.run(go())


def test_without_a_store_a_resumed_parent_runs_the_child_again_and_the_write_once() -> None:
    """With no store, the approved parent runs its child from the start; the write runs once."""
    ledger: list[str] = []
    script = [tool_call("refund", "r1", order="A1"), tool_call("refund", "r1", order="A1")]
    child = Agent(
        ScriptedModel([*script, final("refunded")]),
        _reader(ledger),
        policy=allow_writes("refund") & require_approval_for("refund"),
    )
    tool = child.as_tool(name="payments", description="Payments.", effect="write")
    parent = _parent(
        tool,
        [tool_call("payments", "p1", task="refund A1"), final("done")],
        policy=allow_writes("payments", "refund"),
    )
    paused = parent.run_sync("go")
    assert (paused.status, ledger) == (RunStatus.PAUSED, [])
    (request,) = paused.approval_requests
    decision = Approval(request_id=request.id, approved=True, approver="ops")
    done = parent.resume_sync(paused, approvals=[decision])
    assert (done.status, done.output, ledger) == (RunStatus.COMPLETED, "done", ["refund A1"])
    assert decision in done.approvals  # the child's decision is in the parent's audit trail


def test_an_unresolved_child_leaves_the_write_delegation_unknown() -> None:
    """A child whose write's effect is unknown makes the delegating call's effect unknown too."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: The order id.
        """
        raise TimeoutError("the bank did not answer")

    child = Agent(
        ScriptedModel([tool_call("refund", "r1", order="A1"), final("maybe")]),
        registry,
        policy=allow_writes("refund"),
    )
    tool = child.as_tool(name="payments", description="Payments.", effect="write")
    parent = _parent(
        tool,
        [tool_call("payments", "p1", task="refund A1"), final("done")],
        policy=allow_writes("payments", "refund"),
    )
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (
        RunStatus.UNRESOLVED,
        StopReason.UNRESOLVED_EFFECT,
    )
    assert [operation.tool for operation in result.pending] == ["payments"]


def test_only_agent_tools_are_told_about_the_calling_run() -> None:
    """A plain tool's context carries no caller record: budgets and policy go to agents only."""
    seen: list[object] = []
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def plain(ctx: ToolContext) -> str:
        """A plain read."""
        seen.append(ctx.caller)
        return "ok"

    Agent(ScriptedModel([tool_call("plain"), final("done")]), registry).run_sync("go")
    assert seen == [None]


def test_a_child_started_at_once_gets_all_the_parents_time() -> None:
    """A child called before any time passed gets the parent's whole deadline, not less."""
    clock = FakeClock()
    seen: list[float | None] = []
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def when(ctx: ToolContext) -> str:
        """Say how much time is left."""
        seen.append(ctx.seconds_left(clock.now()))
        return "ok"

    child = Agent(ScriptedModel([tool_call("when"), final("ok")]), registry, clock=clock)
    tool = child.as_tool(name="helper", description="Helps.", effect="read")
    parent = _parent(
        tool,
        [tool_call("helper", task="go"), final("done")],
        clock=clock,
        limits=Limits(deadline_s=10.0),
    )
    assert parent.run_sync("go").status is RunStatus.COMPLETED
    assert seen == [10.0]
