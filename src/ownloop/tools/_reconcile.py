"""Reconciliation: how a write tool settles whether an unknown effect really happened.

A write whose outcome is unknown may have happened. The runtime never retries it blindly; it asks
the lookup the tool declared (``@registry.tool(effect="write", reconcile=lookup)``). The lookup
answers with one of three verdicts, and only an authoritative answer changes anything:

- `Confirmed`: the effect happened (the write is recorded as applied, never repeated);
- `NotApplied`: it authoritatively did not happen (the runtime retries the same call with the
  same idempotency key);
- `StillUnknown`: the lookup cannot tell (the operation stays pending and blocks further writes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ownloop.tools._context import ToolContext

__all__ = ["Confirmed", "NotApplied", "Reconcile", "Reconciliation", "StillUnknown"]


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The write happened.

    Attributes:
        data: What the lookup found (recorded as the write's result).
    """

    data: Any = None


@dataclass(frozen=True, slots=True)
class NotApplied:
    """The write authoritatively did not happen; it may be retried with the same key."""


@dataclass(frozen=True, slots=True)
class StillUnknown:
    """The lookup is not authoritative; the operation stays pending.

    Attributes:
        reason: What the lookup saw.
    """

    reason: str = "the lookup could not tell"


Reconciliation = Confirmed | NotApplied | StillUnknown
"""A lookup's verdict on an unknown effect."""

Reconcile = Callable[[dict[str, Any], ToolContext], "Reconciliation | Awaitable[Reconciliation]"]
"""A lookup: the write's validated arguments and its context (same idempotency key) -> verdict."""
