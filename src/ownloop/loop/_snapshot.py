"""Turning a run's state into a durable snapshot, and a snapshot back into state."""

from __future__ import annotations

from collections.abc import Iterable

from ownloop.clock import Clock
from ownloop.contracts import (
    Approval,
    JournalEntry,
    RunResult,
    RunSnapshot,
    ToolSpec,
)
from ownloop.contracts.durable import SnapshotState
from ownloop.loop.config import LoopConfig
from ownloop.loop.state import RunState
from ownloop.redaction import Redactor
from ownloop.tracing import TraceRecorder, TraceSink

__all__ = ["restore_state", "snapshot_of"]


def snapshot_of(
    config: LoopConfig, state: RunState, kind: SnapshotState, result: RunResult | None = None
) -> RunSnapshot:
    """Capture the run as it stands.

    Args:
        config: The run's configuration.
        state: The run's state.
        kind: ``running``, ``paused`` or ``finished``.
        result: The outcome, when paused or finished.

    Returns:
        The snapshot.
    """
    # Validate the fixed-size fields, then attach the parts that grow with the run without
    # validating them again: they hold records the run already validated, so re-validating
    # thousands of trace events at every checkpoint would make each one cost O(run length).
    head = RunSnapshot(
        run_id=state.run_id,
        state=kind,
        task=state.task,
        actor=state.actor,
        usage=state.usage,
        limits=config.limits,
        pending=tuple(state.pending),
        approvals=tuple(state.decisions),
        available_approvals=tuple(state.approvals),
        approval_requests=tuple(state.approval_requests),
        queue=tuple(state.queue),
        identities=tuple(state.identities.values()),
        admitted_call_id=state.admitted_call_id,
        last_action=state.last_action,
        repeats=state.repeats,
        elapsed_s=max(config.clock.monotonic() - state.started_at, 0.0),
        versions=config.versions,
        result=result,
        saved_at=config.clock.now(),
        conversation=state.conversation,
    )
    return head.model_copy(
        update={
            "messages": tuple(state.messages),
            "trace": state.prior_trace + state.trace.events,  # no copy when nothing came before
            "evidence": tuple(state.evidence.values()),
            "receipts": tuple(state.receipts),
        }
    )


def restore_state(
    snapshot: RunSnapshot,
    *,
    clock: Clock,
    sinks: Iterable[TraceSink],
    tools: tuple[ToolSpec, ...],
    approvals: Iterable[Approval] = (),
    journal: Iterable[JournalEntry] = (),
    redactor: Redactor | None = None,
) -> RunState:
    """Rebuild a run's state from its snapshot, to continue it in this process.

    Args:
        snapshot: The stored snapshot (running or paused).
        clock: The clock; the run's elapsed time continues from the snapshot's.
        sinks: Trace sinks for the continued run.
        tools: The tools offered to the model.
        approvals: New decisions supplied with the resume.
        journal: The run's write journal.
        redactor: What the continued run's trace never shows.

    Returns:
        The state, ready for the loop core.
    """
    last_seq = snapshot.trace[-1].seq if snapshot.trace else 0
    return RunState(
        run_id=snapshot.run_id,
        task=snapshot.task,
        actor=snapshot.actor,
        started_at=clock.monotonic() - snapshot.elapsed_s,
        trace=TraceRecorder(
            snapshot.run_id, clock, tuple(sinks), start_seq=last_seq, redactor=redactor
        ),
        usage=snapshot.usage,
        messages=list(snapshot.messages),
        evidence={item.id: item for item in snapshot.evidence},
        receipts=list(snapshot.receipts),
        pending=list(snapshot.pending),
        last_action=snapshot.last_action,
        repeats=snapshot.repeats,
        tools=tools,
        queue=list(snapshot.queue),
        identities={identity.key: identity for identity in snapshot.identities},
        admitted_call_id=snapshot.admitted_call_id,
        approvals=[*snapshot.available_approvals, *approvals],
        decisions=list(snapshot.approvals),
        approval_requests=list(snapshot.approval_requests),
        prior_trace=snapshot.trace,
        journal={entry.intent.call_id: entry for entry in journal},
        conversation=snapshot.conversation,
    )
