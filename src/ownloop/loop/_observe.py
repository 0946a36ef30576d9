"""Adding observations to the conversation: always bounded, always traced."""

from __future__ import annotations

from ownloop.contracts import ObservationAdded, ToolMessage, UserMessage
from ownloop.loop.state import RunState

__all__ = ["add_feedback", "add_tool_observation", "truncate"]


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut text to ``max_chars`` characters including an explicit marker.

    Args:
        text: The text.
        max_chars: The most characters kept (the marker included).

    Returns:
        The text, cut if needed, and whether it was cut.
    """
    if len(text) <= max_chars:
        return text, False
    marker = f"\n…[truncated: {len(text)} chars, showing {max_chars}]"
    keep = max(max_chars - len(marker), 0)
    return (text[:keep] + marker)[:max_chars], True


def add_tool_observation(
    state: RunState, *, call_id: str, name: str, content: str, max_chars: int, source: str
) -> None:
    """Answer a tool call with a bounded observation.

    Args:
        state: The run.
        call_id: The call answered.
        name: The tool name as proposed.
        content: The observation text.
        max_chars: Its bound.
        source: Where it comes from (``tool``, ``rejection``, ``tool_error``…).
    """
    bounded = _bounded(state, content, max_chars, source, call_id)
    state.messages.append(ToolMessage(call_id=call_id, name=name[:256], content=bounded))


def add_feedback(state: RunState, *, content: str, max_chars: int, source: str) -> None:
    """Give the model runtime feedback (not a tool result) as a bounded user message.

    Args:
        state: The run.
        content: The feedback.
        max_chars: Its bound.
        source: Where it comes from (``completion``…).
    """
    state.messages.append(UserMessage(content=_bounded(state, content, max_chars, source, None)))


def _bounded(
    state: RunState, content: str, max_chars: int, source: str, call_id: str | None
) -> str:
    """Bound an observation and trace its sizes; return the bounded text."""
    bounded, cut = truncate(content, max_chars)
    state.trace.emit(
        ObservationAdded,
        call_id=call_id,
        source=source,
        chars=len(bounded),
        original_chars=len(content),
        truncated=cut,
    )
    return bounded
