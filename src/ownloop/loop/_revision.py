"""Reading the application's state revision through the driver (only when it tracks one)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from ownloop._text import clean_text
from ownloop.contracts import Receipt, RunStatus, StopReason
from ownloop.loop._finish import end
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Failure, Outcome, ReadRevision, Revision
from ownloop.validators import CompletionContext

__all__ = ["completion_context", "current_revision"]


def current_revision(config: LoopConfig) -> Generator[Effect, Outcome, str | None]:
    """Return the current revision, or ``None`` when the application tracks none.

    Args:
        config: The run's configuration.

    Yields:
        `ReadRevision` when the application gave a revision callable.
    """
    if not config.tracks_revision:
        return None
    outcome = yield ReadRevision()
    if isinstance(outcome, Failure):  # the driver gave up waiting: the deadline passed
        end(
            RunStatus.STOPPED,
            StopReason.DEADLINE,
            f"the revision source did not answer before the deadline ({outcome.error})",
        )
    if not isinstance(outcome, Revision) or outcome.value is None:
        return None
    return clean_text(outcome.value)  # the application's text: kept in receipts and the trace


def completion_context(
    config: LoopConfig, receipts: Sequence[Receipt], deps: Any = None
) -> Generator[Effect, Outcome, CompletionContext]:
    """Build the context completion checks and preconditions consult.

    Args:
        config: The run's configuration.
        receipts: The run's receipts, in execution order.
        deps: The run's application objects.

    Yields:
        `ReadRevision` when the application tracks one.
    """
    revision = yield from current_revision(config)
    return CompletionContext(receipts=tuple(receipts), revision=revision, deps=deps)
