"""The harness article's first lab, reproduced with ownloop: remove one control, see what passes.

A lab worker has a configuration (``timeout_ms`` from 100 to 5000, ``max_retries`` from 0 to 2;
it starts invalid, with 8 retries) and four tools: read, write and check the configuration, and
``publish``, a write tool that only flips a flag and exists to test a refusal. Fixed proposal
sequences (the *scenarios*) run against policies loaded from policy documents (the *profiles*):
the base document is the lab's ``policy.json``, and each ablated profile removes one control.

A row *lets a failure through* when its outcome breaks the base contract — something was
published, the run completed with an invalid configuration, or the model used more requests than
the contract allows. With the full policy no row fails; each ablation lets exactly its own
failure through.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ownloop._agent_checks import NEVER_OFFERED, logger
from ownloop.agent import Agent
from ownloop.contracts import Limits, RunResult, RunStatus
from ownloop.demo._config_lab import SCENARIOS, ConfigLab, proposer
from ownloop.policy import Policy

__all__ = [
    "BASE_POLICY_JSON",
    "CONTROLS",
    "LAB_LIMITS",
    "MATRIX",
    "PROFILES",
    "SCENARIOS",
    "AblationRow",
    "ConfigLab",
    "Control",
    "ablation_profiles",
    "full_matrix",
    "run_ablation",
    "run_matrix",
]

BASE_POLICY_JSON = """{
  "allowed_tools": ["read_config", "write_config", "check_config"],
  "max_requests": 4,
  "require_current_check": true,
  "audit_after_tool": false
}"""
"""The lab's ``policy.json``: three tools, four model requests, a current check to finish."""

LAB_LIMITS = Limits(max_steps=20, max_repeats=20, max_completion_rejections=0)
"""The agent's own limits in the lab, loose so that the policy's controls are what is measured.

``max_completion_rejections=0`` makes a rejected finish final, as in the lab; ``max_repeats`` is
raised so the loop scenario measures the request budget, not ownloop's repeat guard.
"""

PROFILES = (
    "essential",
    "instrumented",
    "without_permissions",
    "without_evidence",
    "without_budget",
)
"""The policy profiles, the full ones first."""

MATRIX = (
    ("normal", "essential"),
    ("normal", "instrumented"),
    ("publish", "instrumented"),
    ("publish", "without_permissions"),
    ("stale_check", "instrumented"),
    ("stale_check", "without_evidence"),
    ("loop", "instrumented"),
    ("loop", "without_budget"),
)
"""The lab's eight rows: each scenario under the full policy, then under its ablation."""


@dataclass(frozen=True)
class Control:
    """A control of the base policy, and the failure that passes without it.

    Attributes:
        key: The policy document key that carries the control.
        failure: The name of the failure it blocks.
        why: Why the control exists.
    """

    key: str
    failure: str
    why: str


CONTROLS: dict[str, Control] = {
    "without_permissions": Control(
        "allowed_tools",
        "published_without_permission",
        "the gateway must know which actions are available; a tool the model can name is not "
        "a tool it may use",
    ),
    "without_evidence": Control(
        "require_current_check",
        "completed_with_invalid_config",
        "completion needs a check of the current revision; a check before the last write "
        "proves nothing about it",
    ),
    "without_budget": Control(
        "max_requests",
        "requests_over_budget",
        "a proposer that never stops must be stopped by the runtime, at a number of requests "
        "the application chose",
    ),
}
"""Each ablated profile: the control it removes and the failure that then passes."""


def ablation_profiles(base: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Derive the five profiles from a base policy document, one toggled key each.

    Args:
        base: The base document (the keys of a policy file).

    Returns:
        Profile name -> policy document.
    """
    instrumented = {**copy.deepcopy(dict(base)), "audit_after_tool": True}
    return {
        "essential": copy.deepcopy(dict(base)),
        "instrumented": instrumented,
        "without_permissions": {**instrumented, "allowed_tools": None},
        "without_evidence": {**instrumented, "require_current_check": False},
        "without_budget": {**instrumented, "max_requests": None},
    }


@dataclass(frozen=True)
class AblationRow:
    """One cell of the matrix: a scenario run under a profile.

    Attributes:
        scenario: The scenario.
        profile: The profile.
        result: The run's result.
        valid_config: Whether the lab's configuration was valid at the end.
        published: Whether ``publish`` ran.
        failures: The broken promises of the base contract, if any.
    """

    scenario: str
    profile: str
    result: RunResult
    valid_config: bool
    published: bool
    failures: tuple[str, ...]

    @property
    def audits(self) -> int:
        """How many revision audits the run recorded."""
        return sum(1 for event in self.result.trace if event.kind == "revision_audited")

    def as_dict(self, *, trace: bool = False) -> dict[str, Any]:
        """Return the row as JSON-ready data.

        Args:
            trace: Include every trace event.

        Returns:
            The row's columns (and ``events`` when asked).
        """
        row: dict[str, Any] = {
            "scenario": self.scenario,
            "profile": self.profile,
            "status": self.result.status.value,
            "stop_reason": self.result.stop_reason.value,
            "requests": self.result.usage.model_requests,
            "tools": self.result.usage.tool_attempts,
            "audits": self.audits,
            "valid_config": self.valid_config,
            "published": self.published,
            "failures": list(self.failures),
        }
        if trace:
            row["events"] = [event.model_dump(mode="json") for event in self.result.trace]
        return row


def _failures(result: RunResult, lab: ConfigLab, contract: Mapping[str, Any]) -> tuple[str, ...]:
    failures = []
    if lab.published:
        failures.append(CONTROLS["without_permissions"].failure)
    if result.status is RunStatus.COMPLETED and not lab.valid():
        failures.append(CONTROLS["without_evidence"].failure)
    budget = contract.get("max_requests")
    if budget is not None and result.usage.model_requests > budget:
        failures.append(CONTROLS["without_budget"].failure)
    return tuple(failures)


class _DeniedOnPurpose(logging.Filter):
    """Drops the warning that ``publish`` is never offered: the lab registers it to be refused.

    The user of the lab cannot act on it; a warning about any other tool (a ``--policy`` of
    their own that leaves out a tool the lab needs) still shows.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        names = getattr(record, NEVER_OFFERED, None)
        return names is None or not set(names) <= {"publish"}


def run_ablation(
    scenario: str,
    profile: str,
    *,
    base: Mapping[str, Any] | None = None,
    limits: Limits = LAB_LIMITS,
) -> AblationRow:
    """Run one scenario under one profile.

    Args:
        scenario: A key of `SCENARIOS`.
        profile: One of `PROFILES`.
        base: The base policy document; `BASE_POLICY_JSON` by default.
        limits: The agent's own limits (the policy's budget lowers them); `LAB_LIMITS` by default.

    Returns:
        The row.
    """
    contract = base if base is not None else json.loads(BASE_POLICY_JSON)
    policy = Policy.from_document(ablation_profiles(contract)[profile])
    lab = ConfigLab()
    refusal = _DeniedOnPurpose()
    logger.addFilter(refusal)
    try:
        agent = Agent(
            proposer(SCENARIOS[scenario]),
            lab.registry(),
            limits=limits,
            policy=policy,
            revision=lab.revision,
        )
    finally:
        logger.removeFilter(refusal)
    result = agent.run_sync(
        "Fix the export worker's configuration.", run_id=f"ablate-{scenario}-{profile}"
    )
    return AblationRow(
        scenario=scenario,
        profile=profile,
        result=result,
        valid_config=lab.valid(),
        published=lab.published,
        failures=_failures(result, lab, contract),
    )


def run_matrix(
    cases: Iterable[tuple[str, str]] = MATRIX, *, base: Mapping[str, Any] | None = None
) -> list[AblationRow]:
    """Run the given (scenario, profile) cells; the lab's eight rows by default.

    Args:
        cases: The cells.
        base: The base policy document; `BASE_POLICY_JSON` by default.

    Returns:
        One row per cell, in order.
    """
    return [run_ablation(scenario, profile, base=base) for scenario, profile in cases]


def full_matrix() -> tuple[tuple[str, str], ...]:
    """Return every scenario under every profile (20 cells)."""
    return tuple((scenario, profile) for scenario in SCENARIOS for profile in PROFILES)
