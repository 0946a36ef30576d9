"""A research agent with tools: how many turns it takes depends on the question, not the code.

The seed's "research agent", on ownloop: ``city_population`` and ``city_gdp`` are reads, the
arithmetic goes to ownloop's ``calculate`` (it parses, and never calls eval), and the run is
bounded by `Limits`. "How many people live in Nanjing?" ends in two turns; comparing two cities'
GDP per person takes more. Offline, a stand-in model decides from what it has seen; with
``OPENAI_BASE_URL`` (or ``OPENAI_API_KEY``) set, that server does::

    python examples/population_research.py
"""

from __future__ import annotations

import os
import re

from ownloop import Agent, Limits, RunResult, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse, ToolMessage, UserMessage
from ownloop.models import OpenAIChatModel
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.tools import calculate

CITIES = {
    "Hangzhou": {"population": 1252.0, "gdp": 20059.0},
    "Nanjing": {"population": 954.0, "gdp": 17421.0},
    "Suzhou": {"population": 1296.0, "gdp": 24653.0},
}
"""Resident population (10,000 people) and GDP (100 million yuan)."""

INSTRUCTIONS = (
    "You are a data research assistant. Every number comes from a tool, never from memory; every "
    "calculation goes to the calculate tool. When you know enough, answer and say which lookups "
    "the answer rests on."
)


def build_registry() -> ToolRegistry:
    """Three independent reads: population, GDP and arithmetic."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def city_population(city: str) -> str:
        """Look up a city's resident population, in units of 10,000 people.

        Args:
            city: The city's name, such as Hangzhou.
        """
        found = CITIES.get(city)
        return f"{city}: {found['population']:.0f} x 10,000 people" if found else f"no data: {city}"

    @registry.tool(effect="read")
    def city_gdp(city: str) -> str:
        """Look up a city's GDP, in units of 100 million yuan.

        Args:
            city: The city's name.
        """
        found = CITIES.get(city)
        return f"{city}: GDP {found['gdp']:.0f} x 100 million yuan" if found else f"no data: {city}"

    registry.add(calculate, effect="read")
    return registry


def stand_in(request: ModelRequest) -> ModelResponse:
    """The offline model: look up what the question names, compute, then answer."""
    question = next(m.content for m in request.messages if isinstance(m, UserMessage))
    cities = [city for city in CITIES if city in question]
    observed = [m for m in request.messages if isinstance(m, ToolMessage)]
    wants_gdp = "GDP" in question
    lookups = [("city_population", city) for city in cities]
    lookups += [("city_gdp", city) for city in cities] if wants_gdp else []
    if len(observed) < len(lookups):
        name, city = lookups[len(observed)]
        return tool_call(name, city=city)
    numbers = [float(n) for m in observed for n in re.findall(r"(\d+) x", m.content)]
    if not wants_gdp:
        return final(f"{observed[0].content} (from city_population).")
    half = len(cities)
    per_person = [numbers[half + i] / numbers[i] for i in range(half)]
    richer = per_person.index(max(per_person))
    poorer = 1 - richer
    if len(observed) == len(lookups):
        gdp, people = numbers[half:], numbers[:half]
        expression = (
            f"({gdp[richer]} / {people[richer]}) / ({gdp[poorer]} / {people[poorer]}) * 100 - 100"
        )
        return tool_call("calculate", expression=expression)
    percent = float(observed[-1].content)
    return final(
        f"{cities[richer]} has the higher GDP per person, {percent:.1f}% above "
        f"{cities[poorer]} (from city_population, city_gdp and calculate)."
    )


def model() -> OpenAIChatModel | FunctionModel:
    """The server in OPENAI_BASE_URL (or OpenAI with OPENAI_API_KEY), else the stand-in."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return OpenAIChatModel.from_env()
    return FunctionModel(stand_in, model_name="research-stand-in")


def research(question: str) -> RunResult:
    """Answer one question with the tools, within eight turns."""
    agent = Agent(model(), build_registry(), instructions=INSTRUCTIONS, limits=Limits(max_steps=8))
    return agent.run_sync(question)


def main() -> None:
    """Ask an easy question and a harder one; print how many turns and tool calls each took."""
    for question in (
        "How many people live in Nanjing?",
        "Which has the higher GDP per person, Hangzhou or Nanjing, and by how many percent?",
    ):
        result = research(question)
        print(f"question: {question}")
        print(result)
        print(f"turns: {result.usage.steps}, tool calls: {result.usage.tool_calls}\n")


if __name__ == "__main__":
    main()
