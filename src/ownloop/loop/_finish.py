"""How the loop core ends a run: a private signal carrying the terminal status and reason."""

from __future__ import annotations

from typing import NoReturn

from ownloop.budgets import BudgetBreach
from ownloop.contracts import RunStatus, StopReason

__all__ = ["RunEnded", "end", "end_for_budget"]


class RunEnded(Exception):
    """Raised inside the core to end the run; caught where the result is built.

    Args:
        status: The terminal status.
        reason: The exact stop reason.
        detail: A readable explanation.
        breach: The budget that ran out, when one did.
    """

    def __init__(
        self,
        status: RunStatus,
        reason: StopReason,
        detail: str,
        breach: BudgetBreach | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.breach = breach


def end(status: RunStatus, reason: StopReason, detail: str) -> NoReturn:
    """End the run now.

    Args:
        status: The terminal status.
        reason: The exact stop reason.
        detail: A readable explanation.

    Raises:
        RunEnded: Always.
    """
    raise RunEnded(status, reason, detail)


def end_for_budget(breach: BudgetBreach | None) -> None:
    """End the run as stopped if a budget ran out; do nothing otherwise.

    Args:
        breach: The result of a budget check.

    Raises:
        RunEnded: When ``breach`` is not ``None``.
    """
    if breach is not None:
        raise RunEnded(RunStatus.STOPPED, breach.stop_reason, breach.describe(), breach)
