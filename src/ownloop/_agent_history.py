"""Continuing a conversation: an earlier result (or messages) as the start of a new run.

A follow-up run starts from the earlier turns plus its own user turn, with its own id, trace and
budgets. Only trusted records carry over: the evidence ledger of an earlier result (each item
marked with the run that observed it), never authority. A decision given to an earlier run binds
to that run's calls (its request ids name that run; its digest admitted one call there) and is
refused here; actor, tenant and denials come from the new run's own inputs. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ownloop.contracts import (
    Approval,
    ApprovalRequested,
    AssistantMessage,
    Conversation,
    Evidence,
    Message,
    RunResult,
    RunStatus,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from ownloop.exceptions import ConfigurationError
from ownloop.loop import RunState

__all__ = [
    "Continuation",
    "History",
    "check_fresh_authority",
    "continuation",
    "start_from",
    "with_history",
]

History: TypeAlias = "RunResult[Any] | Sequence[Message]"
"""What a follow-up continues: an earlier run's result, or a conversation as messages."""

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)

NOT_EXECUTED = (
    "Not executed: the earlier run ended before this call ran. Propose it again if it is still "
    "needed."
)
"""The observation given to an earlier tool call that never got one (providers reject orphans)."""


@dataclass(frozen=True, slots=True)
class Continuation:
    """The earlier turns a new run starts from.

    Attributes:
        messages: The earlier conversation without its leading instructions (the new run sends
            its own), every tool call answered.
        evidence: The earlier evidence ledger, each item marked with the run that observed it.
        conversation: The record of where the turns came from, stored with the new run.
        earlier: The earlier result, when the history was one.
    """

    messages: tuple[Message, ...]
    evidence: dict[str, Evidence]
    conversation: Conversation
    earlier: RunResult[Any] | None


def continuation(history: History | None, *, thread_id: str | None = None) -> Continuation | None:
    """Read a history into the turns a follow-up starts from.

    Args:
        history: An earlier result, or the conversation as messages.
        thread_id: The stored thread the follow-up belongs to, if any.

    Returns:
        The continuation; ``None`` for a run that continues nothing and is in no thread.

    Raises:
        ConfigurationError: If the earlier run is paused (resume it instead) or has a write
            whose effect is unknown (settle it first), or an item is not a message.
    """
    if history is None:
        return (
            None
            if thread_id is None
            else Continuation((), {}, Conversation(thread_id=thread_id), None)
        )
    if isinstance(history, RunResult):
        _check_continuable(history)
        messages = _answered(_without_instructions(history.messages))
        evidence = {item.id: _earlier(item, history.run_id) for item in history.evidence}
        record = Conversation(
            continues=history.run_id,
            thread_id=thread_id,
            earlier_messages=len(messages),
            earlier_evidence=len(evidence),
            earlier_usage=_conversation_usage(history),
        )
        return Continuation(messages, evidence, record, history)
    items: object = history  # checked: callers may pass anything
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise ConfigurationError(
            f"history must be a RunResult or a sequence of messages, not {type(history).__name__}"
        )
    for item in history:
        if not isinstance(item, _MESSAGE_TYPES):
            raise ConfigurationError(
                f"history holds a {type(item).__name__}, not a message (SystemMessage, "
                "UserMessage, AssistantMessage or ToolMessage)"
            )
    messages = _answered(_without_instructions(tuple(history)))
    record = Conversation(thread_id=thread_id, earlier_messages=len(messages))
    return Continuation(messages, {}, record, None)


def with_history(opening: list[Message], earlier: Continuation | None) -> list[Message]:
    """Place the earlier turns between a run's instructions and its own user turn.

    Args:
        opening: The new run's opening messages, its user turn last.
        earlier: The continuation, if the run continues one.

    Returns:
        The messages the run starts with.
    """
    if earlier is None:
        return opening
    return [*opening[:-1], *earlier.messages, opening[-1]]


def start_from(state: RunState, earlier: Continuation | None) -> RunState:
    """Give a new run's state the earlier evidence and the record of its conversation.

    Args:
        state: The new run's state, its messages already holding the earlier turns.
        earlier: The continuation, if any.

    Returns:
        The same state.
    """
    if earlier is not None:
        state.evidence = dict(earlier.evidence)
        state.conversation = earlier.conversation
    return state


def check_fresh_authority(earlier: Continuation | None, approvals: Iterable[Approval]) -> None:
    """Refuse a decision that was given to the earlier run: authority never carries over.

    Args:
        earlier: The continuation.
        approvals: The decisions supplied to the new run.

    Raises:
        ConfigurationError: If a decision was applied in the earlier run, or names one of its
            requests.
    """
    result = earlier.earlier if earlier is not None else None
    if result is None:
        return
    given = set(result.approvals)  # a paused run, with decisions not yet used, is refused
    requests = {request.id for request in result.approval_requests} | {
        event.request_id for event in result.trace if isinstance(event, ApprovalRequested)
    }
    for approval in approvals:
        if approval in given or approval.request_id in requests:
            named = approval.request_id or approval.digest
            raise ConfigurationError(
                f"the decision on {named} belongs to the earlier run {result.run_id}: an "
                "approval binds to the call of the run it was given to and is never reused. "
                "A follow-up that proposes the write again needs its own decision"
            )


def _check_continuable(result: RunResult[Any]) -> None:
    if result.status is RunStatus.PAUSED:
        requests = ", ".join(request.id for request in result.approval_requests) or "none"
        raise ConfigurationError(
            f"run {result.run_id} is paused waiting for approval (request {requests}): decide "
            "it and resume the run before a follow-up continues it"
        )
    if result.pending:
        tools = ", ".join(sorted({operation.tool for operation in result.pending}))
        raise ConfigurationError(
            f"run {result.run_id} has writes whose effect is unknown ({tools}): settle them "
            "before a follow-up continues it (a follow-up could repeat them). To continue the "
            "text alone, pass history=result.messages"
        )


def _conversation_usage(result: RunResult[Any]) -> Usage:
    """What the conversation used up to and including ``result``'s run."""
    before = result.conversation.earlier_usage if result.conversation else Usage()
    return before.add(**result.usage.model_dump())


def _earlier(item: Evidence, run_id: str) -> Evidence:
    return item if item.from_run is not None else item.model_copy(update={"from_run": run_id})


def _without_instructions(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Drop the leading system messages: the new run sends its own instructions."""
    index = 0
    while index < len(messages) and isinstance(messages[index], SystemMessage):
        index += 1
    return tuple(messages[index:])


def _answered(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """Give every tool call without an observation one saying it never ran."""
    observed = {message.call_id for message in messages if isinstance(message, ToolMessage)}
    result: list[Message] = []
    missing: list[ToolMessage] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            result.extend(missing)  # answers come right after their turn's observations
            missing = [
                ToolMessage(call_id=call.id, name=call.name, content=NOT_EXECUTED)
                for call in message.tool_calls
                if call.id not in observed
            ]
        elif not isinstance(message, ToolMessage) and missing:
            result.extend(missing)
            missing = []
        result.append(message)
    result.extend(missing)
    return tuple(result)
