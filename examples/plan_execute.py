"""Plan, then execute: write the whole plan first, run each step, review after each one.

The seed's plan-and-execute, on ownloop (`ownloop.patterns.plan_execute_sync`): a planner writes
2 to 5 concrete subtasks as JSON (validated, sent back once if it is not), each subtask is a
bounded `Agent` run, and after each one a reviewer continues, revises the rest of the plan, or
finishes early — here it finishes once the three cities are known, so the planned "compare" step
never runs. Every run draws on one shared `Limits` and lands in one result. Offline, stand-in
models plan, execute and review; with ``OPENAI_BASE_URL`` (or ``OPENAI_API_KEY``) set, that server
does::

    python examples/plan_execute.py
"""

from __future__ import annotations

import json
import os
import re

from ownloop import Agent, Limits, ToolRegistry
from ownloop.agent import AgentModel
from ownloop.contracts import ModelRequest, ModelResponse, ToolMessage, UserMessage
from ownloop.models import OpenAIChatModel
from ownloop.patterns import PlanExecuteResult, plan_execute_sync
from ownloop.testing import FunctionModel, final, tool_call

POPULATION = {"Hangzhou": 1252.0, "Nanjing": 954.0, "Suzhou": 1296.0}
"""Resident population, in units of 10,000 people."""

GOAL = "Find the populations of Hangzhou, Nanjing and Suzhou, and say which is largest."
TOTAL = Limits(max_steps=30, max_model_attempts=40, max_total_tokens=100_000, deadline_s=300)
STEP = Limits(
    max_steps=4,
    max_model_attempts=8,
    max_tool_calls=2,
    max_tool_attempts=4,
    max_total_tokens=10_000,
    deadline_s=60,
)
"""One subtask's budget: a subtask starts only while this still fits in what remains of TOTAL."""


def build_registry() -> ToolRegistry:
    """The executor's one tool, a read."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup_population(city: str) -> str:
        """Look up a city's resident population, in units of 10,000 people.

        Args:
            city: The city's name, such as Hangzhou.
        """
        found = POPULATION.get(city)
        return f"{found:.0f}" if found is not None else f"no data for {city}"

    return registry


def planner_stand_in(request: ModelRequest) -> ModelResponse:
    """The offline planner and reviewer: a plan first, then one review after each subtask."""
    prompt = "\n".join(m.content for m in request.messages if isinstance(m, UserMessage))
    if "Finished subtasks" not in prompt:
        subtasks = [f"Look up the population of {city}" for city in POPULATION]
        return final(json.dumps({"subtasks": [*subtasks, "Compare the three populations"]}))
    found = dict(re.findall(r"The population of (\w+) is (\d+)", prompt))
    if len(found) < len(POPULATION):
        return final(json.dumps({"action": "continue"}))
    largest = max(found, key=lambda city: int(found[city]))
    listing = ", ".join(f"{city} {people}" for city, people in found.items())
    answer = f"{largest} is the largest ({listing}, in 10,000 people)."
    return final(json.dumps({"action": "finish", "answer": answer}))


def executor_stand_in(request: ModelRequest) -> ModelResponse:
    """The offline executor: one lookup for its subtask, then the number it found."""
    task = next(m.content for m in request.messages if isinstance(m, UserMessage))
    subtask = task.split("Your subtask", 1)[-1]
    seen = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    city = next((city for city in POPULATION if f"population of {city}" in subtask), None)
    if city is None:
        return final("Nothing to look up for this subtask.")
    if not seen:
        return tool_call("lookup_population", city=city)
    return final(f"The population of {city} is {seen[0]} (10,000 people).")


def _real_model() -> OpenAIChatModel | None:
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return OpenAIChatModel.from_env()
    return None


def plan_and_execute(goal: str = GOAL) -> PlanExecuteResult:
    """Plan the goal, run each subtask, review after each; all under `TOTAL`."""
    planner: AgentModel = _real_model() or FunctionModel(planner_stand_in, model_name="planner")
    executing: AgentModel = _real_model() or FunctionModel(executor_stand_in, model_name="executor")
    executor = Agent(executing, build_registry(), limits=STEP)
    return plan_execute_sync(planner, executor, goal, limits=TOTAL, run_id="plan-1")


def main() -> None:
    """Print the plan, each run, and how the pattern ended."""
    result = plan_and_execute()
    print("plan:", "; ".join(subtask for subtask in result.plans[0].subtasks))
    for run in result.runs:
        if run.phase == "execute":
            print(f"  executed: {run.result.output}")
    print(f"{result.status.value} ({result.stop_reason.value}): {result.output}")


if __name__ == "__main__":
    main()
