"""The planner's and reviewer's answers as validated data, and the prompts that ask for them.

A plan is JSON naming 2 to N concrete subtasks; a review is JSON saying continue, finish (with the
answer) or revise (with new remaining subtasks). Models like to wrap JSON in code fences or write
a bare list, so parsing tolerates both; anything else is refused with a reason the model can act
on. Nothing here calls a model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "MAX_PLAN_SUBTASKS",
    "PLANNER_INSTRUCTIONS",
    "REVIEWER_INSTRUCTIONS",
    "Plan",
    "Review",
    "ReviewRequest",
    "check_revision",
    "parse_plan",
    "parse_review",
    "plan_prompt",
    "review_prompt",
    "subtask_prompt",
]

MAX_PLAN_SUBTASKS = 20
"""The longest plan accepted, whatever ``max_subtasks`` says."""

Subtask = Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=500)]
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")

PLANNER_INSTRUCTIONS = (
    "You plan before anyone acts. Split the goal into {low} to {high} subtasks, in order. Each "
    "subtask is one concrete instruction that can be carried out on its own (never 'analyze the "
    'problem\'). Answer with JSON only: {{"subtasks": ["first subtask", "second subtask"]}}.'
)
REVIEWER_INSTRUCTIONS = (
    "You review progress towards a goal after each step. Answer with JSON only, one of: "
    '{"action": "finish", "answer": "..."} when the results so far achieve the goal (the answer '
    'uses only those results); {"action": "revise", "subtasks": ["..."]} to replace the remaining '
    'subtasks when the results show the plan is wrong; {"action": "continue"} to go on as planned.'
)


class Plan(BaseModel):
    """A plan: concrete subtasks, in order.

    Attributes:
        subtasks: 2 to `MAX_PLAN_SUBTASKS` distinct instructions, each 3-500 characters.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    subtasks: tuple[Subtask, ...] = Field(min_length=2, max_length=MAX_PLAN_SUBTASKS)

    @field_validator("subtasks")
    @classmethod
    def _distinct(cls, subtasks: tuple[str, ...]) -> tuple[str, ...]:
        if len({subtask.casefold() for subtask in subtasks}) != len(subtasks):
            raise ValueError("subtasks repeat; each must be a different instruction")
        return subtasks


class Review(BaseModel):
    """The verdict after a step.

    Attributes:
        action: ``continue`` with the plan, ``finish`` with an answer, or ``revise`` it.
        answer: The final answer (``finish`` only).
        subtasks: The new remaining subtasks (``revise`` only; at least one).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["continue", "finish", "revise"]
    answer: str | None = Field(default=None, min_length=1)
    subtasks: tuple[Subtask, ...] = Field(default=(), max_length=MAX_PLAN_SUBTASKS)

    @model_validator(mode="after")
    def _fits_action(self) -> Review:
        if (self.action == "finish") != (self.answer is not None):
            raise ValueError("'finish' (and only 'finish') carries an answer")
        if (self.action == "revise") != bool(self.subtasks):
            raise ValueError("'revise' (and only 'revise') carries the new subtasks")
        return self


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    """What a reviewer decides on.

    Attributes:
        goal: The goal.
        done: ``(subtask, output)`` of every finished step, in order.
        remaining: The subtasks still planned.
        allowance: How many more subtasks may run (a revision may not plan more).
    """

    goal: str
    done: tuple[tuple[str, str], ...]
    remaining: tuple[str, ...]
    allowance: int


def _json(text: str) -> Any:
    return json.loads(_FENCE.sub("", text.strip()))


def _problem(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}"[:300] if where else str(first["msg"])[:300]
    return str(error)[:300]


def parse_plan(text: str, max_subtasks: int) -> Plan | str:
    """Read a planner's answer.

    Args:
        text: The answer: ``{"subtasks": [...]}`` or a bare list, optionally in a code fence.
        max_subtasks: The most subtasks allowed.

    Returns:
        The plan, or what is wrong with it, phrased for the planner.
    """
    try:
        data = _json(text)
        plan = Plan.model_validate({"subtasks": data} if isinstance(data, list) else data)
    except (ValueError, TypeError) as error:  # JSONDecodeError and ValidationError included
        return f"not a valid plan ({_problem(error)})"
    if len(plan.subtasks) > max_subtasks:
        return f"the plan has {len(plan.subtasks)} subtasks; at most {max_subtasks} are allowed"
    return plan


def parse_review(text: str, allowance: int, finished: Sequence[str] = ()) -> Review | str:
    """Read a reviewer's answer.

    Args:
        text: The answer, a JSON object, optionally in a code fence.
        allowance: How many subtasks a revision may plan.
        finished: The subtasks already done (a revision may not repeat one).

    Returns:
        The review, or what is wrong with it, phrased for the reviewer.
    """
    try:
        review = Review.model_validate(_json(text))
    except (ValueError, TypeError) as error:
        return f"not a valid review ({_problem(error)})"
    return check_revision(review, allowance, finished)


def check_revision(review: Review, allowance: int, finished: Sequence[str] = ()) -> Review | str:
    """Refuse a revision that plans too much, or whose whole plan would not be a valid `Plan`.

    Args:
        review: The review.
        allowance: How many more subtasks may run.
        finished: The subtasks already done (a revision may not repeat one).

    Returns:
        The review, or why it is refused.
    """
    if review.action != "revise":
        return review
    if len(review.subtasks) > allowance:
        return f"the revision plans {len(review.subtasks)} subtasks; only {allowance} more may run"
    try:
        Plan(subtasks=(*finished, *review.subtasks))
    except ValidationError as error:
        return f"the revised plan is not valid ({_problem(error)})"
    return review


def _results(done: Sequence[tuple[str, str]], max_chars: int) -> str:
    if not done:
        return "(none yet)"
    each = max(max_chars // len(done), 80)
    lines = [f"{n}. {task}\n   result: {output[:each]}" for n, (task, output) in enumerate(done, 1)]
    return "\n".join(lines)


def plan_prompt(goal: str) -> str:
    """Return the planner's task.

    Args:
        goal: The goal.
    """
    return f"Goal: {goal}\n\nWrite the plan."


def review_prompt(request: ReviewRequest, max_chars: int) -> str:
    """Return the reviewer's task: the goal, each result so far, and what remains.

    Args:
        request: What to review.
        max_chars: A bound on the results' text.
    """
    remaining = "\n".join(f"- {task}" for task in request.remaining) or "(none)"
    return (
        f"Goal: {request.goal}\n\nFinished subtasks and their results:\n"
        f"{_results(request.done, max_chars)}\n\nRemaining subtasks:\n{remaining}\n\n"
        f"A revision may plan at most {request.allowance} subtasks."
    )


def subtask_prompt(
    goal: str, done: Sequence[tuple[str, str]], subtask: str, position: str, max_chars: int
) -> str:
    """Return an executor's task: the goal, earlier results, and the one subtask to do.

    Args:
        goal: The goal.
        done: ``(subtask, output)`` of the steps before.
        subtask: This step's subtask.
        position: Where it stands, for example ``"2 of 4"``.
        max_chars: The longest task the executor accepts.
    """
    fixed = len(goal) + len(subtask) + 200
    return (
        f"Overall goal: {goal}\n\nEarlier results:\n{_results(done, max(max_chars - fixed, 0))}"
        f"\n\nYour subtask ({position}): {subtask}\n"
        "Do only this subtask and answer with its result."
    )[:max_chars]
