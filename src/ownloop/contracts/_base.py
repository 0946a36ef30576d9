"""Shared building blocks of the contracts: base classes and bounded field types.

Every contract forbids unknown fields, so a typo in stored JSON or a model's invented field is an
error rather than silently ignored. Records (what happened) are frozen; nothing here does I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints

__all__ = [
    "MAX_ID_CHARS",
    "TOOL_NAME_PATTERN",
    "Contract",
    "Identifier",
    "JsonValue",
    "NonNegativeInt",
    "Record",
    "ToolName",
    "utc_now",
]

MAX_ID_CHARS = 128
"""Longest accepted identifier (run ids, call ids, request ids, actor ids)."""

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""What OpenAI accepts as a function name, and so what ownloop accepts as a tool name."""

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
ToolName = Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]
NonNegativeInt = Annotated[int, Field(ge=0)]


def utc_now() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class Contract(BaseModel):
    """Base of mutable contracts: unknown fields are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Record(BaseModel):
    """Base of frozen records: what happened, never edited after the fact."""

    model_config = ConfigDict(extra="forbid", frozen=True)
