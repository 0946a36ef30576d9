"""The provider-neutral conversation: what the loop sends to a model port.

Adapters translate these to a provider's wire format and back; provider types never appear here.
Opaque provider items (for example reasoning items a provider needs back on the next turn) travel
as JSON values that ownloop neither decodes nor logs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ownloop.contracts._base import Identifier, JsonValue, Record
from ownloop.contracts.tools import ToolCall

__all__ = ["AssistantMessage", "Message", "SystemMessage", "ToolMessage", "UserMessage"]


class SystemMessage(Record):
    """Instructions from the application to the model.

    Attributes:
        content: The instruction text.
    """

    role: Literal["system"] = "system"
    content: str


class UserMessage(Record):
    """The task, or feedback the runtime gives the model in the user's place.

    Attributes:
        content: The text.
    """

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(Record):
    """What the model said: text, tool calls, or both.

    Attributes:
        content: Text the model produced, if any.
        tool_calls: Tool calls the model proposed, in order.
        provider_items: Opaque items the provider needs echoed back (never decoded or logged).
    """

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    provider_items: tuple[JsonValue, ...] = ()


class ToolMessage(Record):
    """The observation for one tool call, answering the assistant message that proposed it.

    Attributes:
        call_id: The id of the tool call this observes.
        name: The tool's name as the model proposed it.
        content: The bounded, serialised observation.
    """

    role: Literal["tool"] = "tool"
    call_id: Identifier
    name: str = Field(max_length=256)
    content: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
"""One message of the conversation, discriminated by ``role``."""
