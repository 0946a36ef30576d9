"""What the loop core needs to know about an agent, gathered once per run."""

from __future__ import annotations

from dataclasses import dataclass

from ownloop.clock import Clock
from ownloop.contracts import Limits, ModelSettings, Versions
from ownloop.retry import RetryPolicy
from ownloop.tools import ToolRegistry
from ownloop.validators import CompletionValidator

__all__ = ["LoopConfig"]


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """The fixed configuration of a run.

    Attributes:
        registry: The tools.
        limits: The budgets.
        validator: The completion check, if any.
        retry: The backoff policy.
        clock: The clock.
        instructions: The system message, if any.
        settings: Sampling settings for every model request.
        versions: The versions producing the run.
    """

    registry: ToolRegistry
    limits: Limits
    validator: CompletionValidator | None
    retry: RetryPolicy
    clock: Clock
    instructions: str | None
    settings: ModelSettings
    versions: Versions
