"""Resuming a run: the facade's rules for what a restored run may do again.

- `claim_pause` remembers, for an agent without a store, which paused results were resumed, so
  resuming the same pause twice cannot run its writes a second time.
- `pending_calls` rebuilds the calls of writes whose effect is unknown (for their lookups) from
  their journaled identity; a write journaled before identities were is validated again from the
  conversation and must match the digest its intent recorded.
- `check_task` refuses a task or run id the loop must never start with.

Pure: the only state is the set of claimed pauses, which the agent owns.
"""

from __future__ import annotations

import dataclasses
import uuid

from ownloop._text import clean_text
from ownloop.contracts import MAX_ID_CHARS, AssistantMessage, Limits, RunSnapshot, ToolCall
from ownloop.exceptions import ConfigurationError, InputRejected
from ownloop.identity import DIGEST_VERSION
from ownloop.loop import RunState, pending_key
from ownloop.tools import ToolRegistry, ValidatedCall

__all__ = ["check_task", "claim_pause", "pending_calls"]


def claim_pause(resumed: set[tuple[str, int]], snapshot: RunSnapshot) -> None:
    """Refuse a second resume of one paused result on an agent without a store.

    Without a store nothing durable records that a pause was resumed; the agent remembers it
    (in `resumed`), so resuming the same paused result again cannot run its writes twice.

    Args:
        resumed: The pauses this agent resumed already, as (run id, trace length); updated.
        snapshot: The paused run about to be resumed.

    Raises:
        ConfigurationError: If this pause was resumed before, naming its requests.
    """
    pause = (snapshot.run_id, len(snapshot.trace))
    if pause in resumed:
        requests = ", ".join(r.id for r in snapshot.approval_requests) or "none"
        raise ConfigurationError(
            f"run {snapshot.run_id} was already resumed from this pause (request "
            f"{requests}): its decisions are spent. Resume the result that resume returned, "
            "or give the agent a store"
        )
    resumed.add(pause)


def pending_calls(tools: ToolRegistry, state: RunState) -> dict[str, ValidatedCall]:
    """Rebuild the calls of pending writes for their lookups, from their journaled identity.

    A write journaled before identities were is re-validated from the conversation, and matched
    by its call id *and* the digest its intent recorded (a model may reuse an id).

    Args:
        tools: The agent's registry.
        state: The restored run.

    Returns:
        Each pending write's call, by journal key; a write whose call cannot be matched is left
        out.
    """
    found: dict[str, ValidatedCall] = {}
    for operation in state.pending:
        key = pending_key(operation)
        for message in state.messages:
            if not isinstance(message, AssistantMessage):
                continue
            for call in message.tool_calls:
                if call.id != operation.call_id:
                    continue
                validated = _recorded_call(tools, state, key, call, operation.arguments_digest)
                if validated is not None:
                    found[key] = validated
    return found


def _recorded_call(
    tools: ToolRegistry, state: RunState, key: str, call: ToolCall, digest: str
) -> ValidatedCall | None:
    entry = state.journal.get(key)
    if entry is not None and entry.intent.arguments is not None:
        if entry.intent.tool != call.name or entry.intent.arguments_digest != digest:
            return None  # a model may reuse a call id for another call
        restored = tools.restore(call, dict(entry.intent.arguments), digest)
        version = entry.intent.digest_version
        version = DIGEST_VERSION if version is None else version
        return dataclasses.replace(restored, digest_version=version)
    validated = tools.validate(call)
    if isinstance(validated, ValidatedCall) and digest == validated.legacy_digest:
        return dataclasses.replace(validated, digest=digest, digest_version=0)
    if isinstance(validated, ValidatedCall) and digest == validated.digest:
        return validated
    return None


def check_task(task: str, run_id: str | None, limits: Limits) -> str:
    """Refuse an empty or oversized task, or a malformed run id; return the run's id.

    Args:
        task: The task the run starts with.
        run_id: The id the caller chose, or ``None`` for a fresh one.
        limits: The agent's limits (`max_input_chars`).

    Returns:
        `run_id`, or a fresh id.

    Raises:
        InputRejected: If the task is empty or longer than `max_input_chars`, or the run id is
            empty, too long, or holds text UTF-8 cannot encode.
    """
    if not isinstance(task, str) or not task.strip():
        raise InputRejected("the task is empty: give the agent something to do")
    if len(task) > limits.max_input_chars:
        raise InputRejected(
            f"the task has {len(task)} characters, more than max_input_chars="
            f"{limits.max_input_chars}; shorten it or raise the limit"
        )
    if run_id is None:
        return uuid.uuid4().hex
    if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_ID_CHARS:
        raise InputRejected(f"run_id must be 1-{MAX_ID_CHARS} characters")
    if clean_text(run_id) is not run_id:  # an id is matched exactly: never repaired
        raise InputRejected("run_id holds text UTF-8 cannot encode (an unpaired surrogate)")
    return run_id
