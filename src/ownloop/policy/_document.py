"""Policy files: the JSON or TOML document an operator writes, validated strictly.

Unknown keys are errors, so a typo never silently weakens a policy; so are duplicate keys (JSON
would keep the last one: ``"denied_tools"`` given twice could end as allow-all) and values of the
wrong type: nothing is coerced (``true`` is not 1, ``"3"`` is not 3, ``"yes"`` is not true); an
integer is accepted where seconds are expected. Every error names the key and the value. The
options of the harness article's ``policy.json`` (``allowed_tools``, ``max_requests``,
``require_current_check``, ``audit_after_tool``) are accepted as they are.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic_core import ErrorDetails

from ownloop.contracts import Effect
from ownloop.exceptions import ConfigurationError
from ownloop.policy._rules import (
    NamedRule,
    allow_tools,
    allow_writes,
    deny_tools,
    require_approval_for,
    require_role,
    tenant_scoped,
)

__all__ = ["PolicyDocument", "load_document", "parse_document"]

_BUDGET_FIELDS = (
    "max_steps",
    "max_model_attempts",
    "max_tool_calls",
    "max_tool_attempts",
    "max_total_tokens",
    "deadline_s",
)


_Name = Annotated[StrictStr, Field(min_length=1)]
"""A tool, role or argument name: a non-empty string, never another type converted."""


class PolicyDocument(BaseModel):
    """The contents of a policy file.

    Attributes:
        allowed_tools: Only these tools may be used (``null``: no tool restriction).
        denied_tools: These tools may never be used.
        allowed_writes: When set, write tools outside this list are denied.
        required_roles: Tool name -> the role an actor needs to use it.
        tenant_argument: An argument that must equal the actor's tenant.
        approval_required: Tools whose every call needs an exact approval.
        max_requests: Model requests in a run (the harness article's name for ``max_steps``).
        max_steps: Model turns in a run.
        max_model_attempts: Model calls in a run, retries included.
        max_tool_calls: Tool calls in a run.
        max_tool_attempts: Tool executions in a run, retries included.
        max_total_tokens: Tokens in a run.
        deadline_s: Wall-clock seconds for a run.
        require_current_check: Completion needs a passing check at the current revision.
        check_tool: The tool whose receipt is that check.
        check_passed_field: The field of the check's result that says it passed.
        audit_after_tool: Record an audit event with the revision after every tool.
        tool_effects: Tool name -> ``read`` or ``write``, for tools whose effect comes from
            outside the code (MCP tools: `ownloop.mcp.MCPToolset` takes it as ``effects=``);
            the rules above then treat the tool by that effect.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_tools: tuple[_Name, ...] | None = None
    denied_tools: tuple[_Name, ...] = ()
    allowed_writes: tuple[_Name, ...] | None = None
    required_roles: dict[_Name, _Name] = Field(default_factory=dict)
    tenant_argument: _Name | None = None
    approval_required: tuple[_Name, ...] = ()
    max_requests: StrictInt | None = Field(default=None, ge=1)
    max_steps: StrictInt | None = Field(default=None, ge=1)
    max_model_attempts: StrictInt | None = Field(default=None, ge=1)
    max_tool_calls: StrictInt | None = Field(default=None, ge=0)
    max_tool_attempts: StrictInt | None = Field(default=None, ge=0)
    max_total_tokens: StrictInt | None = Field(default=None, ge=1)
    deadline_s: StrictFloat | None = Field(default=None, gt=0)
    require_current_check: StrictBool = False
    check_tool: StrictStr = "check_config"
    check_passed_field: StrictStr = "passed"
    audit_after_tool: StrictBool = False
    tool_effects: dict[_Name, Effect] = Field(default_factory=dict)

    def rules(self) -> list[NamedRule]:
        """Return the rules this document asks for, in a fixed order."""
        rules: list[NamedRule] = []
        if self.allowed_tools is not None:
            rules.append(allow_tools(*self.allowed_tools))
        if self.denied_tools:
            rules.append(deny_tools(*self.denied_tools))
        if self.allowed_writes is not None:
            rules.append(allow_writes(*self.allowed_writes))
        rules.extend(require_role(role, tool) for tool, role in sorted(self.required_roles.items()))
        if self.tenant_argument is not None:
            rules.append(tenant_scoped(self.tenant_argument))
        if self.approval_required:
            rules.append(require_approval_for(*self.approval_required))
        return rules

    def budgets(self) -> dict[str, float]:
        """Return the budget caps this document sets, by `Limits` field name."""
        caps: dict[str, float] = {
            name: value for name in _BUDGET_FIELDS if (value := getattr(self, name)) is not None
        }
        if self.max_requests is not None:
            caps["max_steps"] = min(self.max_requests, caps.get("max_steps", self.max_requests))
        return caps


def load_document(path: str | Path) -> PolicyDocument:
    """Read and validate a policy file (``.json`` or ``.toml``).

    Args:
        path: The file.

    Returns:
        The validated document.

    Raises:
        ConfigurationError: If the file cannot be read or parsed, or any key is unknown or invalid.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        if file.suffix.lower() == ".toml":
            data = tomllib.loads(text)  # TOML itself refuses a key defined twice
        else:
            data = json.loads(text, object_pairs_hook=_unique_keys)
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot read policy file {file}: {error}") from None
    return parse_document(data, f"policy file {file}")


def parse_document(data: object, source: str = "policy document") -> PolicyDocument:
    """Validate already-parsed policy data (a mapping, as a JSON or TOML file would hold).

    Args:
        data: The parsed contents.
        source: How errors name where the data came from.

    Returns:
        The validated document.

    Raises:
        ConfigurationError: If any key is unknown or any value invalid.
    """
    try:
        return PolicyDocument.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(_problem(item) for item in error.errors(include_url=False))
        raise ConfigurationError(f"invalid {source}: {problems}") from None


def _problem(item: ErrorDetails) -> str:
    key = ".".join(str(part) for part in item["loc"]) or "(file)"
    value = json.dumps(item["input"], ensure_ascii=False, default=repr)[:200]
    return f"{key}: {item['msg']} (got {value})"


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key!r} appears twice (values {result[key]!r}, {value!r})")
        result[key] = value
    return result
