"""What the loop core needs to know about an agent, gathered once per run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ownloop.clock import Clock
from ownloop.context import ContextPolicy
from ownloop.contracts import Limits, ModelSettings, Versions
from ownloop.cost import PriceTable
from ownloop.loop._output import OutputSpec
from ownloop.policy import Policy
from ownloop.retry import RetryPolicy
from ownloop.tools import ToolRegistry
from ownloop.validators import CompletionValidator, Precondition

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
        policy: Who may call what, and which calls need approval.
        preconditions: Conditions writes must meet before they run.
        has_approver: Whether an approver decides requests inline (else the run pauses).
        tracks_revision: Whether the application gave a revision callable.
        on_denied: ``fail`` ends the run on a denied call; ``observe`` tells the model instead.
        on_approval_denied: The same choice for a denied approval.
        durable: Whether a store checkpoints the run and journals its writes.
        checkpoint_changes: Whether each checkpoint after the first carries only the trace,
            receipts and evidence added since the last (the store keeps the rest).
        context: When and how to compact the conversation, if at all.
        has_summarizer: Whether compaction asks a summarizer model (else it leaves a placeholder).
        prices: Token prices, for the run's cost and ``max_cost``.
        output: The typed answer asked for, or ``None`` for text.
    """

    registry: ToolRegistry
    limits: Limits
    validator: CompletionValidator | None
    retry: RetryPolicy
    clock: Clock
    instructions: str | None
    settings: ModelSettings
    versions: Versions
    policy: Policy
    preconditions: tuple[Precondition, ...] = ()
    has_approver: bool = False
    tracks_revision: bool = False
    on_denied: Literal["fail", "observe"] = "fail"
    on_approval_denied: Literal["fail", "observe"] = "fail"
    durable: bool = False
    checkpoint_changes: bool = False
    context: ContextPolicy | None = None
    has_summarizer: bool = False
    prices: PriceTable | None = None
    output: OutputSpec | None = None
