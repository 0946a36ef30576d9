"""Approvals bound to exact calls: digests, request ids and matching.

An approval admits one call: the tool, its validated arguments in the canonical encoding of
`ownloop.identity` (secrets by their real value, sets sorted, every default resolved) and the
state revision it runs against, digested together. A decision for other arguments or another
revision never matches, and the runtime consumes an approval when the journal records the call it
admitted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ownloop.contracts import Approval, ApprovalRequest
from ownloop.identity import DIGEST_VERSION, digest, encode

__all__ = [
    "approval_digest",
    "approval_request_id",
    "encoded_approval_digest",
    "legacy_approval_digest",
    "matching_approval",
]


def approval_digest(tool: str, arguments: Mapping[str, Any], revision: str | None) -> str:
    """Digest one exact call: tool, arguments and revision (to approve a call up front).

    Args:
        tool: The tool name.
        arguments: Every argument of the call by parameter name, defaults included, as the
            handler receives them (Python values: a ``set``, a ``SecretStr``, a ``datetime``).
        revision: The state revision the call would run against (``None`` when not tracked).

    Returns:
        A hex SHA-256 digest, equal for equal calls whatever the key or set order, the process
        or the hash seed.

    Raises:
        ConfigurationError: An argument has no canonical encoding.
    """
    return encoded_approval_digest(tool, {k: encode(v) for k, v in arguments.items()}, revision)


def encoded_approval_digest(tool: str, encoded: Mapping[str, Any], revision: str | None) -> str:
    """Digest one exact call whose arguments are already in the canonical encoding.

    Args:
        tool: The tool name.
        encoded: The arguments as `ownloop.identity.encode` gave them (the journaled form).
        revision: The state revision the call would run against.

    Returns:
        A hex SHA-256 digest.
    """
    return digest(
        {
            "approval": DIGEST_VERSION,
            "tool": tool,
            "arguments": dict(encoded),
            "revision": revision,
        }
    )


def legacy_approval_digest(tool: str, arguments: dict[str, Any], revision: str | None) -> str:
    """The approval digest of releases before the canonical encoding (secrets masked).

    Used only to recognise a request a run paused with before it was upgraded; never to admit
    a call by itself.

    Args:
        tool: The tool name.
        arguments: The masked JSON arguments (``ValidatedCall.canonical``).
        revision: The revision.
    """
    payload = json.dumps(
        {"tool": tool, "arguments": arguments, "revision": revision},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def approval_request_id(run_id: str, call_id: str, digest: str) -> str:
    """Return the stable id of the approval request for one call in one run.

    Args:
        run_id: The run.
        call_id: The call waiting for approval.
        digest: The call's approval digest.

    Returns:
        ``"apr-"`` and 24 hex digits.
    """
    raw = f"{run_id}\x1f{call_id}\x1f{digest}".encode()
    return f"apr-{hashlib.sha256(raw).hexdigest()[:24]}"


def matching_approval(request: ApprovalRequest, approvals: Iterable[Approval]) -> Approval | None:
    """Find the decision for a request among unconsumed approvals.

    An approval matches when it names the request's id, or carries the request's exact digest
    (an approval given up front, before the request existed).

    Args:
        request: The pending request.
        approvals: Decisions not yet consumed.

    Returns:
        The first matching decision, or ``None``.
    """
    for approval in approvals:
        if approval.request_id is not None and approval.request_id == request.id:
            return approval
        if approval.digest is not None and approval.digest == request.digest:
            return approval
    return None
