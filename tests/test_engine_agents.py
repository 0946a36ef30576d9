"""What the engines' runners accept as an agent, checked when a run is enqueued or a step runs."""

from __future__ import annotations

import pytest

from ownloop import Agent, ToolRegistry
from ownloop.engines import build_agent
from ownloop.exceptions import ConfigurationError
from ownloop.testing import ScriptedModel, final


def _plain() -> Agent:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    return Agent(ScriptedModel([final("done")]), tools=registry)


def _delegating() -> Agent:
    child = Agent(ScriptedModel([final("refunded")]))
    registry = ToolRegistry()
    registry.register(child.as_tool(name="payments", description="Refunds.", effect="write"))
    return Agent(ScriptedModel([final("done")]), tools=registry)


def test_an_engine_builds_the_named_agent_with_its_factory() -> None:
    """build_agent returns a new agent from the named factory."""
    agent = build_agent({"plain": _plain}, "plain")
    assert agent.tools.names() == ("lookup",)
    assert build_agent({"plain": _plain}, "plain") is not agent


def test_an_unknown_agent_name_lists_the_known_ones() -> None:
    """A run naming no known agent is refused with the names there are."""
    with pytest.raises(ConfigurationError, match=r"no agent named 'other' \(known: a, plain\)"):
        build_agent({"plain": _plain, "a": _plain}, "other")


def test_an_agent_with_agent_tools_is_refused_with_the_fix_named() -> None:
    """Delegation does not run as engine steps yet: the agent is refused, never half-run."""
    with pytest.raises(ConfigurationError) as raised:
        build_agent({"triage": _delegating}, "triage")
    message = str(raised.value)
    assert "agent 'triage' has agent tools (payments)" in message
    assert "Agent.run and a store" in message
