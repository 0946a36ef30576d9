"""Running a turn's overlapping calls together, decided as data, with no I/O.

A group is the longest run of consecutive queued calls, from the head, that may overlap: calls of
read tools not declared ``parallel=False``, with valid arguments, that the policy allows without
an approval and no precondition guards, and whose admission would not end the run. The members
are admitted one by one in proposal order (traced, counted, first attempt begun); a single
`InvokeTools` runs their first attempts together, at most `Limits.max_parallel_tools` at once;
then every outcome is judged in proposal order, and every call is finished in proposal order
(retries of a transient failure one at a time, then its observation). The trace and the
conversation therefore read the same whichever call finished first.

Writes never join a group: they keep the one-at-a-time path, where the write journal, the
approval gateway and the pending-effect rule rely on order. A call a group cannot take (a write,
an invalid or denied call, one needing approval, one that would spend the last budget) ends the
group and takes that path too, so a budget stops the run at exactly the call it stops it at alone.

Nothing is checkpointed inside a group. A run that crashes during one resumes from the checkpoint
taken before it and runs the group's reads again, which is safe because a read changes nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass

from ownloop.contracts import Receipt
from ownloop.loop._execute import (
    Attempted,
    attempts,
    begin_attempt,
    judge_attempt,
    protect_sensitive,
    tool_context,
)
from ownloop.loop._finish import RunEnded
from ownloop.loop._revision import current_revision
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import (
    Effect,
    Failure,
    InvokeTool,
    InvokeTools,
    Outcome,
    ToolResults,
)
from ownloop.loop.state import RunState
from ownloop.loop.tool_step import admission_ends_run, admit_proposal, conclude_call
from ownloop.policy import Allow
from ownloop.tools import ValidatedCall

__all__ = ["run_group"]


@dataclass(frozen=True, slots=True)
class _Member:
    """One admitted call of a group, with its journal key."""

    validated: ValidatedCall
    key: str


def run_group(config: LoopConfig, state: RunState) -> Generator[Effect, Outcome, int]:
    """Run the group at the head of the queue, if there is one of two calls or more.

    Args:
        config: The run's configuration.
        state: The run's state.

    Yields:
        Revision reads, one `InvokeTools`, then sleeps and attempts of retried members.

    Returns:
        How many calls from the head of the queue it finished; ``0`` when there is no group
        (the head takes the one-at-a-time path).
    """
    candidates = _candidates(config, state)
    if len(candidates) < 2:
        return 0
    members = yield from _admit(config, state, candidates)
    if not members:
        return 0
    before = yield from current_revision(config)
    share = sum(member.validated.tool.delegates for member in members)  # agents split the rest
    outcome = yield InvokeTools(
        tuple(
            InvokeTool(
                m.validated,
                tool_context(config, state, m.validated, 1, before, key=m.key, share=share),
            )
            for m in members
        ),
        config.limits.max_parallel_tools,
    )
    after = yield from current_revision(config)
    results = _results(outcome, len(members))
    judged: list[tuple[Receipt, Attempted]] = []
    for member, ended, duration in zip(members, results.outcomes, results.durations_s, strict=True):
        attempted = Attempted(ended, duration, after)
        receipt = yield from judge_attempt(
            config, state, member.validated, member.key, attempt=1, attempted=attempted
        )
        judged.append((receipt, attempted))
    yield from _finish(config, state, members, judged)
    return len(members)


def _candidates(config: LoopConfig, state: RunState) -> list[ValidatedCall]:
    """Return the validated calls at the head of the queue that may overlap (none is admitted)."""
    if config.limits.max_parallel_tools < 2 or (
        state.queue and state.admitted_call_id == state.queue[0].id  # resumed: finish it alone
    ):
        return []
    guarded = {precondition.tool for precondition in config.preconditions}
    candidates: list[ValidatedCall] = []
    for call in state.queue:
        registered = config.registry.get(call.name)
        if registered is None or not registered.spec.overlaps or call.name in guarded:
            break
        spec = registered.spec
        validated = config.registry.validate(call)
        if not isinstance(validated, ValidatedCall) or spec.requires_approval:
            break
        if not isinstance(config.policy.decide(state.actor, spec, validated.canonical), Allow):
            break
        candidates.append(validated)
    return candidates


def _admit(
    config: LoopConfig, state: RunState, candidates: Sequence[ValidatedCall]
) -> Generator[Effect, Outcome, list[_Member]]:
    """Admit candidates in proposal order until one would end the run; begin their attempts."""
    members: list[_Member] = []
    for validated in candidates:
        if admission_ends_run(config, state, validated.call):
            break  # that call ends the run on the one-at-a-time path, after the group
        admit_proposal(config, state, validated.call)
        key = state.current_key()
        protect_sensitive(state, validated)
        yield from begin_attempt(config, state, validated, 1)  # a read's yields nothing
        members.append(_Member(validated, key))
    return members


def _results(outcome: Outcome, size: int) -> ToolResults:
    """Return the group's results, or the same failure for every member of a malformed answer."""
    if isinstance(outcome, ToolResults) and len(outcome.outcomes) == size:
        return outcome
    failure = Failure(TypeError(f"the driver answered a group of {size} with {outcome!r}"))
    return ToolResults(outcomes=(failure,) * size, durations_s=(0.0,) * size)


def _finish(
    config: LoopConfig,
    state: RunState,
    members: Sequence[_Member],
    judged: Sequence[tuple[Receipt, Attempted]],
) -> Generator[Effect, Outcome, None]:
    """Finish every member in proposal order: retry transient ones, then observe.

    When a retry ends the run (the deadline, a budget), the members after it that already have a
    final receipt are still observed: their calls ran, so their results stay in the run's record.
    """
    for index, (member, first) in enumerate(zip(members, judged, strict=True)):
        receipt = first[0]
        try:
            if receipt.status == "transient":
                receipt = yield from attempts(config, state, member.validated, member.key, first)
        except RunEnded:
            for later, (done, _) in zip(members[index + 1 :], judged[index + 1 :], strict=True):
                if done.status != "transient":
                    yield from conclude_call(config, state, later.validated, done, later.key)
            raise
        yield from conclude_call(config, state, member.validated, receipt, member.key)
