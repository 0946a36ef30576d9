"""The ``ownloop_run`` workflow: one Temporal workflow per run, segment after segment.

A run's workflow id is ``ownloop:<run id>``. Its first execution runs the run's first segment;
when the run pauses for approval it *continues as new* into an execution that only waits for an
``approve`` signal naming a request the pause waits for. That waiting execution holds no worker
slot (it has no task until a signal arrives) and has a fresh history, so a run that paused under
one release resumes under the next without replaying the old release's steps. A duplicate signal,
or one naming a request already decided, resumes nothing.

Temporal imports a workflow's module afresh in its sandbox for every run. The worker's sandbox
(`ownloop.temporal.sandbox`) passes every module through, and this module's own ownloop imports
are marked as passed through (`workflow.unsafe.imports_passed_through`) for a host that builds
its own sandbox: the loop core, pydantic and the process's runners and pending steps are always
the worker's own.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from ownloop.exceptions import ConfigurationError
    from ownloop.temporal._driver import VersionRefused, runner_for

__all__ = ["APPROVE_SIGNAL", "WORKFLOW_NAME", "OwnloopRun"]

WORKFLOW_NAME = "ownloop_run"
"""The workflow type every ownloop run is started as."""

APPROVE_SIGNAL = "approve"
"""The signal carrying a decision (an `ownloop.contracts.Approval` as JSON)."""

Json = dict[str, Any]


def _names(decision: Json, wanted: set[str]) -> bool:
    """Whether a decision may decide one of ``wanted`` (one naming only a digest may)."""
    request_id = decision.get("request_id")
    return request_id is None or request_id in wanted


@workflow.defn(name=WORKFLOW_NAME)
class OwnloopRun:
    """A run: its segments, and the waits for approval between them."""

    def __init__(self) -> None:
        self._decisions: list[Json] = []

    @workflow.signal(name=APPROVE_SIGNAL)
    def approve(self, decision: Json) -> None:
        """Take a decision (the store validates it when the run resumes).

        Args:
            decision: An `ownloop.contracts.Approval` as JSON.
        """
        self._decisions.append(decision)

    @workflow.run
    async def run(self, agent_name: str, run_id: str, start: Json) -> Json:
        """Run the run's next segment (after waiting for a decision, if it paused).

        Args:
            agent_name: Which agent factory builds the agent.
            run_id: The run.
            start: ``{"kind": "start", ...}`` for a new run, or ``{"kind": "wait",
                "requests": [...], "decisions": [...]}`` after a pause.

        Returns:
            The last segment's summary (status, stop reason, the requests a pause waits for).

        Raises:
            ApplicationError: If the run failed in workflow code (as ``Agent.run`` would raise:
                a failing revision source, say); the workflow fails, it is not retried.
        """
        runner = runner_for(workflow.info().task_queue)
        self._decisions[:0] = list(start.get("decisions", ()))  # taken before continuing as new
        decisions: list[Json] = []
        if start.get("kind") == "wait":
            wanted = set(start.get("requests", ()))
            await workflow.wait_condition(lambda: any(_names(d, wanted) for d in self._decisions))
            decisions = [d for d in self._decisions if _names(d, wanted)]
            self._decisions = [d for d in self._decisions if not _names(d, wanted)]
            start = {"kind": "resume"}
        try:
            summary = await runner.segment(agent_name, run_id, start, decisions)
        except (VersionRefused, ConfigurationError):
            raise  # the workflow task fails and Temporal retries it, maybe on another worker
        except FailureError:
            raise  # already a Temporal failure (a step that kept failing): the workflow fails
        except Exception as error:  # workflow code is deterministic: a retry would fail again
            raise ApplicationError(
                f"run {run_id} failed: {error}", type=type(error).__name__, non_retryable=True
            ) from error
        if summary.get("status") == "paused":
            waiting = {"kind": "wait", "requests": summary["requests"]}
            workflow.continue_as_new(
                args=[agent_name, run_id, {**waiting, "decisions": self._decisions}]
            )
        return summary
