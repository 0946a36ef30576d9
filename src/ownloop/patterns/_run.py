"""`plan_execute`: plan, then run each subtask as a bounded `Agent` run, reviewing after each.

The runs draw from one shared budget, and their results (with their traces, in order) make up
one `PlanExecuteResult`. Checks of the arguments happen here, before any model call.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from ownloop.clock import Clock, SystemClock
from ownloop.contracts import Actor, Limits, RunStatus, StopReason
from ownloop.cost import PriceTable
from ownloop.exceptions import ConfigurationError, InputRejected
from ownloop.models import AgentModel
from ownloop.patterns._plan import MAX_PLAN_SUBTASKS
from ownloop.patterns._result import PlanExecuteResult
from ownloop.patterns._session import Ended, Executor, ReviewFunction, Session, Settings

__all__ = ["plan_execute", "plan_execute_sync"]

MAX_RUN_ID_CHARS = 100
"""The longest pattern id: its runs' ids add a suffix and must stay within 128 characters."""


def _check_arguments(
    goal: str,
    limits: Limits,
    *,
    max_subtasks: int,
    max_rewrites: int,
    run_id: str | None,
    prices: PriceTable | None,
) -> str:
    """Refuse impossible arguments before any model call; return the pattern's id."""
    if not 2 <= max_subtasks <= MAX_PLAN_SUBTASKS:
        raise ConfigurationError(f"max_subtasks must be 2-{MAX_PLAN_SUBTASKS}, got {max_subtasks}")
    if max_rewrites < 0:
        raise ConfigurationError(f"max_rewrites must be >= 0, got {max_rewrites}")
    if limits.max_cost is not None and prices is None:
        raise ConfigurationError("limits.max_cost needs a price table: plan_execute(prices=...)")
    if not goal.strip() or len(goal) > limits.max_input_chars:
        raise InputRejected(f"the goal must have 1-{limits.max_input_chars} characters")
    pattern_id = run_id if run_id is not None else uuid.uuid4().hex[:16]
    if not 0 < len(pattern_id) <= MAX_RUN_ID_CHARS:
        raise ConfigurationError(f"run_id must be 1-{MAX_RUN_ID_CHARS} characters")
    return pattern_id


async def plan_execute(
    planner: AgentModel,
    executor: Executor,
    goal: str,
    *,
    limits: Limits,
    max_subtasks: int = 6,
    reviewer: AgentModel | ReviewFunction | None = None,
    actor: Actor | None = None,
    run_id: str | None = None,
    max_rewrites: int = 1,
    clock: Clock | None = None,
    prices: PriceTable | None = None,
) -> PlanExecuteResult:
    """Plan a goal into subtasks, run each as a bounded `Agent` run, and review after each step.

    Args:
        planner: The model that writes the plan (JSON) and, without a ``reviewer``, reviews.
        executor: Runs each subtask: an `Agent` (admitted only while its limits fit in what
            remains of ``limits``), or a factory ``(remaining: Limits) -> Agent``.
        goal: What to achieve.
        limits: The one budget of every run together (planning, subtasks, reviews).
        max_subtasks: The most subtasks a plan may have, and run in all (revisions included).
        reviewer: Reviews after each step: a model (asked for JSON), or a function returning a
            `Review`; the planner by default.
        actor: The authenticated identity every run acts for.
        run_id: The pattern's id (runs are named after it); a random one by default.
        max_rewrites: How many times an invalid plan or review is sent back before failing.
        clock: Measures the shared deadline (and runs the planner's and reviewer's agents).
        prices: Token prices, needed when ``limits.max_cost`` is set.

    Returns:
        The result; a stop, failure or pause of any run ends the pattern with its status.

    Raises:
        ConfigurationError: If ``max_subtasks`` is not 2-20, ``max_rewrites`` is negative,
            ``limits.max_cost`` is set without ``prices``, or the run id is too long.
        InputRejected: If the goal is empty or longer than ``limits.max_input_chars``.
    """
    pattern_id = _check_arguments(
        goal,
        limits,
        max_subtasks=max_subtasks,
        max_rewrites=max_rewrites,
        run_id=run_id,
        prices=prices,
    )
    settings = Settings(
        pattern_id, max_subtasks, max_rewrites, actor, clock or SystemClock(), prices
    )
    session = Session(
        planner=planner,
        executor=executor,
        reviewer=reviewer if reviewer is not None else planner,
        goal=goal,
        limits=limits,
        settings=settings,
    )
    status, reason, output = RunStatus.COMPLETED, StopReason.FINAL_OUTPUT, None
    try:
        output, detail = await session.run()
    except Ended as ended:
        status, reason, detail = ended.status, ended.reason, ended.detail
    return PlanExecuteResult(
        id=pattern_id,
        goal=goal,
        status=status,
        stop_reason=reason,
        detail=detail,
        output=output,
        usage=session.budget.usage,
        plans=tuple(session.plans),
        runs=tuple(session.runs),
    )


def plan_execute_sync(
    planner: AgentModel, executor: Executor, goal: str, **options: Any
) -> PlanExecuteResult:
    """Run `plan_execute` from synchronous code; the same arguments.

    Args:
        planner: The planning (and by default reviewing) model.
        executor: An `Agent`, or a factory building one from the remaining budget.
        goal: What to achieve.
        **options: The keyword arguments of `plan_execute` (``limits`` is required).

    Returns:
        The result.

    Raises:
        ConfigurationError: If called while an event loop is running.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(plan_execute(planner, executor, goal, **options))
    raise ConfigurationError("plan_execute_sync() was called inside a running event loop")
