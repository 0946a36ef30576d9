"""Current checks: completion and writes wait for a passing check at the current revision."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ownloop import Agent, Limits, RunStatus, StopReason
from ownloop.policy import Policy, allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from ownloop.validators import require_current_check, requires_check_before


class Worker:
    """A service configuration with a revision, a check and an export that needs both."""

    def __init__(self) -> None:
        self.config = {"max_retries": 8}
        self.exports: list[str] = []

    def revision(self) -> str:
        """Return a digest of the configuration."""
        return f"rev-{self.config['max_retries']}"

    def registry(self) -> ToolRegistry:
        """Return the worker's tools."""
        registry = ToolRegistry()

        @registry.tool(effect="write")
        def write_config(max_retries: Annotated[int, Field(ge=0, le=2)]) -> dict[str, int]:
            """Set the retry count.

            Args:
                max_retries: Between 0 and 2.
            """
            self.config = {"max_retries": max_retries}
            return self.config

        @registry.tool(effect="read")
        def check_config() -> dict[str, bool]:
            """Check the configuration."""
            return {"passed": 0 <= self.config["max_retries"] <= 2}

        @registry.tool(effect="write")
        def queue_export(operation_id: str) -> dict[str, str]:
            """Queue an export.

            Args:
                operation_id: The export's id.
            """
            self.exports.append(operation_id)
            return {"queued": operation_id}

        return registry


WRITES = allow_writes("write_config", "queue_export")


def test_stale_check_rejects_completion() -> None:
    """A check that passed before the last write does not let the run complete."""
    worker = Worker()
    model = ScriptedModel(
        [
            tool_call("write_config", "w1", max_retries=2),
            tool_call("check_config", "c1"),
            tool_call("write_config", "w2", max_retries=1),
            final("Configured and checked."),
        ]
    )
    agent = Agent(
        model,
        worker.registry(),
        policy=WRITES,
        validators=[require_current_check("check_config")],
        revision=worker.revision,
        limits=Limits(max_steps=4, max_completion_rejections=0),
    )
    result = agent.run_sync("fix the config")
    assert result.stop_reason is StopReason.COMPLETION_REJECTED
    rejection = next(event for event in result.trace if event.kind == "completion_rejected")
    assert "rev-2" in rejection.reason
    assert "rev-1" in rejection.reason


def test_current_check_lets_the_run_complete() -> None:
    """A passing check after the last write, at the current revision, accepts the answer."""
    worker = Worker()
    model = ScriptedModel(
        [tool_call("write_config", max_retries=2), tool_call("check_config"), final("Done.")]
    )
    agent = Agent(
        model,
        worker.registry(),
        policy=WRITES,
        validators=[require_current_check("check_config")],
        revision=worker.revision,
    )
    assert agent.run_sync("fix").status is RunStatus.COMPLETED


def test_without_a_revision_a_write_after_the_check_makes_it_stale() -> None:
    """With no revision tracker, any applied write after the check makes it stale."""
    worker = Worker()
    model = ScriptedModel(
        [
            tool_call("write_config", "w1", max_retries=2),
            tool_call("check_config"),
            tool_call("write_config", "w2", max_retries=1),
            final("Done."),
            final("Done, really."),
            final("Done, promise."),
        ]
    )
    validator = require_current_check("check_config", passed=lambda data: bool(data["passed"]))
    result = Agent(model, worker.registry(), policy=WRITES, validators=[validator]).run_sync("fix")
    assert result.stop_reason is StopReason.COMPLETION_REJECTED
    assert "written after" in result.detail


def test_failed_or_missing_check_is_named() -> None:
    """Completion without any check, or after a failing one, is rejected with the reason."""
    worker = Worker()
    validator = require_current_check("check_config")
    none = Agent(ScriptedModel([final("Done.")] * 3), worker.registry(), validators=[validator])
    assert "no check_config has run" in none.run_sync("q").detail
    failing = ScriptedModel([tool_call("check_config"), *[final("Done.")] * 3])
    result = Agent(failing, worker.registry(), validators=[validator]).run_sync("q")
    assert "did not pass" in result.detail


def test_write_waits_for_a_current_passing_check() -> None:
    """requires_check_before refuses the export (check_required) until a check passes."""
    worker = Worker()
    worker.config = {"max_retries": 2}
    model = ScriptedModel(
        [
            tool_call("queue_export", "e1", operation_id="export-17"),
            tool_call("check_config", "c1"),
            tool_call("queue_export", "e2", operation_id="export-17"),
            final("Queued."),
        ]
    )
    agent = Agent(
        model,
        worker.registry(),
        policy=WRITES,
        preconditions=[requires_check_before(tool="queue_export", check="check_config")],
        revision=worker.revision,
    )
    result = agent.run_sync("export")
    assert result.status is RunStatus.COMPLETED
    assert worker.exports == ["export-17"]
    rejected = next(event for event in result.trace if event.kind == "tool_rejected")
    assert (rejected.call_id, rejected.code) == ("e1", "check_required")
    assert "check_required" in model.requests[1].messages[-1].content
    assert repr(agent._config.preconditions[0]) == (
        "requires_check_before(tool='queue_export', check='check_config')"
    )


def test_policy_file_requires_current_check_and_audits(tmp_path: Path) -> None:
    """A policy file's require_current_check and audit_after_tool apply to the agent."""
    path = tmp_path / "policy.json"
    path.write_text(
        '{"allowed_tools": ["write_config", "check_config"], "max_requests": 4, '
        '"require_current_check": true, "audit_after_tool": true}'
    )
    worker = Worker()
    model = ScriptedModel(
        [tool_call("write_config", max_retries=2), tool_call("check_config"), final("Done.")]
    )
    agent = Agent(model, worker.registry(), policy=Policy.from_file(path), revision=worker.revision)
    result = agent.run_sync("fix")
    assert result.status is RunStatus.COMPLETED
    audits = [event.revision for event in result.trace if event.kind == "revision_audited"]
    assert audits == ["rev-2", "rev-2"]
    assert agent.limits.max_steps == 4
