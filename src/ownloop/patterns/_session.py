"""One plan-and-execute in progress: its shared budget, its plans and its three kinds of run.

Every model call — planning, each subtask, each review — is an ordinary ownloop run: budgeted,
retried, traced, checked. The planner's and reviewer's JSON is a completion check, so an invalid
answer is sent back ("answer again with the JSON only") a bounded number of times and then ends
the pattern as ``failed`` / ``completion_rejected``. A run that does not complete ends the
pattern with its own status and stop reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownloop.agent import Agent
from ownloop.clock import Clock
from ownloop.contracts import Actor, Evidence, Limits, RunResult, RunStatus, StopReason
from ownloop.cost import PriceTable
from ownloop.models import AgentModel
from ownloop.patterns._budget import Exhausted, SharedBudget
from ownloop.patterns._plan import (
    PLANNER_INSTRUCTIONS,
    REVIEWER_INSTRUCTIONS,
    Plan,
    Review,
    ReviewRequest,
    check_revision,
    parse_plan,
    parse_review,
    plan_prompt,
    review_prompt,
    subtask_prompt,
)
from ownloop.patterns._result import Phase, PhaseRun
from ownloop.validators import Accept, CheckFunction, Reject, Verdict

__all__ = ["Ended", "Executor", "ReviewFunction", "Session", "Settings"]

Executor = Agent[Any, Any] | Callable[[Limits], Agent[Any, Any]]
"""Runs each subtask: an `Agent`, or a factory building one from the remaining budget."""

ReviewFunction = Callable[[ReviewRequest], Review | Awaitable[Review]]
"""Reviews in code instead of asking a model (sync or async)."""


class Ended(Exception):
    """Ends the pattern early with a status, a stop reason and a detail."""

    def __init__(self, status: RunStatus, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail = status, reason, detail


def _checked(parse: Callable[[str], object], name: str) -> CheckFunction:
    """A completion check accepting only what ``parse`` reads (it returns a problem as text)."""

    def check(output: str, _evidence: Sequence[Evidence]) -> Verdict:
        problem = parse(output)
        if isinstance(problem, str):
            return Reject(f"{problem}. Answer again with the JSON only")
        return Accept()

    check.__name__ = name
    return check


@dataclass(frozen=True, slots=True)
class Settings:
    """The fixed options of one plan-and-execute."""

    id: str
    max_subtasks: int
    max_rewrites: int
    actor: Actor | None
    clock: Clock
    prices: PriceTable | None


class Session:
    """The state of one plan-and-execute, and its three kinds of run."""

    def __init__(
        self,
        *,
        planner: AgentModel,
        executor: Executor,
        reviewer: AgentModel | ReviewFunction,
        goal: str,
        limits: Limits,
        settings: Settings,
    ) -> None:
        self.planner, self.executor, self.reviewer = planner, executor, reviewer
        self.goal, self.settings = goal, settings
        self.budget = SharedBudget(limits, settings.clock)
        self.runs: list[PhaseRun] = []
        self.plans: list[Plan] = []
        self.done: list[tuple[str, str]] = []

    async def run(self) -> tuple[str, str]:
        """Plan, then execute and review step by step.

        Returns:
            The answer, and how it was reached.
        """
        self._check_models()
        plan = await self._plan()
        self.plans.append(plan)
        remaining = list(plan.subtasks)
        while remaining:
            subtask = remaining.pop(0)
            step = len(self.done) + 1
            output = await self._execute(step, subtask, f"{step} of {step + len(remaining)}")
            self.done.append((subtask, output))
            review = await self._review(step, subtask, remaining)
            if review.action == "finish" and review.answer is not None:
                return review.answer, f"the review after subtask {step} finished the goal"
            if review.action == "revise":
                remaining = list(review.subtasks)
                finished = tuple(task for task, _ in self.done)
                self.plans.append(Plan(subtasks=(*finished, *remaining)))
        # The plan ran to its end without an explicit finish: the last subtask's result answers.
        return self.done[-1][1], f"the plan ran to its end after {len(self.done)} subtask(s)"

    def _check_models(self) -> None:
        """Build the planner's and reviewer's agents before any model call.

        A missing price (or any other misconfiguration) then fails now, not after paid calls.
        """
        for model in (self.planner, self.reviewer):
            if isinstance(model, AgentModel):
                Agent(model, limits=self.budget.total, prices=self.settings.prices)

    def _remaining(self, before: str) -> Limits:
        remaining = self.budget.remaining(before)
        if isinstance(remaining, Exhausted):
            raise Ended(RunStatus.STOPPED, remaining.reason, remaining.detail)
        return remaining

    async def _sub_run(
        self, phase: Phase, step: int, subtask: str | None, agent: Agent[Any, Any], task: str
    ) -> RunResult:
        run_id = (
            f"{self.settings.id}-plan" if phase == "plan" else f"{self.settings.id}-{phase}-{step}"
        )
        task = task[: agent.limits.max_input_chars]
        result = await agent.run(task, actor=self.settings.actor, run_id=run_id)
        self.budget.add(result.usage)
        self.runs.append(PhaseRun(phase=phase, step=step, subtask=subtask, result=result))
        if result.status is not RunStatus.COMPLETED or result.output is None:
            label = "planning" if phase == "plan" else f"the {phase} run of subtask {step}"
            detail = (
                f"{label} ended {result.status.value} ({result.stop_reason.value}): {result.detail}"
            )
            raise Ended(result.status, result.stop_reason, detail[:4096])
        return result

    def _model_agent(
        self, model: AgentModel, instructions: str, check: CheckFunction, before: str
    ) -> Agent:
        """An agent for one planning or review call: no tools, one rewrite, the remaining budget."""
        remaining = self._remaining(before)
        rewrites = self.settings.max_rewrites
        limits = Limits(
            **{
                **remaining.model_dump(),
                "max_steps": min(remaining.max_steps, rewrites + 1),
                "max_completion_rejections": rewrites,
            }
        )
        return Agent(
            model,
            limits=limits,
            validators=[check],
            instructions=instructions,
            clock=self.settings.clock,
            prices=self.settings.prices,
        )

    async def _plan(self) -> Plan:
        high = self.settings.max_subtasks
        check = _checked(lambda text: parse_plan(text, high), "valid_plan")
        instructions = PLANNER_INSTRUCTIONS.format(low=2, high=high)
        agent = self._model_agent(self.planner, instructions, check, "planning")
        result = await self._sub_run("plan", 0, None, agent, plan_prompt(self.goal))
        plan = parse_plan(result.output or "", high)
        assert isinstance(plan, Plan)  # the completion check accepted exactly this text
        return plan

    async def _execute(self, step: int, subtask: str, position: str) -> str:
        before = f"subtask {step}"
        if isinstance(self.executor, Agent):
            exhausted = self.budget.reserve(self.executor.limits, before)
            if exhausted is not None:
                raise Ended(RunStatus.STOPPED, exhausted.reason, exhausted.detail)
            agent = self.executor
        else:
            granted = self._remaining(before)
            agent = self.executor(granted)
            # A factory's agent is checked like a ready-made one: its limits must fit too.
            exhausted = self.budget.fits(agent.limits, granted, before)
            if exhausted is not None:
                raise Ended(RunStatus.STOPPED, exhausted.reason, exhausted.detail)
        bound = agent.limits.max_input_chars
        task = subtask_prompt(self.goal, self.done, subtask, position, bound)
        result = await self._sub_run("execute", step, subtask, agent, task)
        return result.output or ""

    async def _review(self, step: int, subtask: str, remaining: list[str]) -> Review:
        allowance = self.settings.max_subtasks - len(self.done)
        finished = tuple(task for task, _ in self.done)
        request = ReviewRequest(self.goal, tuple(self.done), tuple(remaining), allowance)
        if not isinstance(self.reviewer, AgentModel):
            verdict = self.reviewer(request)
            review = await verdict if inspect.isawaitable(verdict) else verdict
            checked = check_revision(review, allowance, finished)
            if isinstance(checked, str):
                detail = f"the review of subtask {step} was refused: {checked}"
                raise Ended(RunStatus.FAILED, StopReason.COMPLETION_REJECTED, detail)
            return checked
        check = _checked(lambda text: parse_review(text, allowance, finished), "valid_review")
        before = f"the review of subtask {step}"
        agent = self._model_agent(self.reviewer, REVIEWER_INSTRUCTIONS, check, before)
        task = review_prompt(request, agent.limits.max_input_chars // 2)
        result = await self._sub_run("review", step, subtask, agent, task)
        parsed = parse_review(result.output or "", allowance, finished)
        assert isinstance(parsed, Review)  # the completion check accepted exactly this text
        return parsed
