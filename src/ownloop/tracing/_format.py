"""Human-readable rendering of trace events, one line each (for the console and the CLI)."""

from __future__ import annotations

from collections.abc import Iterable

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
    RunStarted,
    ToolFinished,
    ToolProposed,
    ToolRejected,
    ToolStarted,
)

__all__ = ["describe_event", "format_event", "format_trace"]


def describe_event(event: EventBase) -> str:  # noqa: PLR0911, PLR0912 - one branch per event kind
    """Describe an event's own fields in a few words (without its number and kind).

    Args:
        event: Any event; kinds without a dedicated description show their fields as
            ``key=value``.

    Returns:
        The description.
    """
    match event:
        case RunStarted():
            return f"tools={list(event.tools)} max_steps={event.limits.max_steps}"
        case ModelRequested():
            return f"step={event.step} attempt={event.attempt} messages={event.messages}"
        case ModelResponded():
            calls = f" calls={list(event.tool_calls)}" if event.tool_calls else ""
            tokens = event.usage.total_tokens
            return f"step={event.step} decision={event.decision}{calls} tokens={tokens}"
        case ModelFailed():
            return f"step={event.step} attempt={event.attempt} error={event.error.get('message')!s}"
        case RetryScheduled():
            wait = f"in {event.delay_s:.2f}s"
            return f"{event.target} attempt {event.next_attempt} {wait}: {event.reason}"
        case ToolProposed():
            return f"{event.tool} id={event.call_id} args={event.arguments}"
        case ToolRejected():
            return f"{event.tool} id={event.call_id} {event.code}: {event.reason}"
        case ToolStarted():
            return f"{event.tool} id={event.call_id} attempt={event.attempt}"
        case ToolFinished():
            return f"{event.tool} id={event.call_id} status={event.status} effect={event.effect}"
        case ObservationAdded():
            cut = " (truncated)" if event.truncated else ""
            return f"{event.source} chars={event.chars}{cut}"
        case CompletionRejected():
            return f"{event.validator}: {event.reason}"
        case OutputTruncated():
            return f"{event.original_chars} -> {event.chars} chars"
        case BudgetExhausted():
            return f"{event.budget} limit={event.limit:g} observed={event.observed:g}"
        case RunFinished():
            return f"{event.status.value}/{event.stop_reason.value}: {event.detail}"
    # Kinds added later (approvals, audits, reconciliation) read as their own fields.
    fields = event.model_dump(mode="json", exclude={"run_id", "seq", "at", "kind"})
    return " ".join(f"{key}={value}" for key, value in fields.items())


def format_event(event: EventBase) -> str:
    """Render one event as a single readable line.

    Args:
        event: The event.

    Returns:
        ``"NN kind  details"``.
    """
    kind = getattr(event, "kind", "event")
    return f"{event.seq:02d} {kind:<19} {describe_event(event)}"


def format_trace(events: Iterable[EventBase]) -> str:
    """Render a whole trace, one event a line.

    Args:
        events: The events, in order.

    Returns:
        The lines joined with newlines.
    """
    return "\n".join(format_event(event) for event in events)
