"""A segment of a run on a durable engine: from its start, or from its last pause, to its end.

Every engine runs a run as segments: the first starts the run; each later one resumes it after
an approval, from the stored snapshot, the decisions submitted for it and its write journal. This
module builds a segment's run state the same way on every engine (as recorded steps, so a replay
rebuilds the very same state) and summarises how the segment ended.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ownloop.agent import Agent
from ownloop.contracts import Actor, Approval, JournalEntry, RunResult, RunSnapshot
from ownloop.engines._driver import EngineDriver, Json, nothing
from ownloop.exceptions import ConfigurationError
from ownloop.loop import run_loop
from ownloop.store import RunStore
from ownloop.store._rules import usable_decisions

__all__ = ["build_agent", "load_resume", "run_segment", "start_record", "summary"]


def build_agent(agents: Mapping[str, Callable[[], Agent[Any, Any]]], name: str) -> Agent[Any, Any]:
    """Build the named agent with its factory, as every engine's runner does for a segment.

    Args:
        agents: Agent factories by name.
        name: The agent a run names.

    Returns:
        A new agent from that factory.

    Raises:
        ConfigurationError: If no factory has that name (the message lists the known ones), or
            the agent has agent tools (``Agent.as_tool``), which no engine runs yet.
    """
    factory = agents.get(name)
    if factory is None:
        raise ConfigurationError(f"no agent named {name!r} (known: {', '.join(sorted(agents))})")
    agent = factory()
    delegating = [tool for tool in agent.tools.names() if _delegates(agent, tool)]
    if delegating:
        raise ConfigurationError(
            f"agent {name!r} has agent tools ({', '.join(delegating)}): a delegated run is not "
            "run as engine steps yet; run this agent with Agent.run and a store (its children "
            "are journaled there), or give the engine agents without Agent.as_tool tools"
        )
    return agent


def _delegates(agent: Agent[Any, Any], name: str) -> bool:
    tool = agent.tools.get(name)
    return tool is not None and tool.delegates


def start_record(task: str, actor: Actor | None) -> Json:
    """Return the first segment's input: the task and who the run acts for, as JSON.

    Args:
        task: What the agent should do.
        actor: Who the run acts for.

    Returns:
        ``{"kind": "start", "task": ..., "actor": ...}``.
    """
    return {
        "kind": "start",
        "task": task,
        "actor": None if actor is None else actor.model_dump(mode="json"),
    }


def summary(run_id: str, result: RunResult | None) -> Json:
    """Return how a segment ended: status, stop reason and the requests a pause waits for.

    Args:
        run_id: The run.
        result: Its result (``None`` when the run is not stored).

    Returns:
        The summary, a JSON object.
    """
    if result is None:
        return {"run_id": run_id, "status": None}
    return {
        "run_id": run_id,
        "status": result.status.value,
        "stop_reason": result.stop_reason.value,
        "requests": [request.id for request in result.approval_requests],
    }


async def load_resume(store: RunStore, run_id: str) -> Json:
    """Read what a resumed segment starts from: snapshot, version, new decisions, journal.

    Of the decisions submitted for a request (by its id or its digest), the first stands;
    decisions the snapshot already applied, or that decide nothing the run waits for, are not
    offered again (a decision is consumed once; see ``ownloop.store._rules.usable_decisions``).

    Args:
        store: The run store.
        run_id: The run.

    Returns:
        The JSON value the ``load`` step records (``{"snapshot": None}`` for an unknown run).
    """
    stored = await store.get(run_id)
    if stored is None:
        return {"snapshot": None}
    snapshot = stored.snapshot
    approvals = usable_decisions(snapshot, await store.submitted_approvals(run_id))
    return {
        "snapshot": snapshot.model_dump(mode="json"),
        "version": stored.version,
        "approvals": [approval.model_dump(mode="json") for approval in approvals],
        "journal": [e.model_dump(mode="json") for e in await store.journal(run_id)],
    }


async def run_segment(
    agent: Agent[Any, Any], driver: EngineDriver, store: RunStore, run_id: str, start: Json
) -> Json:
    """Run one segment of a run with ``driver``: a new run, or a resume after a pause.

    Args:
        agent: The run's agent.
        driver: The engine's driver (its clock is the run's clock).
        store: The run store.
        run_id: The run.
        start: ``{"kind": "start", "task": ..., "actor": ...}`` or ``{"kind": "resume"}``
            (with ``"accept_changes": true``: continue under a changed configuration).

    Returns:
        The segment's `summary`.
    """
    clock = driver.clock
    config = dataclasses.replace(agent.loop_config, clock=clock, durable=True)
    if start.get("kind") == "start":
        await driver.step("begin", nothing)
        actor = start.get("actor")
        state = agent.new_state(
            str(start["task"]),
            actor=None if actor is None else Actor.model_validate(actor),
            run_id=run_id,
            clock=clock,
        )
    else:
        loaded: Json = await driver.step("load", lambda: load_resume(store, run_id))
        if loaded["snapshot"] is None:
            return summary(run_id, None)
        snapshot = RunSnapshot.model_validate(loaded["snapshot"])
        if snapshot.state == "finished":  # a late or duplicate segment: nothing to do
            return summary(run_id, snapshot.result)
        driver.version = int(loaded["version"])
        state = agent.restored_state(
            snapshot,
            [Approval.model_validate(item) for item in loaded["approvals"]],
            [JournalEntry.model_validate(item) for item in loaded["journal"]],
            clock=clock,
            accept_changes=start.get("accept_changes") is True,
        )
    return summary(run_id, await driver.drive(run_loop(config, state)))
