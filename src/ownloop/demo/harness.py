"""The harness article's loop, reproduced with ownloop: an export worker and five scenarios.

The worker (`ExportWorker`) holds one setting, ``max_retries``, and queues exports; its faults are
injected on purpose. Deterministic models drive five scenarios through one agent configuration;
each shows which part of the runtime decides:

- ``correct_after_feedback``: invalid arguments are refused by the tool's schema and the *model*
  proposes different ones;
- ``runtime_retry``: a transient failure is retried by the *runtime*; the model is not asked again;
- ``stale_check``: a check that ran before the last write is not accepted as proof of completion;
- ``unknown_is_not_failure``: an export whose outcome is unknown stays pending and blocks a second
  export, which never runs;
- ``approval_required``: an export without an approval bound to it pauses the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import wait_exponential

from ownloop.agent import Agent
from ownloop.clock import Clock
from ownloop.contracts import (
    Approval,
    Limits,
    ModelRequest,
    ModelResponse,
    RunResult,
    RunStatus,
    StopReason,
    ToolMessage,
)
from ownloop.demo._export_worker import HARNESS_TOOLS, ExportWorker
from ownloop.models import AgentModel
from ownloop.policy import allow_tools, approval_digest
from ownloop.retry import RetryPolicy
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call
from ownloop.validators import require_current_check, requires_check_before

__all__ = [
    "HARNESS_LIMITS",
    "HARNESS_TOOLS",
    "ExportWorker",
    "HarnessScenario",
    "build_harness_agent",
    "corrected_model",
    "harness_scenarios",
    "run_harness_scenario",
    "run_harness_scenarios",
]

HARNESS_LIMITS = Limits(
    max_steps=8,
    max_tool_calls=10,
    max_tool_attempts=10,
    max_retries_per_call=1,
    max_completion_rejections=1,
    deadline_s=10.0,
)
"""The article's budgets: 8 proposals, 10 calls, 2 attempts per call, 10 seconds.

One rejected final answer is fed back to the model; the second ends the run.
"""


def build_harness_agent(
    worker: ExportWorker, model: AgentModel, *, clock: Clock | None = None
) -> Agent:
    """Return the harness agent: the worker's tools, its revision, checks, approvals and budgets.

    Args:
        worker: The worker the tools act on.
        model: The model port proposing the actions.
        clock: The clock; the system clock by default.

    Returns:
        An agent that allows exactly the worker's tools, requires a current passing
        ``check_config`` both to finish and to queue an export, binds approvals to the worker's
        configuration digest, and retries transient failures once with a short backoff.
    """
    return Agent(
        model,
        worker.registry(),
        limits=HARNESS_LIMITS,
        policy=allow_tools(*HARNESS_TOOLS),
        validators=[require_current_check("check_config")],
        preconditions=[requires_check_before(tool="queue_export", check="check_config")],
        revision=worker.revision,
        retry=RetryPolicy(wait=wait_exponential(multiplier=0.01, max=0.04)),
        clock=clock,
        instructions="Fix the export worker's configuration (max_retries must be 0-2), check it, "
        "and finish only when the check passed on the current configuration.",
    )


def corrected_model() -> FunctionModel:
    """Return a model that reacts to what the runtime tells it, like the article's proposer.

    It first writes ``max_retries="two"``; when the last observation is a rejection of those
    arguments it writes the integer 2; after a successful write it checks; after a passing check
    it finishes. Anything else ends the run with an explicit stop.
    """

    def respond(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if not isinstance(last, ToolMessage):
            return tool_call("write_config", "call-1", max_retries="two")
        if last.name == "write_config" and "rejected (invalid_arguments)" in last.content:
            return tool_call("write_config", "call-2", max_retries=2)
        if last.name == "write_config":
            return tool_call("check_config", "call-3")
        if last.name == "check_config" and _observed(last.content).get("passed") is True:
            return final("The configuration is fixed and checked.")
        return ModelResponse(stop_reason="no_plan_for_this_observation")

    return FunctionModel(respond, model_name="corrected-proposer")


def _observed(content: str) -> dict[str, Any]:
    """Return an observation's JSON object, or an empty one when it holds something else."""
    try:
        value = json.loads(content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class HarnessScenario:
    """One scenario: how to set it up, and the outcome the runtime must produce.

    Attributes:
        name: The scenario's name.
        lesson: What it shows, in one sentence.
        expected: The ``(status, stop_reason)`` the run must end with.
        setup: Returns the worker, the model and any approvals given up front.
    """

    name: str
    lesson: str
    expected: tuple[RunStatus, StopReason]
    setup: Callable[[], tuple[ExportWorker, AgentModel, list[Approval]]]


def _steps(*steps: ModelResponse) -> ScriptedModel:
    return ScriptedModel(steps, model_name="scripted-proposer")


def _correct_after_feedback() -> tuple[ExportWorker, AgentModel, list[Approval]]:
    return ExportWorker(), corrected_model(), []


def _runtime_retry() -> tuple[ExportWorker, AgentModel, list[Approval]]:
    model = _steps(
        tool_call("write_config", "call-1", max_retries=2),
        tool_call("check_config", "call-2"),
        final("Fixed and checked."),
    )
    return ExportWorker(transient_faults=1), model, []


def _stale_check() -> tuple[ExportWorker, AgentModel, list[Approval]]:
    model = _steps(
        tool_call("write_config", "call-1", max_retries=2),
        tool_call("check_config", "call-2"),
        tool_call("write_config", "call-3", max_retries=1),
        final("Done."),
        final("Done: check_config passed."),  # prose is not a check
    )
    return ExportWorker(), model, []


def _unknown_is_not_failure() -> tuple[ExportWorker, AgentModel, list[Approval]]:
    worker = ExportWorker(config={"max_retries": 2}, uncertain=True)
    digest = approval_digest("queue_export", {"operation_id": "export-17"}, worker.revision())
    approval = Approval(digest=digest, approved=True, approver="reviewer-1", reason="release")
    model = _steps(
        tool_call("check_config", "call-1"),
        tool_call("queue_export", "call-2", operation_id="export-17"),
        tool_call("lookup_export", "call-3", operation_id="export-17"),
        tool_call("queue_export", "call-4", operation_id="export-17"),
    )
    return worker, model, [approval]


def _approval_required() -> tuple[ExportWorker, AgentModel, list[Approval]]:
    model = _steps(
        tool_call("check_config", "call-1"),
        tool_call("queue_export", "call-2", operation_id="export-17"),
    )
    return ExportWorker(config={"max_retries": 2}), model, []


def harness_scenarios() -> tuple[HarnessScenario, ...]:
    """Return the five scenarios of the article's second lab, in its order."""
    completed = (RunStatus.COMPLETED, StopReason.FINAL_OUTPUT)
    return (
        HarnessScenario(
            "correct_after_feedback",
            "invalid arguments go back to the model, which proposes valid ones",
            completed,
            _correct_after_feedback,
        ),
        HarnessScenario(
            "runtime_retry",
            "a transient failure is retried by the runtime, not re-decided by the model",
            completed,
            _runtime_retry,
        ),
        HarnessScenario(
            "stale_check",
            "a check that ran before the last write does not prove completion",
            (RunStatus.FAILED, StopReason.COMPLETION_REJECTED),
            _stale_check,
        ),
        HarnessScenario(
            "unknown_is_not_failure",
            "an unconfirmed export stays pending and blocks a second export",
            (RunStatus.UNRESOLVED, StopReason.UNRESOLVED_EFFECT),
            _unknown_is_not_failure,
        ),
        HarnessScenario(
            "approval_required",
            "an export with no approval bound to it pauses the run",
            (RunStatus.PAUSED, StopReason.APPROVAL_REQUIRED),
            _approval_required,
        ),
    )


def run_harness_scenario(
    scenario: HarnessScenario, *, clock: Clock | None = None
) -> tuple[dict[str, Any], RunResult, ExportWorker]:
    """Run one scenario and summarise it.

    Args:
        scenario: The scenario.
        clock: The clock; the system clock by default.

    Returns:
        The JSON-ready summary, the full run result and the worker after the run.
    """
    worker, model, approvals = scenario.setup()
    agent = build_harness_agent(worker, model, clock=clock)
    result = agent.run_sync(
        "Fix the export worker's configuration.",
        run_id=f"harness-{scenario.name}",
        approvals=approvals,
    )
    usage = result.usage
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "status": result.status.value,
        "stop_reason": result.stop_reason.value,
        "as_expected": (result.status, result.stop_reason) == scenario.expected,
        "proposals": usage.steps,
        "tool_calls": usage.tool_calls,
        "tool_attempts": usage.tool_attempts,
        "retries": sum(1 for event in result.trace if event.kind == "retry_scheduled"),
        "worker_calls": worker.calls,
        "completion_rejections": usage.completion_rejections,
        "reconcile_lookups": worker.lookups,
        "config": dict(worker.config),
        "exports": list(worker.exports),
        "pending": [operation.call_id for operation in result.pending],
        "approval_requests": [
            {"tool": request.tool, "arguments": request.arguments}
            for request in result.approval_requests
        ],
        "lesson": scenario.lesson,
    }
    return summary, result, worker


def run_harness_scenarios(*, clock: Clock | None = None) -> list[dict[str, Any]]:
    """Run the five scenarios and return one JSON-ready summary each.

    Args:
        clock: The clock; the system clock by default.

    Returns:
        The summaries, in the article's order.
    """
    return [run_harness_scenario(scenario, clock=clock)[0] for scenario in harness_scenarios()]
