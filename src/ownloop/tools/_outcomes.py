"""What a proposed tool call that failed validation becomes: a `ToolRejection`.

The other outcome, `ValidatedCall`, lives with `RegisteredTool` (it holds one); this module
imports no other tool module, so argument loading can name rejection codes without a cycle.

A `ToolRejection` is data, not an exception: bad input from a model is expected, and the runtime
turns the rejection into an observation the model can act on. Its message is written for the model
(which field, what was expected, what came) and bounded.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["RejectionCode", "ToolRejection"]

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
