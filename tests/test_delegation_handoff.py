"""Handoffs: the child takes over the conversation; its answer is the parent's, under one budget."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ownloop import Agent, Limits, RunStatus, StopReason, ToolRegistry, citations_observed
from ownloop.cli import main
from ownloop.contracts import ModelResponse, ToolCall
from ownloop.exceptions import ConfigurationError
from ownloop.policy import allow_writes, deny_tools
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolContext
from ownloop.tracing import JsonlSink
from tests.delegation_worker import RUN_ID, build, summary

ROOT = Path(__file__).resolve().parents[1]


class Refund(BaseModel):
    """A typed answer."""

    order: str
    refunded: bool


class Charge(BaseModel):
    """Another typed answer."""

    amount: int


def _tools(ledger: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(order: str) -> dict[str, str]:
        """Look an order up.

        Args:
            order: The order id.
        """
        ledger.append(f"lookup {order}")
        return {"id": f"ord-{order}", "state": "paid"}

    @registry.tool(effect="write")
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: The order id.
        """
        ledger.append(f"refund {order}")
        return f"refunded {order}"

    return registry


def _parent(tool: Any, steps: list[Any], **options: Any) -> Agent[Any, Any]:
    registry = ToolRegistry()
    registry.register(tool)
    return Agent(ScriptedModel(steps), registry, **options)


def _handoff(child: Agent[Any, Any], **options: Any) -> Any:
    options.setdefault("effect", "read")
    return child.as_tool(name="payments", description="Payments.", handoff=True, **options)


def test_the_child_answers_for_the_parent_and_sees_the_conversation() -> None:
    """The handoff's answer is the parent's output; the child saw the parent's turns and task."""
    child_model = ScriptedModel(
        [
            tool_call("lookup", order="A1"),
            tool_call("lookup", "l2", order="B2"),
            final("A1 is refunded."),
        ]
    )
    child = Agent(child_model, _tools([]), instructions="You are payments.")
    parent = _parent(
        _handoff(child), [tool_call("payments", "p1", task="refund A1")], instructions="Triage."
    )
    result = parent.run_sync("I want order A1 refunded.")
    assert (result.status, result.stop_reason) == (RunStatus.COMPLETED, StopReason.FINAL_OUTPUT)
    assert result.output == "A1 is refunded."
    assert "handed-off run" in result.detail
    first = child_model.requests[0].messages
    assert [m.role for m in first] == ["system", "user", "assistant", "tool", "user"]
    assert first[0].content == "You are payments."  # its own instructions, not the parent's
    assert first[1].content == "I want order A1 refunded."
    assert first[3].call_id == "p1"
    assert first[3].content.startswith("Handed off to payments")
    assert first[4].content == "refund A1"
    assert result.usage.steps == 1 + 3
    assert [e.id for e in result.evidence] == ["ord-A1", "ord-B2"]  # the child's, now the run's


def test_a_handoff_never_runs_beside_other_calls() -> None:
    """A handoff tool is never grouped with the turn's other reads."""
    tool = _handoff(Agent(ScriptedModel([])))
    assert tool.spec.parallel is False
    assert tool.spec.parameters["required"] == ["task"]


def test_the_calls_after_a_handoff_in_its_turn_never_run() -> None:
    """Once the child answered, the parent ends: a later call of the same turn does not run."""
    ledger: list[str] = []
    child = Agent(ScriptedModel([final("done by payments")]))
    registry = _tools(ledger)
    registry.register(_handoff(child))
    turn = ModelResponse(
        tool_calls=(
            ToolCall(id="p1", name="payments", arguments={"task": "go"}),
            ToolCall(id="l1", name="lookup", arguments={"order": "A1"}),
        )
    )
    result = Agent(ScriptedModel([turn]), registry).run_sync("go")
    assert (result.status, result.output, ledger) == (
        RunStatus.COMPLETED,
        "done by payments",
        [],
    )


def test_a_typed_parent_takes_the_typed_answer_of_its_type() -> None:
    """A parent and a handoff of the same output type: the parent's output is that value."""
    child = Agent(
        ScriptedModel([final('{"order": "A1", "refunded": true}')]),
        output_type=Refund,
        output_mode="prompted",
    )
    parent = _parent(
        _handoff(child),
        [tool_call("payments", task="refund A1")],
        output_type=Refund,
        output_mode="prompted",
    )
    result = parent.run_sync("go")
    assert result.output == Refund(order="A1", refunded=True)


def test_a_text_parent_takes_a_typed_answer_as_json() -> None:
    """A text parent's output is a typed handoff's answer as JSON text."""
    child = Agent(
        ScriptedModel([final('{"order": "A1", "refunded": true}')]),
        output_type=Refund,
        output_mode="prompted",
    )
    result = _parent(_handoff(child), [tool_call("payments", task="refund A1")]).run_sync("go")
    assert isinstance(result.output, str)
    assert json.loads(result.output) == {"order": "A1", "refunded": True}


def test_a_text_answer_is_bounded_by_the_parents_output_limit() -> None:
    """The parent's ``max_output_chars`` bounds a handed-off text answer, and says so."""
    child = Agent(ScriptedModel([final("x" * 300)]))
    parent = _parent(
        _handoff(child),
        [tool_call("payments", task="go")],
        limits=Limits(max_output_chars=100),
    )
    result = parent.run_sync("go")
    assert len(result.output) == 100
    (cut,) = [e for e in result.trace if e.kind == "output_truncated"]
    assert (cut.original_chars, cut.chars) == (300, 100)


def _twin_refund() -> type[BaseModel]:
    """Another class named ``Refund`` with the same fields: the same JSON schema."""

    class Refund(BaseModel):
        """A typed answer."""

        order: str
        refunded: bool

    return Refund


def test_an_answer_that_cannot_be_the_parents_is_refused_when_the_parent_is_built() -> None:
    """A typed parent refuses a text handoff, or one of another type, before any run."""
    text_child = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match=r"'payments' answers text.*Refund"):
        _parent(_handoff(text_child), [], output_type=Refund)
    other = Agent(ScriptedModel([]), output_type=Charge)
    with pytest.raises(ConfigurationError, match=r"answers Charge.*output_type is Refund"):
        _parent(_handoff(other), [], output_type=Refund)
    same_type = Agent(ScriptedModel([]), output_type=Refund, output_mode="tool")
    _parent(_handoff(same_type), [], output_type=Refund, output_mode="prompted")
    same_schema = Agent(ScriptedModel([]), output_type=_twin_refund(), output_mode="prompted")
    _parent(_handoff(same_schema), [], output_type=Refund, output_mode="prompted")
    plain = Agent(ScriptedModel([]), output_type=Charge).as_tool(
        name="charges", description="Charges.", effect="read"
    )
    _parent(plain, [], output_type=Refund)  # an agent tool's answer is an observation: any type


def test_a_looping_child_stops_at_the_parents_remaining_steps() -> None:
    """The child that took over still gets only the steps the parent has left."""
    looping = [tool_call("lookup", f"c{n}", order=f"A{n}") for n in range(20)]
    child = Agent(ScriptedModel(looping), _tools([]), limits=Limits(max_steps=20))
    parent = _parent(
        _handoff(child, on_stop="end"),
        [tool_call("payments", task="loop")],
        limits=Limits(max_steps=4),
    )
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_STEPS)
    assert result.usage.steps == 4  # one of the parent's, three of the child's


def test_a_stopped_handoff_is_an_observation_by_default() -> None:
    """With ``on_stop="observe"`` a handoff that stopped tells the parent, which answers itself."""
    looping = [tool_call("lookup", f"c{n}", order=f"A{n}") for n in range(3)]
    child = Agent(ScriptedModel(looping), _tools([]))
    parent = _parent(
        _handoff(child, limits=Limits(max_steps=2)),
        [tool_call("payments", task="loop"), final("I will help myself")],
    )
    result = parent.run_sync("go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "I will help myself")


def test_the_parents_policy_bounds_the_child_that_took_over() -> None:
    """A write the parent's policy denies is denied in the handoff, whatever the child allows."""
    ledger: list[str] = []
    child = Agent(
        ScriptedModel([tool_call("refund", order="A1")]),
        _tools(ledger),
        policy=allow_writes("refund"),
    )
    parent = _parent(
        _handoff(child, effect="write", on_stop="end"),
        [tool_call("payments", task="refund A1")],
        policy=allow_writes("payments") & deny_tools("refund"),
    )
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_DENIED)
    assert ledger == []


def test_the_parents_validators_judge_the_handed_off_answer() -> None:
    """A handoff's answer passes the parent's completion checks, with the child's evidence."""
    cited = Agent(
        ScriptedModel([tool_call("lookup", order="A1"), final("paid [ord-A1]")]), _tools([])
    )
    parent = _parent(
        _handoff(cited), [tool_call("payments", task="check")], validators=[citations_observed()]
    )
    assert parent.run_sync("go").status is RunStatus.COMPLETED
    invented = Agent(ScriptedModel([final("paid [ord-Z9]")]))
    parent = _parent(
        _handoff(invented), [tool_call("payments", task="check")], validators=[citations_observed()]
    )
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (
        RunStatus.FAILED,
        StopReason.COMPLETION_REJECTED,
    )
    assert "ord-Z9" in result.detail


def test_a_parents_unknown_write_blocks_the_handed_off_answer() -> None:
    """A write of the parent whose effect is unknown leaves the run unresolved, not completed."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: The order id.
        """
        raise TimeoutError("the carrier did not answer")

    registry.register(_handoff(Agent(ScriptedModel([final("all good")]))))
    parent = Agent(
        ScriptedModel([tool_call("ship", order="A1"), tool_call("payments", task="go")]),
        registry,
        policy=allow_writes("ship"),
    )
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (
        RunStatus.UNRESOLVED,
        StopReason.UNRESOLVED_EFFECT,
    )
    assert "the handed-off answer is blocked" in result.detail


def test_a_finished_handoff_is_replayed_as_a_handoff(tmp_path: Path) -> None:
    """Calling a finished handoff again answers from the store, still as a handoff."""

    async def go() -> None:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            model = ScriptedModel([final("answered")])
            tool = _handoff(Agent(model, store=store))
            context = ToolContext(run_id="top", call_id="c1", tool="payments")
            first = await tool.invoke({"task": "go"}, context)
            again = await tool.invoke({"task": "go"}, context)
            assert (first.handoff, again.handoff) == (True, True)
            assert again.result.output == "answered"
            assert len(model.requests) == 1

    asyncio.run(go())


def _run(database: Path, ledger: Path, phase: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with SqliteRunStore(database) as store:
            parent = build(store, ledger, phase, handoff=True)
            if phase == "resume":
                return summary(await parent.resume(RUN_ID))
            return summary(await parent.run("refund the customer", run_id=RUN_ID))

    return asyncio.run(go())


def test_a_handoffs_write_pauses_the_parent_and_resumes_once_in_another_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pause on the handoff's write, `ownloop approve`, resume elsewhere: the write runs once."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    paused = _run(database, ledger, "start")
    assert (paused["status"], paused["stop_reason"]) == ("paused", "approval_required")
    assert "delegated: payments call p1 -> refund call r1" in paused["reasons"][0]
    assert not ledger.exists()
    assert main(["approve", RUN_ID, paused["requests"][0], "--db", str(database)]) == 0
    capsys.readouterr()
    worker = ["-m", "tests.delegation_worker", str(database), str(ledger), "resume", "handoff"]
    resumed = subprocess.run(
        [sys.executable, *worker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    done = json.loads(resumed.stdout)
    assert (done["status"], done["output"]) == ("completed", "refunded A1")
    assert ledger.read_text().splitlines() == ["refund A1"]


def test_an_approved_handoff_resumed_in_process_runs_its_write_once(tmp_path: Path) -> None:
    """The same pause, decided through the store and resumed here: one write, the child's answer."""
    database, ledger = tmp_path / "runs.db", tmp_path / "ledger"
    paused = _run(database, ledger, "start")
    assert main(["approve", RUN_ID, paused["requests"][0], "--db", str(database)]) == 0
    done = _run(database, ledger, "resume")
    assert (done["status"], done["stop_reason"], done["output"]) == (
        "completed",
        "final_output",
        "refunded A1",
    )
    assert ledger.read_text().splitlines() == ["refund A1"]


def test_trace_show_nests_the_handoffs_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The child's events reach the parent's sink; `trace show` indents its run one level."""
    path = tmp_path / "trace.jsonl"
    child = Agent(ScriptedModel([tool_call("lookup", order="A1"), final("paid")]), _tools([]))
    with JsonlSink(path) as sink:
        _parent(
            _handoff(child), [tool_call("payments", task="check")], trace_sinks=[sink]
        ).run_sync("go", run_id="top")
    assert main(["trace", "show", str(path)]) == 0
    parent, nested = capsys.readouterr().out.split("\n\n")[:2]
    assert "top" in parent.splitlines()[0]
    assert "top/payments/call#1" in nested
    assert all(line.startswith("    ") for line in nested.splitlines() if line)


def test_a_handoff_that_could_not_start_ends_the_parent_with_the_budget_it_lacked() -> None:
    """With ``on_stop="end"``, a handoff with no model attempts left ends the parent naming that."""
    child_model = ScriptedModel([])
    parent = _parent(
        _handoff(Agent(child_model), on_stop="end"),
        [tool_call("payments", task="go")],
        limits=Limits(max_model_attempts=1),
    )
    result = parent.run_sync("go")
    assert (result.status, result.stop_reason) == (
        RunStatus.STOPPED,
        StopReason.MAX_MODEL_ATTEMPTS,
    )
    assert child_model.requests == []
