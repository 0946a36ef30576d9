"""Agent tools as the loop sees them: a child run's result folded into the calling run.

An agent tool (``Agent.as_tool``) returns a `Delegated` record instead of a plain value. The core
adds the child's usage to the run's, turns the child's end into the call's receipt (its output,
a typed observation of its stop, or the end of the run, as configured) and pauses the run when
the child waits for an approval, naming the path to the waiting call. A handoff's child that
answered hands the run its answer (`handoff_answer`), which the run's validators judge before the
run ends with it (`end_with_handoff`). Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from ownloop.contracts import (
    Evidence,
    OutputTruncated,
    Receipt,
    RunResult,
    RunStatus,
    StopReason,
    Usage,
)
from ownloop.loop._finish import end
from ownloop.loop._observe import truncate
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Outcome, ToolReturn
from ownloop.loop.state import RunState
from ownloop.tools import CallerRun, RegisteredTool, ValidatedCall, render_observation, to_jsonable
from ownloop.validators import Reject, Verdict

__all__ = [
    "Delegated",
    "caller_run",
    "end_with_handoff",
    "handoff_answer",
    "journals_write",
    "settle_delegation",
]

OnStop = Literal["observe", "end"]


@dataclass(frozen=True, slots=True)
class Delegated:
    """What an agent tool's handler returns: the child run's result, for the core to fold in.

    Attributes:
        result: The child's result (ended, or paused for an approval).
        on_stop: ``observe`` tells the calling model how the child stopped; ``end`` ends the
            calling run with the child's status and stop reason.
        exhausted: The budget the calling run had nothing left of, when the child never ran.
        handoff: The child took over: its answer is the calling run's final answer.
    """

    result: RunResult[Any] | None
    on_stop: OnStop = "observe"
    exhausted: str | None = None
    handoff: bool = False


def journals_write(config: LoopConfig, tool: RegisteredTool) -> bool:
    """Say whether a call of ``tool`` is journaled in the run's own write journal.

    An agent tool is not: its child run, stored under an id derived from the call's key, is its
    journal (each of the child's writes is journaled there, and a finished child is replayed
    from it, never run again).

    Args:
        config: The run's configuration.
        tool: The tool.

    Returns:
        Whether a durable run records an intent and a receipt for the call.
    """
    return config.durable and tool.spec.effect == "write" and not tool.delegates


def caller_run(config: LoopConfig, state: RunState, key: str, share: int) -> CallerRun:
    """Describe the calling run to an agent tool: its budgets, usage, policy and call key.

    Args:
        config: The run's configuration.
        state: The run's state.
        key: The call's journal key.
        share: How many agent tools running together split what the run has left.

    Returns:
        The record the child's budgets and policy are derived from.
    """
    return CallerRun(
        limits=config.limits,
        usage=state.usage,
        elapsed_s=max(config.clock.monotonic() - state.started_at, 0.0),
        policy=config.policy,
        key=key,
        approvals=tuple(state.approvals),
        share=max(share, 1),
        sinks=state.trace.sinks,
        messages=tuple(state.messages),
    )


def settle_delegation(state: RunState, validated: ValidatedCall, outcome: Outcome) -> Outcome:
    """Fold an agent tool's `Delegated` outcome into the run; any other outcome passes through.

    Args:
        state: The run's state.
        validated: The call.
        outcome: What the handler did.

    Returns:
        The child's output, or a receipt saying how it stopped.

    Raises:
        RunEnded: The child waits for an approval (the run pauses), or it stopped and the tool
            ends the run on a stop.
    """
    if not (isinstance(outcome, ToolReturn) and isinstance(outcome.value, Delegated)):
        return outcome
    delegated: Delegated = outcome.value
    spec, call = validated.tool.spec, validated.call
    result = delegated.result
    if result is None:
        detail = f"the delegated agent {spec.name!r} did not run: no {delegated.exhausted} left"
        return _stopped(validated, delegated, RunStatus.STOPPED, _reason(delegated), detail)
    if result.status is RunStatus.PAUSED:
        state.approval_requests = [
            request.model_copy(
                update={
                    "reason": f"{request.reason} (delegated: {spec.name} call {call.id} -> "
                    f"{request.tool} call {request.call_id})"[:1024]
                }
            )
            for request in result.approval_requests
        ]
        waiting = ", ".join(f"{r.tool} ({r.call_id})" for r in result.approval_requests)
        end(
            RunStatus.PAUSED,
            StopReason.APPROVAL_REQUIRED,
            f"the delegated agent {spec.name!r} (call {call.id}) waits for approval of {waiting}",
        )
    # Counted once, when the child's run ends: the call's journal key (its admission number)
    # stays the same while it waits, and a resumed child is given what the run had left.
    _count(state, result.usage)
    _record_decisions(state, result)
    state.approval_requests = []  # only the call in progress can have been waiting
    if result.status is RunStatus.COMPLETED:
        if delegated.handoff:
            state.handed_off = result
        return ToolReturn(to_jsonable(result.output))
    detail = (
        f"the delegated agent {spec.name!r} ended {result.status.value} "
        f"({result.stop_reason.value}): {result.detail}"
    )
    return _stopped(validated, delegated, result.status, result.stop_reason, detail)


def _reason(delegated: Delegated) -> StopReason:
    """The stop reason of the budget the caller had nothing left of (each names one)."""
    return StopReason(delegated.exhausted or StopReason.DEADLINE.value)


def _stopped(
    validated: ValidatedCall,
    delegated: Delegated,
    status: RunStatus,
    reason: StopReason,
    detail: str,
) -> ToolReturn:
    """Answer the call with the child's stop, or end the run with it (``on_stop="end"``)."""
    if delegated.on_stop == "end":
        end(status, reason, detail)
    spec = validated.tool.spec
    unknown = status is RunStatus.UNRESOLVED and spec.effect == "write"
    return ToolReturn(
        Receipt(
            call_id=validated.call.id,
            tool=spec.name,
            status="unknown" if unknown else "error",
            effect="unknown" if unknown else "none",
            message=detail[:4096],
        )
    )


def _count(state: RunState, used: Usage) -> None:
    """Add what the child used to the run's usage."""
    state.count(**{name: value for name, value in used.model_dump().items() if value})


def _record_decisions(state: RunState, result: RunResult[Any]) -> None:
    """Keep the child's decisions in the run's audit trail; those it consumed admit nothing more."""
    for decision in result.approvals:
        if decision not in state.decisions:
            state.decisions.append(decision)
        names = {decision.request_id, decision.digest} - {None}
        state.approvals = [
            approval
            for approval in state.approvals
            if not ({approval.request_id, approval.digest} & names)
        ]


def handoff_answer(
    config: LoopConfig, state: RunState, result: RunResult[Any]
) -> tuple[Any, tuple[Evidence, ...]]:
    """Take the answer of the handoff's child that answered, and the evidence it may cite.

    The child's evidence joins the run's ledger (its tools ran under this run): the run's
    validators judge the answer against it, and the result lists it.

    Args:
        config: The run's configuration.
        state: The run's state.
        result: The child's result (completed).

    Returns:
        The answer (a typed run's value as the child gave it; for a text run, text, bounded by
        ``max_output_chars``: a typed child's answer as its JSON), and the ledger.
    """
    for item in result.evidence:
        state.evidence.setdefault(item.id, item)
    answer = result.output
    if config.output is None:
        text = render_observation(answer)  # text as it is; a typed value as its JSON
        answer, cut = truncate(text, config.limits.max_output_chars)
        if cut:
            state.trace.emit(OutputTruncated, original_chars=len(text), chars=len(answer))
    return answer, tuple(state.evidence.values())


def end_with_handoff(
    state: RunState, result: RunResult[Any], answer: Any, verdict: Verdict | None
) -> NoReturn:
    """End the run with the handed-off answer, or as failed when a validator rejected it.

    The child answered, so nobody is left to revise a rejected answer: the run fails.

    Args:
        state: The run's state.
        result: The child's result.
        answer: The answer.
        verdict: The run's validators' verdict (``None`` without validators).

    Raises:
        RunEnded: Always: completed (``final_output``), or failed (``completion_rejected``).
    """
    if isinstance(verdict, Reject):
        end(
            RunStatus.FAILED,
            StopReason.COMPLETION_REJECTED,
            f"the answer of the handed-off run {result.run_id} was rejected: {verdict.reason}",
        )
    state.output = answer
    end(
        RunStatus.COMPLETED,
        StopReason.FINAL_OUTPUT,
        f"the handed-off run {result.run_id} answered",
    )
