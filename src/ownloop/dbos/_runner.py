"""Runs as DBOS workflows: the run loop is the workflow, every I/O effect a checkpointed step.

`DbosRunner` registers one workflow, ``ownloop_segment``, with the host application's DBOS instance.
A segment builds a run's state (fresh, or from the store after an approval), then drives the loop
core with a `DbosDriver`, which performs every effect as a step via ``DBOS.run_step_async``. Steps
return JSON (`ownloop.dbos._codec`) together with the time measured at their end; the run's
`StepClock` adopts those readings, so a replay after a crash reads exactly the times the first
execution read and the core takes exactly the same decisions.

DBOS steps are at-least-once. Writes therefore keep ownloop's journal as their guarantee: a write
is one step that journals its intent and runs the handler; a re-execution of that very step (the
worker died mid-write) finds the intent it recorded and answers "effect unknown" instead of
writing again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from dbos import (
    DBOS,
    DBOSClient,
    DBOSConfig,
    DBOSPortableJSONSerializer,
    EnqueueOptions,
    WorkflowSerializationFormat,
)

from ownloop.agent import Agent
from ownloop.contracts import (
    SNAPSHOT_SCHEMA_VERSION,
    Actor,
    Approval,
    RunSnapshot,
)
from ownloop.dbos._driver import DbosDriver, Json, StepClock
from ownloop.dbos._handoff import move_segments
from ownloop.engines import build_agent, run_segment, start_record
from ownloop.exceptions import ConfigurationError
from ownloop.store import PostgresRunStore

__all__ = [
    "APPLICATION_VERSION",
    "WORKFLOW_NAME",
    "DbosDriver",
    "DbosRunner",
    "StepClock",
    "segment_id",
    "worker_config",
]


WORKFLOW_NAME = "ownloop_segment"
"""The name every ownloop segment is registered and enqueued under."""

STEP_LAYOUT = 2
"""Which steps a segment records, in which order; raised whenever a replay would differ (2: the
reads proposed together in one turn are one ``ownloop.tools`` step)."""

APPLICATION_VERSION = f"ownloop-checkpoint-v{SNAPSHOT_SCHEMA_VERSION}-steps{STEP_LAYOUT}"
"""The DBOS application version: ownloop's checkpoint format and step layout (append your own
deploy's version). DBOS replays a pending segment only on a worker of the same version, so a
release that changes either never replays an older segment with different steps."""

logger = logging.getLogger("ownloop.dbos")

SHARED_EXECUTOR_ID = "local"
"""DBOS's executor id for every process that sets none: no one process owns what runs under it."""

_STEP_KINDS = {
    "CallModel": "model",
    "Summarize": "summarize",
    "InvokeTool": "tool",
    "ReadRevision": "revision",
    "AskApprover": "approver",
    "Reconcile": "reconcile",
}


def worker_config(
    name: str,
    system_database_url: str,
    executor_id: str,
    *,
    application_version: str = APPLICATION_VERSION,
    **options: Any,
) -> DBOSConfig:
    """Return a DBOS configuration for an ownloop worker (JSON serialisation, pinned version).

    Args:
        name: The DBOS application name.
        system_database_url: The PostgreSQL URL of the DBOS system database.
        executor_id: This worker's stable id; a replacement recovers its runs by this id.
        application_version: The DBOS application version; recovery needs the same one.
        **options: Any other `DBOSConfig` key.

    Returns:
        The configuration, for ``DBOS(config=...)``.
    """
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": system_database_url,
        "executor_id": executor_id,
        "application_version": application_version,
        "serializer": DBOSPortableJSONSerializer(),
        **options,
    }
    return cast(DBOSConfig, config)


def segment_id(snapshot: RunSnapshot) -> str:
    """Return the workflow id of the segment that continues a run from its stored state.

    It names the run and the pause's position in the run's trace (the sequence number of its
    last event), never how a decision names the request: every decision for one pause maps to
    one segment (DBOS enqueues a workflow id once), and each later pause has another position.

    Args:
        snapshot: The run as stored when the decision was submitted.
    """
    position = snapshot.trace[-1].seq if snapshot.trace else 0
    return f"ownloop:{snapshot.run_id}:pause:{position}"


class DbosRunner:
    """Runs agents as DBOS workflows on a queue, with the host application's DBOS instance.

    In a worker, call ``register(worker=True)`` before ``DBOS.launch()``, `start` (or
    `start_async`) after it, and `shutdown` instead of ``DBOS.destroy()``. A process that launches
    DBOS but is no worker calls ``register(worker=False)``. `enqueue` and `approve` work from any
    process, with or without a launched DBOS, and never take a run from the queue.

    Args:
        store: The PostgreSQL run store (snapshots, write journal, submitted approvals).
        agents: Agent factories by name; a segment builds its agent with the named one.
        queue: The DBOS queue runs are enqueued on.
        system_database_url: The DBOS system database, for enqueueing and handing back.
        application_version: The application version enqueued segments are pinned to.
        polling_interval_s: How often a worker polls the queue.
        worker_concurrency: The most segments one worker runs at once (``None``: no limit).
    """

    def __init__(
        self,
        store: PostgresRunStore,
        agents: Mapping[str, Callable[[], Agent[Any, Any]]],
        *,
        queue: str = "ownloop",
        system_database_url: str | None = None,
        application_version: str = APPLICATION_VERSION,
        polling_interval_s: float = 1.0,
        worker_concurrency: int | None = None,
    ) -> None:
        if not agents:
            raise ConfigurationError("DbosRunner needs at least one agent factory")
        self.store = store
        self.agents = dict(agents)
        self.queue = queue
        self.system_database_url = system_database_url
        self.application_version = application_version
        self.polling_interval_s = polling_interval_s
        self.worker_concurrency = worker_concurrency
        self._client: DBOSClient | None = None
        self.worker = False
        self.workflow: Callable[[str, str, Json], Awaitable[Json]] | None = None

    # ------------------------------------------------------------------ worker side

    def register(
        self, *, worker: bool, listen: Sequence[str] = ()
    ) -> Callable[[str, str, Json], Awaitable[Json]]:
        """Register the ``ownloop_segment`` workflow and say whether this process is a worker.

        Call it before ``DBOS.launch()`` in every process that launches DBOS under the workers'
        application name. A launched DBOS dequeues from every queue its application registered
        unless told otherwise, so this also calls ``DBOS.listen_queues``: a worker listens to
        the runner's queue, any other process (one that only enqueues or approves) to none of
        ownloop's, so it never takes a run it would not finish. ``DBOS.listen_queues`` may be
        called once per process: name your application's own queues in ``listen``.

        Args:
            worker: Whether this process takes runs from the queue (then call `start` after
                launching).
            listen: Other queues this process serves (your application's own).

        Returns:
            The registered workflow function (``DBOS.start_workflow_async`` may start it
            directly, bypassing the queue).
        """
        if self.workflow is not None:
            return self.workflow
        runner = self

        async def ownloop_segment(agent_name: str, run_id: str, start: Json) -> Json:
            return await runner.segment(agent_name, run_id, start)

        DBOS.listen_queues([self.queue, *listen] if worker else list(listen))
        self.worker = worker
        self.workflow = DBOS.workflow(
            name=WORKFLOW_NAME, serialization_type=WorkflowSerializationFormat.PORTABLE
        )(ownloop_segment)
        return self.workflow

    def start(self) -> None:
        """Register the queue with the launched DBOS, so this worker takes runs from it.

        Raises:
            ConfigurationError: If this process was registered as no worker.
        """
        self._check_worker()
        DBOS.register_queue(self.queue, **self._queue_options())

    async def start_async(self) -> None:
        """The same as `start`, from async code."""
        self._check_worker()
        await DBOS.register_queue_async(self.queue, **self._queue_options())

    def _check_worker(self) -> None:
        if not self.worker:
            raise ConfigurationError(
                "this process registered as no worker: call register(worker=True) to take runs"
            )

    def _queue_options(self) -> dict[str, Any]:
        return {
            "polling_interval_sec": self.polling_interval_s,
            "worker_concurrency": self.worker_concurrency,
        }

    def shutdown(self, *, drain_s: int = 30, destroy_registry: bool = False) -> list[str]:
        """Stop this process's DBOS without stranding a run: use it instead of ``DBOS.destroy()``.

        DBOS stops dequeueing at once and lets the segments running here finish for up to
        ``drain_s`` seconds; then it is destroyed, and every ownloop segment still pending under
        this executor id goes back to the queue, where any worker takes it (from its last
        checkpoint, as after a crash; a write cut mid-flight is unknown, never repeated). Under
        DBOS's default executor id ``local``, which every process without one shares, nothing is
        handed back: a relaunch recovers those segments.

        Args:
            drain_s: How long running segments may take to finish (whole seconds).
            destroy_registry: Passed to ``DBOS.destroy`` (also forget registered workflows).

        Returns:
            The workflow ids handed back to the queue.
        """
        executor_id, version = DBOS.executor_id, DBOS.application_version
        DBOS.destroy(workflow_completion_timeout_sec=drain_s, destroy_registry=destroy_registry)
        if executor_id == SHARED_EXECUTOR_ID:
            # every process without an executor id is "local": its pending segments may be
            # running in another one, so they stay put (a relaunch as "local" recovers them)
            logger.warning("executor id 'local' is shared: nothing handed back (set executor_id)")
            return []
        return self.hand_back([executor_id], application_version=version)

    def hand_back(
        self,
        executor_ids: Sequence[str],
        *,
        application_version: str | None = None,
        lanes: Sequence[str] = (),
        to_queue: str | None = None,
    ) -> list[str]:
        """Re-enqueue the ownloop segments pending under executors that no longer run them.

        Only call it for executors that are gone (or stopped, as `shutdown` does): a segment
        pending under a live executor is running there. A segment a worker claimed since is
        never moved, so concurrent callers are safe.

        Args:
            executor_ids: The executors whose pending segments move.
            application_version: Only segments of this version move (default: the runner's).
            lanes: Queues whose waiting segments move as well (``workers recover`` uses its own).
            to_queue: Where they go (default: the runner's queue).

        Returns:
            The workflow ids moved.
        """
        return move_segments(
            self._sync_client(),
            workflow_name=WORKFLOW_NAME,
            application_version=application_version or self.application_version,
            executor_ids=executor_ids,
            lanes=lanes,
            to_queue=to_queue or self.queue,
        )

    async def segment(self, agent_name: str, run_id: str, start: Json) -> Json:
        """Run one segment of a run (the workflow's body): from its start or its last pause.

        Args:
            agent_name: Which agent factory builds the agent.
            run_id: The run.
            start: ``{"kind": "start", "task": ..., "actor": ...}`` or ``{"kind": "resume"}``.

        Returns:
            The segment's summary: status, stop reason and the requests a pause waits for.
        """
        agent = self._agent(agent_name)
        driver = DbosDriver(agent.driver, self.store, StepClock(), run_id)
        return await run_segment(agent, driver, self.store, run_id, start)

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
        """Enqueue a new run; a second call with the same run id enqueues nothing.

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
        await self._enqueue(f"ownloop:{state.run_id}:start", agent_name, state.run_id, start)
        return state.run_id

    async def approve(
        self,
        run_id: str,
        approval: Approval,
        *,
        agent_name: str | None = None,
        accept_changes: bool = False,
    ) -> str:
        """Submit a decision and enqueue the segment that continues the run from its pause.

        The segment's workflow id names the pause, not the decision (see `segment_id`): however
        a decision names the request, and however many are submitted for one pause, one segment
        continues it; a later pause of the same run (a second identical call) gets its own.

        Args:
            run_id: The paused run.
            approval: The decision (naming the request it decides, by id or digest).
            agent_name: The run's agent; by default the one its first segment named.
            accept_changes: Let the segment continue under a configuration that differs from
                the recorded one (a deploy during the pause changed a tool's signature), as
                ``Agent.resume(accept_changes=True)`` does; the recorded call keeps its
                journaled identity.

        Returns:
            The workflow id of the next segment.

        Raises:
            UnknownApprovalRequest: If the run does not wait for what the decision names, or the
                request already has a stored decision (by its id or its digest): nothing is
                stored or enqueued.
        """
        if agent_name is None:
            agent_name = await self._agent_of(run_id)
        await self._dbos_client()  # fail on a missing system database before storing anything
        await self.store.submit_approval(run_id, approval)
        stored = await self.store.get(run_id)
        assert stored is not None  # the submission found it, and runs are never deleted
        workflow_id = segment_id(stored.snapshot)
        start: Json = {"kind": "resume", **({"accept_changes": True} if accept_changes else {})}
        await self._enqueue(workflow_id, agent_name, run_id, start)
        return workflow_id

    async def _agent_of(self, run_id: str) -> str:
        if len(self.agents) == 1:
            return next(iter(self.agents))
        client = await self._dbos_client()
        found = await client.list_workflows_async(workflow_ids=[f"ownloop:{run_id}:start"])
        inputs = found[0].input if found else None
        if not inputs or not inputs.get("args"):
            raise ConfigurationError(f"no segment of run {run_id!r} names its agent")
        return str(inputs["args"][0])

    async def _enqueue(self, workflow_id: str, agent_name: str, run_id: str, start: Json) -> None:
        client = await self._dbos_client()
        options: EnqueueOptions = {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": self.queue,
            "workflow_id": workflow_id,
            "app_version": self.application_version,
            "serialization_type": WorkflowSerializationFormat.PORTABLE,
        }
        await client.enqueue_async(options, agent_name, run_id, start)

    async def _dbos_client(self) -> DBOSClient:
        if self._client is None:
            return await asyncio.to_thread(self._sync_client)
        return self._client

    def _sync_client(self) -> DBOSClient:
        if self._client is None:
            url = self.system_database_url
            if url is None:
                raise ConfigurationError(
                    "enqueueing and handing back need DbosRunner(system_database_url=...): "
                    "the DBOS system database"
                )
            self._client = DBOSClient(
                system_database_url=url, serializer=DBOSPortableJSONSerializer()
            )
        return self._client

    def close(self) -> None:
        """Close the enqueueing client, if one was opened (the store is the caller's)."""
        client, self._client = self._client, None
        if client is not None:
            client.destroy()

    def __repr__(self) -> str:
        return f"DbosRunner(queue={self.queue!r}, agents={sorted(self.agents)})"
