"""Rules every store applies the same way: dead holders, and which approvals may be submitted.

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
from ownloop.exceptions import RunLeased, RunNotFound, StaleCheckpoint, UnknownApprovalRequest

__all__ = [
    "check_submission",
    "decides",
    "holder_is_gone",
    "lease_held",
    "lease_lost",
    "receipt_exists",
    "this_host",
    "waiting_requests",
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
    """Return what an approval decides: its request id, or its digest."""
    return approval.request_id or str(approval.digest)


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
        stored for that request (a repeated click: the first decision stands).

    Raises:
        RunNotFound: If the run is not stored.
        UnknownApprovalRequest: If the run does not wait for what the decision names (by request
            id or digest), or another decision for it is already stored (withdraw that first).
    """
    if snapshot is None:
        raise RunNotFound(f"no run {run_id!r} is stored: there is nothing to approve")
    named = decides(approval)
    if named not in waiting_requests(snapshot):
        listed = ", ".join(sorted(r.id for r in snapshot.approval_requests)) or "none"
        raise UnknownApprovalRequest(
            f"run {run_id} is not waiting for request {named!r} (waiting: {listed}); "
            "nothing was stored"
        )
    for earlier in stored:
        if decides(earlier) != named or earlier in snapshot.approvals:
            continue
        if (earlier.approved, earlier.approver) == (approval.approved, approval.approver):
            return False
        raise UnknownApprovalRequest(
            f"request {named!r} of run {run_id} already has a stored decision by "
            f"{earlier.approver}; withdraw it first (ownloop runs withdraw)"
        )
    return True


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
