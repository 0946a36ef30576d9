"""Runs as Temporal workflows: the run loop is workflow code, every I/O effect a local activity.

`TemporalRunner` starts each run as one ``ownloop_run`` workflow (id ``ownloop:<run id>``) on a
task queue; `TemporalRunner.worker` builds the Temporal worker that executes them. A segment
drives the loop core with a `TemporalDriver`: every effect is a local activity whose JSON output
carries the time it ended, which the run's `StepClock` adopts, so a replay on another worker
reads exactly the times the first execution read and the core takes the same decisions.

Writes keep ownloop's journal as their guarantee (Temporal's activities are at-least-once too):
a write is one activity that journals its intent and runs the handler; a re-execution of that very
activity (the worker died mid-write) finds the intent it recorded and answers "effect unknown"
instead of writing again.

Versioning: a segment records a Temporal patch marker named after the runner's `version`
(ownloop's checkpoint format and step layout, plus the deploy's own suffix) when it starts. A
worker whose version differs refuses to replay that segment (the workflow task fails with a
message naming both versions, and Temporal retries it until a worker of the segment's version
takes it); a run paused between segments resumes under whatever version takes its next segment.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import SandboxImportNotificationPolicy

from ownloop.agent import Agent
from ownloop.contracts import SNAPSHOT_SCHEMA_VERSION, Actor, Approval
from ownloop.engines import Json, build_agent, run_segment, start_record
from ownloop.exceptions import ConfigurationError, UnknownApprovalRequest
from ownloop.store import RunStore
from ownloop.temporal._driver import (
    RUNNERS,
    TemporalDriver,
    VersionRefused,
    ownloop_flush,
    ownloop_step,
    workflow_clock,
)
from ownloop.temporal._workflow import APPROVE_SIGNAL, WORKFLOW_NAME, OwnloopRun

__all__ = [
    "STEP_LAYOUT",
    "VERSION",
    "TemporalRunner",
    "VersionRefused",
    "sandbox",
    "workflow_id",
]

logger = logging.getLogger("ownloop.temporal")

STEP_LAYOUT = 1
"""Which steps a segment records, in which order; raised whenever a replay would differ."""

VERSION = f"ownloop-checkpoint-v{SNAPSHOT_SCHEMA_VERSION}-steps{STEP_LAYOUT}"
"""The default workflow-code version (the patch marker a segment records)."""


def sandbox() -> SandboxedWorkflowRunner:
    """Return Temporal's workflow sandbox as ownloop's workflow code needs it.

    Every module is passed through: ownloop's workflow code is the loop core, deterministic by
    construction (it reads time only from the step clock and performs I/O only as steps), and
    it and its dependencies import some modules lazily (structlog's renderers, a model SDK), which
    the sandbox would otherwise re-import under its restrictions in the middle of a run. The
    process's registry of runners and pending steps must also be the worker's own, never a
    sandbox copy. The sandbox's runtime checks of invalid calls still apply.

    Returns:
        The workflow runner for ``Worker(workflow_runner=...)``.
    """
    restrictions = dataclasses.replace(
        SandboxRestrictions.default.with_passthrough_all_modules(),
        import_notification_policy=SandboxImportNotificationPolicy.SILENT,
    )
    return SandboxedWorkflowRunner(restrictions=restrictions)


def workflow_id(run_id: str) -> str:
    """Return the Temporal workflow id of a run."""
    return f"ownloop:{run_id}"


class TemporalRunner:
    """Runs agents as Temporal workflows on a task queue.

    In a worker process, build the worker with `worker` and run it (``async with
    runner.worker(): ...`` or ``await runner.worker().run()``). `enqueue`, `approve` and `result`
    work from any process with a client on the same namespace.

    Args:
        store: The run store (snapshots, write journal, submitted decisions), shared by every
            worker (PostgreSQL, or SQLite on one machine).
        agents: Agent factories by name; a segment builds its agent with the named one (in
            workflow code: a factory must be cheap and do no I/O).
        client: A connected `temporalio.client.Client`.
        queue: The task queue runs are started on.
        version: The workflow-code version segments record (see the module docs).
        step_timeout_s: The longest any one step (model call, tool, write) may take.
        task_timeout_s: The workflow task timeout: how long a dead worker holds a run before
            another worker takes it over (also the timeout of the no-op activity after a step).
    """

    def __init__(
        self,
        store: RunStore,
        agents: Mapping[str, Callable[[], Agent[Any, Any]]],
        client: Client,
        *,
        queue: str = "ownloop",
        version: str = VERSION,
        step_timeout_s: float = 300.0,
        task_timeout_s: float = 10.0,
    ) -> None:
        if not agents:
            raise ConfigurationError("TemporalRunner needs at least one agent factory")
        self.store = store
        self.agents = dict(agents)
        self.client = client
        self.queue = queue
        self.version = version
        self.step_timeout_s = step_timeout_s
        self.task_timeout_s = task_timeout_s

    # ------------------------------------------------------------------ worker side

    def worker(self, **options: Any) -> Worker:
        """Build the Temporal worker that runs this runner's workflows on its task queue.

        The workflow sandbox is `sandbox`'s (every module passed through); a ``workflow_runner``
        option replaces it. A stopping worker lets running steps finish for up to 30 s
        (``graceful_shutdown_timeout``).

        Args:
            **options: Any other `temporalio.worker.Worker` option (concurrency limits, ...).

        Returns:
            The worker (not running yet).
        """
        RUNNERS[self.queue] = self
        # A run's trace imports structlog on first use (so `import ownloop` stays light). In a
        # worker that first use would be a workflow task, and on starved cores the import can
        # outlast Temporal's 2-second deadlock check, failing the task half-imported: import
        # it here, before the worker polls.
        importlib.import_module("structlog")
        settings: dict[str, Any] = {
            "workflow_runner": sandbox(),
            # a stopping worker lets its steps finish (as DbosRunner.shutdown's drain does): a
            # write cut by the stop would be unknown, not repeated, but unknown all the same
            "graceful_shutdown_timeout": timedelta(seconds=30),
            **options,
        }
        return Worker(
            self.client,
            task_queue=self.queue,
            workflows=[OwnloopRun],
            activities=[ownloop_step, ownloop_flush],
            **settings,
        )

    async def segment(
        self, agent_name: str, run_id: str, start: Json, decisions: list[Json]
    ) -> Json:
        """Run one segment of a run (workflow code): from its start or its last pause.

        Args:
            agent_name: Which agent factory builds the agent.
            run_id: The run.
            start: ``{"kind": "start", "task": ..., "actor": ...}`` or ``{"kind": "resume"}``.
            decisions: The decisions the signals carried (each stored, if the store accepts it).

        Returns:
            The segment's summary: status, stop reason and the requests a pause waits for.

        Raises:
            VersionRefused: If another version of the workflow code started this segment.
        """
        if not workflow.patched(self.version):
            raise VersionRefused(
                f"run {run_id}: this segment was started by workflow code of another version "
                f"than this worker's {self.version!r}; a worker of that version finishes it"
            )
        agent = self._agent(agent_name)
        driver = TemporalDriver(
            agent.driver,
            self.store,
            workflow_clock(),
            run_id,
            agent_clock=agent.loop_config.clock,
            step_timeout_s=self.step_timeout_s,
            flush_timeout_s=self.task_timeout_s,
        )
        if decisions:
            await driver.step("decisions", lambda: self._submit(run_id, decisions))
        return await run_segment(agent, driver, self.store, run_id, start)

    async def _submit(self, run_id: str, decisions: list[Json]) -> int:
        """Store the signalled decisions the store accepts (validated as any submission)."""
        stored = 0
        for decision in decisions:
            try:
                await self.store.submit_approval(run_id, Approval.model_validate(decision))
                stored += 1
            except (UnknownApprovalRequest, ValueError) as refused:
                logger.warning("run %s: a signalled decision was refused: %s", run_id, refused)
        return stored

    def _agent(self, name: str) -> Agent[Any, Any]:
        return build_agent(self.agents, name)

    # ------------------------------------------------------------------ any process

    async def enqueue(
        self,
        agent_name: str,
        task: str,
        *,
        actor: Actor | None = None,
        run_id: str | None = None,
    ) -> str:
        """Start a new run; a second call with the same run id starts nothing.

        Args:
            agent_name: Which agent runs it.
            task: What the agent should do.
            actor: Who the run acts for.
            run_id: The run's id; random by default.

        Returns:
            The run id.

        Raises:
            InputRejected: If the task or run id is not acceptable.
            ConfigurationError: If no agent has that name, or it has agent tools
                (``Agent.as_tool``), which the engine does not run.
        """
        state = self._agent(agent_name).new_state(task, actor=actor, run_id=run_id)
        start = start_record(task, actor)
        try:
            await self.client.start_workflow(
                WORKFLOW_NAME,
                args=[agent_name, state.run_id, start],
                id=workflow_id(state.run_id),
                task_queue=self.queue,
                task_timeout=timedelta(seconds=self.task_timeout_s),
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            logger.info("run %s was started before: nothing started", state.run_id)
        return state.run_id

    async def approve(self, run_id: str, approval: Approval) -> str:
        """Submit a decision (the store validates it) and signal the run's workflow.

        Args:
            run_id: The paused run.
            approval: The decision (naming the request it decides).

        Returns:
            The run's workflow id.

        Raises:
            RunNotFound: If the run is not stored.
            UnknownApprovalRequest: If the run waits for no such request, or it has another
                decision already.
        """
        await self.store.submit_approval(run_id, approval)
        handle = self.client.get_workflow_handle(workflow_id(run_id))
        await handle.signal(APPROVE_SIGNAL, approval.model_dump(mode="json"))
        return workflow_id(run_id)

    async def result(self, run_id: str) -> Json:
        """Wait until the run's workflow ends (through its pauses); return its last summary.

        Args:
            run_id: The run.

        Returns:
            The summary: status, stop reason and the requests a pause waits for.
        """
        handle = self.client.get_workflow_handle(workflow_id(run_id))
        summary: Json = await handle.result(follow_runs=True)
        return summary

    def __repr__(self) -> str:
        return f"TemporalRunner(queue={self.queue!r}, agents={sorted(self.agents)})"
