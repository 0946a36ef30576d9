"""Durable records: run snapshots, the write journal and leases, as stored by a `RunStore`.

A snapshot names tools and models by name and never holds a live object; it carries a
``schema_version`` so stores can refuse a format they do not know. The write journal is the
guarantee that a write never runs twice: an intent is recorded before a write executes and its
receipt after, so a resumed run knows which writes finished, and which may or may not have.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from ownloop.contracts._base import Identifier, JsonValue, Record, ToolName, utc_now
from ownloop.contracts.events import TraceEvent
from ownloop.contracts.limits import Limits, Usage
from ownloop.contracts.messages import Message
from ownloop.contracts.policy import Actor, Approval, ApprovalRequest, PendingOperation
from ownloop.contracts.results import Conversation, RunResult
from ownloop.contracts.status import Versions
from ownloop.contracts.tools import CallIdentity, Evidence, Receipt, ToolCall

__all__ = [
    "SNAPSHOT_SCHEMA_VERSION",
    "JournalEntry",
    "Lease",
    "RunSnapshot",
    "RunSummary",
    "WriteIntent",
]

SNAPSHOT_SCHEMA_VERSION = 2
"""The snapshot format this version of ownloop writes (and the newest it reads).

Version 2 added ``identities`` (the identity of each call in progress); version 1 snapshots load
unchanged and record the identity of a call in progress on its first resume.
"""

SnapshotState = Literal["running", "paused", "finished"]


class RunSnapshot(Record):
    """Everything needed to continue a run in another process, saved after every step.

    Attributes:
        schema_version: The format version.
        run_id: The run.
        state: ``running`` (resume after a crash), ``paused`` (waiting for approval) or
            ``finished`` (``result`` holds the outcome).
        task: The task.
        actor: Who the run acts for.
        usage: The counters.
        limits: The budgets.
        messages: The conversation.
        trace: Every event so far.
        evidence: The evidence ledger.
        receipts: Every receipt.
        pending: Writes whose effect is unknown.
        approvals: Decisions applied (the audit trail).
        available_approvals: Decisions supplied and not yet consumed.
        approval_requests: Requests waiting for a decision.
        queue: Tool calls of the current turn not yet finished.
        identities: The identity of each call in progress, fixed when it was first validated.
        admitted_call_id: The queue head's id once counted and checked for repeats.
        last_action: The last proposed action's key, for repeat detection.
        repeats: How many times in a row it was proposed.
        elapsed_s: Run time used so far (pauses excluded).
        versions: The versions producing the run.
        result: The outcome, once finished or paused.
        saved_at: When the snapshot was taken.
        conversation: The earlier turns the run continued, if any (its first messages hold
            them).
    """

    schema_version: int = SNAPSHOT_SCHEMA_VERSION
    run_id: Identifier
    state: SnapshotState
    task: str
    actor: Actor | None = None
    usage: Usage = Usage()
    limits: Limits = Field(default_factory=Limits)
    messages: tuple[Message, ...] = ()
    trace: tuple[TraceEvent, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    receipts: tuple[Receipt, ...] = ()
    pending: tuple[PendingOperation, ...] = ()
    approvals: tuple[Approval, ...] = ()
    available_approvals: tuple[Approval, ...] = ()
    approval_requests: tuple[ApprovalRequest, ...] = ()
    queue: tuple[ToolCall, ...] = ()
    identities: tuple[CallIdentity, ...] = ()
    admitted_call_id: Identifier | None = None
    last_action: str | None = None
    repeats: int = Field(default=0, ge=0)
    elapsed_s: float = Field(default=0.0, ge=0)
    versions: Versions
    result: RunResult | None = None
    saved_at: datetime = Field(default_factory=utc_now)
    conversation: Conversation | None = None


class WriteIntent(Record):
    """A write about to execute, recorded durably before it does.

    Attributes:
        run_id: The run.
        call_id: The call's journal key: assigned by the loop, unique within the run whatever id
            the model sent (``call#<n>``, the n-th call the run admitted).
        tool: The write tool.
        idempotency_key: The key the write is attempted with.
        arguments_digest: Digest of the validated arguments; a receipt only answers the call
            with the same key and digest.
        recorded_at: When.
        provider_call_id: The id the model gave the call (kept for the wire and the audit).
        arguments: The call's canonical arguments (`CallIdentity.arguments`); ``None`` in
            journals written before identities were journaled.
        digest_version: The encoding of ``arguments`` and ``arguments_digest``; ``None`` before.
        approval: The decision that admitted the write, if one did: the journal records its
            consumption with the write, so no path can spend it again.
    """

    run_id: Identifier
    call_id: Identifier
    tool: ToolName
    idempotency_key: Identifier
    arguments_digest: str = Field(max_length=128)
    recorded_at: datetime = Field(default_factory=utc_now)
    provider_call_id: Identifier | None = None
    arguments: dict[str, JsonValue] | None = None
    digest_version: int | None = Field(default=None, ge=0)
    approval: Approval | None = None


class JournalEntry(Record):
    """One write in the journal: its intent and, once it finished, its receipt.

    Attributes:
        intent: What was about to run.
        receipt: How it ended; ``None`` if the process died before recording it.
    """

    intent: WriteIntent
    receipt: Receipt | None = None


class Lease(Record):
    """One acquisition of a run: the right to write its records until it expires.

    A lease belongs to one acquisition, never to a worker name: every acquisition gets a new
    token, and a store applies a run's intent, receipt, checkpoint and approval consumption only
    while that token is current and unexpired (fencing). Renewing keeps the token.

    Attributes:
        run_id: The run.
        owner: The worker holding it (a name for messages; it grants nothing).
        token: The fencing token of this acquisition.
        expires_at: When another worker may take it over unless the holder renews it.
        host: The holder's host name, so a dead holder on the same host can be detected.
        pid: The holder's process id on that host.
        taken_over_from: The worker whose unexpired lease this acquisition took over, if any.
    """

    run_id: Identifier
    owner: Identifier
    token: Identifier
    expires_at: datetime
    host: str | None = Field(default=None, max_length=256)
    pid: int | None = None
    taken_over_from: Identifier | None = None


class RunSummary(Record):
    """One line of a run listing.

    Attributes:
        run_id: The run.
        state: ``running``, ``paused`` or ``finished``.
        status: The result's status, once paused or finished.
        stop_reason: The result's stop reason, once paused or finished.
        version: The stored snapshot's version (optimistic concurrency).
        updated_at: When it was last saved.
        actor: The id of the actor the run acts for, if any.
        agent: The agent's configuration digest (``versions.policy_digest``), if recorded.
    """

    run_id: Identifier
    state: SnapshotState
    status: str | None = None
    stop_reason: str | None = None
    version: int = Field(ge=1)
    updated_at: datetime
    actor: str | None = None
    agent: str | None = None
