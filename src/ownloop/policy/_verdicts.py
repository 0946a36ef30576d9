"""Authorization verdicts: what a rule decides about one call, and how verdicts combine.

A rule is a callable ``(actor, spec, arguments) -> Allow | Deny | RequireApproval``. ``arguments``
is ``None`` when the runtime asks whether a tool may be *offered* at all (before any proposal), so
rules that depend on argument values allow in that case and decide when real arguments arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ownloop.contracts import Actor, ToolSpec

__all__ = ["ALLOW", "Allow", "Decision", "Deny", "RequireApproval", "Rule", "all_of", "any_of"]


@dataclass(frozen=True, slots=True)
class Allow:
    """The call may go ahead."""


@dataclass(frozen=True, slots=True)
class Deny:
    """The call is refused.

    Attributes:
        reason: Why, in words the model and an operator can act on.
        rule: The rule that refused it.
    """

    reason: str
    rule: str = ""


@dataclass(frozen=True, slots=True)
class RequireApproval:
    """The call needs an approval bound to its exact arguments and revision.

    Attributes:
        reason: Why, shown to the approver.
        rule: The rule that asked for it.
    """

    reason: str
    rule: str = ""


Decision = Allow | Deny | RequireApproval
"""What a rule decides."""

Rule = Callable[[Actor | None, ToolSpec, Mapping[str, Any] | None], Decision]
"""A rule: the actor (if any), the tool's spec, and the validated arguments (``None`` = any)."""

ALLOW = Allow()
"""The one `Allow` instance rules return."""


def all_of(first: Decision, second: Decision) -> Decision:
    """Combine two verdicts that must both allow: a denial wins, then an approval requirement.

    Args:
        first: One verdict.
        second: The other.

    Returns:
        The combined verdict.
    """
    for kind in (Deny, RequireApproval):
        for decision in (first, second):
            if isinstance(decision, kind):
                return decision
    return ALLOW


def any_of(first: Decision, second: Decision) -> Decision:
    """Combine two verdicts of which one must allow: an allowance wins, then an approval.

    Args:
        first: One verdict.
        second: The other.

    Returns:
        The combined verdict; the first denial when both deny.
    """
    for kind in (Allow, RequireApproval):
        for decision in (first, second):
            if isinstance(decision, kind):
                return decision
    return first
