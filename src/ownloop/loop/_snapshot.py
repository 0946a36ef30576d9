"""Turning a run's state into a durable snapshot, and a snapshot back into state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import islice

from ownloop.clock import Clock
from ownloop.contracts import (
    Approval,
    ContextCompacted,
    JournalEntry,
    RunResult,
    RunSnapshot,
    ToolSpec,
    TraceEvent,
)
from ownloop.contracts.durable import SnapshotState
from ownloop.loop.config import LoopConfig
from ownloop.loop.state import RunState
from ownloop.redaction import Redactor
from ownloop.tracing import TraceRecorder, TraceSink

__all__ = ["changed_counts", "forget_saved_trace", "restore_state", "snapshot_of"]


def snapshot_of(
    config: LoopConfig,
    state: RunState,
    kind: SnapshotState,
    result: RunResult | None = None,
    *,
    kept: Mapping[str, int] | None = None,
) -> RunSnapshot:
    """Capture the run as it stands.

    Args:
        config: The run's configuration.
        state: The run's state.
        kind: ``running``, ``paused`` or ``finished``.
        result: The outcome, when paused or finished.
        kept: Leave out the first ``kept[part]`` items of the trace, receipts and evidence (the
            store already holds them): the snapshot then carries only what was added since, so
            building it costs the same at step 10,000 as at step 5 (see `changed_counts`).

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
    if kept is None:
        trace = state.prior_trace + state.trace.events  # no copy when nothing came before
        evidence = tuple(state.evidence.values())
        receipts = tuple(state.receipts)
    else:
        trace = _trace_after(state, kept["trace"])
        added = len(state.evidence) - kept["evidence"]  # the newest, from the end: no walk
        evidence = tuple(islice(reversed(state.evidence.values()), added))[::-1]
        receipts = tuple(state.receipts[kept["receipts"] :])
    return head.model_copy(
        update={
            "messages": tuple(state.messages),
            "trace": trace,
            "evidence": evidence,
            "receipts": receipts,
        }
    )


def changed_counts(state: RunState) -> dict[str, int]:
    """Return how many items of each growing part a checkpoint taken now holds in all.

    After a checkpoint is saved, the next may leave out that many items (``kept`` of
    `snapshot_of`): the trace and the receipts only ever grow. Evidence grows too, except when a
    known item is cited by another call (`RunState.add_evidence` replaces it in place): then its
    count is withheld until the next full checkpoint.

    Args:
        state: The run's state.
    """
    return {
        "trace": state.trace_forgotten + len(state.prior_trace) + len(state.trace),
        "receipts": len(state.receipts),
        "evidence": len(state.evidence),
    }


def _trace_after(state: RunState, count: int) -> tuple[TraceEvent, ...]:
    """The run's trace events after its first ``count`` (without building the whole trace).

    ``count`` is a checkpoint's, and every checkpoint holds the whole prior trace (a resumed
    run's first is whole), so the events after it are all the recorder's.
    """
    return state.trace.since(count - state.trace_forgotten - len(state.prior_trace))


def forget_saved_trace(state: RunState, held: int) -> None:
    """Hold at most about ``2 * held`` trace events: drop the oldest, which the store keeps.

    Only events a checkpoint already carried are dropped (call it right after one), and only once
    more than ``2 * held`` are held, so the work is constant per event. The run's result then
    holds the last ``held`` or more events; the store holds them all.

    Args:
        state: The run's state.
        held: How many of the latest events to keep at least.
    """
    prior = len(state.prior_trace)
    total = prior + len(state.trace)
    if total <= 2 * held:
        return
    drop = total - held
    from_prior = min(drop, prior)  # a resumed run's earlier events go first
    state.prior_trace = state.prior_trace[from_prior:]
    state.trace.forget(drop - from_prior)
    state.trace_forgotten += drop


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
    compacted = sum(
        event.dropped_turns for event in snapshot.trace if isinstance(event, ContextCompacted)
    )
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
        compacted_turns=compacted,
        conversation=snapshot.conversation,
    )
