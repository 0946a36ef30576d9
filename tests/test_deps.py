"""Typed dependencies: `deps_type`, `run(task, deps=...)`, `ToolContext[Deps]`, never stored."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ownloop import (
    Accept,
    Agent,
    Approval,
    CompletionValidator,
    ConfigurationError,
    Reject,
    RunContext,
    RunStatus,
    SqliteRunStore,
    ToolContext,
    ToolRegistry,
)
from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call

SENTINEL = "DEPS-SENTINEL-7f3a"


@dataclass
class Deps:
    """The application's live objects: a tenant and a connection-like log."""

    tenant: str
    log: list[str] = field(default_factory=list)
    secret: str = SENTINEL


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(ctx: ToolContext[Deps], number: str) -> str:
        """Look an invoice up for the run's tenant.

        Args:
            ctx: The call's trusted context, with the run's deps.
            number: The invoice number.
        """
        ctx.deps.log.append(number)
        return f"{ctx.deps.tenant}:{number}"

    @registry.tool(effect="read")
    def plain(ctx: ToolContext) -> str:
        """A tool whose context has no deps type."""
        return f"deps={ctx.deps!r}"

    @registry.tool(effect="write", requires_approval=True)
    def send(ctx: ToolContext[Deps], number: str) -> str:
        """Send an invoice.

        Args:
            ctx: The call's trusted context, with the run's deps.
            number: The invoice number.
        """
        ctx.deps.log.append(f"sent {number}")
        return "sent"

    return registry


def test_a_tool_receives_the_runs_deps_and_they_are_not_in_its_schema() -> None:
    """ctx.deps is the object given to run; neither ToolContext parameter is in a schema."""
    deps = Deps("acme")
    steps = [tool_call("lookup", "c1", number="F-1"), tool_call("plain", "c2"), final("done")]
    agent = Agent(ScriptedModel(steps), _registry(), deps_type=Deps)
    result = agent.run_sync("Find F-1", deps=deps)
    assert result.status is RunStatus.COMPLETED
    assert deps.log == ["F-1"]
    observations = [m.content for m in result.messages if m.role == "tool"]
    assert "acme:F-1" in observations[0]
    assert "deps=Deps(" in observations[1]
    specs = {spec.name: spec for spec in agent.tools.specs()}
    assert list(specs["lookup"].parameters["properties"]) == ["number"]
    assert specs["plain"].parameters["properties"] == {}


def test_without_deps_type_a_plain_context_sees_none() -> None:
    """ToolContext without a type parameter keeps working; deps are None without them."""
    steps = [tool_call("plain", "c1"), final("done")]
    result = Agent(ScriptedModel(steps), _registry()).run_sync("Go")
    assert "deps=None" in next(m.content for m in result.messages if m.role == "tool")


def test_a_run_without_deps_or_with_the_wrong_type_is_refused() -> None:
    """deps_type makes deps required and checks their type, before any model call."""
    agent = Agent(ScriptedModel([]), _registry(), deps_type=Deps)
    with pytest.raises(
        ConfigurationError, match=r"deps_type=Deps: pass run\(\.\.\., deps=\.\.\.\)"
    ):
        agent.run_sync("Go")
    with pytest.raises(ConfigurationError, match="deps must be a Deps"):
        agent.run_sync("Go", deps="acme")  # type: ignore[arg-type]


def test_deps_are_never_in_the_trace_or_a_checkpoint(tmp_path: Path) -> None:
    """Nothing of the deps object reaches the stored snapshot, the trace or the messages."""
    store = SqliteRunStore(tmp_path / "runs.db")
    steps = [tool_call("lookup", "c1", number="F-1"), final("done")]
    agent = Agent(ScriptedModel(steps), _registry(), deps_type=Deps, store=store)
    result = agent.run_sync("Find F-1", deps=Deps("acme"), run_id="deps-1")
    assert SENTINEL not in result.model_dump_json()
    stored = asyncio.run(store.get("deps-1"))
    assert stored is not None
    assert SENTINEL not in stored.snapshot.model_dump_json()


def test_a_resume_that_needs_deps_and_gets_none_is_refused(tmp_path: Path) -> None:
    """A paused run's deps are not stored: resuming without them is refused, with them it runs."""
    store = SqliteRunStore(tmp_path / "runs.db")
    steps = [tool_call("send", "s1", number="F-2"), final("sent")]
    agent = Agent(ScriptedModel(steps), _registry(), deps_type=Deps, store=store)
    paused = agent.run_sync("Send F-2", deps=Deps("acme"), run_id="deps-2")
    assert paused.status is RunStatus.PAUSED
    approval = Approval(request_id=paused.approval_requests[0].id, approved=True, approver="lead")
    with pytest.raises(ConfigurationError, match="given again"):
        agent.resume_sync("deps-2", approvals=[approval])
    deps = Deps("acme")
    result = agent.resume_sync("deps-2", approvals=[approval], deps=deps)
    assert result.status is RunStatus.COMPLETED
    assert deps.log == ["sent F-2"]


def test_an_in_memory_resume_takes_deps_again() -> None:
    """Resuming a paused result without a store also hands the new deps to the tools."""
    steps = [tool_call("send", "s1", number="F-3"), final("sent")]
    agent = Agent(ScriptedModel(steps), _registry(), deps_type=Deps)
    paused = agent.run_sync("Send F-3", deps=Deps("acme"))
    approval = Approval(request_id=paused.approval_requests[0].id, approved=True, approver="lead")
    deps = Deps("acme")
    assert agent.resume_sync(paused, approvals=[approval], deps=deps).status is RunStatus.COMPLETED
    assert deps.log == ["sent F-3"]


def test_validators_and_instructions_read_the_deps() -> None:
    """A context validator sees context.deps; instructions= may be a function of the run."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final("acme answer" if len(seen) > 1 else "other answer")

    def same_tenant(output: str, evidence: object, context: object) -> Accept | Reject:
        tenant = context.deps.tenant  # type: ignore[attr-defined]
        return Accept() if tenant in output else Reject(f"mention {tenant}")

    def instructions(context: RunContext[Deps]) -> str:
        return f"You answer for {context.deps.tenant} (run {context.run_id}): {context.task}"

    agent = Agent(
        FunctionModel(answer),
        deps_type=Deps,
        validators=[CompletionValidator(same_tenant, "same_tenant", uses_context=True)],
        instructions=instructions,
    )
    result = agent.run_sync("Answer", deps=Deps("acme"), run_id="r-9")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.completion_rejections == 1
    assert seen[0].messages[0].content == "You answer for acme (run r-9): Answer"


def test_a_deps_type_that_is_not_a_class_is_not_checked_by_isinstance() -> None:
    """A generic alias (list[str]) cannot be checked at run time: only presence is required."""
    steps = [final("done")]
    agent = Agent(ScriptedModel(steps), deps_type=list[str])  # type: ignore[arg-type]
    assert agent.run_sync("Go", deps=["a"]).status is RunStatus.COMPLETED
