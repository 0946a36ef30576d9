"""The mutable state of one run, owned by the loop core while the run is active."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ownloop.contracts import (
    Actor,
    Approval,
    ApprovalRequest,
    CallIdentity,
    Conversation,
    Evidence,
    JournalEntry,
    Message,
    PendingOperation,
    Receipt,
    RunResult,
    ToolCall,
    ToolSpec,
    TraceEvent,
    Usage,
)
from ownloop.evidence import EvidenceRule, shown_evidence
from ownloop.tools import ValidatedCall
from ownloop.tracing import TraceRecorder

__all__ = [
    "JOURNAL_KEY_PREFIX",
    "RunState",
    "action_key",
    "idempotency_key",
    "pending_key",
]


@dataclass
class RunState:
    """Everything a run has done so far.

    Attributes:
        run_id: The run.
        task: The task text.
        actor: Who the run acts for.
        started_at: The clock's monotonic reading when the run started.
        trace: The run's event recorder.
        usage: The counters.
        messages: The conversation.
        evidence: What tools returned that may be cited, by id, in first-seen order.
        receipts: Every tool execution's receipt.
        pending: Writes whose effect is unknown.
        last_action: The key of the last proposed action, for repeat detection.
        repeats: How many times in a row that action was proposed.
        output: The final answer, once accepted: text, or a value of the ``output_type``.
        raw_output: The last final answer as the model gave it (typed runs only).
        deps: The application's dependencies for this run (live objects: never stored).
        tools: The tools offered to the model (those the policy does not deny this actor).
        queue: Tool calls of the current turn not yet finished, the one in progress first.
        admitted_call_id: The queue head's id once it has been counted and checked for repeats.
        approvals: Supplied decisions not yet consumed.
        decisions: Every decision applied: the audit trail.
        approval_requests: Requests waiting for a decision.
        pending_calls: The validated call of each pending write by journal key, for
            reconciliation.
        prior_trace: Events recorded before a pause, when the run was resumed.
        deferred_feedback: Runtime messages for the model, held until the current turn's tool
            observations are complete (providers reject a message between them).
        journal: The stored write journal by journal key, when the run was restored from a
            store.
        tool_tokens: The estimated tokens of the offered tool schemas (fixed for the run).
        taken_over_from: The worker whose unexpired lease this segment took over, if any.
        identities: The identity of each call in progress by journal key, fixed when the call
            was first validated (checkpointed; dropped once the call is answered).
        admitted_by: The decision that admitted each call in progress, by journal key
            (journaled with a write's intent).
        saved_counts: How many trace events, receipts and evidence items the last checkpoint
            held, when checkpoints carry only what changed (``None`` before the first).
        evidence_rewritten: Whether a known evidence item changed since the last checkpoint.
        trace_forgotten: How many of the run's first trace events are no longer held (they are
            in the store): the trace held is ``prior_trace`` then the recorder's events, after
            those.
        compacted_turns: Turns removed by context compaction over the whole run.
        conversation: Where the earlier turns the run continues came from, if any.
        handed_off: The result of a handoff's child that answered: its answer ends the run
            once the call is observed (never checkpointed: the run ends before the next one).
    """

    run_id: str
    task: str
    actor: Actor | None
    started_at: float
    trace: TraceRecorder
    usage: Usage = field(default_factory=Usage)
    messages: list[Message] = field(default_factory=list)
    evidence: dict[str, Evidence] = field(default_factory=dict)
    receipts: list[Receipt] = field(default_factory=list)
    pending: list[PendingOperation] = field(default_factory=list)
    last_action: str | None = None
    repeats: int = 0
    output: Any = None
    raw_output: str | None = None
    deps: Any = None
    tools: tuple[ToolSpec, ...] = ()
    queue: list[ToolCall] = field(default_factory=list)
    admitted_call_id: str | None = None
    approvals: list[Approval] = field(default_factory=list)
    decisions: list[Approval] = field(default_factory=list)
    approval_requests: list[ApprovalRequest] = field(default_factory=list)
    pending_calls: dict[str, ValidatedCall] = field(default_factory=dict)
    prior_trace: tuple[TraceEvent, ...] = ()
    deferred_feedback: list[str] = field(default_factory=list)
    journal: dict[str, JournalEntry] = field(default_factory=dict)
    tool_tokens: int | None = None
    taken_over_from: str | None = None
    identities: dict[str, CallIdentity] = field(default_factory=dict)
    admitted_by: dict[str, Approval] = field(default_factory=dict)
    saved_counts: dict[str, int] | None = None
    evidence_rewritten: bool = False
    trace_forgotten: int = 0
    compacted_turns: int = 0
    conversation: Conversation | None = None
    handed_off: RunResult[Any] | None = None

    def count(self, **increments: float) -> None:
        """Add to the named usage counters."""
        self.usage = self.usage.add(**increments)

    def add_pending(
        self, validated: ValidatedCall, reason: str, revision: str | None, key: str
    ) -> None:
        """Record a write whose effect is unknown.

        Args:
            validated: The write's validated call.
            reason: Why its effect is unknown.
            revision: The revision it ran against.
            key: The call's journal key.
        """
        self.pending.append(
            PendingOperation(
                call_id=validated.call.id,
                tool=validated.tool.spec.name,
                arguments_digest=validated.digest,
                idempotency_key=self.write_key(key, validated),
                revision=revision,
                reason=reason[:1024],
                journal_key=key,
            )
        )
        self.pending_calls[key] = validated

    def write_key(self, key: str, validated: ValidatedCall) -> str:
        """Return a write's idempotency key: the one fixed with its identity.

        Args:
            key: The call's journal key.
            validated: The call.
        """
        identity = self.identities.get(key)
        if identity is not None and identity.idempotency_key is not None:
            return identity.idempotency_key
        return idempotency_key(self.run_id, key, validated.digest)

    def settle(self, key: str) -> None:
        """Forget a pending write once an authoritative answer settled it.

        Args:
            key: The write's journal key.
        """
        self.pending = [operation for operation in self.pending if pending_key(operation) != key]
        self.pending_calls.pop(key, None)

    def current_key(self) -> str:
        """Return the journal key of the call being handled: ``call#<n>``, its admission number.

        Unique within the run whatever id the model sent, and the same when a crashed or paused
        call is handled again (admission is counted once, and checkpointed with the run).
        """
        return f"{JOURNAL_KEY_PREFIX}{self.usage.tool_calls}"

    def journaled(self, key: str, validated: ValidatedCall) -> JournalEntry | None:
        """Return the journal entry of this call: the same key (and, checked by the caller, digest).

        A journal recorded before keys existed is keyed by the provider's id; its entry is found
        by that id when the arguments digest matches.

        Args:
            key: The call's journal key.
            validated: The call.
        """
        entry = self.journal.get(key)
        provider_id = validated.call.id
        if entry is not None or provider_id.startswith(JOURNAL_KEY_PREFIX):
            return entry
        legacy = self.journal.get(provider_id)
        if legacy is not None and legacy.intent.arguments_digest in (
            validated.digest,
            validated.legacy_digest,
        ):
            return legacy
        return None

    def record_evidence(
        self, tool: str, call_id: str, data: Any, shown: str, rule: EvidenceRule | None = None
    ) -> None:
        """Add what the model was shown of a fact-source result to the evidence ledger.

        Args:
            tool: The tool that returned it.
            call_id: The call that returned it.
            data: The JSON-ready result.
            shown: The observation the model received (an id cut from it does not count).
            rule: How items are identified (`EvidenceRule` by default).
        """
        for item_id, title in shown_evidence(rule or EvidenceRule(), data, shown):
            known = self.evidence.get(item_id)
            if known is None or known.from_run is not None:  # seen again: now this run's
                self.evidence[item_id] = Evidence(
                    id=item_id, tool=tool, call_ids=(call_id,), title=title
                )
            elif call_id not in known.call_ids:
                self.evidence[item_id] = known.model_copy(
                    update={"call_ids": (*known.call_ids, call_id)}
                )
                self.evidence_rewritten = True


JOURNAL_KEY_PREFIX = "call#"
"""How a loop-assigned journal key starts (a provider id is never trusted to be unique)."""


def pending_key(operation: PendingOperation) -> str:
    """Return a pending write's journal key (its call id in runs recorded before keys existed)."""
    return operation.journal_key or operation.call_id


def idempotency_key(run_id: str, call_id: str, digest: str) -> str:
    """Return the idempotency key of a write call: stable across retries and resumes.

    Args:
        run_id: The run.
        call_id: The call's journal key.
        digest: The validated arguments' digest.

    Returns:
        32 hex digits.
    """
    return hashlib.sha256(f"{run_id}\x1f{call_id}\x1f{digest}".encode()).hexdigest()[:32]


def action_key(tool: str, arguments: Any) -> str:
    """Return a canonical key for a proposed action: the tool and its arguments, key-sorted.

    Args:
        tool: The proposed tool name.
        arguments: The raw arguments (a JSON string is parsed first when it is valid).

    Returns:
        A string equal for equal proposals, whatever their key order or spacing.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):  # too deep to parse: validation rejects it
            return f"{tool}|{arguments}"
    return f"{tool}|{json.dumps(arguments, sort_keys=True, separators=(',', ':'), default=str)}"
