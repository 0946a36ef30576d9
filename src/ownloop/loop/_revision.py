"""Reading the application's state revision through the driver (only when it tracks one)."""

from __future__ import annotations

from collections.abc import Generator, Sequence

from ownloop._text import clean_text
from ownloop.contracts import Receipt
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Outcome, ReadRevision, Revision
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
    value = outcome.value if isinstance(outcome, Revision) else None
    return None if value is None else clean_text(value)  # the application's text, kept in receipts


def completion_context(
    config: LoopConfig, receipts: Sequence[Receipt]
) -> Generator[Effect, Outcome, CompletionContext]:
    """Build the context completion checks and preconditions consult.

    Args:
        config: The run's configuration.
        receipts: The run's receipts, in execution order.

    Yields:
        `ReadRevision` when the application tracks one.
    """
    revision = yield from current_revision(config)
    return CompletionContext(receipts=tuple(receipts), revision=revision)
