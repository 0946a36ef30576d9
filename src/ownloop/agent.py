"""The `Agent` facade: configure once, then run, resume and inspect bounded runs.

The loop core decides; the `Driver` (``ownloop.runtime``) performs. This module gathers an agent's
configuration, checks inputs before any model call, builds a run's state (fresh, or restored from
a paused result) and hands both to the driver. `run`/`resume` and their ``_sync`` twins share one
implementation.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import platform
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Literal, cast

from typing_extensions import TypeVar

from ownloop._agent_checks import (
    check_configuration,
    check_deps,
    check_fresh_decisions,
    tool_versions,
    warn_never_offered,
)
from ownloop._agent_history import (
    History,
    check_fresh_authority,
    continuation,
    start_from,
    with_history,
)
from ownloop._agent_output import output_spec, typed_result
from ownloop._agent_resume import check_task, claim_pause, pending_calls
from ownloop._agent_support import (
    check_requests,
    run_blocking,
    sdk_version,
    snapshot_of_result,
    usable_submissions,
)
from ownloop._agent_threads import thread_state
from ownloop._text import clean_text
from ownloop._version import __version__
from ownloop.clock import Clock, SystemClock
from ownloop.context import ContextPolicy
from ownloop.contracts import (
    MAX_ID_CHARS,
    Actor,
    Approval,
    ConfigurationChanged,
    JournalEntry,
    Limits,
    Message,
    ModelSettings,
    OutputMode,
    RunResult,
    RunSnapshot,
    SystemMessage,
    ToolSpec,
    UserMessage,
    Versions,
)
from ownloop.cost import PriceTable
from ownloop.delegation import agent_tool, check_handoffs
from ownloop.exceptions import ConfigurationError, RunNotFound
from ownloop.loop import LoopConfig, RunState, restore_state, run_loop
from ownloop.models import AgentModel
from ownloop.policy import Deny, Policy, default_policy
from ownloop.retry import RetryPolicy
from ownloop.runtime import Approver, Driver, RevisionSource, RunSession
from ownloop.store import RunStore, takes_changes
from ownloop.streaming import RunStream
from ownloop.tools import RegisteredTool, RunContext, ToolRegistry
from ownloop.tracing import Redactor, TraceRecorder, TraceSink
from ownloop.validators import (
    CheckFunction,
    CompletionValidator,
    Precondition,
    as_validator,
    require_current_check,
)

__all__ = ["Agent"]

DepsT = TypeVar("DepsT", default=None)
"""The type of the application objects a run hands its tools (``deps_type``)."""

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's final answer (``output_type``)."""


class Agent(Generic[DepsT, OutputT]):
    """A bounded, auditable agent: a model that proposes and a runtime that decides.

    Generic in its dependencies and its answer: ``Agent(model, output_type=Invoice)`` is an
    ``Agent[None, Invoice]`` whose runs return ``RunResult[Invoice]``.

    Args:
        model: The model port (a provider adapter, or a scripted model in tests).
        tools: The tools the model may propose; none by default.
        limits: The run budgets; safe defaults when omitted (a policy's budgets may lower them).
        validators: Completion checks; every one must accept a final answer.
        policy: Who may call what; by default reads are allowed and every write is denied
            (`ownloop.policy.default_policy`).
        approver: Decides approval requests inline; without one, a run needing approval pauses.
        revision: Returns the current state revision (sync or async), binding approvals,
            receipts and checks to the state they saw.
        preconditions: Conditions writes must meet first (`requires_check_before`).
        on_denied: ``"fail"`` ends the run when the policy denies a call; ``"observe"`` tells
            the model instead so it can change course.
        on_approval_denied: The same choice for an approval that was denied.
        clock: The clock for budgets, timestamps and backoff; the system clock by default.
        instructions: A system message sent first in every run, or a function of the run's
            `RunContext` (its task, actor and ``deps``) returning it, called once per run.
        retry: The backoff policy for transient model and tool failures.
        settings: Sampling settings sent with every model request.
        stream: Ask the model adapter to stream responses (sets ``settings.stream``).
        trace_sinks: Callables receiving every trace event as it is recorded.
        redactor: What the trace never shows (secret keys, patterns, values) and its size
            bounds; the built-in rules by default. Parameters marked ``Sensitive()`` are
            always added as secret keys.
        store: Where runs are checkpointed after every step and their writes journaled, so a
            paused or crashed run resumes in another process without repeating a write.
        worker_id: This worker's name in leases (default: host name and process id). It names
            the holder in messages and grants nothing: every acquisition of a run gets its own
            fencing token, so two resumes in one process never both hold a run.
        lease_ttl_s: How long a run's lease lasts without a heartbeat; a running segment renews
            it every third of that, so it bounds how long a dead worker blocks a run, not how
            long a run may take.
        context: Keeps requests bounded: compacts the conversation when the next request's
            estimated size would exceed the policy's cap.
        summarizer: A model that condenses the turns compaction removes (its calls count
            against the run's budgets); without it a placeholder says what was removed.
        prices: Token prices per model, for ``usage.cost`` and ``limits.max_cost``.
        output_type: The type of the final answer: a Pydantic model, a dataclass, a
            ``TypedDict``, a scalar (``int``, ``bool``, ``Literal[...]``), ``list[...]`` of those
            or a union; ``str`` (text) by default. ``result.output`` is then a value of it.
        output_mode: How the typed answer is asked for: ``native`` (the provider's structured
            output), ``tool`` (a final-result tool) or ``prompted`` (instructions and a JSON
            answer); by default the strongest the model adapter offers.
        deps_type: The type of the application objects each run is given
            (``run(task, deps=...)``) and tools receive as ``ctx.deps`` (``ToolContext[D]``);
            with it, a run or resume without ``deps`` is refused.

    Raises:
        ConfigurationError: If an argument cannot work (no ``respond`` method, not a registry,
            a validator that is not callable, an unknown ``on_denied`` value).
    """

    def __init__(
        self,
        model: AgentModel,
        tools: ToolRegistry | None = None,
        *,
        limits: Limits | None = None,
        validators: Iterable[CheckFunction] = (),
        policy: Policy | None = None,
        approver: Approver | None = None,
        revision: RevisionSource | None = None,
        preconditions: Sequence[Precondition] = (),
        on_denied: Literal["fail", "observe"] = "fail",
        on_approval_denied: Literal["fail", "observe"] = "fail",
        clock: Clock | None = None,
        instructions: str | Callable[[RunContext[DepsT]], str] | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        stream: bool = False,
        trace_sinks: Sequence[TraceSink] = (),
        redactor: Redactor | None = None,
        store: RunStore | None = None,
        worker_id: str | None = None,
        lease_ttl_s: float = 30.0,
        context: ContextPolicy | None = None,
        summarizer: AgentModel | None = None,
        prices: PriceTable | None = None,
        output_type: type[OutputT] | None = None,
        output_mode: OutputMode | None = None,
        deps_type: type[DepsT] | None = None,
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise ConfigurationError(
                f"model {model!r} is not a model port: it needs an async respond(request) method"
            )
        if tools is not None and not isinstance(tools, ToolRegistry):
            raise ConfigurationError(f"tools must be a ToolRegistry, got {type(tools).__name__}")
        for name, value in (("on_denied", on_denied), ("on_approval_denied", on_approval_denied)):
            if value not in ("fail", "observe"):
                raise ConfigurationError(f"{name} must be 'fail' or 'observe', not {value!r}")
        self.model = model
        self.tools = tools if tools is not None else ToolRegistry()
        self.policy = policy if policy is not None else default_policy()
        warn_never_offered(self.policy, self.tools.specs())
        self.limits = self.policy.apply_budgets(limits if limits is not None else Limits())
        if self.limits.max_cost is not None and prices is None:
            raise ConfigurationError("limits.max_cost needs a price table: Agent(prices=...)")
        validator = self._validator(validators)
        self._output = output_spec(model, output_type, output_mode, self.tools)
        check_handoffs(self.tools, self._output)
        self.deps_type = deps_type
        self._instructions = instructions
        base = settings or ModelSettings()
        self._config = LoopConfig(
            registry=self.tools,
            limits=self.limits,
            validator=validator,
            retry=retry if retry is not None else RetryPolicy(),
            clock=clock if clock is not None else SystemClock(),
            instructions=instructions if isinstance(instructions, str) else None,
            settings=base.model_copy(update={"stream": True}) if stream else base,
            versions=self._versions(validator),
            policy=self.policy,
            preconditions=tuple(preconditions),
            has_approver=approver is not None,
            tracks_revision=revision is not None,
            on_denied=on_denied,
            on_approval_denied=on_approval_denied,
            durable=store is not None,
            checkpoint_changes=takes_changes(store),
            context=context,
            has_summarizer=summarizer is not None,
            prices=prices,
            output=self._output,
        )
        if prices is not None:
            prices.price(self._config.versions.model)  # fail now, not after a paid call
        self._driver = Driver(model, self._config.clock, approver, revision, summarizer)
        self._sinks = tuple(trace_sinks)
        self.redactor = redactor if redactor is not None else Redactor()
        self.store = store
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"[:MAX_ID_CHARS]
        if lease_ttl_s <= 0:
            raise ConfigurationError("lease_ttl_s must be positive")
        self._lease_ttl_s = lease_ttl_s
        self._resumed: set[tuple[str, int]] = set()

    def _validator(self, validators: Iterable[CheckFunction]) -> CompletionValidator | None:
        checks = [as_validator(check) for check in validators]
        if self.policy.require_current_check is not None:
            checks.append(require_current_check(*self.policy.require_current_check))
        validator: CompletionValidator | None = None
        for check in checks:
            validator = check if validator is None else validator & check
        return validator

    def _versions(self, validator: CompletionValidator | None) -> Versions:
        # How many reads overlap schedules calls and authorises nothing: runs stored before the
        # limit existed, or under another value, resume without an "other configuration" refusal.
        limits = self.limits.model_dump_json(exclude={"max_parallel_tools"})
        configuration = f"{limits}|{validator!r}|{self.policy!r}|{self.tools.names()}"
        if self._output is not None:  # text agents keep the digest their stored runs carry
            configuration += f"|{self._output_label()}"
        model_name = getattr(self.model, "model_name", None)
        return Versions(
            ownloop=__version__,
            python=platform.python_version(),
            sdk=sdk_version(),
            model=model_name if isinstance(model_name, str) else type(self.model).__name__,
            policy_digest=hashlib.sha256(configuration.encode()).hexdigest()[:16],
            tools=tool_versions(self.tools.specs()),
            output_type=self._output_label(),
        )

    def _output_label(self) -> str | None:
        spec = self._output
        return None if spec is None else f"{spec.format.name}:{spec.mode}:{spec.digest}"

    def as_tool(
        self,
        *,
        name: str,
        description: str,
        effect: Literal["read", "write"],
        limits: Limits | None = None,
        on_stop: Literal["observe", "end"] = "observe",
        handoff: bool = False,
    ) -> RegisteredTool:
        """Return this agent as a tool of a parent (``parent_registry.register(...)``).

        The child runs under the parent run's remaining budgets, its actor, its policy
        intersected with the child's, and its approvals; see `ownloop.delegation.agent_tool`
        and docs/delegation.md.

        Args:
            name: The tool's name, as the parent's model calls it.
            description: What this agent does, for the parent's model.
            effect: ``"read"`` (the child's writes are denied) or ``"write"``.
            limits: Caps for the child below what the parent has left.
            on_stop: ``"observe"`` tells the parent's model how the child stopped; ``"end"``
                ends the parent run with the child's stop.
            handoff: This agent takes over: it continues the parent's conversation, and its
                answer is the parent's final answer.

        Returns:
            The tool.
        """
        return agent_tool(
            self,
            name=name,
            description=description,
            effect=effect,
            limits=limits,
            on_stop=on_stop,
            handoff=handoff,
            answers=self._output,
        )

    def delegated(
        self, limits: Limits, policy: Policy, sinks: Sequence[TraceSink] = ()
    ) -> Agent[DepsT, OutputT]:
        """Return this agent under other limits and policy, for one delegated run segment.

        The recorded versions stay this agent's, so the child run resumes under either.

        Args:
            limits: The segment's budgets.
            policy: The segment's policy (the caller's intersected with this agent's).
            sinks: The caller's trace sinks, added to this agent's (one trace).

        Returns:
            A shallow copy sharing the model, tools, store and driver.
        """
        derived = copy.copy(self)
        derived.limits, derived.policy = limits, policy
        derived._config = dataclasses.replace(self._config, limits=limits, policy=policy)
        derived._sinks = (*self._sinks, *(sink for sink in sinks if sink not in self._sinks))
        return derived

    def offered_tools(self, actor: Actor | None) -> tuple[ToolSpec, ...]:
        """Return the tools the model is offered for this actor: those the policy does not deny.

        Args:
            actor: Who the run acts for.

        Returns:
            The specs, in registration order.
        """
        return tuple(
            spec
            for spec in self.tools.specs()
            if not isinstance(self.policy.decide(actor, spec, None), Deny)
        )

    async def run(
        self,
        task: str,
        *,
        actor: Actor | None = None,
        run_id: str | None = None,
        approvals: Iterable[Approval] = (),
        deps: DepsT | None = None,
        history: History | None = None,
        thread_id: str | None = None,
    ) -> RunResult[OutputT]:
        """Run the task to a terminal state (or a pause) and return everything that happened.

        Args:
            task: What the agent should do.
            actor: The authenticated identity the run acts for (trusted: from the application).
            run_id: An id for the run; a random one by default.
            approvals: Decisions given up front, bound to exact calls by digest.
            deps: The application's objects for this run (``deps_type``): tools read them as
                ``ctx.deps``; never stored or traced.
            history: An earlier result (or its messages) this run continues: it starts with
                that conversation plus ``task``, and may cite the earlier evidence; its budgets,
                id, trace and approvals are its own (see the Conversations page).
            thread_id: A stored thread to continue: the run continues the thread's last
                finished run and is recorded as its next one (needs a store).

        Returns:
            The result. Budget stops, denials, pauses and model failures are results.

        Raises:
            InputRejected: If the task is empty or longer than ``limits.max_input_chars``, or the
                run id is not 1-128 characters.
            UnexpectedModelCall: If a scripted model ran out of steps (a test bug).
            ConfigurationError: If the agent declares ``deps_type`` and ``deps`` is missing or
                of another type, or the history cannot be continued (a paused or unresolved
                run), or an approval was given to the earlier run.
            ThreadBusy: If the thread's last run is not finished, or another follow-up
                continued it first.
        """
        if thread_id is None:
            state = self.new_state(
                task, actor=actor, run_id=run_id, approvals=approvals, deps=deps, history=history
            )
        else:
            state = await thread_state(
                self.store,
                thread_id,
                history,
                lambda previous: self.new_state(
                    task,
                    actor=actor,
                    run_id=run_id,
                    approvals=approvals,
                    deps=deps,
                    history=previous,
                    thread_id=thread_id,
                ),
            )
        return await self._drive(state)

    def run_stream(
        self,
        task: str,
        *,
        actor: Actor | None = None,
        run_id: str | None = None,
        approvals: Iterable[Approval] = (),
        warn_at: float = 0.8,
        deps: DepsT | None = None,
        history: History | None = None,
    ) -> RunStream[OutputT]:
        """Run the task, yielding its events as they happen; the last one carries the result.

        Args:
            task: What the agent should do.
            actor: The authenticated identity the run acts for.
            run_id: An id for the run; a random one by default.
            approvals: Decisions given up front.
            warn_at: The share of a budget at which a `BudgetWarning` is emitted.
            deps: The application's objects for this run.
            history: An earlier result (or messages) the run continues, as in `run`.

        Returns:
            The stream (the run starts when it is first read); leaving it early cancels the run.

        Raises:
            InputRejected: If the task or run id is not acceptable (before anything runs).
        """
        state = self.new_state(
            task, actor=actor, run_id=run_id, approvals=approvals, deps=deps, history=history
        )
        return RunStream[OutputT](state, self._drive, limits=self.limits, warn_at=warn_at)

    @property
    def loop_config(self) -> LoopConfig:
        """The configuration the loop core runs with (for drivers other than the built-in one).

        Its checkpoints are whole snapshots: only the built-in driver hands a store a
        checkpoint's changes alone (``checkpoint_changes``).
        """
        return dataclasses.replace(self._config, checkpoint_changes=False)

    @property
    def driver(self) -> Driver:
        """The driver performing this agent's effects (model, tools, approver, revision)."""
        return self._driver

    def new_state(
        self,
        task: str,
        *,
        actor: Actor | None = None,
        run_id: str | None = None,
        approvals: Iterable[Approval] = (),
        clock: Clock | None = None,
        deps: DepsT | None = None,
        history: History | None = None,
        thread_id: str | None = None,
    ) -> RunState:
        """Build a new run's state, checking its inputs first (what `run` starts from).

        Args:
            task: What the agent should do.
            actor: The identity the run acts for.
            run_id: An id for the run; a random one by default.
            approvals: Decisions given up front.
            clock: The clock the run reads; the agent's by default.
            deps: The application's objects for this run.
            history: An earlier result (or messages) the run continues.
            thread_id: The thread the run is recorded in (recorded with its conversation).

        Returns:
            The state, with the opening messages.

        Raises:
            InputRejected: If the task or run id is not acceptable.
            ConfigurationError: If ``deps`` is missing or of another type than ``deps_type``.
        """
        run_id = check_task(task, run_id, self.limits)
        check_deps(self.deps_type, deps, "run")
        earlier, approvals = continuation(history, thread_id=thread_id), list(approvals)
        check_fresh_authority(earlier, approvals)
        task = clean_text(task)  # an unpaired surrogate would break every trace and store
        clock = clock if clock is not None else self._config.clock
        opening = self._opening_messages(RunContext(run_id, task, actor, cast("DepsT", deps)))
        state = RunState(
            run_id=run_id,
            task=task,
            actor=actor,
            started_at=clock.monotonic(),
            trace=TraceRecorder(run_id, clock, self._sinks, redactor=self._trace_redactor()),
            messages=with_history(opening, earlier),
            tools=self.offered_tools(actor),
            approvals=approvals,
            deps=deps,
        )
        return start_from(state, earlier)

    async def _drive(self, state: RunState) -> RunResult[OutputT]:
        """Drive a run, holding its lease for the whole segment when a store is configured."""
        loop = run_loop(self._config, state)
        if self.store is None:
            return self._typed(await self._driver.drive(loop))
        lease = await self.store.acquire_lease(state.run_id, self.worker_id, self._lease_ttl_s)
        session = RunSession(self.store, lease, None, ttl_s=self._lease_ttl_s)
        try:
            async with session.heartbeat():
                return self._typed(await self._driver.drive(loop, session))
        finally:
            await self.store.release_lease(lease)

    def _typed(self, result: RunResult[Any]) -> RunResult[OutputT]:
        return cast("RunResult[OutputT]", typed_result(result, self._output))

    async def stored_result(self, run_id: str) -> RunResult[OutputT] | None:
        """Load a run's result from the agent's store, typed as this agent's ``output_type``.

        Args:
            run_id: The run.

        Returns:
            The result (``RunResult[T]``), or ``None`` while the run has not paused or ended.

        Raises:
            ConfigurationError: If the agent has no store, or the stored output is not a value
                of the ``output_type``.
            RunNotFound: If the store has no such run.
        """
        if self.store is None:
            raise ConfigurationError("loading a stored result needs Agent(store=...)")
        stored = await self.store.get(run_id)
        if stored is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store!r}")
        result = stored.snapshot.result
        return None if result is None else self._typed(result)

    def run_sync(
        self,
        task: str,
        *,
        actor: Actor | None = None,
        run_id: str | None = None,
        approvals: Iterable[Approval] = (),
        deps: DepsT | None = None,
        history: History | None = None,
        thread_id: str | None = None,
    ) -> RunResult[OutputT]:
        """Run the task from synchronous code; the same as awaiting `run`.

        Args:
            task: What the agent should do.
            actor: The authenticated identity the run acts for.
            run_id: An id for the run; a random one by default.
            approvals: Decisions given up front.
            deps: The application's objects for this run.
            history: An earlier result (or messages) the run continues.
            thread_id: A stored thread to continue.

        Returns:
            The result.

        Raises:
            ConfigurationError: If called while an event loop is running (await `run` instead).
        """
        return run_blocking(
            lambda: self.run(
                task,
                actor=actor,
                run_id=run_id,
                approvals=approvals,
                deps=deps,
                history=history,
                thread_id=thread_id,
            ),
            "run",
        )

    async def resume(
        self,
        paused: RunResult[Any] | str,
        *,
        approvals: Iterable[Approval] = (),
        accept_changes: bool = False,
        take_over: bool = False,
        deps: DepsT | None = None,
    ) -> RunResult[OutputT]:
        """Continue a paused (or, from a store, interrupted) run exactly where it stopped.

        Args:
            paused: The paused run's result, or a run id to load from the agent's store (a
                run paused for approval, or one whose worker died mid-run).
            approvals: Decisions, each naming a request the run waits for (or an exact digest);
                decisions submitted to the store (``ownloop approve``) for requests the run
                still waits for are added.
            accept_changes: Continue even if this agent's limits, policy, validators or tools
                differ from those the run was recorded with (``versions.policy_digest``); the
                change is recorded as a ``configuration_changed`` trace event.
            take_over: Take the run even though another worker's lease has not expired (you
                know that worker is dead or stuck). Safe: the old holder can record nothing
                more, so it executes no further write. Recorded in the trace. A holder on this
                host whose process has ended is taken over without it.
            deps: The application's objects, given again (they are never stored); required
                when the agent declares ``deps_type``.

        Returns:
            The result of the continued run; its trace holds the events from before.

        Raises:
            ConfigurationError: If the run is finished, or an approval names a request the run
                is not waiting for, or a run id is given without a store, or the configuration
                differs from the recorded one and ``accept_changes`` is false, or the agent
                declares ``deps_type`` and no ``deps`` are given.
            RunNotFound: If the store has no such run.
            RunLeased: If another worker is executing the run.
        """
        decisions = list(approvals)
        check_deps(self.deps_type, deps, "resume")
        if isinstance(paused, RunResult) and self.store is None:
            snapshot = snapshot_of_result(paused)
            state = self._restore(snapshot, decisions, [], accept_changes)
            claim_pause(self._resumed, snapshot)
            state.deps = deps
            return self._typed(await self._driver.drive(run_loop(self._config, state)))
        run_id = paused if isinstance(paused, str) else paused.run_id
        store = self.store
        if store is None:
            raise ConfigurationError("resuming a run by id needs Agent(store=...)")
        # Lease first, then load: a worker must never continue from a view another worker
        # changed after it was read.
        lease = await store.acquire_lease(
            run_id, self.worker_id, self._lease_ttl_s, take_over=take_over
        )
        session = RunSession(store, lease, None, ttl_s=self._lease_ttl_s)
        try:
            async with session.heartbeat():
                stored = await store.get(run_id)
                if stored is None:
                    raise RunNotFound(f"no run {run_id!r} in {store!r}")
                submitted = usable_submissions(
                    stored.snapshot, await store.submitted_approvals(run_id)
                )
                state = self._restore(
                    stored.snapshot,
                    [*submitted, *decisions],
                    await store.journal(run_id),
                    accept_changes,
                )
                state.taken_over_from = lease.taken_over_from
                state.deps = deps
                session.version = stored.version
                result = await self._driver.drive(run_loop(self._config, state), session)
                return self._typed(result)
        finally:
            await store.release_lease(lease)

    def restored_state(
        self,
        snapshot: RunSnapshot,
        approvals: Iterable[Approval],
        journal: list[JournalEntry],
        *,
        clock: Clock | None = None,
        accept_changes: bool = False,
    ) -> RunState:
        """Rebuild a resumable run's state from its snapshot and write journal (what `resume` does).

        Args:
            snapshot: The stored (or paused) run.
            approvals: Decisions to apply, each naming a request the run waits for.
            journal: The run's write journal.
            clock: The clock the run reads; the agent's by default.
            accept_changes: Continue under a configuration that differs from the recorded one.

        Returns:
            The state, ready for the loop core.

        Raises:
            ConfigurationError: If the run is finished, an approval names a request the run is
                not waiting for, or the configuration changed and ``accept_changes`` is false.
        """
        return self._restore(snapshot, list(approvals), journal, accept_changes, clock)

    def _restore(
        self,
        snapshot: RunSnapshot,
        decisions: list[Approval],
        journal: list[JournalEntry],
        accept_changes: bool = False,
        clock: Clock | None = None,
    ) -> RunState:
        """Rebuild a resumable run's state, refusing finished runs and misaddressed approvals."""
        if snapshot.state == "finished":
            status = snapshot.result.status.value if snapshot.result else "finished"
            raise ConfigurationError(
                f"run {snapshot.run_id} is {status}, not paused: it cannot be resumed"
            )
        check_requests(snapshot, decisions)
        check_fresh_decisions(snapshot, decisions)
        offered = self.offered_tools(snapshot.actor)
        changes = check_configuration(
            snapshot, self._config.versions, self.limits, offered, accept=accept_changes
        )
        state = restore_state(
            snapshot,
            clock=clock if clock is not None else self._config.clock,
            sinks=self._sinks,
            tools=offered,
            approvals=decisions,
            journal=journal,
            redactor=self._trace_redactor(),
        )
        state.pending_calls = pending_calls(self.tools, state)
        if changes:
            state.trace.emit(
                ConfigurationChanged,
                recorded_digest=snapshot.versions.policy_digest,
                digest=self._config.versions.policy_digest,
                changes=tuple(changes),
            )
        return state

    def resume_sync(
        self,
        paused: RunResult[Any] | str,
        *,
        approvals: Iterable[Approval] = (),
        accept_changes: bool = False,
        take_over: bool = False,
        deps: DepsT | None = None,
    ) -> RunResult[OutputT]:
        """Resume a paused run from synchronous code; the same as awaiting `resume`.

        Args:
            paused: The paused run's result, or a run id to load from the store.
            approvals: The decisions.
            accept_changes: Continue under a configuration that differs from the recorded one.
            take_over: Take the run from a worker whose lease has not expired.
            deps: The application's objects, given again.

        Returns:
            The result of the continued run.
        """
        return run_blocking(
            lambda: self.resume(
                paused,
                approvals=approvals,
                accept_changes=accept_changes,
                take_over=take_over,
                deps=deps,
            ),
            "resume",
        )

    def _trace_redactor(self) -> Redactor:
        """The run's redactor: the agent's, plus every ``Sensitive()`` parameter name as a key."""
        names = sorted({name for spec in self.tools.specs() for name in spec.sensitive})
        return self.redactor.with_keys(*names) if names else self.redactor

    def _opening_messages(self, context: RunContext[DepsT]) -> list[Message]:
        messages: list[Message] = []
        instructions = self._instructions
        text = instructions(context) if callable(instructions) else instructions
        if text:
            messages.append(SystemMessage(content=clean_text(text)))
        if self._output is not None and self._output.mode == "prompted":
            messages.append(SystemMessage(content=self._output.instructions()))
        messages.append(UserMessage(content=context.task))
        return messages

    def __repr__(self) -> str:
        return (
            f"Agent(model={self.model!r}, tools={list(self.tools.names())}, "
            f"policy={self.policy!r}, limits=Limits(max_steps={self.limits.max_steps}, ...))"
        )
