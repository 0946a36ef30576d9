"""The composable `Policy` and the public factories of the built-in rules.

Policies compose: ``a & b`` allows only what both allow (a denial beats an approval requirement,
which beats an allowance); ``a | b`` allows what either allows. `allow_all` and `deny_all` are the
neutral elements. The repr reads like the expression that built the policy: it is recorded in
every run's policy digest.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ownloop.contracts import Actor, Limits, ToolSpec
from ownloop.exceptions import ConfigurationError
from ownloop.policy import _rules
from ownloop.policy._document import PolicyDocument, load_document, parse_document
from ownloop.policy._verdicts import ALLOW, Decision, Deny, RequireApproval, Rule, all_of, any_of

__all__ = [
    "Policy",
    "allow_all",
    "allow_tools",
    "allow_writes",
    "default_policy",
    "deny_all",
    "deny_tools",
    "refuse_sql_writes",
    "require_approval_for",
    "require_role",
    "tenant_scoped",
]


@dataclass(frozen=True)
class Policy:
    """A named, composable authorization rule, plus the run settings a policy file may carry.

    Args:
        rule: The function deciding each call.
        name: How the policy reads in traces and reprs.
        budgets: `Limits` caps (the stricter of these and the agent's limits apply).
        require_current_check: ``(check tool, passed field)`` when completion needs a check
            that passed at the current revision.
        audit_after_tool: Whether to record an audit event with the revision after every tool.
    """

    rule: Rule
    name: str
    budgets: Mapping[str, float] = field(default_factory=dict)
    require_current_check: tuple[str, str] | None = None
    audit_after_tool: bool = False

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        """Load a policy from a JSON or TOML file; unknown keys are errors.

        Args:
            path: The file.

        Returns:
            The policy: its rules joined with ``&``, its budgets, check and audit settings.

        Raises:
            ConfigurationError: If the file is unreadable or invalid.
        """
        return _from_document(load_document(path), f"Policy.from_file({Path(path).name!r}: ")

    @classmethod
    def from_document(cls, document: PolicyDocument | Mapping[str, Any]) -> Policy:
        """Build a policy from a policy document already in memory, with `from_file`'s rules.

        Args:
            document: A `PolicyDocument`, or a mapping with the keys a policy file may hold.

        Returns:
            The policy: its rules joined with ``&``, its budgets, check and audit settings.

        Raises:
            ConfigurationError: If the mapping has an unknown key or an invalid value.
        """
        if not isinstance(document, PolicyDocument):
            document = parse_document(document)
        return _from_document(document, "Policy.from_document(")

    def decide(
        self, actor: Actor | None, spec: ToolSpec, arguments: Mapping[str, Any] | None
    ) -> Decision:
        """Decide one call, naming this policy in a refusal that names no rule.

        Args:
            actor: Who the run acts for.
            spec: The tool.
            arguments: The validated arguments, or ``None`` to ask whether the tool may be offered.

        Returns:
            The decision.
        """
        decision = self.rule(actor, spec, arguments)
        if isinstance(decision, Deny | RequireApproval) and not decision.rule:
            return type(decision)(decision.reason, self.name)
        return decision

    def __call__(
        self, actor: Actor | None, spec: ToolSpec, arguments: Mapping[str, Any] | None
    ) -> Decision:
        return self.decide(actor, spec, arguments)

    def __and__(self, other: Policy) -> Policy:
        right = _as_policy(other)
        return self._combine(
            right, lambda a, s, x: all_of(self.decide(a, s, x), right.decide(a, s, x)), "&"
        )

    def __or__(self, other: Policy) -> Policy:
        right = _as_policy(other)
        return self._combine(
            right, lambda a, s, x: any_of(self.decide(a, s, x), right.decide(a, s, x)), "|"
        )

    def _combine(self, right: Policy, rule: Rule, operator: str) -> Policy:
        budgets = dict(self.budgets)
        for key, value in right.budgets.items():
            budgets[key] = min(value, budgets.get(key, value))
        return Policy(
            rule,
            f"({self.name} {operator} {right.name})",
            budgets=budgets,
            require_current_check=self.require_current_check or right.require_current_check,
            audit_after_tool=self.audit_after_tool or right.audit_after_tool,
        )

    def apply_budgets(self, limits: Limits) -> Limits:
        """Return ``limits`` with every budget this policy caps lowered to the policy's value.

        Args:
            limits: The agent's limits.

        Returns:
            The stricter combination.
        """
        if not self.budgets:
            return limits
        values = limits.model_dump()
        for key, cap in self.budgets.items():
            values[key] = min(values[key], type(values[key])(cap))
        return Limits(**values)

    def __repr__(self) -> str:
        return self.name


def _from_document(document: PolicyDocument, prefix: str) -> Policy:
    rules = [Policy(rule, name) for rule, name in document.rules()]
    policy = functools.reduce(operator.and_, rules) if rules else allow_all()
    check = (document.check_tool, document.check_passed_field)
    return Policy(
        policy.rule,
        f"{prefix}{policy.name})",
        budgets=document.budgets(),
        require_current_check=check if document.require_current_check else None,
        audit_after_tool=document.audit_after_tool,
    )


def _as_policy(other: object) -> Policy:
    if isinstance(other, Policy):
        return other
    raise ConfigurationError(f"a policy composes only with another Policy, not {other!r}")


def allow_all() -> Policy:
    """Return the policy that allows every call (the neutral element of ``&``)."""
    return Policy(lambda _actor, _spec, _args: ALLOW, "allow_all()")


def deny_all(reason: str = "no tool is allowed") -> Policy:
    """Return the policy that denies every call (the neutral element of ``|``).

    Args:
        reason: The denial reason.
    """
    return Policy(lambda _actor, _spec, _args: Deny(reason), "deny_all()")


def allow_tools(*names: str) -> Policy:
    """Allow only the named tools; every other tool is denied and never offered.

    Args:
        *names: The tools that may be used (write tools listed here are explicitly allowed).
    """
    return Policy(*_rules.allow_tools(*names))


def deny_tools(*names: str) -> Policy:
    """Deny the named tools; every other tool is allowed.

    Args:
        *names: The tools that may not be used.
    """
    return Policy(*_rules.deny_tools(*names))


def allow_writes(*names: str) -> Policy:
    """Allow every read tool and only the named write tools: writes need explicit allowance.

    Args:
        *names: The write tools that may be used.
    """
    return Policy(*_rules.allow_writes(*names))


def default_policy() -> Policy:
    """Return the policy of an agent built without one: reads run, writes need approval or leave.

    Read tools are allowed. A write tool declared ``requires_approval=True`` is offered and each
    call pauses for an exact approval (its declaration says it runs once a person approves). Any
    other write is denied and never offered. A policy passed to the agent replaces this one.

    Returns:
        The default policy (it reads ``default_policy()`` in reprs and digests).
    """
    return Policy(*_rules.declared_writes())


def require_role(role: str, *tools: str) -> Policy:
    """Require the actor to hold ``role`` to use the named tools (every tool when none named).

    Args:
        role: The role required.
        *tools: The tools it guards.
    """
    return Policy(*_rules.require_role(role, *tools))


def tenant_scoped(argument: str = "tenant_id") -> Policy:
    """Require an argument naming a tenant to equal the actor's tenant, at any depth.

    Every occurrence, top level or nested in objects and lists, must be a string exactly equal
    to the actor's tenant.

    Args:
        argument: The argument that carries a tenant id.
    """
    return Policy(*_rules.tenant_scoped(argument))


def require_approval_for(*tools: str, reason: str = "a person must approve this call") -> Policy:
    """Require an exact approval for every call of the named tools (every write tool when none).

    Args:
        *tools: The tools that need approval.
        reason: Shown to the approver.
    """
    return Policy(*_rules.require_approval_for(*tools, reason=reason))


def refuse_sql_writes(argument: str = "query", *tools: str, dialect: str | None = None) -> Policy:
    """Deny SQL in an argument unless it is provably read-only (one parsed ``SELECT``).

    See `ownloop.policy.SIDE_EFFECT_FUNCTIONS` and the policy guide for exactly what passes. A
    guard on the text, behind a read-only database account, never a replacement for it. Needs
    ``pip install 'ownloop[sql]'`` (sqlglot).

    Args:
        argument: The argument that carries SQL.
        *tools: The tools it guards; every tool with that argument when empty.
        dialect: The sqlglot dialect to parse with; the generic dialect when ``None``.

    Raises:
        ConfigurationError: If sqlglot is not installed.
    """
    return Policy(*_rules.refuse_sql_writes(argument, *tools, dialect=dialect))
