"""Edges of the bounds: driver defaults, abandoned threads, compaction that would not shrink."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from ownloop import Agent, ContextPolicy, Limits
from ownloop.clock import SystemClock
from ownloop.contracts import ContextCompacted, ToolCall
from ownloop.exceptions import UnknownEffectError
from ownloop.loop import ReadRevision, Reconcile, Revision, ToolReturn
from ownloop.policy import allow_writes
from ownloop.runtime import Driver
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, ToolContext, ToolRegistry, call_in_thread
from ownloop.validators import citations_observed


def test_a_driver_without_revision_source_or_lookup_answers_none() -> None:
    """Asked directly, the driver reads no revision and settles nothing without callables."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def send(to: str) -> str:
        """Send.

        Args:
            to: Whom.
        """
        return "sent"

    validated = registry.validate(ToolCall(id="c1", name="send", arguments={"to": "x"}))
    assert not hasattr(validated, "code")
    driver = Driver(ScriptedModel([]), SystemClock())
    context = ToolContext(run_id="r", call_id="c1", tool="send")

    async def ask() -> tuple[Any, Any]:
        revision = await driver.perform(ReadRevision())
        settled = await driver.perform(Reconcile(validated, context))  # type: ignore[arg-type]
        return revision, settled

    revision, settled = asyncio.run(ask())
    assert revision == Revision(None)
    assert settled == ToolReturn(None)


def test_an_abandoned_thread_that_finishes_while_the_loop_runs_is_dropped() -> None:
    """A thread whose caller stopped waiting delivers nothing, and nothing waits for it."""
    finished = threading.Event()

    def slow() -> str:
        time.sleep(0.2)
        finished.set()
        return "late"

    async def run() -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(call_in_thread(slow), 0.01)
        await asyncio.sleep(0.4)  # the thread finishes while the loop still runs
        return finished.is_set()

    assert asyncio.run(run())


def test_a_failing_sync_call_raises_in_the_caller() -> None:
    """An exception raised in the thread is raised where the call is awaited."""

    def broken() -> None:
        raise ValueError("bad")

    async def run() -> str:
        try:
            await call_in_thread(broken)
        except ValueError as error:
            return str(error)
        return "no error"

    assert asyncio.run(run()) == "bad"


def test_a_compaction_that_would_not_shrink_the_request_is_skipped() -> None:
    """When the placeholder outweighs the turn it replaces, the conversation is kept."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def peek(size: int) -> str:
        """Return text of a size.

        Args:
            size: Characters.
        """
        return "x" * size

    model = ScriptedModel(
        [tool_call("peek", "c1", size=1), tool_call("peek", "c2", size=3_000), final("done")]
    )
    policy = ContextPolicy(max_request_tokens=256, keep_last_turns=1)
    result = Agent(model, registry, context=policy).run_sync("go")
    assert result.status == "completed", result.detail
    assert not [e for e in result.trace if isinstance(e, ContextCompacted)]
    assert len(model.requests[-1].messages) == len(model.requests[1].messages) + 2


def test_a_confirmed_write_of_a_tool_that_is_no_fact_source_is_no_evidence() -> None:
    """A write declared evidence=False stays out of the ledger even when confirmed."""
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], context: ToolContext) -> Confirmed:
        return Confirmed({"id": "N-1"})

    @registry.tool(effect="write", reconcile=lookup, evidence=False)
    def note(text: str) -> str:
        """Note.

        Args:
            text: What.
        """
        raise UnknownEffectError("lost")

    model = ScriptedModel([tool_call("note", text="t"), final("noted"), final("noted")])
    agent = Agent(
        model,
        registry,
        policy=allow_writes("note"),
        validators=[citations_observed()],
        limits=Limits(max_completion_rejections=0),
    )
    result = agent.run_sync("note")
    assert result.status == "completed", result.detail
    assert result.evidence == ()
