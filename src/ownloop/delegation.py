"""Agents as tools of another agent, under the calling run's budgets, policy and approvals.

`agent_tool` (what ``Agent.as_tool`` returns) is a tool whose handler runs a child agent. The
child's budgets are what the calling run has left (never more), optionally capped lower; its
policy is the caller's intersected with its own, so a child never widens authority; it acts for
the caller's actor. The child's run is stored under an id derived from the call's journal key
(decided once by the caller), so a resumed caller resumes the child where it paused and replays
a finished child instead of running it again. The loop core folds the child's result in
(``ownloop.loop._delegate``). This module decides budgets and runs the child; it never touches
the caller's state.

A *handoff* (``as_tool(handoff=True)``) is the same tool, with the same budgets, policy, journal
and approvals; its child also continues the caller's conversation, and its answer is the caller's
final answer. `check_handoffs` refuses, when the caller is built, a handoff whose answer cannot be
a value of the caller's ``output_type``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Literal, Protocol, Self

from ownloop.contracts import (
    MAX_ID_CHARS,
    Approval,
    Limits,
    Message,
    RunResult,
    RunSnapshot,
    ToolMessage,
    Usage,
)
from ownloop.exceptions import ConfigurationError
from ownloop.loop import Delegated
from ownloop.loop._output import OutputSpec
from ownloop.policy import Policy, default_policy
from ownloop.store import RunStore
from ownloop.tools import CallerRun, RegisteredTool, ToolContext, ToolRegistry

__all__ = ["ChildAgent", "agent_tool", "check_handoffs", "child_limits", "child_run_id"]

_BUDGETS = (
    ("max_steps", "steps", "max_steps"),
    ("max_model_attempts", "model_attempts", "max_model_attempts"),
    ("max_tool_calls", "tool_calls", "max_tool_calls"),
    ("max_tool_attempts", "tool_attempts", "max_tool_attempts"),
)
"""A budget, the usage counter it bounds, and the stop reason of its exhaustion."""

_AT_LEAST_ONE = {"max_steps", "max_model_attempts"}


class ChildAgent(Protocol):
    """What delegation needs of an agent (`ownloop.Agent` is one)."""

    store: RunStore | None
    limits: Limits
    policy: Policy
    deps_type: Any

    def delegated(
        self, limits: Limits, policy: Policy, sinks: Sequence[Callable[[Any], None]] = ()
    ) -> ChildAgent:
        """Return the agent under other limits and policy, its recorded versions unchanged."""

    async def run(
        self,
        task: str,
        *,
        actor: Any = None,
        run_id: str | None = None,
        approvals: Any = (),
        deps: Any = None,
        history: Sequence[Message] | None = None,
    ) -> RunResult[Any]:
        """Run a task (see `ownloop.Agent.run`)."""

    async def resume(
        self,
        paused: RunResult[Any] | str,
        *,
        approvals: Any = (),
        accept_changes: bool = False,
        take_over: bool = False,
        deps: Any = None,
    ) -> RunResult[Any]:
        """Resume a stored run (see `ownloop.Agent.resume`)."""


def child_run_id(run_id: str, key: str, name: str) -> str:
    """Return the id of the child run a call delegates to: stable for the call, unique per run.

    Args:
        run_id: The calling run.
        key: The call's journal key in the calling run.
        name: The agent tool's name.

    Returns:
        ``"<run_id>/<name>/<key>"``, or a digest of it when longer than an id may be.
    """
    child = f"{run_id}/{name}/{key}"
    if len(child) <= MAX_ID_CHARS:
        return child
    return f"delegated-{hashlib.sha256(child.encode()).hexdigest()[:40]}"


def child_limits(
    own: Limits, cap: Limits | None, caller: CallerRun, elapsed_s: float
) -> Limits | str:
    """Derive a child segment's budgets: its own, capped, and never above what the caller has left.

    The caller counts a child's usage once the child's run ends (not at a pause), so the child's
    counters, earlier segments included, may reach what the caller had left as the call started;
    children running together (reads in one group) split it evenly. Time is not split: they run
    at the same time.

    Args:
        own: The child agent's limits.
        cap: A lower cap for this child (``as_tool(limits=...)``), if any.
        caller: The calling run as the call started.
        elapsed_s: Seconds the child run has run so far (its time is the caller's too).

    Returns:
        The limits, or the name of the budget the caller has nothing left of.
    """
    values = own.model_dump()
    if cap is not None:
        for name, value in cap.model_dump().items():
            if value is not None and (values[name] is None or value < values[name]):
                values[name] = value
    parent, spent, share = caller.limits, caller.usage, caller.share
    for budget, counter, reason in _BUDGETS:
        left = (getattr(parent, budget) - getattr(spent, counter)) // share
        if left < (1 if budget in _AT_LEAST_ONE else 0):
            return reason
        values[budget] = min(values[budget], left)
    tokens_left = (parent.max_total_tokens - spent.input_tokens - spent.output_tokens) // share
    if tokens_left < 1:
        return "max_total_tokens"
    values["max_total_tokens"] = min(values["max_total_tokens"], tokens_left)
    if parent.max_cost is not None:
        cost_left = (parent.max_cost - spent.cost) / share
        if cost_left <= 0:
            return "max_cost"
        current = values["max_cost"]
        values["max_cost"] = cost_left if current is None else min(current, cost_left)
    seconds_left = parent.deadline_s - caller.elapsed_s
    if seconds_left <= 0:
        return "deadline"
    values["deadline_s"] = min(values["deadline_s"], elapsed_s + seconds_left)
    return Limits(**values)


def agent_tool(
    child: ChildAgent,
    *,
    name: str,
    description: str,
    effect: Literal["read", "write"],
    limits: Limits | None = None,
    on_stop: Literal["observe", "end"] = "observe",
    handoff: bool = False,
    answers: OutputSpec | None = None,
) -> RegisteredTool:
    """Make ``child`` a tool a parent registry can hold (``registry.register(tool)``).

    Args:
        child: The agent to delegate to.
        name: The tool's name, as the parent's model calls it.
        description: What the child does, for the parent's model.
        effect: ``"read"`` restricts the child to reads (its writes are denied); ``"write"``
            lets it write, each write decided by the parent's policy intersected with its own.
        limits: Caps for the child below what the parent has left (each field at most).
        on_stop: When the child stops without an answer (a budget, a denial, unresolved):
            ``"observe"`` tells the parent's model (a typed observation), ``"end"`` ends the
            parent run with the child's status and stop reason.
        handoff: The child takes over: it continues the parent's conversation (plus the
            ``task``), and its answer is the parent's final answer (checked by the parent's
            validators). A handoff never runs beside the turn's other calls.
        answers: The child's output spec (``None``: text), which `check_handoffs` compares
            with the parent's.

    Returns:
        The tool; its single argument is the child's ``task``.

    Raises:
        ConfigurationError: An option cannot work.
    """
    if effect not in ("read", "write"):
        raise ConfigurationError(f"effect must be 'read' or 'write', not {effect!r}")
    if on_stop not in ("observe", "end"):
        raise ConfigurationError(f"on_stop must be 'observe' or 'end', not {on_stop!r}")
    reads_only = default_policy() if effect == "read" else None

    async def delegate(task: str, ctx: ToolContext) -> Delegated:
        """Delegate a task.

        Args:
            task: What the delegated agent should do, in full: it sees nothing else.
            ctx: The calling run's trusted context (never in the schema).
        """
        return await _run_child(
            child, task, ctx, name=name, cap=limits, on_stop=on_stop, reads_only=reads_only
        )

    async def hand_off(task: str, ctx: ToolContext) -> Delegated:
        """Hand the conversation over.

        Args:
            task: What the agent taking over should do now; it sees the conversation so far,
                and its answer is the final answer.
            ctx: The calling run's trusted context (never in the schema).
        """
        return await _run_child(
            child,
            task,
            ctx,
            name=name,
            cap=limits,
            on_stop=on_stop,
            reads_only=reads_only,
            handoff=True,
        )

    registry = ToolRegistry()
    if not handoff:
        return _AgentTool.of(
            registry.add(delegate, name=name, description=description, effect=effect)
        )
    tool = registry.add(hand_off, name=name, description=description, effect=effect, parallel=False)
    made = _HandoffTool.of(tool)
    made.answers = answers
    return made


def check_handoffs(registry: ToolRegistry, output: OutputSpec | None) -> None:
    """Refuse a handoff whose answer cannot be the answer of an agent with ``output``.

    A text agent takes any answer (a typed one as its JSON text); a typed agent takes only an
    answer of the same type (the same type, or one with the same JSON schema).

    Args:
        registry: The parent's tools.
        output: The parent's output spec (``None``: text).

    Raises:
        ConfigurationError: A handoff answers text, or another type, than the parent's.
    """
    if output is None:
        return
    for name in registry.names():
        tool = registry.get(name)
        if not isinstance(tool, _HandoffTool):
            continue
        answers = tool.answers
        if answers is None or not (
            answers.output_type == output.output_type
            or answers.format.json_schema == output.format.json_schema
        ):
            given = "text" if answers is None else answers.format.name
            raise ConfigurationError(
                f"the handoff {name!r} answers {given}, but this agent's output_type is "
                f"{output.format.name}: a handoff's answer is this agent's answer, so its "
                "output_type must be this agent's"
            )


class _AgentTool(RegisteredTool):
    """A registered tool that runs an agent: the loop folds its child's result in."""

    __slots__ = ()
    delegates = True

    @classmethod
    def of(cls, tool: RegisteredTool) -> Self:
        made = cls.__new__(cls)
        for slot in RegisteredTool.__slots__:
            setattr(made, slot, getattr(tool, slot))
        return made


class _HandoffTool(_AgentTool):
    """An agent tool whose child takes over: it carries the output spec the child answers in."""

    __slots__ = ("answers",)
    answers: OutputSpec | None


async def _run_child(
    child: ChildAgent,
    task: str,
    ctx: ToolContext,
    *,
    name: str,
    cap: Limits | None,
    on_stop: Literal["observe", "end"],
    reads_only: Policy | None,
    handoff: bool = False,
) -> Delegated:
    caller = ctx.caller
    if caller is None:  # called outside a run (a test calling the handler): the child's own
        caller = CallerRun(child.limits, Usage(), 0.0, child.policy, ctx.call_id)
    run_id = child_run_id(ctx.run_id, caller.key, name)
    stored = await _stored(child.store, run_id)
    if stored is not None and stored.state == "finished" and stored.result is not None:
        return Delegated(stored.result, on_stop, handoff=handoff)  # replayed, not run again
    elapsed = stored.elapsed_s if stored is not None else 0.0
    bounded = child_limits(child.limits, cap, caller, elapsed)
    if isinstance(bounded, str):
        return Delegated(None, on_stop, exhausted=bounded, handoff=handoff)
    policy = caller.policy & child.policy
    if reads_only is not None:
        policy = policy & reads_only
    derived = child.delegated(bounded, policy, caller.sinks)
    deps = ctx.deps if child.deps_type is not None else None
    if stored is None:
        history = _handed_over(caller, ctx.call_id, name) if handoff else None
        result = await _apart(
            derived.run(
                task,
                actor=ctx.actor,
                run_id=run_id,
                approvals=caller.approvals,
                deps=deps,
                history=history,
            )
        )
        return Delegated(result, on_stop, handoff=handoff)
    approvals = _addressed(stored, caller.approvals)
    # The caller holds its own lease, so no other worker runs this child: a lease the child's
    # dead worker left behind is taken over at once (fencing refuses that worker's records).
    result = await _apart(derived.resume(run_id, approvals=approvals, take_over=True, deps=deps))
    return Delegated(result, on_stop, handoff=handoff)


def _handed_over(caller: CallerRun, call_id: str, name: str) -> tuple[Message, ...]:
    """The conversation a handoff's child continues: the caller's, its handoff call answered."""
    note = ToolMessage(
        call_id=call_id,
        name=name,
        content=f"Handed off to {name}: continue this conversation and answer directly.",
    )
    return (*caller.messages, note)


async def _apart(run: Coroutine[Any, Any, RunResult[Any]]) -> RunResult[Any]:
    """Run the child in its own task: its deadline (a context variable) stays its own."""
    return await asyncio.create_task(run)


async def _stored(store: RunStore | None, run_id: str) -> RunSnapshot | None:
    if store is None:
        return None
    record = await store.get(run_id)
    return None if record is None else record.snapshot


def _addressed(snapshot: RunSnapshot, approvals: tuple[Approval, ...]) -> list[Approval]:
    """The caller's decisions naming a request the child waits for (its other ones stay)."""
    ids = {request.id for request in snapshot.approval_requests}
    digests = {request.digest for request in snapshot.approval_requests}
    return [
        approval
        for approval in approvals
        if approval.request_id in ids
        or (approval.request_id is None and approval.digest in digests)
    ]
