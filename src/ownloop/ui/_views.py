"""What each page shows, read from a `RunStore` and redacted; no HTML here.

Values a person sees are passed through the redactor first (the task, arguments, receipts,
answers, reasons), so the page never shows a secret the trace would have hidden. Trace events are
stored already redacted; they are read through `ownloop.tracing.timeline`, as ``trace show`` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ownloop.contracts import (
    Approval,
    ApprovalRequest,
    JournalEntry,
    Receipt,
    RunSnapshot,
    RunSummary,
    utc_now,
)
from ownloop.exceptions import RunNotFound
from ownloop.redaction import Redactor
from ownloop.store import RunStore, run_cursor
from ownloop.store._rules import standing_decision
from ownloop.tracing import BudgetUse, Timeline, timeline

__all__ = [
    "PendingRequest",
    "RunPage",
    "RunRow",
    "age",
    "find_request",
    "pending_requests",
    "run_page",
    "run_rows",
]

_STATES = ("running", "paused", "finished")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One line of the runs list."""

    run_id: str
    state: str
    status: str | None
    stop_reason: str | None
    version: int
    updated_at: datetime
    age: str


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A request a paused run waits for, as an approver sees it."""

    run_id: str
    request_id: str
    tool: str
    arguments: str
    digest: str
    revision: str | None
    reason: str
    actor: str | None
    requested_at: datetime
    decision: Approval | None


@dataclass(frozen=True, slots=True)
class RunPage:
    """Everything the run page shows."""

    run_id: str
    state: str
    status: str | None
    stop_reason: str | None
    detail: str | None
    version: int
    saved_at: datetime
    task: str
    output: str | None
    timeline: Timeline | None
    budgets: tuple[BudgetUse, ...]
    receipts: tuple[Receipt, ...]
    journal: tuple[JournalEntry, ...]
    decisions: tuple[Approval, ...]
    requests: tuple[PendingRequest, ...]
    versions: dict[str, Any] = field(default_factory=dict)
    thread_id: str | None = None


def age(moment: datetime, now: datetime | None = None) -> str:
    """Return how long ago ``moment`` was, in its largest whole unit (``42s``, ``3m``, ``2d``).

    Args:
        moment: A timezone-aware time.
        now: The present; the current time by default.
    """
    seconds = max(int(((now or utc_now()) - moment).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


async def run_rows(
    store: RunStore,
    *,
    state: str | None,
    status: str | None,
    text: str | None,
    actor: str | None = None,
    agent: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> tuple[list[RunRow], str | None]:
    """Return one page of the runs list, most recently updated first, filtered.

    Args:
        store: The store.
        state: Only runs in this state (ignored unless it is one of the three states).
        status: Only runs whose result has this status.
        text: Only runs whose id contains this text (among the page's runs).
        actor: Only runs acting for this actor id.
        agent: Only runs of this agent configuration digest.
        after: The page after this cursor.
        limit: At most this many.

    Returns:
        The rows, and the cursor of the next page when this one is full.
    """
    summaries: list[RunSummary] = await store.list_runs(
        state=state if state in _STATES else None,
        status=status or None,
        actor=actor or None,
        agent=agent or None,
        after=after or None,
        limit=limit,
    )
    now = utc_now()
    rows = [
        RunRow(
            run_id=summary.run_id,
            state=summary.state,
            status=summary.status,
            stop_reason=summary.stop_reason,
            version=summary.version,
            updated_at=summary.updated_at,
            age=age(summary.updated_at, now),
        )
        for summary in summaries
        if not text or text in summary.run_id
    ]
    return rows, _next(summaries, limit)


def _next(summaries: list[RunSummary], limit: int) -> str | None:
    return run_cursor(summaries[-1]) if summaries and len(summaries) >= limit else None


async def run_page(store: RunStore, run_id: str, redactor: Redactor) -> RunPage:
    """Return what the run page shows.

    Args:
        store: The store.
        run_id: The run.
        redactor: What must never be shown.

    Raises:
        RunNotFound: If the store has no such run.
    """
    stored = await store.get(run_id)
    if stored is None:
        raise RunNotFound(f"no run {run_id!r}")
    snapshot = stored.snapshot
    submitted = await store.submitted_approvals(run_id)
    journal = await store.journal(run_id)
    line = timeline(snapshot.trace) if snapshot.trace else None
    result = snapshot.result
    return RunPage(
        run_id=snapshot.run_id,
        state=snapshot.state,
        status=result.status.value if result else None,
        stop_reason=result.stop_reason.value if result else None,
        detail=redactor.redact_text(result.detail) if result else None,
        version=stored.version,
        saved_at=snapshot.saved_at,
        task=redactor.redact_text(snapshot.task),
        output=redactor.redact_text(result.output) if result and result.output else None,
        timeline=line,
        budgets=line.budgets if line else (),
        receipts=tuple(_redacted_receipt(receipt, redactor) for receipt in snapshot.receipts),
        journal=tuple(
            entry.model_copy(update={"receipt": _redacted_receipt(entry.receipt, redactor)})
            if entry.receipt
            else entry
            for entry in journal
        ),
        decisions=tuple(_redacted_approval(item, redactor) for item in snapshot.approvals),
        requests=tuple(_waiting(snapshot, submitted, redactor)),
        versions=snapshot.versions.model_dump(mode="json"),
        thread_id=snapshot.conversation.thread_id if snapshot.conversation else None,
    )


async def pending_requests(
    store: RunStore, redactor: Redactor, *, after: str | None = None, limit: int = 50
) -> tuple[list[PendingRequest], str | None]:
    """Return the requests one page of paused runs waits for, oldest run last.

    Args:
        store: The store.
        redactor: What must never be shown.
        after: The page of paused runs after this cursor.
        limit: At most this many paused runs.

    Returns:
        The requests, and the cursor of the next page when this one is full.
    """
    found: list[PendingRequest] = []
    paused = await store.list_runs(state="paused", after=after or None, limit=limit)
    for summary in paused:
        stored = [run for run in [await store.get(summary.run_id)] if run is not None]
        submitted = await store.submitted_approvals(summary.run_id)
        for run in stored:  # a run that moved on since the listing waits for nothing
            found.extend(_waiting(run.snapshot, submitted, redactor))
    return found, _next(paused, limit)


def find_request(snapshot: RunSnapshot, request_id: str) -> ApprovalRequest | None:
    """Return the request with this id the run waits for, if it does.

    Args:
        snapshot: The run.
        request_id: The request.
    """
    if snapshot.state != "paused":
        return None
    return next((item for item in snapshot.approval_requests if item.id == request_id), None)


def _waiting(
    snapshot: RunSnapshot, submitted: list[Approval], redactor: Redactor
) -> list[PendingRequest]:
    if snapshot.state != "paused":
        return []
    # the stores' rule: a stored decision decides the request it names by id or by digest
    decided = {
        request.id: standing[0]
        for request in snapshot.approval_requests
        if (standing := standing_decision(snapshot, submitted, {request.id})) is not None
    }
    return [
        PendingRequest(
            run_id=snapshot.run_id,
            request_id=request.id,
            tool=request.tool,
            arguments=json.dumps(
                redactor.redact(request.arguments), indent=2, sort_keys=True, ensure_ascii=False
            ),
            digest=request.digest,
            revision=request.revision,
            reason=redactor.redact_text(request.reason),
            actor=redactor.redact_text(request.actor.id) if request.actor else None,
            requested_at=request.requested_at,
            decision=_redacted_approval(decided[request.id], redactor)
            if request.id in decided
            else None,
        )
        for request in snapshot.approval_requests
    ]


def _redacted_receipt(receipt: Receipt, redactor: Redactor) -> Receipt:
    message = redactor.redact_text(receipt.message) if receipt.message else None
    return receipt.model_copy(update={"data": redactor.redact(receipt.data), "message": message})


def _redacted_approval(approval: Approval, redactor: Redactor) -> Approval:
    """A decision as a page shows it, applied or only submitted: reason and approver redacted."""
    reason = redactor.redact_text(approval.reason) if approval.reason is not None else None
    approver = redactor.redact_text(approval.approver)
    if reason == approval.reason and approver == approval.approver:
        return approval
    return approval.model_copy(update={"reason": reason, "approver": approver})
