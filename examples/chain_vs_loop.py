"""The same question written as a chain and as a loop: who decides the steps?

The seed's contrast, on ownloop. In the **chain**, the code fixes four steps and their order; the
model only fills two of them (read the cities out of the question, phrase the answer), each a
one-turn bounded run. In the **loop**, the model decides at run time which tools to call and how
often; ownloop bounds it (`Limits`), checks every call and records why it stopped. Offline, stand-in
models play both parts; with ``OPENAI_BASE_URL`` (or ``OPENAI_API_KEY``) set, that server does::

    python examples/chain_vs_loop.py
"""

from __future__ import annotations

import os
import re

from ownloop import Agent, Limits, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse, ToolMessage, UserMessage
from ownloop.models import OpenAIChatModel
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.tools import calculate

POPULATION = {"Hangzhou": 1252.0, "Nanjing": 954.0, "Suzhou": 1296.0, "Hefei": 985.0}
"""Resident population, in units of 10,000 people."""

QUESTION = "How many more people live in Hangzhou than in Nanjing, in percent?"


def _real_model() -> OpenAIChatModel | None:
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return OpenAIChatModel.from_env()
    return None


# ----------------------------------------------------------------------------- the chain


def chain_stand_in(request: ModelRequest) -> ModelResponse:
    """The offline model of the chain's two model steps."""
    prompt = next(m.content for m in request.messages if isinstance(m, UserMessage))
    if prompt.startswith("Name the two cities"):
        return final(", ".join(city for city in POPULATION if city in prompt))
    numbers = re.findall(r"[\d.]+", prompt.split("Facts:", 1)[1])
    return final(f"Hangzhou has {float(numbers[2]):.1f}% more residents than Nanjing.")


def ask(prompt: str) -> str:
    """One model turn, bounded: no tools, one step."""
    model = _real_model() or FunctionModel(chain_stand_in, model_name="chain-stand-in")
    result = Agent(model, limits=Limits(max_steps=1)).run_sync(prompt)
    return result.output or ""


def chain(question: str) -> str:
    """Four steps in an order the code fixes; the model fills steps 1 and 4."""
    first, second = (city.strip() for city in ask(f"Name the two cities in: {question}").split(","))
    people_a, people_b = POPULATION[first], POPULATION[second]  # step 2: a lookup in code
    percent = (people_a - people_b) / people_b * 100  # step 3: arithmetic in code
    facts = f"{first} {people_a}, {second} {people_b}, difference {percent:.2f}%"
    return ask(f"Answer '{question}' in one sentence. Facts: {facts}")


# ----------------------------------------------------------------------------- the loop


def build_registry() -> ToolRegistry:
    """The loop's tools: a population lookup and arithmetic, both reads."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup_population(city: str) -> str:
        """Look up a city's resident population, in units of 10,000 people.

        Args:
            city: The city's name, such as Hangzhou.
        """
        found = POPULATION.get(city)
        return f"{found}" if found is not None else f"no data for {city}"

    registry.add(calculate, effect="read")
    return registry


def loop_stand_in(request: ModelRequest) -> ModelResponse:
    """The offline model of the loop: it picks the next tool from what it has seen."""
    seen = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    if len(seen) < 2:
        return tool_call("lookup_population", city=("Hangzhou", "Nanjing")[len(seen)])
    if len(seen) == 2:
        return tool_call("calculate", expression=f"({seen[0]} - {seen[1]}) / {seen[1]} * 100")
    return final(f"Hangzhou has {float(seen[2]):.1f}% more residents than Nanjing.")


def loop(question: str) -> tuple[str, int]:
    """The model decides the steps; ownloop bounds and checks them. Returns answer and turns."""
    model = _real_model() or FunctionModel(loop_stand_in, model_name="loop-stand-in")
    agent = Agent(model, build_registry(), limits=Limits(max_steps=8))
    result = agent.run_sync(question)
    return result.output or str(result), result.usage.steps


def main() -> None:
    """Answer the question both ways."""
    print(f"question: {QUESTION}")
    print(f"chain (4 steps, fixed by the code): {chain(QUESTION)}")
    answer, turns = loop(QUESTION)
    print(f"loop ({turns} turns, chosen by the model): {answer}")


if __name__ == "__main__":
    main()
