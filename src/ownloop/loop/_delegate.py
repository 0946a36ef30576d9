"""Agent tools as the loop sees them: a child run's result folded into the calling run.

An agent tool (``Agent.as_tool``) returns a `Delegated` record instead of a plain value. The core
adds the child's usage to the run's, turns the child's end into the call's receipt (its output,
a typed observation of its stop, or the end of the run, as configured) and pauses the run when
the child waits for an approval, naming the path to the waiting call. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ownloop.contracts import Receipt, RunResult, RunStatus, StopReason, Usage
from ownloop.loop._finish import end
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Outcome, ToolReturn
from ownloop.loop.state import RunState
from ownloop.tools import CallerRun, RegisteredTool, ValidatedCall, to_jsonable

__all__ = ["Delegated", "caller_run", "journals_write", "settle_delegation"]

OnStop = Literal["observe", "end"]


@dataclass(frozen=True, slots=True)
class Delegated:
    """What an agent tool's handler returns: the child run's result, for the core to fold in.

    Attributes:
        result: The child's result (ended, or paused for an approval).
        on_stop: ``observe`` tells the calling model how the child stopped; ``end`` ends the
            calling run with the child's status and stop reason.
        exhausted: The budget the calling run had nothing left of, when the child never ran.
    """

    result: RunResult[Any] | None
    on_stop: OnStop = "observe"
    exhausted: str | None = None


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


def caller_run(config: LoopConfig, state: RunState, key: str, share: int = 1) -> CallerRun:
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
