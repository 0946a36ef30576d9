"""Bounded context: plan how to shrink a conversation without breaking provider rules.

An agent loop resends its whole history every turn, so tokens grow with the square of the turns.
A `ContextPolicy` caps the estimated size of the next request; when it would be exceeded, the
conversation keeps its system messages, the task and the last turns, and the middle is replaced
by one message (a placeholder saying what was dropped, or a summary). A *turn* is an assistant
message with the observations that answer its tool calls (and any runtime feedback after them):
turns are removed whole, so a tool call is never separated from its observation — providers
reject orphans. Everything here is pure; the loop applies the plan and traces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ownloop.contracts import AssistantMessage, Message, SystemMessage, ToolSpec, UserMessage
from ownloop.exceptions import ConfigurationError
from ownloop.tokens import TokenCounter, estimate_request_tokens, heuristic_tokens

__all__ = ["Compaction", "ContextPolicy", "plan_compaction", "split_turns"]


@dataclass(frozen=True)
class ContextPolicy:
    """When and how to compact the conversation.

    The defaults compact rarely and drop much: a request may grow to 8,000 tokens (the head, the
    tools and about three observations of ``Limits.max_observation_chars``), and a compaction
    keeps only the last turn, so the next one is several turns away. Each compaction changes the
    request's prefix, which providers' prompt caches key on, so fewer, larger compactions are
    cheaper than shaving one turn every time. Keep more turns when the model needs earlier
    observations verbatim, or give the agent a summarizer.

    Args:
        max_request_tokens: Compact when the next request's estimated input exceeds this.
        keep_last_turns: Turns always kept at the end (fewer only if they alone exceed the cap).
        counter: Counts a text's tokens (the heuristic by default; `ownloop.tokens.token_counter`
            uses tiktoken when available).
    """

    max_request_tokens: int = 8_000
    keep_last_turns: int = 1
    counter: TokenCounter = heuristic_tokens

    def __post_init__(self) -> None:
        if self.max_request_tokens < 256:
            raise ConfigurationError("ContextPolicy.max_request_tokens must be at least 256")
        if self.keep_last_turns < 1:
            raise ConfigurationError("ContextPolicy.keep_last_turns must be at least 1")


@dataclass(frozen=True, slots=True)
class Compaction:
    """A plan: which messages to keep, which to drop.

    Attributes:
        head: The pinned messages (system messages and the task).
        dropped: The messages to remove, whole turns only.
        tail: The kept recent turns.
        dropped_turns: How many turns (led by an assistant message) are removed; a previous
            compaction's placeholder is removed too but is not a turn.
        before_tokens: Estimated request tokens before.
    """

    head: tuple[Message, ...]
    dropped: tuple[Message, ...]
    tail: tuple[Message, ...]
    dropped_turns: int
    before_tokens: int

    def apply(self, replacement: Message) -> list[Message]:
        """Return the compacted conversation with ``replacement`` standing for the dropped part."""
        return [*self.head, replacement, *self.tail]


def split_turns(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Split a conversation into pinned head messages and whole turns.

    Args:
        messages: The conversation.

    Returns:
        The head (leading system messages and the first user message) and the turns in order.
    """
    index = 0
    while index < len(messages) and isinstance(messages[index], SystemMessage):
        index += 1
    if index < len(messages) and isinstance(messages[index], UserMessage):
        index += 1
    head = list(messages[:index])
    turns: list[list[Message]] = []
    for message in messages[index:]:
        if isinstance(message, AssistantMessage) or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return head, turns


def plan_compaction(
    messages: Sequence[Message], tools: Sequence[ToolSpec], policy: ContextPolicy
) -> Compaction | None:
    """Decide whether and what to compact before the next request.

    Args:
        messages: The conversation.
        tools: The tools offered (their schemas count towards the request).
        policy: The policy.

    Returns:
        A plan, or ``None`` when the request fits or there is no whole turn to drop (removing
        only an earlier placeholder would just replace it with another).
    """
    before = estimate_request_tokens(messages, tools, policy.counter)
    if before <= policy.max_request_tokens:
        return None
    head, turns = split_turns(messages)
    keep = min(policy.keep_last_turns, len(turns))
    fixed = estimate_request_tokens([*head], tools, policy.counter)
    while keep > 1:
        tail_tokens = sum(
            estimate_request_tokens(turn, (), policy.counter) for turn in turns[-keep:]
        )
        if fixed + tail_tokens <= policy.max_request_tokens:
            break
        keep -= 1
    dropped_turns = turns[: len(turns) - keep]
    counted = sum(isinstance(turn[0], AssistantMessage) for turn in dropped_turns)
    if not counted:
        return None
    return Compaction(
        head=tuple(head),
        dropped=tuple(message for turn in dropped_turns for message in turn),
        tail=tuple(message for turn in turns[len(turns) - keep :] for message in turn),
        dropped_turns=counted,
        before_tokens=before,
    )
