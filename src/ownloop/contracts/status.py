"""How a run ends: its status, the exact stop reason, and the versions that produced it."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from ownloop.contracts._base import Record

__all__ = ["RunStatus", "StopReason", "Versions"]


class RunStatus(StrEnum):
    """The state a run ended (or paused) in."""

    COMPLETED = "completed"
    """A final answer passed every completion check."""
    PAUSED = "paused"
    """Waiting for an approval; the run can be resumed."""
    STOPPED = "stopped"
    """A budget, the deadline, repeated actions or the model's explicit stop ended it."""
    UNRESOLVED = "unresolved"
    """A write's effect is unknown; only an authoritative lookup can settle it."""
    FAILED = "failed"
    """A permanent model or tool error, an invalid receipt or a denial ended it."""


class StopReason(StrEnum):
    """The exact cause of a run's end, readable in the trace."""

    FINAL_OUTPUT = "final_output"
    EXPLICIT_STOP = "explicit_stop"
    MAX_STEPS = "max_steps"
    MAX_MODEL_ATTEMPTS = "max_model_attempts"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_TOOL_ATTEMPTS = "max_tool_attempts"
    MAX_TOTAL_TOKENS = "max_total_tokens"
    MAX_COST = "max_cost"
    DEADLINE = "deadline"
    REPEATED_ACTION = "repeated_action"
    TOOL_DENIED = "tool_denied"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_DENIED = "approval_denied"
    COMPLETION_REJECTED = "completion_rejected"
    INVALID_OUTPUT = "invalid_output"
    UNRESOLVED_EFFECT = "unresolved_effect"
    RECEIPT_INVALID = "receipt_invalid"
    MODEL_ERROR = "model_error"
    TOOL_ERROR = "tool_error"


class ToolVersion(Record):
    """What a run recorded of one registered tool, so a resume notices a changed tool.

    Attributes:
        name: The tool.
        effect: Its declared effect.
        schema_digest: A digest of its parameter schema and options (strict, approval,
            idempotent).
    """

    name: str = Field(max_length=128)
    effect: str = Field(max_length=16)
    schema_digest: str = Field(max_length=128)


class Versions(Record):
    """The versions that produced a run, recorded so a result can be reproduced and audited.

    Attributes:
        ownloop: ownloop's version.
        python: The Python version.
        sdk: The provider SDK's version (``openai``), if installed.
        model: The model name the adapter targets, if known.
        policy_digest: A digest of the run's limits and policy configuration.
        tools: Each registered tool's effect and schema digest (empty in runs recorded before
            tools were recorded: their first resume records them).
        output_type: The typed answer the run produces (its name and schema digest, with the
            mode), or ``None`` for text.
    """

    ownloop: str = Field(max_length=64)
    python: str = Field(max_length=64)
    sdk: str | None = Field(default=None, max_length=64)
    model: str | None = Field(default=None, max_length=256)
    policy_digest: str | None = Field(default=None, max_length=128)
    tools: tuple[ToolVersion, ...] = ()
    output_type: str | None = Field(default=None, max_length=128)
