"""Checks the `Agent` facade makes on its configuration: tools never offered, resumes that changed.

- `warn_never_offered` logs one warning per rule that denies registered tools to every actor, so a
  tool that can never run does not go unnoticed (it is not an error: a registry may be shared).
  Each tool and rule is reported once per process: an application that builds an agent per
  request does not repeat it on every request.
- `check_deps` refuses a run or resume without the deps the agent declares (deps are live objects,
  never stored, so a resume must give them again), or with deps of another type.
- `configuration_changes` says what differs between the configuration a run was recorded with
  and the one resuming it (each tool's effect and schema included, from `tool_versions`);
  `check_configuration` refuses such a resume unless told to accept it.
- `check_fresh_decisions` refuses a decision the run already applied (passed again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ownloop.contracts import (
    Actor,
    Approval,
    Limits,
    RunSnapshot,
    RunStarted,
    ToolSpec,
    ToolVersion,
    Versions,
)
from ownloop.exceptions import ConfigurationError
from ownloop.identity import digest
from ownloop.policy import Deny, Policy

__all__ = [
    "NEVER_OFFERED",
    "check_configuration",
    "check_deps",
    "check_fresh_decisions",
    "configuration_changes",
    "logger",
    "tool_changes",
    "tool_versions",
    "warn_never_offered",
]

logger = logging.getLogger("ownloop")
"""The logger the agent's configuration warnings go to."""

NEVER_OFFERED = "ownloop_never_offered"
"""The log record attribute holding the names a never-offered warning is about, for filters."""

_warned: set[tuple[str, str]] = set()
"""The (tool, rule) pairs already reported in this process."""


class _EveryRole(tuple[str, ...]):
    """A roles tuple that contains every role: the most privileged actor a policy could see."""

    def __contains__(self, _role: object) -> bool:
        return True


def _probe_actors() -> tuple[Actor | None, Actor]:
    privileged = Actor.model_construct(id="ownloop-probe", tenant=None, roles=_EveryRole())
    return None, privileged


def warn_never_offered(policy: Policy, specs: Iterable[ToolSpec]) -> None:
    """Log one warning per rule that denies tools to an anonymous run and to any role.

    The tools a rule never offers are named together in one line, with the rule's reason (for
    the first of them), so a registry of many tools, such as an MCP server's, costs one line;
    a write tool's line adds that a tool that only reads declares ``effect="read"``.

    Args:
        policy: The agent's policy.
        specs: The registered tools.
    """
    probes = _probe_actors()
    denied: dict[str, list[tuple[ToolSpec, Deny]]] = {}
    for spec in specs:
        try:
            decisions = [policy.decide(actor, spec, None) for actor in probes]
        except Exception:  # noqa: S112 - a custom rule the probe surprised decides at run time
            continue
        denial = decisions[0]
        if not all(isinstance(decision, Deny) for decision in decisions):
            continue
        assert isinstance(denial, Deny)
        rule = denial.rule or repr(policy)
        if (spec.name, rule) in _warned:
            continue
        _warned.add((spec.name, rule))
        denied.setdefault(rule, []).append((spec, denial))
    for rule, tools in denied.items():
        first, denial = tools[0]
        extra = {NEVER_OFFERED: tuple(spec.name for spec, _ in tools)}
        hint = (
            '; if it only reads, declare @registry.tool(effect="read")'
            if any(spec.effect == "write" for spec, _ in tools)
            else ""
        )
        if len(tools) == 1:
            logger.warning(
                "tool %r is registered but the policy never offers it (rule %s: %s)%s",
                first.name,
                rule,
                denial.reason,
                hint,
                extra=extra,
            )
            continue
        logger.warning(
            "%d tools are registered but the policy never offers them (rule %s): %s; for %r: %s%s",
            len(tools),
            rule,
            ", ".join(repr(spec.name) for spec, _ in tools),
            first.name,
            denial.reason,
            hint,
            extra=extra,
        )


def configuration_changes(
    snapshot: RunSnapshot, versions: Versions, limits: Limits, offered: Iterable[str]
) -> list[str]:
    """Say what differs between a run's recorded configuration and the resuming agent's.

    Args:
        snapshot: The run as stored (or paused).
        versions: The resuming agent's versions.
        limits: The resuming agent's limits.
        offered: The names of the tools the resuming agent offers the run's actor.

    Returns:
        Nothing when the digests agree; otherwise one phrase per difference found, or a phrase
        naming the policy and validators when neither the limits nor the offered tools differ.
    """
    changes = tool_changes(snapshot.versions.tools, versions.tools)
    if snapshot.versions.policy_digest == versions.policy_digest:
        return changes
    if snapshot.limits != limits:
        recorded, now = snapshot.limits.model_dump(), limits.model_dump()
        names = [name for name in recorded if recorded[name] != now[name]]
        changes.append("limits (" + ", ".join(names) + ")")
    started = next((event for event in snapshot.trace if isinstance(event, RunStarted)), None)
    current = list(offered)
    if started is not None and set(started.tools) != set(current):
        added = sorted(set(current) - set(started.tools))
        removed = sorted(set(started.tools) - set(current))
        parts = [f"added {', '.join(added)}"] if added else []
        parts += [f"removed {', '.join(removed)}"] if removed else []
        changes.append("offered tools (" + "; ".join(parts) + ")")
    if snapshot.versions.output_type != versions.output_type:
        before, after = snapshot.versions.output_type or "str", versions.output_type or "str"
        changes.append(f"output_type ({before} -> {after})")
    if not changes:
        changes.append("the policy, the validators or the registered tools")
    return changes


def tool_versions(specs: Iterable[ToolSpec]) -> tuple[ToolVersion, ...]:
    """Record each tool's effect and a digest of its schema and options, for a run's versions.

    Args:
        specs: The registered tools.
    """
    return tuple(
        ToolVersion(
            name=spec.name,
            effect=spec.effect,
            schema_digest=digest(
                {
                    "parameters": spec.parameters,
                    "strict": spec.strict,
                    "requires_approval": spec.requires_approval,
                    "idempotent": spec.idempotent,
                }
            )[:16],
        )
        for spec in specs
    )


def tool_changes(recorded: Iterable[ToolVersion], current: Iterable[ToolVersion]) -> list[str]:
    """Name each recorded tool whose effect or schema changed (a run recorded none: nothing).

    Args:
        recorded: The tools the run was recorded with.
        current: The resuming agent's tools.
    """
    now = {tool.name: tool for tool in current}
    changes: list[str] = []
    for tool in recorded:
        found = now.get(tool.name)
        if found is None:
            continue  # a tool no longer registered shows as an offered-tools change
        if found.effect != tool.effect:
            changes.append(f"tool {tool.name!r} effect ({tool.effect} -> {found.effect})")
        if found.schema_digest != tool.schema_digest:
            changes.append(f"tool {tool.name!r} signature (its schema or options changed)")
    return changes


def check_fresh_decisions(snapshot: RunSnapshot, decisions: Iterable[Approval]) -> None:
    """Refuse a decision the run already applied: one decision admits one call, once.

    Args:
        snapshot: The run.
        decisions: The decisions supplied to a resume.

    Raises:
        ConfigurationError: A decision is one the run already applied.
    """
    for decision in decisions:
        if decision in snapshot.approvals:
            named = decision.request_id or decision.digest
            raise ConfigurationError(
                f"the decision for request {named} was already applied to run "
                f"{snapshot.run_id}: a decision admits one call once; decide the request the "
                "run waits for now"
            )


def check_configuration(
    snapshot: RunSnapshot,
    versions: Versions,
    limits: Limits,
    offered: Iterable[ToolSpec],
    *,
    accept: bool,
) -> list[str]:
    """Refuse a resume under another configuration than the recorded one, unless accepted.

    Args:
        snapshot: The run as stored (or paused).
        versions: The resuming agent's versions.
        limits: The resuming agent's limits.
        offered: The tools the resuming agent offers the run's actor.
        accept: Whether the caller accepts a changed configuration.

    Returns:
        What differs (empty when nothing does); the caller records it when not empty.

    Raises:
        ConfigurationError: If something differs and ``accept`` is false.
    """
    changes = configuration_changes(snapshot, versions, limits, [spec.name for spec in offered])
    if changes and not accept:
        recorded, now = snapshot.versions.policy_digest, versions.policy_digest
        digests = f" (policy_digest {recorded}, now {now})" if recorded != now else ""
        raise ConfigurationError(
            f"run {snapshot.run_id} was recorded with another configuration{digests}: "
            f"{'; '.join(changes)} differ. Resume it with the agent it ran with, or pass "
            f"accept_changes=True to continue under this one (recorded in the trace)."
        )
    return changes


def check_deps(deps_type: object, deps: object, verb: str) -> None:
    """Refuse missing deps, or deps of another type, when the agent declares ``deps_type``.

    Args:
        deps_type: The agent's ``deps_type`` (``None`` when it declares none).
        deps: The deps given to the run or resume.
        verb: ``run`` or ``resume``, named in the message.

    Raises:
        ConfigurationError: If deps are missing, or not an instance of a class ``deps_type``.
    """
    if deps_type is None:
        return
    name = getattr(deps_type, "__name__", repr(deps_type))
    if deps is None:
        raise ConfigurationError(
            f"this agent declares deps_type={name}: pass {verb}(..., deps=...); deps are live "
            "objects, never stored, so a resumed run needs them given again"
        )
    if isinstance(deps_type, type) and not isinstance(deps, deps_type):
        raise ConfigurationError(
            f"deps must be a {name} (the agent's deps_type), not {type(deps).__name__}"
        )
