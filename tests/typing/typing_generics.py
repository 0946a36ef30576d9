"""Checked by ``mypy --strict`` (tests/test_typing.py), never run: the generics read as documented.

Each ``assert_type`` is a claim about what a user's type checker sees; a wrong claim fails the
suite. The lines marked ``type: ignore[...]`` must stay errors (``warn_unused_ignores`` is on under
``--strict``, so an ignore that stops being needed fails too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_type

from pydantic import BaseModel
from temporalio.client import Client

from ownloop import Agent, Limits, RunContext, RunResult, ToolContext, ToolRegistry
from ownloop.dbos import DbosRunner
from ownloop.patterns import plan_execute_sync
from ownloop.store import MemoryRunStore, PostgresRunStore
from ownloop.streaming import RunStream
from ownloop.temporal import TemporalRunner
from ownloop.testing import ScriptedModel


class Invoice(BaseModel):
    """An answer type."""

    number: str
    total: int


@dataclass
class Deps:
    """The application's objects."""

    tenant: str


model = ScriptedModel([])

text_agent = Agent(model)
assert_type(text_agent, Agent[None, str])
assert_type(text_agent.run_sync("task"), RunResult[str])
assert_type(text_agent.run_sync("task").output, str | None)

typed = Agent(model, output_type=Invoice)
assert_type(typed, Agent[None, Invoice])
result = typed.run_sync("task")
assert_type(result, RunResult[Invoice])
assert_type(result.output, Invoice | None)
assert_type(result.raw_output, str | None)
assert_type(typed.resume_sync(result), RunResult[Invoice])
assert_type(typed.run_stream("task"), RunStream[Invoice])
assert_type(typed.run_sync("and then?", history=result), RunResult[Invoice])
assert_type(typed.run_sync("and then?", history=result.messages), RunResult[Invoice])
assert_type(text_agent.run_sync("from a typed turn", history=result), RunResult[str])
assert_type(typed.run_sync("in a thread", thread_id="chat-1"), RunResult[Invoice])
typed.run_sync("and then?", history="earlier text")  # type: ignore[arg-type]

counted = Agent(model, output_type=int)
assert_type(counted.run_sync("task").output, int | None)

YesNo = Literal["yes", "no"]
yes_no: Agent[None, YesNo] = Agent(model, output_type=YesNo)  # type: ignore[arg-type]
assert_type(yes_no.run_sync("task").output, YesNo | None)

listed = Agent(model, output_type=list[Invoice])
assert_type(listed.run_sync("task").output, list[Invoice] | None)


def instructions(context: RunContext[Deps]) -> str:
    """Instructions written from the run's deps."""
    assert_type(context.deps, Deps)
    return f"You work for {context.deps.tenant}."


with_deps = Agent(model, deps_type=Deps, output_type=Invoice, instructions=instructions)
assert_type(with_deps, Agent[Deps, Invoice])
assert_type(with_deps.run_sync("task", deps=Deps("acme")), RunResult[Invoice])
with_deps.run_sync("task", deps="acme")  # type: ignore[arg-type]

registry = ToolRegistry()


@registry.tool(effect="read")
def lookup(ctx: ToolContext[Deps], number: str) -> str:
    """Look an invoice up for the tenant."""
    assert_type(ctx.deps, Deps)
    return f"{ctx.deps.tenant}:{number}"


@registry.tool(effect="read")
def plain(ctx: ToolContext, number: str) -> str:
    """A tool with a plain context: deps are None."""
    assert_type(ctx.deps, None)
    return number


async def awaited() -> None:
    """The async API is typed the same way."""
    assert_type(await typed.run("task"), RunResult[Invoice])
    stored = await typed.stored_result("run-1")
    assert_type(stored, RunResult[Invoice] | None)


def engines_take_typed_agents(
    store: PostgresRunStore, memory: MemoryRunStore, client: Client
) -> None:
    """The engines and patterns accept an agent of any deps and output type."""

    def invoices() -> Agent[None, Invoice]:
        """A factory of typed agents."""
        return typed

    DbosRunner(store, {"invoices": invoices})
    TemporalRunner(memory, {"invoices": invoices}, client)
    plan_execute_sync(model, typed, "goal", limits=Limits(max_steps=4))
