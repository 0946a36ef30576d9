"""The two outcomes of validating a proposed tool call: admitted (`ValidatedCall`) or not.

A `ToolRejection` is data, not an exception: bad input from a model is expected, and the runtime
turns the rejection into an observation the model can act on. Its message is written for the model
(which field, what was expected, what came) and bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from ownloop.contracts import JsonValue, ToolCall

if TYPE_CHECKING:
    from ownloop.tools._tool import RegisteredTool

__all__ = ["RejectionCode", "ToolRejection", "ValidatedCall"]

RejectionCode = Literal["unknown_tool", "invalid_json", "invalid_arguments", "arguments_too_large"]
"""Why a proposed call was rejected before its tool ran."""


class ToolRejection(BaseModel):
    """A proposed tool call that was rejected before the tool ran.

    Attributes:
        call_id: The id of the rejected call.
        tool: The tool name as proposed (it may name no tool).
        code: Why: ``unknown_tool``, ``invalid_json``, ``invalid_arguments`` or
            ``arguments_too_large``.
        message: What was wrong, written so the model can fix its next call (bounded).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_id: str
    tool: str
    code: RejectionCode
    message: str


@dataclass(frozen=True, slots=True, eq=False)
class ValidatedCall:
    """A proposed call whose tool exists and whose arguments passed validation.

    Attributes:
        call: The proposal as the model sent it.
        tool: The registered tool it calls.
        arguments: Python values ready to pass to the function, defaults restored.
        canonical: The arguments as JSON (defaults restored, keys sorted at every level).
        digest: SHA-256 hex of ``"<tool>:" + canonical JSON`` (sorted keys, compact); equal
            for equal calls of the same tool, whatever key order the model used.
    """

    call: ToolCall
    tool: RegisteredTool
    arguments: dict[str, Any]
    canonical: dict[str, JsonValue]
    digest: str

    def __repr__(self) -> str:
        # Arguments may hold secrets (see ToolSpec.sensitive): the repr shows only identifiers.
        return (
            f"ValidatedCall(tool={self.tool.spec.name!r}, call_id={self.call.id!r}, "
            f"digest={self.digest[:12]!r})"
        )
