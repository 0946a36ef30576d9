"""One proposed tool call, from proposal to observation: decided as data, no I/O.

The order is fixed: trace the proposal, reserve a tool call, detect repetition, validate, settle or
refuse new writes while an earlier write's effect is unknown, pass the gateway (authorize, check
preconditions, approve), execute with retries, check the receipt, and answer the call with a
bounded observation.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ownloop.budgets import check_before_tool_attempt, check_before_tool_call, check_deadline
from ownloop.contracts import (
    Receipt,
    RevisionAudited,
    RunResult,
    RunStatus,
    StopReason,
    ToolCall,
    ToolProposed,
    ToolRejected,
)
from ownloop.loop._delegate import end_with_handoff, handoff_answer, journals_write
from ownloop.loop._execute import execute, replay_journaled
from ownloop.loop._finish import end, end_for_budget
from ownloop.loop._gateway import admit
from ownloop.loop._identity import identify
from ownloop.loop._observe import add_tool_observation, truncate
from ownloop.loop._revision import completion_context, current_revision
from ownloop.loop._unknown import settle_pending
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Outcome
from ownloop.loop.state import RunState, action_key
from ownloop.redaction import bound_value, redact_sensitive
from ownloop.tools import ToolRejection, ValidatedCall, render_observation
from ownloop.validators import evidence_rule_of

__all__ = [
    "admission_ends_run",
    "admit_proposal",
    "block_on_pending",
    "conclude_call",
    "run_tool_call",
]


def run_tool_call(
    config: LoopConfig, state: RunState, call: ToolCall
) -> Generator[Effect, Outcome, None]:
    """Handle one proposed call: admit, validate, execute and observe it, or end the run.

    Args:
        config: The run's configuration.
        state: The run's state.
        call: The model's proposal.

    Yields:
        Every effect the call needs: tool attempts, sleeps, revision reads, approvals, lookups.
    """
    if state.admitted_call_id != call.id:  # a call resumed after approval was admitted already
        admit_proposal(config, state, call)
    key = state.current_key()
    validated = identify(config, state, call, key)  # decided once, then read back
    if isinstance(validated, ToolRejection):
        state.trace.emit(
            ToolRejected,
            call_id=call.id,
            tool=call.name,
            code=validated.code,
            reason=validated.message,
        )
        add_tool_observation(
            state,
            call_id=call.id,
            name=call.name,
            content=f"Tool call rejected ({validated.code}): {validated.message}",
            max_chars=config.limits.max_observation_chars,
            source="rejection",
        )
        return
    receipt = _from_journal(config, state, validated, key)
    if receipt is None:
        if validated.tool.spec.effect == "write":
            yield from block_on_pending(config, state, f"write {validated.tool.spec.name!r}")
        if not (yield from admit(config, state, validated, key)):
            _answered(state, key)
            return
        receipt = yield from execute(config, state, validated, key)
    yield from conclude_call(config, state, validated, receipt, key)
    _answered(state, key)
    if state.handed_off is not None:  # the child took over and answered: the run ends with it
        yield from _hand_over(config, state, state.handed_off)


def _hand_over(
    config: LoopConfig, state: RunState, result: RunResult[Any]
) -> Generator[Effect, Outcome, None]:
    """End the run with a handoff's answer, checked as the run's own answer would be."""
    yield from block_on_pending(config, state, "the handed-off answer")
    answer, evidence = handoff_answer(config, state, result)
    verdict = None
    if config.validator is not None:
        context = yield from completion_context(config, state.receipts, state.deps)
        verdict = config.validator(answer, evidence, context)
    end_with_handoff(state, result, answer, verdict)


def _answered(state: RunState, key: str) -> None:
    """Forget a call's identity once it is answered: its intent (for a write) keeps it."""
    state.identities.pop(key, None)
    state.admitted_by.pop(key, None)


def conclude_call(
    config: LoopConfig, state: RunState, validated: ValidatedCall, receipt: Receipt, key: str
) -> Generator[Effect, Outcome, None]:
    """Act on a call's final receipt: keep an unknown write pending, audit, observe.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The call.
        receipt: Its checked, recorded receipt.
        key: The call's journal key.

    Yields:
        A revision read, when the policy audits after every tool.
    """
    call = validated.call
    if receipt.status == "unknown":
        reason = receipt.message or "effect unknown"
        state.add_pending(validated, reason, receipt.revision, key)
    if config.policy.audit_after_tool:
        revision = yield from current_revision(config)
        state.trace.emit(RevisionAudited, call_id=call.id, tool=call.name, revision=revision)
    _observe(config, state, validated, receipt)


def _from_journal(
    config: LoopConfig, state: RunState, validated: ValidatedCall, key: str
) -> Receipt | None:
    """Journal first: a write the journal holds is done, so it skips the gateway entirely.

    It is neither re-authorised nor re-approved (its approval was given and consumed before its
    intent was journaled), and never executed again; a request waiting for it is dropped.
    """
    if not journals_write(config, validated.tool):
        return None
    receipt = replay_journaled(state, validated, key)
    if receipt is not None:
        state.approval_requests = []  # only the call in progress can have been waiting
    return receipt


def block_on_pending(
    config: LoopConfig, state: RunState, blocked: str
) -> Generator[Effect, Outcome, None]:
    """End the run as unresolved if writes with unknown effect remain after asking their lookups.

    Args:
        config: The run's configuration.
        state: The run's state.
        blocked: What is waiting (named in the detail).

    Yields:
        The lookups' effects.
    """
    if not state.pending:
        return
    yield from settle_pending(config, state)
    if state.pending:
        calls = ", ".join(f"{p.tool} ({p.call_id})" for p in state.pending)
        end(
            RunStatus.UNRESOLVED,
            StopReason.UNRESOLVED_EFFECT,
            f"{blocked} is blocked: the effect of {calls} is unknown and no authoritative "
            "lookup settled it",
        )


def admission_ends_run(config: LoopConfig, state: RunState, call: ToolCall) -> bool:
    """Say whether admitting ``call`` now would end the run (a budget, the deadline, a repeat).

    Nothing is counted or traced: a group stops growing before such a call, which then takes
    the one-at-a-time path and ends the run exactly as it would have alone.

    Args:
        config: The run's configuration.
        state: The run's state.
        call: The next proposal.

    Returns:
        ``True`` when its admission (or its first attempt) would end the run.
    """
    limits = config.limits
    if check_before_tool_call(limits, state.usage) is not None:
        return True
    if check_before_tool_attempt(limits, state.usage) is not None:
        return True
    elapsed = config.clock.monotonic() - state.started_at
    if check_deadline(limits, elapsed, "before_tool_attempt") is not None:
        return True
    key = action_key(call.name, call.arguments)
    repeats = state.repeats + 1 if key == state.last_action else 1
    return repeats >= limits.max_repeats


def admit_proposal(config: LoopConfig, state: RunState, call: ToolCall) -> None:
    """Trace a proposal, count it as a tool call and check it for repetition.

    Args:
        config: The run's configuration.
        state: The run's state.
        call: The proposal.

    Raises:
        RunEnded: The tool-call budget is spent, or the same action repeats too often.
    """
    registered = config.registry.get(call.name)
    sensitive = registered.spec.sensitive if registered is not None else ()
    state.trace.emit(
        ToolProposed,
        step=max(state.usage.steps, 1),
        call_id=call.id,
        tool=call.name,
        arguments=bound_value(redact_sensitive(call.arguments, sensitive)),
    )
    end_for_budget(check_before_tool_call(config.limits, state.usage))
    state.count(tool_calls=1)
    state.admitted_call_id = call.id
    key = action_key(call.name, call.arguments)
    if key == state.last_action:
        state.repeats += 1
    else:
        state.last_action, state.repeats = key, 1
    if state.repeats >= config.limits.max_repeats:
        end(
            RunStatus.STOPPED,
            StopReason.REPEATED_ACTION,
            f"{call.name!r} was proposed with the same arguments {state.repeats} times in a row",
        )


def _observe(
    config: LoopConfig, state: RunState, validated: ValidatedCall, receipt: Receipt
) -> None:
    spec, call = validated.tool.spec, validated.call
    limit = config.limits.max_observation_chars
    max_chars = min(spec.max_output_chars or limit, limit)
    if receipt.status == "unknown":
        content = (
            f"The effect of {spec.name} is unknown ({receipt.message}). It may have happened; "
            "do not repeat it. The runtime will reconcile it."
        )
        source = "unknown_effect"
    elif receipt.status == "error":
        content, source = f"Tool {spec.name} failed: {receipt.message}", "tool_error"
    else:
        content, source = render_observation(receipt.data), "tool"
        if spec.evidence:  # what the model is shown of a fact source is evidence
            shown, _ = truncate(content, max_chars)
            rule = evidence_rule_of(config.validator)
            state.record_evidence(spec.name, call.id, receipt.data, shown, rule)
    add_tool_observation(
        state, call_id=call.id, name=call.name, content=content, max_chars=max_chars, source=source
    )
