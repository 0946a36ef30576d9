"""Helpers of the `Agent` facade, pure or nearly so.

Resuming (a paused result as a snapshot, approval checks), running a coroutine from synchronous
code, and the provider SDK's version.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import TypeVar

from ownloop.contracts import Approval, RunResult, RunSnapshot, RunStatus
from ownloop.exceptions import ConfigurationError
from ownloop.store._rules import usable_decisions

__all__ = [
    "check_requests",
    "run_blocking",
    "sdk_version",
    "snapshot_of_result",
    "usable_submissions",
]

T = TypeVar("T")


def snapshot_of_result(paused: RunResult) -> RunSnapshot:
    """Turn a paused result (in memory, no store) into the snapshot a resume starts from.

    Args:
        paused: The paused run's result.

    Returns:
        The snapshot.

    Raises:
        ConfigurationError: If the run is not paused.
    """
    resume = paused.resume
    if paused.status is not RunStatus.PAUSED or resume is None:
        raise ConfigurationError(
            f"run {paused.run_id} is {paused.status.value}, not paused: it cannot be resumed"
        )
    return RunSnapshot(
        run_id=paused.run_id,
        state="paused",
        task=resume.task,
        actor=resume.actor,
        usage=paused.usage,
        limits=paused.limits,
        messages=paused.messages,
        trace=paused.trace,
        evidence=paused.evidence,
        receipts=paused.receipts,
        pending=paused.pending,
        approvals=paused.approvals,
        available_approvals=resume.approvals,
        approval_requests=paused.approval_requests,
        queue=resume.queue,
        identities=resume.identities,
        admitted_call_id=resume.admitted_call_id,
        last_action=resume.last_action,
        repeats=resume.repeats,
        elapsed_s=resume.elapsed_s,
        versions=paused.versions,
        result=paused,
        conversation=paused.conversation,
    )


def check_requests(snapshot: RunSnapshot, decisions: list[Approval]) -> None:
    """Refuse approvals naming a request the run is not waiting for (a typo, another run).

    Args:
        snapshot: The run.
        decisions: The approvals supplied.

    Raises:
        ConfigurationError: If one names a request the run does not wait for.
    """
    waiting = {request.id for request in snapshot.approval_requests}
    for approval in decisions:
        if approval.request_id is not None and approval.request_id not in waiting:
            raise ConfigurationError(
                f"approval names request {approval.request_id}, which run {snapshot.run_id} "
                f"is not waiting for (waiting: {', '.join(sorted(waiting)) or 'none'})"
            )


def usable_submissions(snapshot: RunSnapshot, submitted: list[Approval]) -> list[Approval]:
    """Pick the stored decisions a resume applies: the first for each request the run waits for.

    The stores' rule (`ownloop.store._rules.usable_decisions`): a request named by id or by
    digest takes one decision; one that names nothing the run waits for is skipped, never an
    error, so nothing stored can block a resume.

    Args:
        snapshot: The run.
        submitted: The decisions stored for it, in order.

    Returns:
        The decisions to apply.
    """
    return usable_decisions(snapshot, submitted)


@functools.cache
def sdk_version() -> str | None:
    """Return the installed ``openai`` SDK's version, if any (cached)."""
    try:
        return metadata.version("openai")
    except metadata.PackageNotFoundError:  # pragma: no cover - openai is a core dependency
        return None


def run_blocking(make: Callable[[], Awaitable[T]], name: str) -> T:
    """Run a coroutine to completion from synchronous code, refusing a running event loop.

    Args:
        make: Builds the coroutine.
        name: The async method's name, for the error message.

    Returns:
        The coroutine's result.

    Raises:
        ConfigurationError: If an event loop is already running in this thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]  # every caller passes a coroutine
    raise ConfigurationError(
        f"{name}_sync() was called inside a running event loop; use 'await agent.{name}(...)'"
    )
