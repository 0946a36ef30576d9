"""What a plan-and-execute returns: its status, each plan, and every run with its trace."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ownloop.contracts import Evidence, RunResult, RunStatus, StopReason, TraceEvent, Usage
from ownloop.patterns._plan import Plan

__all__ = ["Phase", "PhaseRun", "PlanExecuteResult"]

Phase = Literal["plan", "execute", "review"]
"""The kinds of run in a plan-and-execute."""


class PhaseRun(BaseModel):
    """One run of the pattern.

    Attributes:
        phase: ``plan``, ``execute`` (a subtask) or ``review``.
        step: The subtask's number, from 1 (0 for planning).
        subtask: The subtask executed or just reviewed (``None`` for planning).
        result: The run's full result, its trace included.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    phase: Phase
    step: int
    subtask: str | None = None
    result: RunResult


class PlanExecuteResult(BaseModel):
    """Everything a plan-and-execute did: how it ended, each plan, each run and their traces.

    Attributes:
        id: The pattern's id; its runs are ``<id>-plan``, ``<id>-execute-<n>``, ``<id>-review-<n>``.
        goal: The goal.
        status: How it ended: ``completed`` only when the reviewer finished it or the plan ran
            to its end; otherwise the status of the run or budget that ended it.
        stop_reason: The exact cause.
        detail: A readable explanation naming the phase, limit or error involved.
        output: The answer, when completed.
        usage: The counters of every run, added up (what the shared budget was charged).
        plans: The plan, then the whole plan after each revision (finished subtasks first).
        runs: Every run in order.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    goal: str
    status: RunStatus
    stop_reason: StopReason
    detail: str
    output: str | None = None
    usage: Usage
    plans: tuple[Plan, ...] = ()
    runs: tuple[PhaseRun, ...] = ()

    @property
    def steps(self) -> tuple[PhaseRun, ...]:
        """The subtask runs, in order."""
        return tuple(run for run in self.runs if run.phase == "execute")

    @property
    def trace(self) -> tuple[TraceEvent, ...]:
        """Every run's events, run after run: the one trace of the whole pattern."""
        return tuple(event for run in self.runs for event in run.result.trace)

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """What tools returned in the subtask runs, in order."""
        return tuple(item for run in self.steps for item in run.result.evidence)
