"""The gateway between a validated call and its execution: authorize, check, approve.

Identity, approvals and budgets come only from trusted records — the application's actor, the
policy, the approvals supplied to the run or decided by the approver — never from what a model or
a tool wrote. Every refusal is a trace event; what the model is told is bounded.
"""

from __future__ import annotations

from collections.abc import Generator

from ownloop.contracts import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovalRequested,
    RunStatus,
    StopReason,
    ToolDenied,
    ToolRejected,
)
from ownloop.loop._finish import end
from ownloop.loop._observe import add_tool_observation
from ownloop.loop._revision import completion_context, current_revision
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import AskApprover, Decided, Effect, Outcome
from ownloop.loop.state import RunState
from ownloop.policy import (
    Deny,
    RequireApproval,
    approval_request_id,
    encoded_approval_digest,
    legacy_approval_digest,
    matching_approval,
)
from ownloop.redaction import redact_sensitive
from ownloop.tools import ValidatedCall

__all__ = ["admit"]


def admit(
    config: LoopConfig, state: RunState, validated: ValidatedCall, key: str
) -> Generator[Effect, Outcome, bool]:
    """Decide whether a validated call may execute now.

    Args:
        config: The run's configuration.
        state: The run's state.
        validated: The call.
        key: The call's journal key; its approval request is named after it, so a request
            is never shared by two calls whatever ids the model sent.

    Yields:
        Revision reads and approver questions.

    Returns:
        ``True`` to execute; ``False`` when the model was told why not (the run goes on).
    """
    spec, call = validated.tool.spec, validated.call
    decision = config.policy.decide(state.actor, spec, validated.canonical)
    if isinstance(decision, Deny):
        state.trace.emit(
            ToolDenied, call_id=call.id, tool=spec.name, reason=decision.reason, rule=decision.rule
        )
        if config.on_denied == "fail":
            end(
                RunStatus.FAILED, StopReason.TOOL_DENIED, f"{spec.name!r} denied: {decision.reason}"
            )
        _tell(config, state, validated, f"Tool call denied by policy: {decision.reason}", "denied")
        return False
    if config.preconditions:
        context = yield from completion_context(config, state.receipts)
        for precondition in config.preconditions:
            problem = precondition.problem(spec.name, context)
            if problem is not None:
                state.trace.emit(
                    ToolRejected,
                    call_id=call.id,
                    tool=spec.name,
                    code="check_required",
                    reason=problem,
                )
                _tell(config, state, validated, f"check_required: {problem}", "check_required")
                return False
    if spec.requires_approval or isinstance(decision, RequireApproval):
        reason = (
            decision.reason
            if isinstance(decision, RequireApproval)
            else "the tool requires approval"
        )
        return (yield from _approve(config, state, validated, reason, key))
    return True


def _tell(
    config: LoopConfig, state: RunState, validated: ValidatedCall, text: str, source: str
) -> None:
    add_tool_observation(
        state,
        call_id=validated.call.id,
        name=validated.call.name,
        content=text,
        max_chars=config.limits.max_observation_chars,
        source=source,
    )


def _waiting(
    state: RunState, validated: ValidatedCall, digest: str, revision: str | None
) -> ApprovalRequest | None:
    """Return the request this call paused with, if it is waiting for it.

    A request recorded before the canonical encoding (snapshot version 1) carries the digest of
    the old formula; it is recognised by that formula for the same recorded call.
    """
    legacy = legacy_approval_digest(validated.tool.spec.name, validated.canonical, revision)
    return next(
        (
            request
            for request in state.approval_requests
            if request.call_id == validated.call.id and request.digest in (digest, legacy)
        ),
        None,
    )


def _approve(
    config: LoopConfig, state: RunState, validated: ValidatedCall, reason: str, key: str
) -> Generator[Effect, Outcome, bool]:
    spec, call = validated.tool.spec, validated.call
    revision = yield from current_revision(config)
    digest = encoded_approval_digest(spec.name, validated.encoded, revision)
    waiting = _waiting(state, validated, digest, revision)
    if waiting is not None:  # a paused call keeps the request it paused with
        digest = waiting.digest
    request = ApprovalRequest(
        id=waiting.id if waiting is not None else approval_request_id(state.run_id, key, digest),
        call_id=call.id,
        tool=spec.name,
        arguments=redact_sensitive(validated.canonical, spec.sensitive),
        digest=digest,
        revision=revision,
        actor=state.actor,
        reason=reason[:1024],
        requested_at=config.clock.now(),
    )
    approval = matching_approval(request, state.approvals)
    source = "supplied"
    if approval is None:
        state.trace.emit(
            ApprovalRequested,
            request_id=request.id,
            call_id=call.id,
            tool=spec.name,
            digest=digest,
            revision=revision,
            reason=request.reason,
        )
        if config.has_approver:
            outcome = yield AskApprover(request)
            decided = outcome.approval if isinstance(outcome, Decided) else None
            approval = matching_approval(request, [decided] if decided is not None else [])
            source = "approver"
    if approval is None:
        state.approval_requests = [request]
        end(
            RunStatus.PAUSED,
            StopReason.APPROVAL_REQUIRED,
            f"{spec.name!r} needs an approval (request {request.id}): {request.reason}",
        )
    if approval in state.approvals:
        state.approvals.remove(approval)  # consumed by the call it admits
    state.decisions.append(approval)
    state.admitted_by[key] = approval  # a write's intent journals it: consumed on every path
    state.approval_requests = []
    state.trace.emit(
        ApprovalDecided,
        request_id=request.id,
        call_id=call.id,
        approved=approval.approved,
        approver=approval.approver,
        reason=approval.reason,
        source=source,
    )
    if approval.approved:
        return True
    why = approval.reason or "no reason given"
    if config.on_approval_denied == "fail":
        end(
            RunStatus.FAILED,
            StopReason.APPROVAL_DENIED,
            f"{approval.approver} denied {spec.name!r}: {why}",
        )
    _tell(
        config,
        state,
        validated,
        f"Approval denied by {approval.approver}: {why}",
        "approval_denied",
    )
    return False
