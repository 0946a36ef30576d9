"""Trusted records of identity, approvals and unresolved writes.

These come from the application or from the runtime's own records, never from a model's or a
tool's prose.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, model_validator

from ownloop.contracts._base import Identifier, JsonValue, Record, ToolName, utc_now

__all__ = ["Actor", "Approval", "ApprovalRequest", "PendingOperation"]


class Actor(Record):
    """The authenticated identity a run acts for, passed by the application.

    Attributes:
        id: The actor's id.
        tenant: The tenant the actor belongs to, if the application has tenants.
        roles: The actor's roles.
    """

    id: Identifier
    tenant: Identifier | None = None
    roles: tuple[Identifier, ...] = ()


class ApprovalRequest(Record):
    """A pending request for approval, bound to one exact call.

    Attributes:
        id: The request id an approval must name.
        call_id: The tool call waiting for it.
        tool: The tool.
        arguments: The validated arguments, with sensitive values redacted.
        digest: ``digest(tool, canonical arguments, revision)``; an approval binds to it.
        revision: The state revision the call would run against.
        actor: Who the run acts for.
        reason: Why approval is needed.
        requested_at: When the request was made.
    """

    id: Identifier
    call_id: Identifier
    tool: ToolName
    arguments: dict[str, JsonValue]
    digest: str = Field(max_length=128)
    revision: str | None = Field(default=None, max_length=256)
    actor: Actor | None = None
    reason: str = Field(default="approval required", max_length=1024)
    requested_at: datetime = Field(default_factory=utc_now)


class Approval(Record):
    """A named approver's decision on one approval request, or on one exact call given up front.

    Name the request (``request_id``) when answering a paused run; give the call's ``digest``
    (``ownloop.policy.approval_digest``) to approve an exact call before it is proposed.

    Attributes:
        request_id: The request it decides.
        digest: The exact call it decides, when no request id is known yet.
        approved: ``True`` to admit the call, ``False`` to deny it.
        approver: Who decided.
        reason: Why, in the approver's words.
        decided_at: When.
    """

    request_id: Identifier | None = None
    digest: str | None = Field(default=None, max_length=128)
    approved: bool
    approver: Identifier
    reason: str | None = Field(default=None, max_length=1024)
    decided_at: datetime = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _names_what_it_decides(self) -> Approval:
        if self.request_id is None and self.digest is None:
            raise ValueError("an approval must name a request_id or a digest")
        return self


class PendingOperation(Record):
    """A write whose effect is unknown: it may have happened. Only a lookup can resolve it.

    Attributes:
        call_id: The call that attempted the write.
        tool: The write tool.
        arguments_digest: Digest of the validated arguments.
        idempotency_key: The key the write was attempted with.
        revision: The revision it ran against.
        reason: Why the effect is unknown.
        created_at: When it became pending.
        journal_key: The call's journal key (``None`` in runs recorded before keys existed).
    """

    call_id: Identifier
    tool: ToolName
    arguments_digest: str = Field(max_length=128)
    idempotency_key: Identifier
    revision: str | None = Field(default=None, max_length=256)
    reason: str = Field(max_length=1024)
    created_at: datetime = Field(default_factory=utc_now)
    journal_key: Identifier | None = None
