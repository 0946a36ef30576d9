"""Executing one admitted call: attempts, receipts, retries of transient failures.

Every attempt draws from the shared ``max_tool_attempts`` budget, no retry waits past the deadline,
and every outcome becomes a `Receipt` that is checked before it is believed.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta

from ownloop._text import describe_error
from ownloop.budgets import check_before_tool_attempt, check_deadline
from ownloop.contracts import (
    Approval,
    Receipt,
    ReceiptEffect,
    ReceiptStatus,
    RetryScheduled,
    RunStatus,
    StopReason,
    ToolFinished,
    ToolSpec,
    ToolStarted,
    WriteIntent,
)
from ownloop.exceptions import TransientToolError
from ownloop.loop._delegate import caller_run, journals_write, settle_delegation
from ownloop.loop._finish import end, end_for_budget
from ownloop.loop._revision import current_revision
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import (
    ConfirmLease,
    Effect,
    Failure,
    InvokeTool,
    Outcome,
    RecordIntent,
    RecordReceipt,
    Sleep,
    ToolReturn,
)
from ownloop.loop.state import RunState, idempotency_key
from ownloop.retry import GiveUp, retry_after_hint
from ownloop.tools import ToolContext, ValidatedCall, to_jsonable

__all__ = [
    "Attempted",
    "attempts",
    "begin_attempt",
    "consume_decision",
    "execute",
    "idempotency_key",
    "judge_attempt",
    "protect_sensitive",
    "receipt_problem",
    "replay_journaled",
    "tool_context",
]

_COHERENT = {
    "ok": {"none", "applied"},
    "transient": {"none"},
    "error": {"none"},
    "unknown": {"unknown"},
}


def tool_context(
    config: LoopConfig,
    state: RunState,
    validated: ValidatedCall,
    attempt: int,
    revision: str | None,
    *,
    key: str,
    share: int = 1,
) -> ToolContext:
    """Build what a handler (or a reconcile lookup) is told about the run.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The call.
        attempt: The attempt number, from 1.
        revision: The current revision.
        key: The call's journal key (its idempotency key derives from it).
        share: How many agent tools of one group split what the run has left.

    Returns:
        The context; write tools get the call's idempotency key.
    """
    spec, call = validated.tool.spec, validated.call
    remaining = config.limits.deadline_s - (config.clock.monotonic() - state.started_at)
    return ToolContext(
        run_id=state.run_id,
        call_id=call.id,
        tool=spec.name,
        attempt=attempt,
        actor=state.actor,
        idempotency_key=state.write_key(key, validated) if spec.effect == "write" else None,
        deadline=config.clock.now() + timedelta(seconds=max(remaining, 0.0)),
        deps=state.deps,
        revision=revision,
        caller=caller_run(config, state, key, share) if validated.tool.delegates else None,
        clock=config.clock,
    )


def execute(
    config: LoopConfig, state: RunState, validated: ValidatedCall, key: str
) -> Generator[Effect, Outcome, Receipt]:
    """Run the handler until it gives a non-transient receipt, or the run ends.

    A durable write is journaled first under its key. Callers answer a write the journal
    already holds from it (`replay_journaled`, before the gateway) and never reach here with it:
    execution starts only for a call the journal does not hold, or one its lookup cleared.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The admitted call.
        key: The call's journal key.

    Yields:
        `InvokeTool`, `Sleep` before retries, and revision reads.

    Returns:
        The receipt (``ok``, ``error`` or ``unknown``), checked and recorded.
    """
    spec = validated.tool.spec
    protect_sensitive(state, validated)
    if journals_write(config, validated.tool):
        yield RecordIntent(
            WriteIntent(
                run_id=state.run_id,
                call_id=key,
                tool=spec.name,
                idempotency_key=state.write_key(key, validated),
                arguments_digest=validated.digest,
                recorded_at=config.clock.now(),
                provider_call_id=validated.call.id,
                arguments=validated.encoded,
                digest_version=validated.digest_version,
                approval=state.admitted_by.get(key),
            )
        )
    return (yield from attempts(config, state, validated, key))


@dataclass(frozen=True, slots=True)
class Attempted:
    """An attempt that already ran (as part of a group), for `attempts` to judge.

    Attributes:
        outcome: What the handler did.
        duration_s: How long it ran.
        revision: The revision read after it.
    """

    outcome: Outcome
    duration_s: float
    revision: str | None


def protect_sensitive(state: RunState, validated: ValidatedCall) -> None:
    """Keep a call's sensitive argument values out of the trace (an error may quote them).

    Args:
        state: The run's state.
        validated: The call.
    """
    spec = validated.tool.spec
    if spec.sensitive:
        state.trace.protect(
            *(str(value) for key, value in validated.canonical.items() if key in spec.sensitive)
        )


def begin_attempt(
    config: LoopConfig, state: RunState, validated: ValidatedCall, attempt: int
) -> Generator[Effect, Outcome, None]:
    """Check the budgets and the deadline, count the attempt and trace its start.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The call.
        attempt: The attempt number, from 1.

    Yields:
        `ConfirmLease` before a journaled write's retry.
    """
    limits, spec = config.limits, validated.tool.spec
    end_for_budget(check_before_tool_attempt(limits, state.usage))
    elapsed = config.clock.monotonic() - state.started_at
    end_for_budget(check_deadline(limits, elapsed, "before_tool_attempt"))
    if config.durable and spec.effect == "write" and attempt > 1:
        yield ConfirmLease()  # fenced like the intent: a worker that lost the run stops here
    state.count(tool_attempts=1)
    state.trace.emit(ToolStarted, call_id=validated.call.id, tool=spec.name, attempt=attempt)


def attempts(
    config: LoopConfig,
    state: RunState,
    validated: ValidatedCall,
    key: str,
    transient: tuple[Receipt, Attempted] | None = None,
) -> Generator[Effect, Outcome, Receipt]:
    """Attempt a call until its receipt is not transient, or the run ends.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The admitted (and, for a write, journaled) call.
        key: The call's journal key.
        transient: A first attempt already run and judged transient (in a group): the
            attempts go on from its retry.

    Yields:
        `InvokeTool`, `Sleep` before retries, and revision reads.

    Returns:
        The checked, recorded receipt.
    """
    attempt = 1
    while True:
        if transient is None:
            attempted = yield from _attempt(config, state, validated, key, attempt)
            receipt = yield from judge_attempt(
                config, state, validated, key, attempt=attempt, attempted=attempted
            )
        else:
            (receipt, attempted), transient = transient, None
        if receipt.status != "transient":
            return receipt
        outcome = attempted.outcome
        error = outcome.error if isinstance(outcome, Failure) else None
        spec = validated.tool.spec
        yield from _retry(config, state, spec, attempt=attempt, receipt=receipt, error=error)
        attempt += 1


def _attempt(
    config: LoopConfig, state: RunState, validated: ValidatedCall, key: str, attempt: int
) -> Generator[Effect, Outcome, Attempted]:
    yield from begin_attempt(config, state, validated, attempt)
    before = yield from current_revision(config)
    started = config.clock.monotonic()
    outcome = yield InvokeTool(
        validated, tool_context(config, state, validated, attempt, before, key=key)
    )
    duration = max(config.clock.monotonic() - started, 0.0)
    after = yield from current_revision(config)
    return Attempted(outcome, duration, after)


def judge_attempt(
    config: LoopConfig,
    state: RunState,
    validated: ValidatedCall,
    key: str,
    *,
    attempt: int,
    attempted: Attempted,
) -> Generator[Effect, Outcome, Receipt]:
    """Turn an attempt's outcome into a receipt, trace it and check it; keep a final one.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The call.
        key: The call's journal key.
        attempt: The attempt number, from 1.
        attempted: What the attempt did.

    Yields:
        `RecordReceipt` for a journaled write's final receipt.

    Returns:
        The receipt; a transient one is not recorded (its retry decides).

    Raises:
        RunEnded: The receipt cannot be believed (failed / receipt_invalid).
    """
    spec, call_id = validated.tool.spec, validated.call.id
    outcome = settle_delegation(state, validated, attempted.outcome)
    receipt = _receipt(spec, call_id, outcome, attempted.revision)
    state.trace.emit(
        ToolFinished,
        call_id=call_id,
        tool=spec.name,
        attempt=attempt,
        status=receipt.status,
        effect=receipt.effect,
        duration_s=attempted.duration_s,
        message=receipt.message,
    )
    revision = attempted.revision if config.tracks_revision else None
    problem = receipt_problem(spec, call_id, receipt, revision)
    if problem is not None:
        return receipt_invalid(state, validated, receipt, problem, key=key)
    if receipt.status != "transient":
        state.receipts.append(receipt)
        if journals_write(config, validated.tool):
            yield RecordReceipt(state.run_id, key, receipt)
    return receipt


def replay_journaled(state: RunState, validated: ValidatedCall, key: str) -> Receipt | None:
    """Answer a write the journal holds, without executing (or authorising) it again.

    Args:
        state: The run's state.
        validated: The call.
        key: Its journal key.

    Returns:
        The journaled receipt (``unknown`` when the intent has none, or when the entry under
        this key records other arguments: never another call's receipt); ``None`` when the
        journal does not hold the call.
    """
    entry = state.journaled(key, validated)
    if entry is None:
        return None
    if entry.intent.approval is not None:  # the journal says what admitted it
        consume_decision(state, entry.intent.approval)
    spec, call_id = validated.tool.spec, validated.call.id
    recorded = (validated.digest,) if entry.intent.arguments is not None else (
        validated.digest, validated.legacy_digest  # a journal written before identities
    )  # fmt: skip
    if entry.intent.arguments_digest not in recorded:
        problem = f"the journal entry {key} records other arguments than this call"
        return _replay(state, spec, call_id, None, problem)
    return _replay(state, spec, call_id, entry.receipt)


def consume_decision(state: RunState, decision: Approval) -> None:
    """Consume a decision whose admitted call the journal records, whatever path admitted it.

    Before a crash the gateway admitted the call; a resume replays it from the journal and never
    reaches the gateway, so the decision is spent here: it, and any supplied or stored decision
    naming the same request or digest, admits nothing more.

    Args:
        state: The run's state.
        decision: The decision the journal records with the write.
    """
    names = {decision.request_id, decision.digest} - {None}
    for approval in list(state.approvals):
        if approval == decision or {approval.request_id, approval.digest} & names:
            state.approvals.remove(approval)
    if decision not in state.decisions:
        state.decisions.append(decision)


def _replay(
    state: RunState,
    spec: ToolSpec,
    call_id: str,
    journaled: Receipt | None,
    problem: str = "the process stopped after this write started and before its outcome was "
    "recorded",
) -> Receipt:
    """Answer a write found in the journal without executing it again."""
    if journaled is not None and journaled.call_id != call_id:  # the wire's id of this call
        journaled = journaled.model_copy(update={"call_id": call_id})
    receipt = journaled or Receipt(
        call_id=call_id,
        tool=spec.name,
        status="unknown",
        effect="unknown",
        message=problem,
    )
    state.trace.emit(
        ToolFinished,
        call_id=call_id,
        tool=spec.name,
        attempt=1,
        status=receipt.status,
        effect=receipt.effect,
        duration_s=0.0,
        message="from the write journal; not executed again",
    )
    state.receipts.append(receipt)
    return receipt


def receipt_problem(
    spec: ToolSpec, call_id: str, receipt: Receipt, revision: str | None
) -> str | None:
    """Say what is wrong with a receipt, or ``None`` when it can be believed.

    Args:
        spec: The tool that ran.
        call_id: The call it ran for.
        receipt: The receipt.
        revision: The current revision, when tracked.

    Returns:
        The problem, or ``None``.
    """
    if receipt.call_id != call_id or receipt.tool != spec.name:
        return (
            f"receipt names call {receipt.call_id!r} of tool {receipt.tool!r}, "
            f"expected call {call_id!r} of {spec.name!r}"
        )
    if receipt.effect not in _COHERENT[receipt.status]:
        return f"status {receipt.status!r} with effect {receipt.effect!r} is incoherent"
    if receipt.effect != "none" and spec.effect == "read":
        return f"read tool {spec.name!r} claims an {receipt.effect} effect"
    if revision is not None and receipt.revision != revision:
        return f"receipt revision {receipt.revision!r} is not the current revision {revision!r}"
    return None


def receipt_invalid(
    state: RunState,
    validated: ValidatedCall,
    receipt: Receipt,
    problem: str,
    *,
    key: str,
) -> Receipt:
    """End the run on a receipt that cannot be believed; a write's effect becomes unknown.

    Args:
        state: The run's state.
        validated: The call.
        receipt: The bad receipt.
        problem: What is wrong with it.
        key: The call's journal key.

    Raises:
        RunEnded: Always, as failed / receipt_invalid.
    """
    spec = validated.tool.spec
    state.receipts.append(receipt)
    if spec.effect == "write":
        state.add_pending(validated, f"invalid receipt: {problem}", receipt.revision, key)
    end(RunStatus.FAILED, StopReason.RECEIPT_INVALID, f"{spec.name!r}: {problem}")


def _retry(
    config: LoopConfig,
    state: RunState,
    spec: ToolSpec,
    *,
    attempt: int,
    receipt: Receipt,
    error: BaseException | None,
) -> Generator[Effect, Outcome, None]:
    limits = config.limits
    if attempt > limits.max_retries_per_call:
        state.receipts.append(receipt)
        end(
            RunStatus.FAILED,
            StopReason.TOOL_ERROR,
            f"tool {spec.name!r} failed after {attempt} attempts: {receipt.message}",
        )
    decision = config.retry.next_wait(attempt, retry_after_hint(error) if error else None)
    if isinstance(decision, GiveUp):
        state.receipts.append(receipt)
        end(RunStatus.FAILED, StopReason.TOOL_ERROR, f"tool {spec.name!r}: {decision.reason}")
    end_for_budget(check_before_tool_attempt(limits, state.usage, "before_retry"))
    elapsed = config.clock.monotonic() - state.started_at
    end_for_budget(check_deadline(limits, elapsed + decision.seconds, "before_retry"))
    state.trace.emit(
        RetryScheduled,
        target="tool",
        call_id=receipt.call_id,
        next_attempt=attempt + 1,
        delay_s=decision.seconds,
        reason=receipt.message or "transient failure",
    )
    yield Sleep(decision.seconds)


def _receipt(spec: ToolSpec, call_id: str, outcome: Outcome, revision: str | None) -> Receipt:
    """Classify a handler's outcome as a receipt (receipts returned by handlers are kept)."""
    write = spec.effect == "write"
    if isinstance(outcome, ToolReturn):
        if isinstance(outcome.value, Receipt):
            returned = outcome.value
            if returned.revision is None and revision is not None:
                return returned.model_copy(update={"revision": revision})
            return returned
        return Receipt(
            call_id=call_id,
            tool=spec.name,
            status="ok",
            effect="applied" if write else "none",
            revision=revision,
            data=to_jsonable(outcome.value),
        )
    error = outcome.error if isinstance(outcome, Failure) else TypeError(repr(outcome))
    message = describe_error(error)  # a raising __str__ or an unpaired surrogate is the tool's
    status: ReceiptStatus
    effect: ReceiptEffect
    if isinstance(error, TransientToolError) or (isinstance(error, TimeoutError) and not write):
        status, effect = "transient", "none"
    elif write:
        # A write that raised may have happened anyway: unknown, never failure, never retried.
        status, effect = "unknown", "unknown"
    else:
        status, effect = "error", "none"
    return Receipt(
        call_id=call_id,
        tool=spec.name,
        status=status,
        effect=effect,
        revision=revision,
        message=message,
    )
