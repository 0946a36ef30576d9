"""The built-in authorization rules, as plain rule functions with their readable names.

Each factory returns ``(rule, name)``; `ownloop.policy.Policy` wraps them into composable policies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ownloop.contracts import Actor, ToolSpec
from ownloop.exceptions import ConfigurationError
from ownloop.policy._verdicts import ALLOW, Decision, Deny, RequireApproval, Rule

__all__ = [
    "NamedRule",
    "allow_tools",
    "allow_writes",
    "declared_writes",
    "deny_tools",
    "refuse_sql_writes",
    "require_approval_for",
    "require_role",
    "tenant_scoped",
]

NamedRule = tuple[Rule, str]
"""A rule and the name it reads as in traces."""


def _names(names: Iterable[str], what: str) -> frozenset[str]:
    collected = frozenset(names)
    if any(not isinstance(name, str) or not name for name in collected):
        raise ConfigurationError(f"{what} takes tool names (non-empty strings)")
    return collected


def _listing(names: frozenset[str]) -> str:
    return ", ".join(repr(name) for name in sorted(names))


def allow_tools(*names: str) -> NamedRule:
    """Allow only the named tools; every other tool is denied and never offered.

    Args:
        *names: The tools that may be used.
    """
    allowed = _names(names, "allow_tools")

    def rule(_actor: Actor | None, spec: ToolSpec, _args: Mapping[str, Any] | None) -> Decision:
        if spec.name in allowed:
            return ALLOW
        listing = _listing(allowed) or "none"
        return Deny(f"tool {spec.name!r} is not in the allowed tools ({listing})")

    return rule, f"allow_tools({_listing(allowed)})"


def deny_tools(*names: str) -> NamedRule:
    """Deny the named tools; every other tool is allowed.

    Args:
        *names: The tools that may not be used.
    """
    denied = _names(names, "deny_tools")

    def rule(_actor: Actor | None, spec: ToolSpec, _args: Mapping[str, Any] | None) -> Decision:
        return Deny(f"tool {spec.name!r} is denied") if spec.name in denied else ALLOW

    return rule, f"deny_tools({_listing(denied)})"


def allow_writes(*names: str) -> NamedRule:
    """Allow every read tool, and only the named write tools: writes need explicit allowance.

    Args:
        *names: The write tools that may be used.
    """
    allowed = _names(names, "allow_writes")

    def rule(_actor: Actor | None, spec: ToolSpec, _args: Mapping[str, Any] | None) -> Decision:
        if spec.effect == "read" or spec.name in allowed:
            return ALLOW
        return Deny(
            f"write tool {spec.name!r} is not explicitly allowed; allow it with "
            f"allow_writes({spec.name!r})"
        )

    return rule, f"allow_writes({_listing(allowed)})"


def declared_writes() -> NamedRule:
    """The default rule: reads allowed, writes declared ``requires_approval`` need an approval.

    A write tool declared ``@registry.tool(effect="write", requires_approval=True)`` is offered
    and each call pauses for an approval bound to its exact arguments; any other write is denied
    until a policy allows it.
    """

    def rule(_actor: Actor | None, spec: ToolSpec, _args: Mapping[str, Any] | None) -> Decision:
        if spec.effect == "read":
            return ALLOW
        if spec.requires_approval:
            return RequireApproval("the tool requires approval")
        return Deny(
            f"write tool {spec.name!r} is not explicitly allowed; declare it "
            f"requires_approval=True to run it once a person approves, or allow it with "
            f"allow_writes({spec.name!r})"
        )

    return rule, "default_policy()"


def require_role(role: str, *tools: str) -> NamedRule:
    """Require the actor to hold ``role`` to use the named tools (all tools when none are named).

    Args:
        role: The role required.
        *tools: The tools it guards; every tool when empty.
    """
    guarded = _names(tools, "require_role")

    def rule(actor: Actor | None, spec: ToolSpec, _args: Mapping[str, Any] | None) -> Decision:
        if guarded and spec.name not in guarded:
            return ALLOW
        if actor is not None and role in actor.roles:
            return ALLOW
        who = f"actor {actor.id!r}" if actor is not None else "an anonymous run"
        return Deny(f"tool {spec.name!r} requires role {role!r}, which {who} does not have")

    return rule, f"require_role({role!r}{', ' if guarded else ''}{_listing(guarded)})"


def tenant_scoped(argument: str = "tenant_id") -> NamedRule:
    """Require an argument naming a tenant to equal the actor's tenant, wherever it appears.

    Tools without that argument are unaffected. A run without an actor tenant may not use it.

    Args:
        argument: The name of the argument that carries a tenant id.
    """

    def rule(actor: Actor | None, spec: ToolSpec, args: Mapping[str, Any] | None) -> Decision:
        if args is None or argument not in args:
            return ALLOW
        tenant = actor.tenant if actor is not None else None
        if tenant is not None and args[argument] == tenant:
            return ALLOW
        return Deny(
            f"{spec.name}.{argument} must be the actor's own tenant; "
            f"{'the run has no tenant' if tenant is None else 'it names another tenant'}"
        )

    return rule, f"tenant_scoped({argument!r})"


def require_approval_for(*tools: str, reason: str = "a person must approve this call") -> NamedRule:
    """Require an exact approval for every call of the named tools (all write tools when none).

    Args:
        *tools: The tools that need approval; every write tool when empty.
        reason: Shown to the approver.
    """
    guarded = _names(tools, "require_approval_for")

    def rule(_actor: Actor | None, spec: ToolSpec, _args: Mapping[str, Any] | None) -> Decision:
        needs = spec.name in guarded if guarded else spec.effect == "write"
        return RequireApproval(reason) if needs else ALLOW

    return rule, f"require_approval_for({_listing(guarded) or 'writes'})"


_SQL_WRITE = re.compile(
    r"\b(insert|update|delete|drop|alter|create|truncate|grant|revoke|merge|replace|attach)\b",
    re.IGNORECASE,
)


def refuse_sql_writes(argument: str = "query", *tools: str) -> NamedRule:
    """Refuse SQL that writes: any statement keyword that changes data or schema is denied.

    This is a guard on the argument's text, a second line behind a read-only database account,
    never a replacement for it.

    Args:
        argument: The argument that carries SQL.
        *tools: The tools it guards; every tool with that argument when empty.
    """
    guarded = _names(tools, "refuse_sql_writes")

    def rule(_actor: Actor | None, spec: ToolSpec, args: Mapping[str, Any] | None) -> Decision:
        if args is None or (guarded and spec.name not in guarded):
            return ALLOW
        text = args.get(argument)
        match = _SQL_WRITE.search(text) if isinstance(text, str) else None
        if match is None:
            return ALLOW
        return Deny(f"{spec.name}.{argument} contains the write keyword {match.group(1).upper()}")

    return rule, f"refuse_sql_writes({argument!r})"
