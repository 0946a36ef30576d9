"""Tool results as a user turn of facts, for servers whose chat template drops ``tool`` messages.

llama-cpp-python's ``chatml-function-calling`` template renders system, user and assistant turns
only: a ``tool`` message vanishes, the model never sees the result and calls the tool again. With
the profile's ``fold_tool_results`` switch each tool exchange (an assistant turn that calls tools
and the results that answer it) is sent as one user turn stating the calls and what they returned.
Pure mapping, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ownloop.contracts import AssistantMessage, Message, ToolMessage, UserMessage
from ownloop.models._normalize import arguments_text

__all__ = ["ends_with_tool_results", "fold_tool_results"]

_INSTRUCTION = "Answer the user's request from these facts in one short sentence."


def ends_with_tool_results(messages: Sequence[Message]) -> bool:
    """Whether the conversation's last message is a tool result."""
    return bool(messages) and isinstance(messages[-1], ToolMessage)


def fold_tool_results(messages: Sequence[Message]) -> list[Message]:
    """Replace every tool exchange by one user turn of facts.

    Args:
        messages: The conversation.

    Returns:
        The conversation with no tool messages and no assistant turns that only call tools; an
        assistant's text alongside its calls is kept as its own turn.
    """
    folded: list[Message] = []
    names: dict[str, str] = {}
    facts: list[str] = []

    def flush() -> None:
        if facts:
            folded.append(UserMessage(content="\n".join(["Tool results:", *facts, _INSTRUCTION])))
            facts.clear()

    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            flush()
            if message.content:
                folded.append(AssistantMessage(content=message.content))
            for call in message.tool_calls:
                names[call.id] = f"{call.name}({arguments_text(call.arguments)})"
        elif isinstance(message, ToolMessage):
            called = names.get(message.call_id, "a tool")
            facts.append(f"- {called} returned: {message.content}")
        else:
            flush()
            folded.append(message)
    flush()
    return folded
