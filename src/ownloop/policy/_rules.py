"""The built-in authorization rules, as plain rule functions with their readable names.

Each factory returns ``(rule, name)``; `ownloop.policy.Policy` wraps them into composable policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from ownloop.contracts import Actor, ToolSpec
from ownloop.exceptions import ConfigurationError
from ownloop.policy._sql import load_sqlglot, sql_write_reason
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
    """Require every argument naming a tenant to equal the actor's tenant, wherever it appears.

    The argument is looked for at any depth: at the top level, inside objects (mappings and
    Pydantic models, by field name or alias), and inside lists, tuples and sets. Every
    occurrence must be a string exactly equal to the actor's tenant (case-sensitive, no trimming
    or normalisation); a number, ``null`` or any other value is another tenant. Calls where the
    argument appears nowhere are unaffected. A run without an actor tenant may not use it.

    Args:
        argument: The name of the argument that carries a tenant id.
    """

    def rule(actor: Actor | None, spec: ToolSpec, args: Mapping[str, Any] | None) -> Decision:
        found = tuple(_occurrences(args, argument)) if args is not None else ()
        if not found:
            return ALLOW
        tenant = actor.tenant if actor is not None else None
        if tenant is None:
            return Deny(
                f"{spec.name}.{found[0][0]} must be the actor's own tenant; the run has no tenant"
            )
        for path, value in found:
            if not (isinstance(value, str) and value == tenant):
                return Deny(
                    f"{spec.name}.{path} must be the actor's own tenant; it names another tenant"
                )
        return ALLOW

    return rule, f"tenant_scoped({argument!r})"


def _occurrences(root: Any, argument: str) -> Iterator[tuple[str, Any]]:
    """Yield ``(path, value)`` for every key or field named ``argument``, at any depth."""
    stack: list[tuple[str, Any]] = [("", root)]
    seen: set[int] = set()
    while stack:
        path, value = stack.pop()
        if isinstance(value, str | bytes | int | float | None) or id(value) in seen:
            continue
        seen.add(id(value))
        for key, item in _children(value):
            if isinstance(key, str):
                child = f"{path}.{key}" if path else key
            else:
                child = f"{path}[{key!r}]"
            if key == argument:
                yield child, item
            stack.append((child, item))


def _children(value: Any) -> Iterable[tuple[Any, Any]]:
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        named = [(name, getattr(value, name, None)) for name in fields]
        aliases = [
            (field.alias, getattr(value, name, None))
            for name, field in fields.items()
            if field.alias and field.alias != name
        ]
        return named + aliases
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return list(enumerate(value))
    return ()


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


def refuse_sql_writes(
    argument: str = "query", *tools: str, dialect: str | None = None
) -> NamedRule:
    """Refuse SQL that is not provably read-only: it is parsed, and only one ``SELECT`` passes.

    A single ``SELECT`` (``WITH``, ``UNION``… included) with no ``INTO``, no row locks, no
    writing statement anywhere inside and no call to a function in `SIDE_EFFECT_FUNCTIONS` is
    allowed; everything else is denied, text that does not parse and non-text values included.
    A user-defined function that writes cannot be seen: this is a second line behind a read-only
    database account, never a replacement for it. Needs ``pip install 'ownloop[sql]'``.

    Args:
        argument: The argument that carries SQL.
        *tools: The tools it guards; every tool with that argument when empty.
        dialect: The sqlglot dialect to parse with (``"postgres"``, ``"mysql"``, ``"sqlite"``…).

    Raises:
        ConfigurationError: If sqlglot is not installed.
    """
    guarded = _names(tools, "refuse_sql_writes")
    load_sqlglot()

    def rule(_actor: Actor | None, spec: ToolSpec, args: Mapping[str, Any] | None) -> Decision:
        if args is None or (guarded and spec.name not in guarded) or argument not in args:
            return ALLOW
        text = args[argument]
        if text is None:
            return ALLOW
        reason = sql_write_reason(text, dialect) if isinstance(text, str) else "it is not SQL text"
        if reason is None:
            return ALLOW
        return Deny(f"{spec.name}.{argument} is not a read-only query: {reason}")

    shown = f", dialect={dialect!r}" if dialect is not None else ""
    return rule, f"refuse_sql_writes({argument!r}{shown})"
