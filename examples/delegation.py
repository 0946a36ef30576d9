"""Plan and execute on agents as tools: a coordinator delegates each subtask to an executor agent.

The seed's plan-and-execute, rebuilt with ``Agent.as_tool``: the coordinator's model plans by
calling the ``execute`` tool once per subtask (three reads, run in parallel), and each call is a
bounded run of the executor agent. The executors draw on the coordinator's budgets (they split
what it has left), act for its actor under its policy, and their events land in its trace. The
coordinator then answers from what they returned. Offline, stand-in models coordinate and
execute; with ``OPENAI_BASE_URL`` (or ``OPENAI_API_KEY``) set, that server does::

    python examples/delegation.py
"""

from __future__ import annotations

import os
import re

from ownloop import Agent, Limits, ToolRegistry
from ownloop.agent import AgentModel
from ownloop.contracts import ModelRequest, ModelResponse, ToolCall, ToolMessage, UserMessage
from ownloop.models import OpenAIChatModel
from ownloop.testing import FunctionModel, final, tool_call

POPULATION = {"Hangzhou": 1252.0, "Nanjing": 954.0, "Suzhou": 1296.0}
"""Resident population, in units of 10,000 people."""

GOAL = "Find the populations of Hangzhou, Nanjing and Suzhou, and say which is largest."
TOTAL = Limits(max_steps=30, max_model_attempts=40, max_total_tokens=100_000, deadline_s=300)
STEP = Limits(max_steps=4, max_tool_calls=2, max_total_tokens=10_000, deadline_s=60)
"""Caps for one executor run, below what the coordinator has left."""


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


def coordinator_stand_in(request: ModelRequest) -> ModelResponse:
    """The offline coordinator: one subtask per city, then the answer from the executors."""
    answers = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    if not answers:
        calls = tuple(
            ToolCall(
                id=f"plan-{n}",
                name="execute",
                arguments={"task": f"Look up the population of {city}"},
            )
            for n, city in enumerate(POPULATION, 1)
        )
        return ModelResponse(tool_calls=calls)
    found = dict(re.findall(r"The population of (\w+) is (\d+)", "\n".join(answers)))
    largest = max(found, key=lambda city: int(found[city]))
    listing = ", ".join(f"{city} {people}" for city, people in found.items())
    return final(f"{largest} is the largest ({listing}, in 10,000 people).")


def executor_stand_in(request: ModelRequest) -> ModelResponse:
    """The offline executor: one lookup for its subtask, then the number it found."""
    task = next(m.content for m in request.messages if isinstance(m, UserMessage))
    seen = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    city = next((city for city in POPULATION if city in task), None)
    if city is None:
        return final("Nothing to look up for this subtask.")
    if not seen:
        return tool_call("lookup_population", city=city)
    return final(f"The population of {city} is {seen[0]} (10,000 people).")


def _real_model() -> OpenAIChatModel | None:
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return OpenAIChatModel.from_env()
    return None


def build_coordinator() -> Agent[None, str]:
    """The coordinator, with the executor agent registered as its ``execute`` tool."""
    executing: AgentModel = _real_model() or FunctionModel(executor_stand_in, model_name="executor")
    coordinating: AgentModel = _real_model() or FunctionModel(
        coordinator_stand_in, model_name="coordinator"
    )
    executor = Agent(executing, build_registry())
    tools = ToolRegistry()
    tools.register(
        executor.as_tool(
            name="execute",
            description="Carry out one concrete subtask and report what was found.",
            effect="read",
            limits=STEP,
        )
    )
    return Agent(coordinating, tools, limits=TOTAL)


def main() -> None:
    """Print each delegated subtask's answer, the coordinator's answer and the shared usage."""
    result = build_coordinator().run_sync(GOAL, run_id="coordinator-1")
    for message in result.messages:
        if isinstance(message, ToolMessage):
            print(f"  executed: {message.content}")
    print(f"{result.status.value} ({result.stop_reason.value}): {result.output}")
    usage = result.usage
    print(f"one budget: {usage.steps} turns, {usage.tool_calls} tool calls (executors included)")


if __name__ == "__main__":
    main()
