"""A run's trace as a readable timeline: think, act, observe, stop, with times and counters.

A model request and its response read as one ``think`` line, a tool's start and finish as one
``run`` line. Kinds this module has no dedicated line for (added later, or unknown to this
version) still appear, as their fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from ownloop.contracts import (
    ApprovalDecided,
    ApprovalRequested,
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
    RunResumed,
    RunStarted,
    ToolFinished,
    ToolProposed,
    ToolRejected,
    ToolStarted,
)
from ownloop.redaction import cut_text
from ownloop.tracing._format import describe_event
from ownloop.tracing._runs import BudgetUse, budget_use, one_run

__all__ = ["Timeline", "TimelineEntry", "timeline"]

_ARGUMENT_CHARS = 160


class TimelineEntry(BaseModel):
    """One line of a timeline.

    Attributes:
        seq: The sequence number of the event the line ends with.
        offset_s: Seconds since the run's first event.
        step: The model step the line belongs to, if any.
        phase: ``start``, ``think``, ``retry``, ``act``, ``reject``, ``approve``, ``run``,
            ``observe``, ``budget``, ``note``, ``resume``, ``stop`` or ``event``.
        kind: The event's kind.
        text: What happened.
    """

    model_config = ConfigDict(frozen=True)

    seq: int
    offset_s: float
    step: int | None
    phase: str
    kind: str
    text: str


class Timeline(BaseModel):
    """A run's trace, arranged for reading.

    Attributes:
        run_id: The run.
        status: Its final status, if the trace has ``run_finished``.
        stop_reason: Its stop reason, likewise.
        versions: The versions recorded when it started.
        budgets: Each budget's use.
        entries: The lines, in order.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    status: str | None
    stop_reason: str | None
    versions: dict[str, Any] | None
    budgets: tuple[BudgetUse, ...]
    entries: tuple[TimelineEntry, ...]

    def render(self) -> str:
        """Return the timeline as text, one line per entry, grouped by step."""
        outcome = f"{self.status} ({self.stop_reason})" if self.status else "unfinished"
        lines = [f"run {self.run_id}: {outcome}"]
        if self.versions:
            lines.append("  versions: " + _versions(self.versions))
        step: int | None = None
        for entry in self.entries:
            if entry.step is not None and entry.step != step:
                step = entry.step
                lines.append(f"step {step}")
            lines.append(
                f"  #{entry.seq:02d} +{entry.offset_s:.3f}s  {entry.phase:<8} {entry.text}"
            )
        uses = [_budget(use) for use in self.budgets]
        for start in range(0, len(uses), 3):
            label = "budgets:" if start == 0 else ""
            lines.append(f"  {label:<9} " + " · ".join(uses[start : start + 3]))
        return "\n".join(lines)


def timeline(events: Iterable[EventBase]) -> Timeline:
    """Arrange one run's events as a readable timeline.

    Args:
        events: The events of one run, in order.

    Returns:
        The timeline (render it with `Timeline.render`, or dump it as JSON).

    Raises:
        InputRejected: If the events are not those of exactly one run.
    """
    run = one_run(events)
    origin = run[0].at
    entries: list[TimelineEntry] = []
    step: int | None = None
    open_calls: dict[str, ToolStarted] = {}
    for event in run:
        if isinstance(event, ModelRequested):
            step = event.step
            continue  # read with its response (or failure)
        if isinstance(event, ToolStarted):
            open_calls[event.call_id] = event
            continue  # read with its finish
        if isinstance(event, ToolFinished):
            open_calls.pop(event.call_id, None)
        phase, text = _line(event)
        entries.append(_entry(event, origin, step, phase, text))
    entries.extend(
        _entry(started, origin, step, "run", f"{started.tool} [{started.call_id}] started")
        for started in open_calls.values()
    )
    entries.sort(key=lambda entry: entry.seq)
    started = next((event for event in run if isinstance(event, RunStarted)), None)
    finished = next((event for event in reversed(run) if isinstance(event, RunFinished)), None)
    return Timeline(
        run_id=run[0].run_id,
        status=finished.status.value if finished else None,
        stop_reason=finished.stop_reason.value if finished else None,
        versions=started.versions.model_dump(mode="json") if started else None,
        budgets=tuple(budget_use(run)),
        entries=tuple(entries),
    )


def _entry(event: EventBase, origin: datetime, step: int | None, phase: str, text: str) -> Any:
    offset = max((event.at - origin).total_seconds(), 0.0)
    kind = str(getattr(event, "kind", "event"))
    return TimelineEntry(
        seq=event.seq, offset_s=offset, step=step, phase=phase, kind=kind, text=text
    )


def _line(event: EventBase) -> tuple[str, str]:  # noqa: PLR0911 - one branch per event kind
    paused = _pause_line(event)
    if paused is not None:
        return paused
    match event:
        case RunStarted():
            tools = ", ".join(event.tools) or "none"
            return "start", f"task of {event.task_chars} chars; tools: {tools}"
        case ModelResponded():
            return "think", _response(event)
        case ModelFailed():
            kind = "retryable" if event.retryable else "permanent"
            error = f"{event.error.get('type')}: {event.error.get('message')}"
            return "think", f"model attempt {event.attempt} failed ({kind}): {error}"
        case RetryScheduled():
            target = f"tool [{event.call_id}]" if event.target == "tool" else "model"
            wait = f"{target} attempt {event.next_attempt} in {event.delay_s:.2f}s"
            return "retry", f"{wait}: {event.reason}"
        case ToolProposed():
            return "act", f"{event.tool}({_arguments(event.arguments)}) [{event.call_id}]"
        case ToolFinished():
            note = f": {event.message}" if event.message else ""
            outcome = f"{event.status}/{event.effect} in {event.duration_s:.3f}s{note}"
            return "run", f"{event.tool} [{event.call_id}] attempt {event.attempt} → {outcome}"
        case ObservationAdded():
            cut = f" (cut from {event.original_chars})" if event.truncated else ""
            call = f" [{event.call_id}]" if event.call_id else ""
            return "observe", f"{event.source}{call}: {event.chars} chars{cut}"
        case ToolRejected() | CompletionRejected():
            return "reject", describe_event(event)
        case BudgetExhausted():
            amounts = f"{_number(event.observed)} of {_number(event.limit)}"
            return "budget", f"{event.budget} exhausted: {amounts} at {event.checkpoint}"
        case OutputTruncated():
            return "note", f"final answer cut: {describe_event(event)}"
        case RunFinished():
            return "stop", f"{event.status.value} ({event.stop_reason.value}): {event.detail}"
    return "event", f"{getattr(event, 'kind', 'event')}: {describe_event(event)}"


def _pause_line(event: EventBase) -> tuple[str, str] | None:
    """The lines of approvals and resumes, or None for another kind."""
    match event:
        case ApprovalRequested():
            request = f"{event.tool} [{event.call_id}] needs approval {event.request_id}"
            return "approve", f"{request}: {event.reason}"
        case ApprovalDecided():
            decision = "approved" if event.approved else "denied"
            why = f": {event.reason}" if event.reason else ""
            return (
                "approve",
                f"{event.request_id} [{event.call_id}] {decision} by {event.approver}{why}",
            )
        case RunResumed():
            used = f"{_number(event.elapsed_s)}s already used"
            return "resume", f"resumed with {event.approvals} decision(s); {used}"
    return None


def _response(event: ModelResponded) -> str:
    if event.decision == "tool_calls":
        outcome = "tool calls: " + ", ".join(event.tool_calls)
    elif event.decision == "stop":
        outcome = f"explicit stop: {event.stop_reason}"
    else:
        outcome = f"{event.decision} answer" if event.decision == "final" else "empty response"
    usage = event.usage
    cost = f"{event.duration_s:.3f}s, {usage.input_tokens}+{usage.output_tokens} tokens"
    return f"model attempt {event.attempt} → {outcome} ({cost})"


def _arguments(arguments: Any) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return cut_text(text, _ARGUMENT_CHARS)


def _versions(versions: dict[str, Any]) -> str:
    labels = {"sdk": "openai", "policy_digest": "policy"}
    return " · ".join(  # each tool's schema digest is for resumes, not for reading
        f"{labels.get(key, key)} {value}"
        for key, value in versions.items()
        if value is not None and key != "tools"
    )


def _budget(use: BudgetUse) -> str:
    return f"{use.name} {_number(use.used)}/{_number(use.limit)} ({use.ratio:.0%})"


def _number(value: float) -> str:
    """Whole numbers as they are; others to two decimals (seconds, money), never in e-notation."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
