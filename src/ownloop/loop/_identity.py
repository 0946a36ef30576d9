"""A call's identity, decided once: when it is first validated, then only ever read back.

`identify` is the one place a proposal becomes a `ValidatedCall` in the one-at-a-time path. A call
handled for the first time is validated, and its canonical arguments (every default and factory
value resolved), digest and idempotency key are fixed as a `CallIdentity` in the run's state
before anything else happens: the checkpoint of a pause holds it with the approval request, and
a write's intent journals it before the write runs. A call handled again (after a pause, a crash,
a take-over, a deploy) is rebuilt from that record (the checkpointed identity, else the journaled
intent), never validated afresh: a new hash seed, a default factory or a changed signature cannot
change what it is, what it was approved as, or the key it is attempted with.

Runs begun before identities were recorded (snapshot version 1) get their identity on their first
resume: from the journaled intent when its digest matches the old formula (its digest and key
are kept), else from validation under the resuming configuration.
"""

from __future__ import annotations

import dataclasses

from ownloop.contracts import CallIdentity, JournalEntry, ToolCall, WriteIntent
from ownloop.loop.config import LoopConfig
from ownloop.loop.state import RunState, idempotency_key
from ownloop.tools import ToolRejection, ValidatedCall

__all__ = ["identify"]


def identify(
    config: LoopConfig, state: RunState, call: ToolCall, key: str
) -> ValidatedCall | ToolRejection:
    """Return the call under its identity: the recorded one, or one fixed (and recorded) now.

    Args:
        config: The run's configuration.
        state: The run's state.
        call: The proposal being handled.
        key: Its journal key.

    Returns:
        The validated call, or the rejection of a call seen for the first time.

    Raises:
        ConfigurationError: A recorded call's tool is gone, or its current signature would
            change the recorded arguments.
    """
    recorded = state.identities.get(key)
    if recorded is not None and _names(recorded, call):
        restored = config.registry.restore(call, dict(recorded.arguments), recorded.digest)
        return dataclasses.replace(restored, digest_version=recorded.digest_version)
    entry = state.journal.get(key)
    intent = entry.intent if entry is not None else None
    if intent is not None and intent.arguments is not None and _journals(intent, call):
        # The journal holds the identity (the call is answered from it at once, so no second
        # copy is recorded); an intent with arguments has its digest_version, 0 when it
        # journaled a legacy write again.
        restored = config.registry.restore(call, dict(intent.arguments), intent.arguments_digest)
        return dataclasses.replace(restored, digest_version=intent.digest_version or 0)
    checked = config.registry.validate(call)
    if isinstance(checked, ToolRejection):
        return checked
    return _record(state, checked, key, entry)


def _names(identity: CallIdentity, call: ToolCall) -> bool:
    return identity.call_id == call.id and identity.tool == call.name


def _journals(intent: WriteIntent, call: ToolCall) -> bool:
    return intent.tool == call.name and intent.provider_call_id in (None, call.id)


def _record(
    state: RunState, validated: ValidatedCall, key: str, entry: JournalEntry | None
) -> ValidatedCall:
    """Fix a first-seen call's identity; adopt a legacy intent's digest and key when it matches."""
    write = validated.tool.spec.effect == "write"
    write_key = idempotency_key(state.run_id, key, validated.digest) if write else None
    if entry is not None and entry.intent.arguments_digest == validated.legacy_digest:
        # Journaled by a release before identities were: keep what it attempted the write with.
        validated = dataclasses.replace(
            validated, digest=entry.intent.arguments_digest, digest_version=0
        )
        write_key = entry.intent.idempotency_key
    state.identities[key] = CallIdentity(
        key=key,
        call_id=validated.call.id,
        tool=validated.tool.spec.name,
        arguments=validated.encoded,
        digest=validated.digest,
        idempotency_key=write_key,
        digest_version=validated.digest_version,
    )
    return validated
