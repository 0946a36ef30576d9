"""Authorization and approvals as data: who may call what, and which calls need a person.

A `Policy` decides each proposed call from trusted inputs only — the application's `Actor`, the
tool's declaration and the validated arguments — never from a model's or a tool's prose. The
runtime consults it twice: to choose which tools to offer, and before executing each call.
"""

from ownloop.policy._approvals import (
    approval_digest,
    approval_request_id,
    encoded_approval_digest,
    legacy_approval_digest,
    matching_approval,
)
from ownloop.policy._document import PolicyDocument
from ownloop.policy._policy import (
    Policy,
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
from ownloop.policy._sql import SIDE_EFFECT_FUNCTIONS
from ownloop.policy._verdicts import Allow, Decision, Deny, RequireApproval, Rule

__all__ = [
    "SIDE_EFFECT_FUNCTIONS",
    "Allow",
    "Decision",
    "Deny",
    "Policy",
    "PolicyDocument",
    "RequireApproval",
    "Rule",
    "allow_all",
    "allow_tools",
    "allow_writes",
    "approval_digest",
    "approval_request_id",
    "default_policy",
    "deny_all",
    "deny_tools",
    "encoded_approval_digest",
    "legacy_approval_digest",
    "matching_approval",
    "refuse_sql_writes",
    "require_approval_for",
    "require_role",
    "tenant_scoped",
]
