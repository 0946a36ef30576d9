"""Policies as data: built-in rules, composition, and policy files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownloop import Actor, ConfigurationError, Limits, ToolSpec
from ownloop.policy import (
    Allow,
    Deny,
    Policy,
    RequireApproval,
    allow_all,
    allow_tools,
    allow_writes,
    default_policy,
    deny_all,
    deny_tools,
    refuse_sql_writes,
    require_approval_for,
    require_role,
    tenant_scoped,
)

READ = ToolSpec(name="search", parameters={"type": "object"})
WRITE = ToolSpec(name="refund", parameters={"type": "object"}, effect="write")
ALICE = Actor(id="alice", tenant="acme", roles=("support",))


def test_allow_tools_denies_everything_else_and_names_the_rule() -> None:
    """allow_tools admits the listed tools only, and a denial names the policy that refused."""
    policy = allow_tools("search")
    assert policy.decide(None, READ, None) == Allow()
    denied = policy.decide(None, WRITE, None)
    assert isinstance(denied, Deny)
    assert "'refund' is not in the allowed tools ('search')" in denied.reason
    assert denied.rule == "allow_tools('search')"


def test_default_policy_denies_writes_until_allowed() -> None:
    """The default policy allows reads, denies writes, and allow_writes opens named writes."""
    assert default_policy().decide(None, READ, {}) == Allow()
    assert isinstance(default_policy().decide(None, WRITE, {}), Deny)
    assert allow_writes("refund").decide(None, WRITE, {}) == Allow()


def test_and_needs_both_and_denial_beats_approval() -> None:
    """A & b allows only what both allow; a denial wins over an approval requirement."""
    approval = require_approval_for("refund")
    both = approval & deny_tools("refund")
    assert isinstance(both.decide(None, WRITE, {}), Deny)
    assert isinstance((approval & allow_all()).decide(None, WRITE, {}), RequireApproval)
    assert (allow_all() & allow_tools("search")).decide(None, READ, {}) == Allow()
    assert repr(both) == "(require_approval_for('refund') & deny_tools('refund'))"


def test_or_needs_either_with_neutral_elements() -> None:
    """A | b allows what either allows; deny_all is neutral for | and allow_all for &."""
    either = deny_all() | allow_tools("search")
    assert either.decide(None, READ, {}) == Allow()
    assert isinstance(either.decide(None, WRITE, {}), Deny)
    assert isinstance(
        (deny_all() | require_approval_for()).decide(None, WRITE, {}), RequireApproval
    )
    with pytest.raises(ConfigurationError, match="another Policy"):
        allow_all() & "search"  # type: ignore[operator]


def test_required_role_comes_from_the_actor_only() -> None:
    """require_role checks the application's actor; an anonymous run is refused."""
    policy = require_role("manager", "refund")
    assert isinstance(policy.decide(ALICE, WRITE, {}), Deny)
    manager = Actor(id="bob", roles=("manager",))
    assert policy.decide(manager, WRITE, {}) == Allow()
    assert policy.decide(ALICE, READ, {}) == Allow()
    assert "anonymous" in policy.decide(None, WRITE, {}).reason  # type: ignore[union-attr]
    assert isinstance(require_role("admin").decide(ALICE, READ, None), Deny)


def test_tenant_scoping_compares_the_argument_with_the_actor_tenant() -> None:
    """tenant_scoped denies arguments naming another tenant and allows the actor's own."""
    policy = tenant_scoped()
    assert policy.decide(ALICE, READ, {"tenant_id": "acme"}) == Allow()
    assert isinstance(policy.decide(ALICE, READ, {"tenant_id": "globex"}), Deny)
    assert isinstance(policy.decide(None, READ, {"tenant_id": "acme"}), Deny)
    assert policy.decide(ALICE, READ, None) == Allow()
    assert policy.decide(ALICE, READ, {"query": "x"}) == Allow()


def test_sql_write_keywords_are_refused() -> None:
    """refuse_sql_writes denies DELETE/UPDATE/DROP text and allows SELECT."""
    policy = refuse_sql_writes("query")
    assert policy.decide(None, READ, {"query": "SELECT * FROM orders"}) == Allow()
    denied = policy.decide(None, READ, {"query": "select 1; delete from orders"})
    assert isinstance(denied, Deny)
    assert "DELETE" in denied.reason
    assert (
        refuse_sql_writes("query", "other").decide(None, READ, {"query": "DROP TABLE x"}) == Allow()
    )


def test_policy_file_json_builds_rules_budgets_and_checks(tmp_path: Path) -> None:
    """A JSON policy file gives rules, budget caps, a current-check requirement and audits."""
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps(
            {
                "allowed_tools": ["read_config", "write_config", "check_config"],
                "max_requests": 4,
                "require_current_check": True,
                "audit_after_tool": False,
            }
        )
    )
    policy = Policy.from_file(path)
    assert policy.require_current_check == ("check_config", "passed")
    assert not policy.audit_after_tool
    assert policy.apply_budgets(Limits()).max_steps == 4
    assert policy.apply_budgets(Limits(max_steps=2)).max_steps == 2
    assert isinstance(policy.decide(None, ToolSpec(name="publish", parameters={}), {}), Deny)
    assert "allow_tools" in repr(policy)


def test_policy_file_toml_and_every_key(tmp_path: Path) -> None:
    """A TOML policy file composes roles, tenants, approvals, denials and allowed writes."""
    path = tmp_path / "policy.toml"
    path.write_text(
        'denied_tools = ["drop"]\nallowed_writes = ["refund"]\ntenant_argument = "tenant_id"\n'
        'approval_required = ["refund"]\naudit_after_tool = true\nmax_tool_calls = 3\n'
        'deadline_s = 30.0\n[required_roles]\nrefund = "support"\n'
    )
    policy = Policy.from_file(path)
    assert isinstance(policy.decide(ALICE, WRITE, {"tenant_id": "acme"}), RequireApproval)
    assert isinstance(policy.decide(ALICE, WRITE, {"tenant_id": "globex"}), Deny)
    assert policy.audit_after_tool
    limits = policy.apply_budgets(Limits())
    assert (limits.max_tool_calls, limits.deadline_s) == (3, 30.0)


def test_empty_policy_file_allows_everything(tmp_path: Path) -> None:
    """A policy file with no rules allows every tool (it replaces the default policy)."""
    path = tmp_path / "open.json"
    path.write_text("{}")
    assert Policy.from_file(path).decide(None, WRITE, {}) == Allow()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"allowed_tool": ["x"]}', "allowed_tool: Extra inputs are not permitted"),
        ('{"max_requests": 0}', "max_requests"),
        ("{not json", "cannot read policy file"),
    ],
)
def test_invalid_policy_files_are_configuration_errors(
    tmp_path: Path, content: str, message: str
) -> None:
    """Unknown keys, impossible values and unparsable files raise ConfigurationError."""
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        Policy.from_file(path)


def test_missing_policy_file_is_a_configuration_error(tmp_path: Path) -> None:
    """A policy file that does not exist is reported with its path."""
    with pytest.raises(ConfigurationError, match=r"missing\.json"):
        Policy.from_file(tmp_path / "missing.json")


def test_rule_factories_refuse_bad_tool_names() -> None:
    """A rule given something other than tool names is a configuration error."""
    with pytest.raises(ConfigurationError, match="tool names"):
        allow_tools("")
