"""Rules every store applies the same way: dead holders, decisions, and who may still write.

One decision per request, however it names the request: a decision decides every request the run
waits for whose id it names or whose digest it carries (the requests the gateway would let it
admit), so a decision by request id and another by digest for the same request conflict.

No I/O on a database here: the stores call these inside their own transactions.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from ownloop.contracts import Approval, RunSnapshot
from ownloop.exceptions import (
    RunLeased,
    RunNotFound,
    StaleCheckpoint,
    StoreUpgraded,
    UnknownApprovalRequest,
)

__all__ = [
    "check_store_schema",
    "check_submission",
    "decided_requests",
    "decides",
    "holder_is_gone",
    "lease_held",
    "lease_lost",
    "receipt_exists",
    "standing_decision",
    "this_host",
    "usable_decisions",
    "waiting_requests",
    "withdrawn",
]


@functools.cache
def this_host() -> str:
    """Return this machine's host name (as stored with a lease)."""
    return socket.gethostname()[:256]


def holder_is_gone(host: str | None, pid: int | None) -> bool:
    """Say whether a lease holder is a process of this host that no longer runs.

    Only a holder on this host can be judged; a holder elsewhere, or this very process, is never
    "gone" (its lease expires, or an operator takes it over explicitly).

    Args:
        host: The holder's host name.
        pid: The holder's process id.

    Returns:
        ``True`` when the holder's process has certainly ended.
    """
    if host != this_host() or pid is None or pid <= 0 or pid == os.getpid():
        return False
    try:
        # Signal 0 only asks whether the process exists. Mutation testing must never change it:
        # a mutant would really send that signal (SIGHUP, to the test runner itself).
        os.kill(pid, 0)  # pragma: no mutate
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process its parent has not reaped yet still answers signal 0."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] in ("Z", "X")


def waiting_requests(snapshot: RunSnapshot) -> set[str]:
    """Return the request ids and digests a paused run waits for.

    Args:
        snapshot: The run.
    """
    return {name for request in snapshot.approval_requests for name in (request.id, request.digest)}


def decides(approval: Approval) -> str:
    """Return what an approval names: its request id, or its digest."""
    return approval.request_id or str(approval.digest)


def decided_requests(snapshot: RunSnapshot, approval: Approval) -> set[str]:
    """Return the ids of the requests the run waits for that a decision decides.

    A decision decides a request when it names the request's id or carries its digest: exactly
    the requests the gateway would let it admit.

    Args:
        snapshot: The run.
        approval: The decision.
    """
    return {
        request.id
        for request in snapshot.approval_requests
        if approval.request_id == request.id or approval.digest == request.digest
    }


def check_submission(
    run_id: str, snapshot: RunSnapshot | None, approval: Approval, stored: Iterable[Approval]
) -> bool:
    """Refuse a decision that names no request the run waits for, or contradicts a stored one.

    Args:
        run_id: The run.
        snapshot: Its stored snapshot, if any.
        approval: The decision being submitted.
        stored: The decisions already stored for the run.

    Returns:
        ``True`` to store it; ``False`` when the same verdict by the same approver is already
        stored for that request, however it was named (a repeated click: the first decision
        stands).

    Raises:
        RunNotFound: If the run is not stored.
        UnknownApprovalRequest: If the run has finished, or does not wait for what the
            decision names (by request id or digest), or another decision for that request is
            already stored, by its id or by its digest (withdraw that first).
    """
    if snapshot is None:
        raise RunNotFound(f"no run {run_id!r} is stored: there is nothing to approve")
    if snapshot.state == "finished":  # it waits for nothing, whatever an older ownloop kept
        raise UnknownApprovalRequest(
            f"run {run_id} has finished: it waits for no decision; nothing was stored"
        )
    named = decides(approval)
    decided = decided_requests(snapshot, approval)
    if named not in waiting_requests(snapshot) or (
        approval.request_id is not None and approval.request_id not in decided
    ):
        listed = ", ".join(sorted(r.id for r in snapshot.approval_requests)) or "none"
        raise UnknownApprovalRequest(
            f"run {run_id} is not waiting for request {named!r} (waiting: {listed}); "
            "nothing was stored"
        )
    standing = standing_decision(snapshot, stored, decided)
    if standing is None:
        return True
    earlier, request = standing
    if (earlier.approved, earlier.approver) == (approval.approved, approval.approver):
        return False
    verdict = "approved" if earlier.approved else "denied"
    raise UnknownApprovalRequest(
        f"request {request!r} of run {run_id} was already decided: {verdict} by "
        f"{earlier.approver} (named by {decides(earlier)!r}); one decision per request, "
        f"however it names the request: withdraw it first "
        f"(ownloop runs withdraw {run_id} {request})"
    )


def standing_decision(
    snapshot: RunSnapshot, stored: Iterable[Approval], requests: set[str]
) -> tuple[Approval, str] | None:
    """Find the stored decision, not applied yet, that already decides one of ``requests``.

    Args:
        snapshot: The run.
        stored: The decisions stored for it, in order.
        requests: Request ids the run waits for.

    Returns:
        The first such decision and the (first) request it decides, or ``None``.
    """
    for earlier in stored:
        both = requests & decided_requests(snapshot, earlier)
        if both and earlier not in snapshot.approvals:
            return earlier, min(both)
    return None


def usable_decisions(snapshot: RunSnapshot, submitted: Iterable[Approval]) -> list[Approval]:
    """Pick the stored decisions a resume applies: the first for each request the run waits for.

    A request is taken by the first decision that decides it, whether by its id or its digest; a
    later one is skipped, as is a decision that decides nothing the run waits for any more
    (already applied, a withdrawn request, a run that moved on): nothing stored blocks a resume.

    Args:
        snapshot: The run.
        submitted: The decisions stored for it, in order.

    Returns:
        The decisions to apply.
    """
    applied = {*snapshot.approvals, *snapshot.available_approvals}
    undecided = {request.id for request in snapshot.approval_requests}
    usable: list[Approval] = []
    for approval in submitted:
        decided = decided_requests(snapshot, approval) & undecided
        if decided and approval not in applied:
            undecided -= decided  # the first decision stands
            usable.append(approval)
    return usable


def withdrawn(snapshot: RunSnapshot | None, approval: Approval, what: str) -> bool:
    """Say whether withdrawing ``what`` (a request id or a digest) removes a stored decision.

    It does when the decision names ``what`` (by request id or digest), or decides a request the
    run waits for that ``what`` names: withdrawing by request id also removes a decision that
    named that request by its digest, and the other way round.

    Args:
        snapshot: The run's stored snapshot, if any.
        approval: A stored decision.
        what: The request id or digest being withdrawn.
    """
    if what in (approval.request_id, approval.digest):
        return True
    if snapshot is None:
        return False
    named = {r.id for r in snapshot.approval_requests if what in (r.id, r.digest)}
    return bool(named & decided_requests(snapshot, approval))


def check_store_schema(where: str, found: int, writes: int) -> None:
    """Refuse a write to a store whose schema is no longer the one this process writes.

    Every write transaction of the SQL stores reads the store's schema version and calls this
    before writing, so a process opened before another release upgraded the store writes
    nothing more (the upgrade fence).

    Args:
        where: The store (named in the error).
        found: The store's schema version now.
        writes: The store schema version this process writes.

    Raises:
        StoreUpgraded: If they differ.
    """
    if found != writes:
        raise StoreUpgraded(
            f"the run store at {where} is now at store schema version {found}, but this process "
            f"opened it at version {writes} and writes only that layout, so it wrote nothing: "
            f"an ownloop release that knows version {found} changed the store while this "
            "process ran. Stop this worker and restart it on that release (see 'Rolling "
            "upgrades' in docs/concepts/durability.md)"
        )


def lease_lost(run_id: str) -> RunLeased:
    """Return the error of a write by a worker whose lease expired or was taken over."""
    return RunLeased(
        f"the lease on run {run_id} was lost: it expired or another worker took the run over, "
        "so this worker records nothing more for it"
    )


def lease_held(run_id: str, owner: str, expires_at: datetime) -> RunLeased:
    """Return the error of a worker trying to take a lease another worker holds."""
    return RunLeased(
        f"run {run_id} is being executed by {owner} until {expires_at.isoformat()}; "
        "resume it after that worker finishes or its lease expires, or take it over "
        "(resume(..., take_over=True), ownloop runs unlock) if that worker is dead"
    )


def receipt_exists(run_id: str, call_id: str) -> StaleCheckpoint:
    """Return the error of an intent for a write that already has a receipt."""
    return StaleCheckpoint(
        f"write {call_id} of run {run_id} already has a receipt: this worker's view of the run is "
        "stale, so the write is not executed again"
    )
