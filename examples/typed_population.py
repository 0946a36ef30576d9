"""A typed answer: compare two cities' populations and get a `Comparison`, not prose.

The model looks the numbers up and computes with tools, then answers under a strict JSON schema;
``result.output`` is a `Comparison` instance, checked by Pydantic (a negative difference is sent
back to the model with the error). Runs offline with a scripted model::

    python examples/typed_population.py

or against a real endpoint (``OPENAI_API_KEY``, ``OPENAI_MODEL``, ``OPENAI_BASE_URL``)::

    python examples/typed_population.py --live
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field, field_validator

from ownloop import Agent, Limits, RunResult, ToolRegistry
from ownloop.models import AgentModel, OpenAIChatModel
from ownloop.testing import ScriptedModel, final, tool_call

POPULATIONS = {"Hangzhou": 12_520_000, "Nanjing": 9_540_000, "Suzhou": 12_960_000}


class Comparison(BaseModel):
    """How two populations compare."""

    larger: str = Field(description="The city with more residents.")
    difference: int = Field(description="Residents of the larger city minus the smaller's.")
    percent: float = Field(description="The difference as a percentage of the smaller city.")

    @field_validator("difference")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError("the difference is the larger minus the smaller: never negative")
        return value


def registry() -> ToolRegistry:
    """The lookup and the calculator."""
    tools = ToolRegistry()

    @tools.tool(effect="read")
    def lookup_population(city: str) -> int:
        """Return a city's resident population.

        Args:
            city: The city's English name, e.g. Hangzhou.
        """
        return POPULATIONS[city]

    @tools.tool(effect="read")
    def percent_of(part: int, whole: int) -> float:
        """Return ``part`` as a percentage of ``whole``, rounded to one decimal.

        Args:
            part: The part.
            whole: The whole.
        """
        return round(part / whole * 100, 1)

    return tools


def scripted() -> ScriptedModel:
    """A model that looks both cities up, computes, and answers (first with a sign error)."""
    return ScriptedModel(
        [
            tool_call("lookup_population", "p1", city="Hangzhou"),
            tool_call("lookup_population", "p2", city="Nanjing"),
            tool_call("percent_of", "c1", part=2_980_000, whole=9_540_000),
            final('{"larger": "Hangzhou", "difference": -2980000, "percent": 31.2}'),
            final('{"larger": "Hangzhou", "difference": 2980000, "percent": 31.2}'),
        ]
    )


def compare(model: AgentModel) -> RunResult[Comparison]:
    """Run the comparison and return the typed result."""
    agent = Agent(
        model,
        registry(),
        output_type=Comparison,
        limits=Limits(max_steps=8),
        instructions="Use the tools for every number; never answer from memory.",
    )
    return agent.run_sync("Compare the populations of Hangzhou and Nanjing.")


def main(argv: list[str]) -> int:
    """Print the comparison; ``--live`` uses the configured endpoint."""
    model: AgentModel = OpenAIChatModel.from_env() if "--live" in argv else scripted()
    result = compare(model)
    print(result.status.value, result.stop_reason.value)
    if result.output is not None:
        comparison = result.output  # a Comparison: typed attributes, not text
        print(f"{comparison.larger} is larger by {comparison.difference:,} ({comparison.percent}%)")
    return 0 if result.output is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
