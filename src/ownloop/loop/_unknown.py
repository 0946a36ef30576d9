"""Settling writes whose effect is unknown, only through the lookup the tool declared.

Nothing here guesses: a lookup that confirms the effect records it as applied; one that says it
did not happen clears the write for a retry of the same call with the same idempotency key; any
other answer — including a lookup that fails — leaves the operation pending.
"""

from __future__ import annotations

from collections.abc import Generator

from ownloop.contracts import EffectReconciled, Receipt
from ownloop.loop._execute import execute, tool_context
from ownloop.loop._observe import truncate
from ownloop.loop._revision import current_revision
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Outcome, Reconcile, ToolReturn
from ownloop.loop.state import RunState, pending_key
from ownloop.tools import Confirmed, NotApplied, render_observation, to_jsonable
from ownloop.validators import evidence_rule_of

__all__ = ["settle_pending"]


def settle_pending(config: LoopConfig, state: RunState) -> Generator[Effect, Outcome, None]:
    """Ask every pending write's lookup once; settle what it answers authoritatively.

    Args:
        config: The run's configuration.
        state: The run's state.

    Yields:
        `Reconcile` per pending write with a lookup, and the effects of a cleared retry.
    """
    for operation in list(state.pending):
        key = pending_key(operation)
        validated = state.pending_calls.get(key)
        if validated is None or validated.tool.reconcile is None:
            continue
        spec, call_id = validated.tool.spec, operation.call_id
        revision = yield from current_revision(config)
        context = tool_context(config, state, validated, 1, revision, key=key)
        outcome = yield Reconcile(validated, context)
        verdict = outcome.value if isinstance(outcome, ToolReturn) else None
        if isinstance(verdict, Confirmed):
            state.trace.emit(EffectReconciled, call_id=call_id, tool=spec.name, outcome="confirmed")
            state.settle(key)
            data = to_jsonable(verdict.data)
            state.receipts.append(
                Receipt(
                    call_id=call_id,
                    tool=spec.name,
                    status="ok",
                    effect="applied",
                    revision=revision,
                    data=data,
                )
            )
            feedback = f"The effect of {spec.name} (call {call_id}) is confirmed: "
            feedback += render_observation(data)
            state.deferred_feedback.append(feedback)
            if spec.evidence:  # a confirmed write counts like one that answered directly
                shown, _ = truncate(feedback, config.limits.max_observation_chars)
                state.record_evidence(
                    spec.name, call_id, data, shown, evidence_rule_of(config.validator)
                )
        elif isinstance(verdict, NotApplied):
            state.trace.emit(
                EffectReconciled, call_id=call_id, tool=spec.name, outcome="not_applied"
            )
            state.settle(key)
            state.journal.pop(key, None)  # the lookup cleared it: the retry may run
            receipt = yield from execute(config, state, validated, key)
            if receipt.status == "unknown":
                reason = receipt.message or "effect unknown"
                state.add_pending(validated, reason, receipt.revision, key)
            state.deferred_feedback.append(
                f"{spec.name} (call {call_id}) had not taken effect and was retried with the same "
                f"idempotency key: {receipt.status} {render_observation(receipt.data)}"
            )
        else:
            state.trace.emit(EffectReconciled, call_id=call_id, tool=spec.name, outcome="unknown")
