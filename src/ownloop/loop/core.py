"""The loop core: decides every next action of a run as data, and does no I/O.

`run_loop` is a generator. It yields effects (`CallModel`, `InvokeTool`, `Sleep`) and receives
their outcomes; it returns the `RunResult`. Every budget is checked at a named point, every
transition is a trace event, and every way the run can end names its `StopReason`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ownloop._text import clean_json, clean_text, safe_str
from ownloop.budgets import (
    check_after_usage,
    check_before_model_attempt,
    check_before_model_call,
    check_deadline,
)
from ownloop.contracts import (
    AssistantMessage,
    BudgetExhausted,
    CompletionRejected,
    ModelFailed,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    OutputTruncated,
    ResumeState,
    RetryScheduled,
    RunFinished,
    RunResult,
    RunResumed,
    RunStarted,
    RunStatus,
    StopReason,
    TokenUsage,
)
from ownloop.contracts.durable import SnapshotState
from ownloop.exceptions import ProviderError, SendRefused, UnexpectedModelCall
from ownloop.loop._context import StepBudget, charge, prepare_context
from ownloop.loop._deadline import set_run_deadline
from ownloop.loop._finish import RunEnded, end, end_for_budget
from ownloop.loop._inputs import clean_response
from ownloop.loop._observe import add_feedback, truncate
from ownloop.loop._output import InvalidOutput
from ownloop.loop._output_turn import answer_in_calls, output_request, reject_output
from ownloop.loop._parallel import run_group
from ownloop.loop._revision import completion_context
from ownloop.loop._snapshot import changed_counts, forget_saved_trace, snapshot_of
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import CallModel, Effect, Failure, Outcome, Persist, Sleep
from ownloop.loop.state import RunState
from ownloop.loop.tool_step import block_on_pending, run_tool_call
from ownloop.redaction import bound_value
from ownloop.retry import GiveUp, is_transient_model_error, retry_after_hint
from ownloop.validators import Reject

__all__ = ["LoopGenerator", "run_loop"]

TRACE_HELD = 1000
"""With a store that takes a checkpoint's changes alone, a run holds its last 1,000 to 2,000 trace
events in memory (and in its result); the store holds the whole trace."""

LoopGenerator = Generator[Effect, Outcome, RunResult[Any]]
"""The core's type: yields effects, receives outcomes, returns the result."""


def run_loop(config: LoopConfig, state: RunState) -> LoopGenerator:
    """Run the loop until it ends, yielding every effect for a driver to perform.

    Args:
        config: The run's fixed configuration.
        state: The run's state, with the task already in its messages.

    Returns:
        The run's result, whatever way it ended.
    """
    set_run_deadline(state.started_at + config.limits.deadline_s)
    if state.prior_trace:
        state.trace.emit(
            RunResumed,
            approvals=len(state.approvals),
            elapsed_s=max(config.clock.monotonic() - state.started_at, 0.0),
            taken_over_from=state.taken_over_from,
        )
    else:
        state.trace.emit(
            RunStarted,
            task_chars=len(state.task),
            actor_id=state.actor.id if state.actor else None,
            tools=tuple(spec.name for spec in state.tools),
            limits=config.limits,
            versions=config.versions,
        )
        yield from _checkpoint(config, state)
    try:
        yield from _run_queue(config, state)
        while True:
            yield from _model_turn(config, state)
    except RunEnded as ended:
        result = _finish(config, state, ended)
    if config.durable:
        paused = result.status is RunStatus.PAUSED
        yield _persist(config, state, "paused" if paused else "finished", result)
    return result


def _checkpoint(config: LoopConfig, state: RunState) -> Generator[Effect, Outcome, None]:
    """Save the run as it stands, when a store is configured."""
    if config.durable:
        yield _persist(config, state, "running")


def _persist(
    config: LoopConfig, state: RunState, kind: SnapshotState, result: RunResult | None = None
) -> Persist:
    """The checkpoint effect: the whole run, or only what changed since the last checkpoint.

    A failed save ends the run (the driver raises), so the counts of this checkpoint are what
    the store holds whenever the next one is built.
    """
    if not config.checkpoint_changes:
        return Persist(snapshot_of(config, state, kind, result))
    kept = state.saved_counts
    if kept is not None and state.evidence_rewritten:
        kept = {**kept, "evidence": 0}
    snapshot = snapshot_of(config, state, kind, result, kept=kept)
    state.saved_counts = changed_counts(state)
    state.evidence_rewritten = False
    forget_saved_trace(state, TRACE_HELD)  # the store keeps them: memory stays bounded
    return Persist(snapshot, kept)


def _run_queue(config: LoopConfig, state: RunState) -> Generator[Effect, Outcome, None]:
    """Finish the current turn's tool calls, in order (after a resume, the paused one first).

    Consecutive calls that may overlap run as a group (see `run_group`); every other call runs
    alone. The run is checkpointed after each call or group, never inside one.
    """
    while state.queue:
        finished = yield from run_group(config, state)
        if not finished:
            yield from run_tool_call(config, state, state.queue[0])
            finished = 1
        del state.queue[:finished]
        state.admitted_call_id = None
        yield from _checkpoint(config, state)
    for feedback in state.deferred_feedback:
        add_feedback(
            state, content=feedback, max_chars=config.limits.max_observation_chars, source="runtime"
        )
    state.deferred_feedback.clear()


def _elapsed(config: LoopConfig, state: RunState) -> float:
    return config.clock.monotonic() - state.started_at


def _model_turn(config: LoopConfig, state: RunState) -> Generator[Effect, Outcome, None]:
    limits = config.limits
    end_for_budget(check_before_model_call(limits, state.usage))
    end_for_budget(check_deadline(limits, _elapsed(config, state), "before_model_call"))
    yield from prepare_context(config, state)
    state.count(steps=1)
    request = output_request(
        config,
        ModelRequest(
            run_id=state.run_id,
            step=state.usage.steps,
            messages=tuple(state.messages),
            tools=state.tools,
            settings=config.settings,
        ),
    )
    response = yield from _ask_model(config, state, request)
    if response.stop_reason is not None:
        end(
            RunStatus.STOPPED,
            StopReason.EXPLICIT_STOP,
            f"the model stopped explicitly: {response.stop_reason}",
        )
    answer = answer_in_calls(config, state, response)
    if answer is not None:  # tool mode: the final-result tool's arguments are the answer
        yield from _complete(config, state, answer)
        return
    if response.tool_calls:  # the crossing response is counted; none of its calls runs
        end_for_budget(check_after_usage(limits, state.usage))
        state.queue = list(response.tool_calls)
        yield from _checkpoint(config, state)
        yield from _run_queue(config, state)
        return
    if response.final_output is None:
        end(
            RunStatus.FAILED,
            StopReason.MODEL_ERROR,
            "the model returned neither a final answer, tool calls nor an explicit stop",
        )
    yield from _complete(config, state, response.final_output)


def _ask_model(
    config: LoopConfig, state: RunState, request: ModelRequest
) -> Generator[Effect, Outcome, ModelResponse]:
    limits = config.limits
    attempt = 1
    while True:
        end_for_budget(check_before_model_attempt(limits, state.usage))
        state.count(model_attempts=1)
        if attempt > 1:
            request = request.model_copy(update={"attempt": attempt})
        state.trace.emit(
            ModelRequested,
            step=request.step,
            attempt=attempt,
            messages=len(request.messages),
            request_chars=sum(len(getattr(m, "content", None) or "") for m in request.messages),
            tools=len(request.tools),
        )
        started = config.clock.monotonic()
        budget = StepBudget(config, state)
        remaining = max(limits.deadline_s - _elapsed(config, state), 0.0)
        outcome = yield CallModel(request, remaining, budget)
        if isinstance(outcome, ModelResponse):
            outcome = clean_response(outcome)
            duration = config.clock.monotonic() - started
            _record_response(config, state, request, outcome, duration, counted=budget.counted)
            return outcome
        error = outcome.error if isinstance(outcome, Failure) else TypeError(repr(outcome))
        if isinstance(error, SendRefused):  # a re-ask the budget refused: count what was used
            _count_refused(config, state, error, budget.counted)
        yield from _retry_model(config, state, request.step, attempt, error)
        attempt += 1


def _retry_model(
    config: LoopConfig, state: RunState, step: int, attempt: int, error: BaseException
) -> Generator[Effect, Outcome, None]:
    if isinstance(error, UnexpectedModelCall):
        raise error  # a test script ran out: the test is wrong, not the run
    transient = is_transient_model_error(error)
    state.trace.emit(
        ModelFailed, step=step, attempt=attempt, error=_describe(error), retryable=transient
    )
    if not transient:
        end(RunStatus.FAILED, StopReason.MODEL_ERROR, f"model call failed: {_message(error)}")
    if attempt > config.limits.max_retries_per_call:
        end(
            RunStatus.FAILED,
            StopReason.MODEL_ERROR,
            f"model call failed after {attempt} attempts: {_message(error)}",
        )
    decision = config.retry.next_wait(attempt, retry_after_hint(error))
    if isinstance(decision, GiveUp):
        end(RunStatus.FAILED, StopReason.MODEL_ERROR, f"model call not retried: {decision.reason}")
    end_for_budget(check_before_model_attempt(config.limits, state.usage, "before_retry"))
    end_for_budget(
        check_deadline(config.limits, _elapsed(config, state) + decision.seconds, "before_retry")
    )
    state.trace.emit(
        RetryScheduled,
        target="model",
        next_attempt=attempt + 1,
        delay_s=decision.seconds,
        reason=_message(error),
    )
    yield Sleep(decision.seconds)


def _count_refused(config: LoopConfig, state: RunState, refused: SendRefused, counted: int) -> None:
    """Count the answered requests of an attempt whose re-ask was refused, then end the run."""
    usage: TokenUsage = refused.usage
    state.count(
        model_requests=refused.sent,
        model_attempts=max(refused.sent - 1 - counted, 0),
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )
    charge(config, state, ModelResponse(usage=usage))
    end_for_budget(refused.breach)


def _record_response(
    config: LoopConfig,
    state: RunState,
    request: ModelRequest,
    response: ModelResponse,
    duration_s: float,
    *,
    counted: int = 0,
) -> None:
    usage = response.usage
    requests = response.provider_requests  # an adapter's re-asks are attempts too
    state.count(
        model_requests=requests,
        model_attempts=max(requests - 1 - counted, 0),  # those its budget admitted are counted
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )
    charge(config, state, response)
    if response.stop_reason is not None:
        decision = "stop"
    elif response.tool_calls:
        decision = "tool_calls"
    elif response.final_output is not None:
        decision = "final"
    else:
        decision = "empty"
    state.trace.emit(
        ModelResponded,
        step=request.step,
        attempt=request.attempt,
        decision=decision,
        tool_calls=tuple(call.name for call in response.tool_calls),
        stop_reason=response.stop_reason,
        usage=usage,
        model=response.model,
        provider_request_id=response.provider_request_id,
        duration_s=max(duration_s, 0.0),
        time_to_first_token_s=response.time_to_first_token_s,
        provider_requests=requests,
        notes=response.notes,
    )
    state.messages.append(
        AssistantMessage(
            content=response.final_output,
            tool_calls=response.tool_calls,
            provider_items=response.provider_items,
        )
    )


def _complete(config: LoopConfig, state: RunState, output: str) -> Generator[Effect, Outcome, None]:
    limits = config.limits
    yield from block_on_pending(config, state, "the final answer")
    value: Any = output
    if config.output is not None:
        state.raw_output = output
        value = config.output.read(output, limits.max_output_chars)
        if isinstance(value, InvalidOutput):
            reject_output(config, state, value, output)
            return
    if config.validator is not None:
        context = yield from completion_context(config, state.receipts, state.deps)
        verdict = config.validator(value, tuple(state.evidence.values()), context)
        if isinstance(verdict, Reject):
            _reject(config, state, verdict)
            return
    if config.output is None:  # a typed value is never cut: its answer's length was checked
        value, cut = truncate(output, limits.max_output_chars)
        if cut:
            state.trace.emit(OutputTruncated, original_chars=len(output), chars=len(value))
    state.output = value
    end(RunStatus.COMPLETED, StopReason.FINAL_OUTPUT, "the final answer passed every check")


def _reject(config: LoopConfig, state: RunState, verdict: Reject) -> None:
    verdict = Reject(clean_text(verdict.reason), verdict.validator)  # the application's text
    state.count(completion_rejections=1)
    rejections = state.usage.completion_rejections
    state.trace.emit(
        CompletionRejected,
        validator=verdict.validator or "validator",
        reason=verdict.reason,
        rejections=rejections,
    )
    if rejections > config.limits.max_completion_rejections:
        end(
            RunStatus.FAILED,
            StopReason.COMPLETION_REJECTED,
            f"the final answer was rejected {rejections} time(s); last: {verdict.reason}",
        )
    add_feedback(
        state,
        content=f"Your final answer was not accepted: {verdict.reason}. Revise it, using only "
        "evidence returned by tools in this run.",
        max_chars=config.limits.max_observation_chars,
        source="completion",
    )


def _message(error: BaseException) -> str:
    text = clean_text(error.message) if isinstance(error, ProviderError) else safe_str(error)
    return f"{type(error).__name__}: {text}"[:500] if text else type(error).__name__


def _describe(error: BaseException) -> dict[str, Any]:
    if isinstance(error, ProviderError):
        described: dict[str, Any] = bound_value(clean_json(error.describe()))
    else:
        described = {"type": type(error).__name__, "message": bound_value(safe_str(error))}
    if not described.get("message"):  # say what failed even when the exception says nothing
        described["message"] = f"{type(error).__name__} raised without a message"
    return described


def _finish(config: LoopConfig, state: RunState, ended: RunEnded) -> RunResult[Any]:
    if ended.status is not RunStatus.PAUSED:
        # Only a paused run waits for a decision: a finished one keeps no request, whatever
        # happened to the call that paused (denied on resume, a budget spent before it). The
        # state records it once, so the result, the stored snapshot and every store's rule for
        # submitted decisions read the same thing.
        state.approval_requests = []
    if ended.breach is not None:
        breach = ended.breach
        state.trace.emit(
            BudgetExhausted,
            budget=breach.budget,
            limit=breach.limit,
            observed=breach.observed,
            checkpoint=breach.checkpoint,
        )
    state.trace.emit(
        RunFinished,
        status=ended.status,
        stop_reason=ended.reason,
        detail=ended.detail[:4096],
        usage=state.usage,
    )
    resume = None
    if ended.status is RunStatus.PAUSED:
        resume = ResumeState(
            task=state.task,
            actor=state.actor,
            queue=tuple(state.queue),
            admitted_call_id=state.admitted_call_id,
            last_action=state.last_action,
            repeats=state.repeats,
            elapsed_s=max(config.clock.monotonic() - state.started_at, 0.0),
            approvals=tuple(state.approvals),
            identities=tuple(state.identities.values()),
        )
    return RunResult(
        run_id=state.run_id,
        status=ended.status,
        stop_reason=ended.reason,
        detail=ended.detail[:4096],
        output=state.output,
        raw_output=state.raw_output,
        usage=state.usage,
        limits=config.limits,
        messages=tuple(state.messages),
        trace=(*state.prior_trace, *state.trace.events),
        evidence=tuple(state.evidence.values()),
        receipts=tuple(state.receipts),
        pending=tuple(state.pending),
        approval_requests=tuple(state.approval_requests),
        approvals=tuple(state.decisions),
        versions=config.versions,
        resume=resume,
        conversation=state.conversation,
    )
