"""One proposed tool call, from proposal to observation: decided as data, no I/O.

The order is fixed: trace the proposal, reserve a tool call, detect repetition, validate, refuse a
new write while another write's effect is unknown, then execute with retries of transient failures
(each attempt drawn from the shared budget, no wait past the deadline), turn the outcome into a
receipt, and answer the call with a bounded observation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from datetime import timedelta

from ownloop.budgets import check_before_tool_attempt, check_before_tool_call, check_deadline
from ownloop.contracts import (
    PendingOperation,
    Receipt,
    RetryScheduled,
    RunStatus,
    StopReason,
    ToolCall,
    ToolFinished,
    ToolProposed,
    ToolRejected,
    ToolSpec,
    ToolStarted,
)
from ownloop.exceptions import TransientToolError, UnknownEffectError
from ownloop.loop._finish import end, end_for_budget
from ownloop.loop._observe import add_tool_observation
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Failure, InvokeTool, Outcome, Sleep, ToolReturn
from ownloop.loop.state import RunState, action_key
from ownloop.redaction import bound_value, redact_sensitive
from ownloop.retry import GiveUp, retry_after_hint
from ownloop.tools import ToolContext, ToolRejection, ValidatedCall, render_observation, to_jsonable

__all__ = ["run_tool_call"]


def run_tool_call(
    config: LoopConfig, state: RunState, call: ToolCall
) -> Generator[Effect, Outcome, None]:
    """Handle one proposed call: admit, validate, execute and observe it, or end the run.

    Args:
        config: The run's configuration.
        state: The run's state.
        call: The model's proposal.

    Yields:
        `InvokeTool` for each attempt and `Sleep` before each retry.
    """
    limits = config.limits
    registered = config.registry.get(call.name)
    sensitive = registered.spec.sensitive if registered is not None else ()
    state.trace.emit(
        ToolProposed,
        step=max(state.usage.steps, 1),
        call_id=call.id,
        tool=call.name,
        arguments=bound_value(redact_sensitive(call.arguments, sensitive)),
    )
    end_for_budget(check_before_tool_call(limits, state.usage))
    state.count(tool_calls=1)
    _check_repeats(config, state, call)
    validated = config.registry.validate(call)
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
            max_chars=limits.max_observation_chars,
            source="rejection",
        )
        return
    spec = validated.tool.spec
    if spec.effect == "write" and state.pending:
        end(
            RunStatus.UNRESOLVED,
            StopReason.UNRESOLVED_EFFECT,
            f"write {spec.name!r} refused: {len(state.pending)} earlier write(s) have an unknown "
            "effect and must be resolved first",
        )
    receipt = yield from _execute(config, state, validated)
    _observe(config, state, validated, receipt)


def _check_repeats(config: LoopConfig, state: RunState, call: ToolCall) -> None:
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


def _execute(
    config: LoopConfig, state: RunState, validated: ValidatedCall
) -> Generator[Effect, Outcome, Receipt]:
    limits, spec, call_id = config.limits, validated.tool.spec, validated.call.id
    key = (
        _idempotency_key(state.run_id, call_id, validated.digest)
        if spec.effect == "write"
        else None
    )
    deadline = config.clock.now() + timedelta(
        seconds=limits.deadline_s - (config.clock.monotonic() - state.started_at)
    )
    attempt = 1
    while True:
        end_for_budget(check_before_tool_attempt(limits, state.usage))
        end_for_budget(
            check_deadline(
                limits, config.clock.monotonic() - state.started_at, "before_tool_attempt"
            )
        )
        state.count(tool_attempts=1)
        state.trace.emit(ToolStarted, call_id=call_id, tool=spec.name, attempt=attempt)
        context = ToolContext(
            run_id=state.run_id,
            call_id=call_id,
            tool=spec.name,
            attempt=attempt,
            actor=state.actor,
            idempotency_key=key,
            deadline=deadline,
            revision=None,
        )
        started = config.clock.monotonic()
        outcome = yield InvokeTool(validated, context)
        receipt = _receipt(spec, call_id, outcome)
        state.trace.emit(
            ToolFinished,
            call_id=call_id,
            tool=spec.name,
            attempt=attempt,
            status=receipt.status,
            effect=receipt.effect,
            duration_s=max(config.clock.monotonic() - started, 0.0),
            message=receipt.message,
        )
        if receipt.status != "transient":
            state.receipts.append(receipt)
            return receipt
        error = outcome.error if isinstance(outcome, Failure) else None
        yield from _retry_tool(
            config,
            state,
            spec=spec,
            call_id=call_id,
            attempt=attempt,
            receipt=receipt,
            error=error,
        )
        attempt += 1


def _retry_tool(
    config: LoopConfig,
    state: RunState,
    *,
    spec: ToolSpec,
    call_id: str,
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
        call_id=call_id,
        next_attempt=attempt + 1,
        delay_s=decision.seconds,
        reason=receipt.message or "transient failure",
    )
    yield Sleep(decision.seconds)


def _idempotency_key(run_id: str, call_id: str, digest: str) -> str:
    return hashlib.sha256(f"{run_id}\x1f{call_id}\x1f{digest}".encode()).hexdigest()[:32]


def _receipt(spec: ToolSpec, call_id: str, outcome: Outcome) -> Receipt:
    """Classify a handler's outcome as a receipt (the loop validates receipts returned by tools)."""
    write = spec.effect == "write"
    if isinstance(outcome, ToolReturn):
        if isinstance(outcome.value, Receipt):
            return outcome.value
        return Receipt(
            call_id=call_id,
            tool=spec.name,
            status="ok",
            effect="applied" if write else "none",
            data=to_jsonable(outcome.value),
        )
    error = outcome.error if isinstance(outcome, Failure) else TypeError(repr(outcome))
    message = f"{type(error).__name__}: {error}"[:1000]
    if isinstance(error, TransientToolError) or (isinstance(error, TimeoutError) and not write):
        return Receipt(
            call_id=call_id, tool=spec.name, status="transient", effect="none", message=message
        )
    if write or isinstance(error, UnknownEffectError):
        # A write that raised may have happened anyway: unknown, never failure, never retried.
        return Receipt(
            call_id=call_id, tool=spec.name, status="unknown", effect="unknown", message=message
        )
    return Receipt(call_id=call_id, tool=spec.name, status="error", effect="none", message=message)


def _observe(
    config: LoopConfig, state: RunState, validated: ValidatedCall, receipt: Receipt
) -> None:
    spec, call = validated.tool.spec, validated.call
    max_chars = min(
        spec.max_output_chars or config.limits.max_observation_chars,
        config.limits.max_observation_chars,
    )
    if receipt.call_id != call.id or receipt.tool != spec.name:
        end(
            RunStatus.FAILED,
            StopReason.RECEIPT_INVALID,
            f"tool {spec.name!r} returned a receipt for call {receipt.call_id!r} of tool "
            f"{receipt.tool!r}, expected call {call.id!r}",
        )
    if receipt.status == "unknown":
        state.pending.append(
            PendingOperation(
                call_id=call.id,
                tool=spec.name,
                arguments_digest=validated.digest,
                idempotency_key=_idempotency_key(state.run_id, call.id, validated.digest),
                reason=receipt.message or "effect unknown",
            )
        )
        content = (
            f"The effect of {spec.name} is unknown ({receipt.message}). It may have happened; "
            "do not repeat it. The runtime will reconcile it."
        )
        source = "unknown_effect"
    elif receipt.status == "error":
        content = f"Tool {spec.name} failed: {receipt.message}"
        source = "tool_error"
    else:
        state.record_evidence(spec.name, call.id, receipt.data)
        content = render_observation(receipt.data)
        source = "tool"
    add_tool_observation(
        state, call_id=call.id, name=call.name, content=content, max_chars=max_chars, source=source
    )
