"""Automatic diagnosis of a run's trace: the patterns that explain a run that went wrong.

Each check reads the typed events and reports findings with the sequence numbers that show them:
repeated actions, slow tools, empty tool results, retries and failures, tools a server ignored,
rejections, budgets that ran out or nearly did, truncations, and traces that are cut short or
have gaps.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from ownloop.contracts import (
    BudgetExhausted,
    CompletionRejected,
    EventBase,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ObservationAdded,
    OutputTruncated,
    RetryScheduled,
    RunFinished,
    ToolDenied,
    ToolFinished,
    ToolProposed,
    ToolRejected,
)
from ownloop.tracing._jsonl import UnknownEvent
from ownloop.tracing._runs import BudgetUse, budget_use, one_run

__all__ = ["Diagnosis", "Finding", "diagnose"]

Severity = Literal["info", "warning", "error"]
_EMPTY_CHARS = 2  # "", "[]", "{}" and '""': a tool that returned nothing


class Finding(BaseModel):
    """One thing worth knowing about a run.

    Attributes:
        code: What kind of finding (``repeated_action``, ``slow_tool``…).
        severity: ``info``, ``warning`` or ``error``.
        message: What was found, in words.
        seqs: The events that show it.
    """

    model_config = ConfigDict(frozen=True)

    code: str
    severity: Severity
    message: str
    seqs: tuple[int, ...] = ()


class Diagnosis(BaseModel):
    """What `diagnose` found in a run.

    Attributes:
        run_id: The run.
        status: Its final status, if the trace has ``run_finished``.
        stop_reason: Its stop reason, likewise.
        findings: What was found, most severe first.
        budgets: Each budget's use.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    status: str | None
    stop_reason: str | None
    findings: tuple[Finding, ...]
    budgets: tuple[BudgetUse, ...]

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented pattern
    @property
    def ok(self) -> bool:
        """Whether nothing was found at warning or error level."""
        return all(finding.severity == "info" for finding in self.findings)

    def render(self) -> str:
        """Return the diagnosis as text, one line per finding."""
        outcome = f"{self.status} ({self.stop_reason})" if self.status else "unfinished"
        count = f"{len(self.findings)} finding(s)" if self.findings else "no findings"
        lines = [f"run {self.run_id}: {outcome} — {count}"]
        for finding in self.findings:
            seqs = f" (#{', #'.join(str(seq) for seq in finding.seqs)})" if finding.seqs else ""
            lines.append(f"  {finding.severity:<7} {finding.code:<22} {finding.message}{seqs}")
        return "\n".join(lines)


def diagnose(
    events: Iterable[EventBase],
    *,
    slow_tool_s: float = 5.0,
    repeat_threshold: int = 2,
    budget_ratio: float = 0.8,
) -> Diagnosis:
    """Find the patterns that explain how a run went.

    Args:
        events: The events of one run, in order.
        slow_tool_s: A tool attempt longer than this is slow.
        repeat_threshold: Proposing the same tool with the same arguments this many times is a
            repeated action.
        budget_ratio: A budget used to at least this fraction of its limit is nearly exhausted.

    Returns:
        The diagnosis, findings sorted by severity (errors first) then position.

    Raises:
        InputRejected: If the events are not those of exactly one run.
    """
    run = one_run(events)
    budgets = budget_use(run)
    findings = [
        *_outcome(run),
        *_sequence(run),
        *_repeats(run, repeat_threshold),
        *_tools(run, slow_tool_s),
        *_model(run),
        *_tools_ignored(run),
        *_rejections(run),
        *_budgets(run, budgets, budget_ratio),
        *_unknown(run),
    ]
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda item: (order[item.severity], item.seqs[:1] or (0,)))
    finished = next((event for event in reversed(run) if isinstance(event, RunFinished)), None)
    return Diagnosis(
        run_id=run[0].run_id,
        status=finished.status.value if finished else None,
        stop_reason=finished.stop_reason.value if finished else None,
        findings=tuple(findings),
        budgets=tuple(budgets),
    )


def _found(code: str, severity: Severity, message: str, *events: EventBase) -> Finding:
    return Finding(code=code, severity=severity, message=message, seqs=tuple(e.seq for e in events))


def _outcome(run: Sequence[EventBase]) -> list[Finding]:
    finished = [event for event in run if isinstance(event, RunFinished)]
    if not finished:
        message = "no run_finished event: the run crashed, is still running, or the trace is cut"
        return [_found("unfinished", "warning", message)]
    last = finished[-1]
    status = last.status.value
    if status == "completed":
        return []
    # A failed run, or one whose write may have happened, needs a person; a pause is expected.
    severities: dict[str, Severity] = {"failed": "error", "unresolved": "error", "paused": "info"}
    severity = severities.get(status, "warning")
    message = f"{status} ({last.stop_reason.value}): {last.detail}"
    return [_found(f"run_{status}", severity, message, last)]


def _sequence(run: Sequence[EventBase]) -> list[Finding]:
    seqs = [event.seq for event in run]
    if seqs == list(range(1, len(seqs) + 1)):
        return []
    missing = sorted(set(range(1, max(seqs) + 1)) - set(seqs))
    if missing:
        message = f"sequence numbers skip {missing[:10]}: the trace is incomplete"
    else:
        message = "sequence numbers repeat or go backwards: two traces may be mixed"
    return [_found("sequence_gap", "error", message)]


def _repeats(run: Sequence[EventBase], threshold: int) -> list[Finding]:
    proposals: dict[tuple[str, str], list[ToolProposed]] = defaultdict(list)
    for event in run:
        if isinstance(event, ToolProposed):
            arguments = json.dumps(event.arguments, sort_keys=True, default=str)
            proposals[(event.tool, arguments)].append(event)
    return [
        _found(
            "repeated_action",
            "warning",
            f"{tool} was proposed {len(same)} times with the same arguments: the model may be "
            "going in circles",
            *same,
        )
        for (tool, _), same in proposals.items()
        if len(same) >= threshold
    ]


def _tools(run: Sequence[EventBase], slow_tool_s: float) -> list[Finding]:
    findings = []
    for event in run:
        if isinstance(event, ToolFinished):
            if event.duration_s > slow_tool_s:
                message = f"{event.tool} took {event.duration_s:.2f}s (over {slow_tool_s:g}s)"
                findings.append(_found("slow_tool", "warning", message, event))
            if event.status == "error":
                message = f"{event.tool} [{event.call_id}] failed: {event.message}"
                findings.append(_found("tool_error", "warning", message, event))
            elif event.status == "unknown":
                message = (
                    f"{event.tool} [{event.call_id}] may or may not have applied: {event.message}"
                )
                findings.append(_found("unknown_effect", "error", message, event))
        elif isinstance(event, ObservationAdded):
            if event.source == "tool" and event.original_chars <= _EMPTY_CHARS:
                message = (
                    f"a tool returned nothing [{event.call_id}]: the model may invent the rest"
                )
                findings.append(_found("empty_result", "warning", message, event))
            elif event.truncated:
                message = (
                    f"an observation was cut from {event.original_chars} to {event.chars} chars"
                )
                findings.append(_found("observation_truncated", "info", message, event))
        elif isinstance(event, OutputTruncated):
            message = f"the final answer was cut from {event.original_chars} to {event.chars} chars"
            findings.append(_found("output_truncated", "info", message, event))
    return findings


def _model(run: Sequence[EventBase]) -> list[Finding]:
    findings = []
    retries: dict[str, list[RetryScheduled]] = defaultdict(list)
    for event in run:
        if isinstance(event, RetryScheduled):
            retries[event.target].append(event)
        elif isinstance(event, ModelFailed) and not event.retryable:
            error = f"{event.error.get('type')}: {event.error.get('message')}"
            findings.append(_found("model_failed", "error", f"a model call failed: {error}", event))
    for target, scheduled in retries.items():
        reasons = "; ".join(sorted({event.reason for event in scheduled})[:3])
        message = f"{target} calls were retried {len(scheduled)} time(s): {reasons}"
        findings.append(_found("retries", "warning", message, *scheduled))
    return findings


def _tools_ignored(run: Sequence[EventBase]) -> list[Finding]:
    """Tools offered, no call ever, from a server known to drop tools without ``tool_choice``.

    llama.cpp's servers name the model by its ``.gguf`` file; llama-cpp-python's function-calling
    handler leaves the tools out of the prompt unless ``tool_choice`` is sent, and the model then
    answers from nothing.
    """
    offered = [event for event in run if isinstance(event, ModelRequested) and event.tools]
    if not offered or any(isinstance(event, ToolProposed) for event in run):
        return []
    served = [
        event
        for event in run
        if isinstance(event, ModelResponded) and (event.model or "").lower().endswith(".gguf")
    ]
    if not served:
        return []
    message = (
        f"tools were offered in {len(offered)} request(s) but no tool call ever came from a "
        "llama.cpp server, which leaves tools out of the prompt unless tool_choice is sent: "
        "set OWNLOOP_COMPAT=llamacpp (or ModelSettings.tool_choice)"
    )
    return [_found("tools_ignored", "warning", message, offered[0], served[0])]


def _rejections(run: Sequence[EventBase]) -> list[Finding]:
    findings = []
    for event in run:
        if isinstance(event, ToolRejected):
            message = f"{event.tool} [{event.call_id}] rejected ({event.code}): {event.reason}"
            findings.append(_found("tool_rejected", "warning", message, event))
        elif isinstance(event, ToolDenied):
            message = f"{event.tool} [{event.call_id}] denied by {event.rule}: {event.reason}"
            findings.append(_found("tool_denied", "warning", message, event))
        elif isinstance(event, CompletionRejected):
            message = f"answer #{event.rejections} rejected by {event.validator}: {event.reason}"
            findings.append(_found("completion_rejected", "warning", message, event))
    return findings


def _budgets(run: Sequence[EventBase], uses: Sequence[BudgetUse], ratio: float) -> list[Finding]:
    findings = []
    exhausted = set()
    for event in run:
        if isinstance(event, BudgetExhausted):
            exhausted.add(event.budget)
            amounts = f"{event.observed:g} of {event.limit:g} at {event.checkpoint}"
            findings.append(
                _found("budget_exhausted", "error", f"{event.budget}: {amounts}", event)
            )
    for use in uses:
        if use.budget not in exhausted and use.ratio >= ratio:
            message = f"{use.name}: {use.used:g} of {use.limit:g} used ({use.ratio:.0%})"
            findings.append(_found("budget_near_limit", "warning", message))
    return findings


def _unknown(run: Sequence[EventBase]) -> list[Finding]:
    unknown = [event for event in run if isinstance(event, UnknownEvent)]
    if not unknown:
        return []
    kinds = ", ".join(sorted({event.kind for event in unknown}))
    message = f"{len(unknown)} event(s) of kinds this version does not check: {kinds}"
    return [_found("unrecognised_events", "info", message, *unknown)]
