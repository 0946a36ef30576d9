"""The harness article's five loop scenarios, run with ownloop against a local export worker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ownloop import Approval, ModelRequest, ModelResponse, RunStatus, StopReason
from ownloop.cli import main
from ownloop.demo.harness import (
    ExportWorker,
    build_harness_agent,
    corrected_model,
    harness_scenarios,
    run_harness_scenario,
    run_harness_scenarios,
)
from ownloop.policy import approval_digest
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call

SCENARIOS = {scenario.name: scenario for scenario in harness_scenarios()}


def _run(name: str) -> dict[str, Any]:
    return run_harness_scenario(SCENARIOS[name], clock=FakeClock())[0]


def test_every_scenario_ends_as_the_article_says() -> None:
    """The five scenarios end, in order, with the status and stop reason the lesson needs."""
    summaries = run_harness_scenarios(clock=FakeClock())
    assert [(s["scenario"], s["status"], s["stop_reason"]) for s in summaries] == [
        ("correct_after_feedback", "completed", "final_output"),
        ("runtime_retry", "completed", "final_output"),
        ("stale_check", "failed", "completion_rejected"),
        ("unknown_is_not_failure", "unresolved", "unresolved_effect"),
        ("approval_required", "paused", "approval_required"),
    ]
    assert all(summary["as_expected"] for summary in summaries)
    json.dumps(summaries)  # JSON-ready


def test_no_export_ever_runs_twice() -> None:
    """Across all scenarios, the worker queues each export id at most once."""
    for summary in run_harness_scenarios(clock=FakeClock()):
        assert len(summary["exports"]) == len(set(summary["exports"]))


def test_correct_after_feedback_the_model_changes_its_arguments() -> None:
    """'two' is refused by the schema before the handler runs; the model then writes 2."""
    worker, model, _ = SCENARIOS["correct_after_feedback"].setup()
    assert isinstance(model, FunctionModel)
    result = build_harness_agent(worker, model, clock=FakeClock()).run_sync("fix")
    assert result.status is RunStatus.COMPLETED
    assert (result.usage.steps, result.usage.tool_calls, result.usage.tool_attempts) == (4, 3, 2)
    assert worker.calls == 2
    assert worker.config == {"max_retries": 2}
    rejected = [event for event in result.trace if event.kind == "tool_rejected"]
    assert [(event.call_id, event.code) for event in rejected] == [("call-1", "invalid_arguments")]
    assert "two" in model.requests[1].messages[-1].content


def test_an_out_of_range_setting_is_refused_by_the_schema() -> None:
    """max_retries=8 never reaches the worker: strict validation refuses it with feedback."""
    worker = ExportWorker()
    model = ScriptedModel(
        [tool_call("write_config", max_retries=8), final("Done."), final("Done, I said.")]
    )
    result = build_harness_agent(worker, model, clock=FakeClock()).run_sync("fix")
    assert worker.calls == 0
    assert worker.config == {"max_retries": 8}
    assert "less than or equal to 2" in model.requests[1].messages[-1].content
    assert result.stop_reason is StopReason.COMPLETION_REJECTED


def test_runtime_retry_stays_inside_the_runtime() -> None:
    """A transient failure is retried on the same call; the model is asked three times, not four."""
    clock = FakeClock()
    summary, result, worker = run_harness_scenario(SCENARIOS["runtime_retry"], clock=clock)
    assert (summary["proposals"], summary["tool_calls"], summary["tool_attempts"]) == (3, 2, 3)
    assert (summary["retries"], worker.calls) == (1, 3)
    retry = next(event for event in result.trace if event.kind == "retry_scheduled")
    assert (retry.call_id, retry.next_attempt) == ("call-1", 2)
    assert clock.slept == [0.01]


def test_stale_check_is_rejected_whatever_the_model_claims() -> None:
    """A check before the last write is stale: both final answers are rejected, the run fails."""
    summary, result, _ = run_harness_scenario(SCENARIOS["stale_check"], clock=FakeClock())
    assert summary["completion_rejections"] == 2
    assert summary["config"] == {"max_retries": 1}
    rejection = next(event for event in result.trace if event.kind == "completion_rejected")
    assert "ran at revision" in rejection.reason
    assert result.output is None


def test_a_fresh_check_after_the_feedback_completes_the_run() -> None:
    """After the stale-check rejection, a model that checks again completes."""
    worker = ExportWorker()
    model = ScriptedModel(
        [
            tool_call("write_config", "call-1", max_retries=2),
            tool_call("check_config", "call-2"),
            tool_call("write_config", "call-3", max_retries=1),
            final("Done."),
            tool_call("check_config", "call-4"),
            final("Done, checked again."),
        ]
    )
    result = build_harness_agent(worker, model, clock=FakeClock()).run_sync("fix")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.completion_rejections == 1


def test_unknown_export_stays_pending_and_blocks_the_second_export() -> None:
    """The export ran once, its effect is unknown, the lookup cannot tell; the retry never runs."""
    summary, result, worker = run_harness_scenario(
        SCENARIOS["unknown_is_not_failure"], clock=FakeClock()
    )
    assert summary["exports"] == ["export-17"]
    assert summary["pending"] == ["call-2"]
    assert (summary["tool_calls"], summary["tool_attempts"], worker.calls) == (4, 3, 3)
    assert worker.lookups == summary["reconcile_lookups"] == 1
    reconciled = [event.outcome for event in result.trace if event.kind == "effect_reconciled"]
    assert reconciled == ["unknown"]
    assert [(a.approver, a.approved) for a in result.approvals] == [("reviewer-1", True)]
    assert "queue_export" in result.detail


def test_export_without_approval_pauses_with_one_request() -> None:
    """With no approval bound to the export, the run pauses with one exact request."""
    summary, result, worker = run_harness_scenario(
        SCENARIOS["approval_required"], clock=FakeClock()
    )
    assert summary["exports"] == []
    assert summary["approval_requests"] == [
        {"tool": "queue_export", "arguments": {"operation_id": "export-17"}}
    ]
    (request,) = result.approval_requests
    assert request.digest == approval_digest(
        "queue_export", {"operation_id": "export-17"}, worker.revision()
    )


def test_resumed_with_an_approval_the_export_runs_exactly_once() -> None:
    """Approving the paused request runs the export once and the run completes."""
    worker = ExportWorker(config={"max_retries": 2})
    model = ScriptedModel(
        [
            tool_call("check_config", "call-1"),
            tool_call("queue_export", "call-2", operation_id="export-17"),
            final("Export queued."),
        ]
    )
    agent = build_harness_agent(worker, model, clock=FakeClock())
    paused = agent.run_sync("export")
    approval = Approval(
        request_id=paused.approval_requests[0].id, approved=True, approver="reviewer-1"
    )
    result = agent.resume_sync(paused, approvals=[approval])
    assert result.status is RunStatus.COMPLETED
    assert worker.exports == ["export-17"]


def test_export_waits_for_a_current_check() -> None:
    """An export before any check gets check_required feedback and never reaches approval."""
    worker = ExportWorker(config={"max_retries": 2})
    model = ScriptedModel(
        [
            tool_call("queue_export", "call-1", operation_id="export-17"),
            tool_call("check_config", "call-2"),
            final("Checked; the export still needs a person."),
        ]
    )
    result = build_harness_agent(worker, model, clock=FakeClock()).run_sync("export")
    assert result.status is RunStatus.COMPLETED
    assert worker.exports == []
    assert result.approval_requests == ()
    assert "check_required" in model.requests[1].messages[-1].content


def test_corrected_model_stops_on_an_observation_it_has_no_plan_for() -> None:
    """After an observation it does not expect, the feedback-driven model stops explicitly."""
    corrected = corrected_model()

    async def respond(request: ModelRequest) -> ModelResponse:
        if len(request.messages) <= 2:  # instructions and task: look up an export first
            return tool_call("lookup_export", operation_id="export-17")
        return await corrected.respond(request)

    worker = ExportWorker()
    result = build_harness_agent(worker, FunctionModel(respond), clock=FakeClock()).run_sync("x")
    assert result.stop_reason is StopReason.EXPLICIT_STOP
    assert worker.config == {"max_retries": 8}


def test_corrected_model_does_not_trust_a_check_it_cannot_read() -> None:
    """A check_config observation that is not a JSON result leaves the model without a plan."""
    corrected = corrected_model()

    async def respond(request: ModelRequest) -> ModelResponse:
        if len(request.messages) <= 2:  # an invalid check call: its observation is a rejection
            return tool_call("check_config", unexpected=True)
        return await corrected.respond(request)

    result = build_harness_agent(ExportWorker(), FunctionModel(respond)).run_sync("x")
    assert result.stop_reason is StopReason.EXPLICIT_STOP


def test_reading_the_config_shows_the_worker_state() -> None:
    """read_config returns the worker's configuration as the model's observation."""
    model = ScriptedModel([tool_call("read_config"), ModelResponse(stop_reason="done_reading")])
    build_harness_agent(ExportWorker(), model, clock=FakeClock()).run_sync("read")
    assert model.requests[1].messages[-1].content == '{"max_retries":8}'


def test_an_export_after_a_check_leaves_the_check_current() -> None:
    """Queueing an export does not change the configuration's revision: the check stays current."""
    worker = ExportWorker(config={"max_retries": 2})
    digest = approval_digest("queue_export", {"operation_id": "export-9"}, worker.revision())
    model = ScriptedModel(
        [
            tool_call("check_config", "call-1"),
            tool_call("queue_export", "call-2", operation_id="export-9"),
            final("Exported the checked configuration."),
        ]
    )
    agent = build_harness_agent(worker, model, clock=FakeClock())
    approval = Approval(digest=digest, approved=True, approver="reviewer-1")
    result = agent.run_sync("export", approvals=[approval])
    assert result.status is RunStatus.COMPLETED
    assert worker.exports == ["export-9"]


def test_lookup_export_is_not_authoritative() -> None:
    """The worker's own lookup says not found, not authoritative, even for a queued export."""
    worker = ExportWorker()
    worker.exports.append("export-17")
    assert worker.find_export("export-17") == {
        "operation_id": "export-17",
        "found": False,
        "authoritative": False,
    }


def test_cli_demo_harness_json_prints_one_json_line_per_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """'ownloop demo harness --json' prints five JSON lines and exits 0 when all are as expected."""
    assert main(["demo", "harness", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["scenario"] for line in lines] == list(SCENARIOS)
    assert all(line["as_expected"] for line in lines)


def test_cli_demo_harness_prints_one_readable_line_per_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """'ownloop demo harness' prints each scenario's outcome and lesson, one line each."""
    assert main(["demo", "harness"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    assert "paused (approval_required)" in lines[-1]
    assert all("as expected: " in line for line in lines)


def test_cli_demo_defaults_to_research(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop demo research' is the research demo, as 'ownloop demo' alone."""
    assert main(["demo", "research", "--max-steps", "1"]) == 1
    assert "max_steps" in capsys.readouterr().out
