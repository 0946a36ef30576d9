"""Patterns built from bounded runs: plan-and-execute under one budget and one trace.

`plan_execute` asks a planner model for a plan (validated JSON: 2 to N concrete subtasks), runs
each subtask as a bounded `Agent` run, and after each step lets a reviewer finish early or revise
the remaining plan. Every model call is an ordinary ownloop run — budgeted, retried, traced and
checked — drawing from one shared `Limits`; the result holds every run, in order, and so one
trace. This package sits above `ownloop.agent`; nothing below imports it.
"""

from ownloop.patterns._plan import MAX_PLAN_SUBTASKS, Plan, Review, ReviewRequest
from ownloop.patterns._result import Phase, PhaseRun, PlanExecuteResult
from ownloop.patterns._run import plan_execute, plan_execute_sync
from ownloop.patterns._session import Executor, ReviewFunction

__all__ = [
    "MAX_PLAN_SUBTASKS",
    "Executor",
    "Phase",
    "PhaseRun",
    "Plan",
    "PlanExecuteResult",
    "Review",
    "ReviewFunction",
    "ReviewRequest",
    "plan_execute",
    "plan_execute_sync",
]
