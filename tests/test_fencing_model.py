"""The model-based proof of "no write runs twice": a state machine searching for counterexamples.

Each example drives one run through the public API on one store (memory, SQLite, PostgreSQL).
The model proposes reads, writes, approval-gated writes, unknown tools and invalid arguments, with
call ids that repeat within a response and are reused across turns; a write's arguments may add a
set of tags, a secret token, a nested model and a reference its parameter's ``default_factory``
makes when the model leaves it out. Write tools succeed, fail
transiently, raise before acting, act slowly (still in their thread when another worker takes
the run over), or act and then raise (unknown effect); a lookup reads the external ledger.
Between segments the machine crashes a worker at every effect boundary (after a checkpoint, an
intent, a receipt, inside the write after its effect) and abandons it with its lease held,
resumes in a fresh `Agent` (after the lease expires on a fake clock, or by take-over), resumes
concurrently, stalls a worker past its lease while another finishes the run, and submits approvals
that match, deny, repeat or are misaddressed.

After every step: no external effect happened twice (the ledger), no approval-gated effect lacks an
approval, every journaled receipt belongs to the call that produced it, every result is typed and
within its budgets, every trace numbers its events without gaps, and every journaled write's
arguments are what its handler received (the factory's value and the secret's real value too).

Examples per store: ``OWNLOOP_FENCING_EXAMPLES`` (default 2000 for memory, a third of that for
SQLite and a tenth for PostgreSQL); ``OWNLOOP_FENCING_EXAMPLES=100000`` is the long search.

The identity machine (`tests.fencing_identity`) searches generated argument types, crashes,
deploys and decisions. On SQLite and PostgreSQL every segment is a fresh interpreter under a
random hash seed: ``OWNLOOP_IDENTITY_EXAMPLES`` examples each (default
``OWNLOOP_FENCING_EXAMPLES / 700``, at least 2). On the memory store every segment runs in this
process: ``OWNLOOP_FENCING_EXAMPLES / 40`` examples (at least 2).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from pydantic import BaseModel, Field, SecretStr

from ownloop import Agent, Approval, RunResult, RunStatus
from ownloop.clock import FakeClock
from ownloop.contracts import (
    ApprovalRequest,
    Lease,
    Limits,
    ModelRequest,
    ModelResponse,
    Receipt,
    RunSnapshot,
    ToolCall,
    WriteIntent,
)
from ownloop.exceptions import (
    ConfigurationError,
    RunLeased,
    RunNotFound,
    TransientToolError,
    UnknownApprovalRequest,
)
from ownloop.identity import encode
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
from ownloop.tools import Confirmed, NotApplied, ToolContext, ToolRegistry
from tests.durable_support import fresh_schema, postgres_dsn
from tests.fencing_identity import IdentityMachine

TTL = 30.0
LIMITS = Limits(max_steps=6, max_tool_calls=12, max_tool_attempts=24, max_repeats=4)
BASE = int(os.environ.get("OWNLOOP_FENCING_EXAMPLES", "2000"))
MODES = ("ok", "ok", "slow", "transient", "raise", "unknown", "crash")
IDS = ("c1", "c1", "c2", "dup", "call#1")


class Crash(BaseException):
    """The worker process dies here: nothing below it runs, its lease stays held."""


class Parcel(BaseModel):
    """A nested model argument of the write tools."""

    street: str
    tags: frozenset[str] = frozenset()


_WORDS = st.sampled_from(["pear", "fig", "café", "cafe\u0301", "", "ﬁ"])
extras_plan = st.fixed_dictionaries(
    {},
    optional={
        "tags": st.lists(_WORDS, max_size=4),
        "token": _WORDS,
        "parcel": st.fixed_dictionaries({"street": _WORDS, "tags": st.lists(_WORDS, max_size=3)}),
        "ref": _WORDS,  # left out, the parameter's default_factory makes a fresh one
    },
)
KINDS = ("read", "write", "approved_write", "nothing", "bad_args", "delegate", "delegate_approved")
call_plan = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(IDS),
    st.sampled_from(MODES),
    extras_plan,
)
turn_plan = st.one_of(st.just(()), st.lists(call_plan, min_size=1, max_size=3).map(tuple))
script_plan = st.lists(turn_plan, min_size=1, max_size=4)


class PlannedModel:
    """Answers step n with the n-th planned turn (the same turn when a step is asked again)."""

    def __init__(self, script: list[tuple[tuple[str, str, str, dict[str, Any]], ...]]) -> None:
        self.script = script

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Return the planned turn of this step: tool calls, or a final answer."""
        if request.step > len(self.script) or not self.script[request.step - 1]:
            return ModelResponse(final_output="done")
        calls = []
        for index, (kind, call_id, mode, extras) in enumerate(self.script[request.step - 1]):
            nonce = f"s{request.step}i{index}"
            tool, arguments = kind, {"nonce": nonce, "mode": mode, **extras}
            if kind == "read":
                arguments = {"query": nonce}
            elif kind == "bad_args":
                tool, arguments = "write", "{not json"  # type: ignore[assignment]
            elif kind.startswith("delegate"):  # the child writes (approved or not) in ``mode``
                write = "approved_write" if kind == "delegate_approved" else "write"
                tool, arguments = "delegate", {"task": f"{nonce}|{write}|{mode}"}
            calls.append(ToolCall(id=call_id, name=tool, arguments=arguments))
        return ModelResponse(tool_calls=tuple(calls))


class ChildModel:
    """The delegated agent's model: one write its task names, then an answer."""

    def __init__(self, children: set[str]) -> None:
        self.children = children

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Propose the task's write at the first step, answer after it."""
        self.children.add(request.run_id)
        task = next(m.content for m in request.messages if m.role == "user")
        nonce, tool, mode = str(task).split("|")
        if request.step > 1:
            return ModelResponse(final_output=f"child {nonce} done")
        arguments = {"nonce": f"{nonce}-child", "mode": mode}
        return ModelResponse(tool_calls=(ToolCall(id="w1", name=tool, arguments=arguments),))


class FaultyStore:
    """Delegates to a store; crashes after the n-th write, or stalls before it (see the rules)."""

    def __init__(self, store: RunStore, crash_after: int | None = None) -> None:
        self._store = store
        self.crash_after = crash_after
        self.stall_before: int | None = None
        self.stall_run: str | None = None  # stalls only in this run's writes, never a child's
        self.on_stall: Any = None
        self.writes = 0
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def _around(self, write: Any, run_id: str) -> Any:
        self.writes += 1
        # A child stalled inside its delegation call would wait for the worker that waits for
        # that call (this process's in-flight write): a deadlock of the test, not of a worker.
        stalls = run_id == self.stall_run
        if self.writes == self.stall_before and stalls and self.on_stall is not None:
            stall, self.on_stall = self.on_stall, None
            await stall()
        result = await write()
        if self.writes == self.crash_after:
            self.crashed = True
            raise Crash
        return result

    async def save(
        self, snapshot: RunSnapshot, *, expected_version: int | None, lease: Lease | None = None
    ) -> int:
        """Save (see `RunStore`), crashing or stalling where planned."""
        version: int = await self._around(
            lambda: self._store.save(snapshot, expected_version=expected_version, lease=lease),
            snapshot.run_id,
        )
        return version

    async def record_intent(self, intent: WriteIntent, *, lease: Lease | None = None) -> None:
        """Journal an intent (see `RunStore`), crashing or stalling where planned."""
        await self._around(lambda: self._store.record_intent(intent, lease=lease), intent.run_id)

    async def record_receipt(
        self, run_id: str, call_id: str, receipt: Receipt, *, lease: Lease | None = None
    ) -> None:
        """Journal a receipt (see `RunStore`), crashing or stalling where planned."""
        await self._around(
            lambda: self._store.record_receipt(run_id, call_id, receipt, lease=lease), run_id
        )

    async def release_lease(self, lease: Lease) -> None:
        """A crashed worker never gives its lease back."""
        if not self.crashed:
            await self._store.release_lease(lease)


_WORLD: Any = None
_REGISTRY: list[ToolRegistry] = []


class _Backends:
    """One SQLite file and one PostgreSQL schema per test session and store kind (runs differ)."""

    sqlite: SqliteRunStore | None = None
    postgres: PostgresRunStore | None = None
    clock = FakeClock()


class FencingMachine(RuleBasedStateMachine):
    """One run, its workers, its approvals and the outside world it writes to."""

    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.lease_clock = _Backends.clock if self.backend != "memory" else FakeClock()
        self.store = self._store()
        self.run_id = f"run-{uuid.uuid4().hex[:12]}"
        self.ledger: dict[str, str] = {}  # idempotency key -> nonce
        self.received: dict[str, Any] = {}  # idempotency key -> the extras, encoded
        self.effects: list[str] = []  # nonces, in order
        self.granted: set[str] = set()
        self.crashed_once: set[str] = set()
        self.transient_once: set[str] = set()
        self.problems: list[str] = []
        self.results: list[RunResult] = []
        self.script: list[Any] = []
        self.started = False
        self.abandoned = False
        self.children: set[str] = set()  # the delegated runs' ids

    def _store(self) -> RunStore:
        if self.backend == "memory":
            return MemoryRunStore(clock=self.lease_clock)
        if self.backend == "sqlite":
            if _Backends.sqlite is None:
                path = Path(tempfile.mkdtemp()) / "fencing.db"
                _Backends.sqlite = SqliteRunStore(path, clock=_Backends.clock)
            return _Backends.sqlite
        if _Backends.postgres is None:
            _Backends.postgres = PostgresRunStore(postgres_dsn(), schema=fresh_schema())
        return _Backends.postgres

    def teardown(self) -> None:
        """Close this example's event loop (the shared stores stay open)."""
        if isinstance(self.store, PostgresRunStore):
            self.loop.run_until_complete(self.store.close())
        self.loop.close()

    # ----------------------------------------------------------------- the outside world

    def _effect(self, tool: str, nonce: str, key: str | None, received: dict[str, Any]) -> None:
        if nonce in self.effects:
            self.problems.append(f"the effect of {nonce} happened twice")
        if tool == "approved_write" and nonce not in self.granted:
            self.problems.append(f"{nonce} took effect without its approval")
        self.effects.append(nonce)
        self.ledger[str(key)] = nonce
        self.received[str(key)] = encode(received)

    def _registry(self) -> ToolRegistry:
        global _WORLD
        _WORLD = self
        if _REGISTRY:
            return _REGISTRY[0]
        registry = ToolRegistry()
        _REGISTRY.append(registry)

        class _Current:
            def __getattr__(self, name: str) -> Any:
                return getattr(_WORLD, name)

        machine = _Current()

        @registry.tool(effect="read")
        def read(query: str) -> dict[str, str]:
            """Read something.

            Args:
                query: What.
            """
            return {"id": query}

        def act(
            tool: str, nonce: str, mode: str, ctx: ToolContext, received: dict[str, Any]
        ) -> dict[str, str]:
            if mode == "transient" and nonce not in machine.transient_once:
                machine.transient_once.add(nonce)
                raise TransientToolError("busy")
            if mode == "raise":
                raise ValueError("refused before acting")
            if mode == "slow":  # still in its thread when another worker takes the run over
                time.sleep(0.002)
            machine._effect(tool, nonce, ctx.idempotency_key, received)
            if mode == "unknown":
                raise ValueError("acted, then lost the connection")
            if mode == "crash" and nonce not in machine.crashed_once:
                machine.crashed_once.add(nonce)
                machine.faulty_crashed()
                raise Crash
            return {"nonce": nonce}

        def lookup(arguments: dict[str, Any], ctx: ToolContext) -> Confirmed | NotApplied:
            nonce = machine.ledger.get(str(ctx.idempotency_key))
            return Confirmed({"nonce": nonce}) if nonce is not None else NotApplied()

        @registry.tool(effect="write", reconcile=lookup)
        def write(
            nonce: str,
            mode: str,
            ctx: ToolContext,
            *,
            ref: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
            tags: Annotated[set[str], Field(default_factory=set)],
            token: SecretStr | None = None,
            parcel: Parcel | None = None,
        ) -> dict[str, str]:
            """Write.

            Args:
                nonce: Which planned call this is.
                mode: How it behaves.
                ctx: Injected.
                ref: A reference, made fresh when left out.
                tags: Tags.
                token: A secret.
                parcel: A nested model.
            """
            received = {"ref": ref, "tags": tags, "token": token, "parcel": parcel}
            return act("write", nonce, mode, ctx, received)

        @registry.tool(effect="write", requires_approval=True, reconcile=lookup)
        def approved_write(
            nonce: str,
            mode: str,
            ctx: ToolContext,
            *,
            ref: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
            tags: Annotated[set[str], Field(default_factory=set)],
            token: SecretStr | None = None,
            parcel: Parcel | None = None,
        ) -> dict[str, str]:
            """Write, once approved.

            Args:
                nonce: Which planned call this is.
                mode: How it behaves.
                ctx: Injected.
                ref: A reference, made fresh when left out.
                tags: Tags.
                token: A secret.
                parcel: A nested model.
            """
            received = {"ref": ref, "tags": tags, "token": token, "parcel": parcel}
            return act("approved_write", nonce, mode, ctx, received)

        return registry

    def faulty_crashed(self) -> None:
        """Mark the running worker's store as crashed (its lease is abandoned)."""
        if self.current is not None:
            self.current.crashed = True

    current: FaultyStore | None = None

    def _agent(self, store: RunStore, verdict: str | None) -> Agent:
        def approver(request: ApprovalRequest) -> Approval | None:
            if verdict is None:
                return None
            nonce = str(request.arguments.get("nonce"))
            if verdict == "approve":
                self.granted.add(nonce)
            return Approval(request_id=request.id, approved=verdict == "approve", approver="inline")

        child = Agent(  # its approvals pause the parent (the parent's approver never sees them)
            ChildModel(self.children),
            self._registry(),
            policy=allow_writes("write", "approved_write"),
            clock=FakeClock(),
            store=store,
            lease_ttl_s=TTL,
        )
        registry = ToolRegistry()
        for name in self._registry().names():
            tool = self._registry().get(name)
            assert tool is not None
            registry.register(tool)
        registry.register(child.as_tool(name="delegate", description="Delegates.", effect="write"))
        return Agent(
            PlannedModel(self.script),
            registry,
            limits=LIMITS,
            policy=allow_writes("write", "approved_write", "delegate"),
            approver=approver if verdict is not None else None,
            clock=FakeClock(),
            store=store,
            lease_ttl_s=TTL,
        )

    # ----------------------------------------------------------------- rules

    @initialize(script=script_plan)
    def plan(self, script: list[Any]) -> None:
        """Fix what the model proposes at each step."""
        self.script = script

    async def _segment(self, agent: Agent, take_over: bool) -> RunResult | None:
        try:
            if not self.started:
                self.started = True
                result = await agent.run("do the plan", run_id=self.run_id)
            else:
                result = await agent.resume(self.run_id, take_over=take_over)
        except Crash:
            self.abandoned = True
            return None
        except (RunLeased, RunNotFound, UnknownApprovalRequest):
            return None
        except ConfigurationError as error:
            if "cannot be resumed" not in str(error):
                raise
            return None
        self.results.append(result)
        return result

    @rule(
        crash_after=st.none() | st.integers(min_value=1, max_value=12),
        verdict=st.sampled_from((None, "approve", "deny")),
        take_over=st.booleans(),
    )
    def segment(self, crash_after: int | None, verdict: str | None, take_over: bool) -> None:
        """Run or resume in a fresh worker, which may crash after its n-th durable write."""
        faulty = FaultyStore(self.store, crash_after)
        self.current = faulty
        self.loop.run_until_complete(self._segment(self._agent(faulty, verdict), take_over))
        self.current = None

    @precondition(lambda self: self.backend != "postgres")
    @rule()
    def leases_expire(self) -> None:
        """Time passes without a heartbeat: every abandoned lease expires."""
        self.lease_clock.advance(TTL + 1)

    @precondition(lambda self: self.started)
    @rule(workers=st.integers(min_value=2, max_value=3), take_over=st.booleans())
    def concurrent_resumes(self, workers: int, take_over: bool) -> None:
        """Several workers of one process resume the run at once (a double click)."""
        agents = [self._agent(self.store, "approve") for _ in range(workers)]

        async def race() -> None:
            await asyncio.gather(*(self._segment(agent, take_over) for agent in agents))

        self.loop.run_until_complete(race())

    @precondition(lambda self: self.started)
    @rule(stall_before=st.integers(min_value=1, max_value=6))
    def stall_past_the_lease(self, stall_before: int) -> None:
        """A worker stalls past its lease; another takes the run over and goes on; it wakes."""
        stalled = FaultyStore(self.store)
        stalled.stall_before = stall_before
        stalled.stall_run = self.run_id
        woke: list[int] = []  # the effects when the other worker was done

        async def other_worker() -> None:
            if self.backend != "postgres":
                self.lease_clock.advance(TTL + 1)
            await self._segment(self._agent(self.store, "approve"), self.backend == "postgres")
            woke.append(len(self.effects))

        stalled.on_stall = other_worker
        self.current = stalled
        outcome = self.loop.run_until_complete(
            self._segment(self._agent(stalled, "approve"), take_over=False)
        )
        self.current = None
        if woke and outcome is not None:
            self.problems.append("a worker that lost its lease finished its segment")
        if woke and len(self.effects) > woke[0]:
            self.problems.append("a worker that lost its lease executed a write")

    @precondition(lambda self: self.started)
    @rule(
        kind=st.sampled_from(("approve", "deny", "repeat", "wrong_request", "other_run")),
    )
    def submit_decision(self, kind: str) -> None:
        """Submit a decision from another process: matching, denying, repeated or misaddressed."""

        async def submit() -> None:
            stored = await self.store.get(self.run_id)
            requests = stored.snapshot.approval_requests if stored else ()
            run_id, request_id = self.run_id, requests[0].id if requests else "req-none"
            if kind == "wrong_request":
                request_id = f"{request_id}-typo"
            if kind == "other_run":
                run_id = f"{self.run_id}-elsewhere"
            approval = Approval(request_id=request_id, approved=kind != "deny", approver="operator")
            times = 2 if kind == "repeat" else 1
            for _ in range(times):
                try:
                    await self.store.submit_approval(run_id, approval)
                except (UnknownApprovalRequest, RunNotFound):
                    if kind in ("approve", "deny", "repeat") and requests:
                        # refused only when another decision for it is stored already
                        earlier = await self.store.submitted_approvals(run_id)
                        if not any(a.request_id == request_id for a in earlier):
                            self.problems.append(f"a matching decision was refused: {kind}")
                    return
                if kind in ("wrong_request", "other_run") or not requests:
                    self.problems.append(f"a misaddressed decision was stored: {kind}")
                if approval.approved and requests:
                    self.granted.add(str(requests[0].arguments.get("nonce")))

        self.loop.run_until_complete(submit())

    # ----------------------------------------------------------------- invariants

    @invariant()
    def nothing_went_wrong(self) -> None:
        """No effect twice, no unapproved effect, no misattributed receipt, typed bounded ends."""
        assert not self.problems, self.problems
        assert len(self.effects) == len(set(self.effects))
        if self.children:
            event("a delegated child ran")
        if any("-child" in nonce for nonce in self.effects):
            event("a delegated child's write took effect")
        if any("(delegated: " in r.reason for x in self.results for r in x.approval_requests):
            event("a delegated child's write paused the parent")
        for result in self.results:
            assert isinstance(result.status, RunStatus)
            usage, limits = result.usage, result.limits
            assert usage.steps <= limits.max_steps
            assert usage.tool_calls <= limits.max_tool_calls
            assert usage.tool_attempts <= limits.max_tool_attempts
            seqs = [event.seq for event in result.trace]
            assert seqs == list(range(1, len(seqs) + 1)), seqs

    @invariant()
    def every_journaled_receipt_is_its_calls(self) -> None:
        """A journaled ok receipt carries the effect its own intent's key produced."""
        if not self.started:
            return
        for run_id in (self.run_id, *sorted(self.children)):
            self._check_journal(run_id)

    def _check_journal(self, run_id: str) -> None:
        journal = self.loop.run_until_complete(self.store.journal(run_id))
        keys = [entry.intent.call_id for entry in journal]
        assert len(keys) == len(set(keys)), keys
        for entry in journal:
            receipt, intent = entry.receipt, entry.intent
            assert intent.call_id.startswith("call#")
            received = self.received.get(str(intent.idempotency_key))
            if received is not None:  # the handler ran with exactly the journaled arguments
                assert intent.arguments is not None
                assert {name: intent.arguments.get(name) for name in received} == received
            if receipt is None:
                continue
            assert (receipt.tool, receipt.call_id) == (intent.tool, intent.provider_call_id)
            if receipt.status == "ok":
                done = self.ledger.get(intent.idempotency_key)
                assert done is not None, f"{intent.call_id} has an ok receipt and no effect"
                assert receipt.data == {"nonce": done}


def _settings(examples: int) -> settings:
    return settings(
        max_examples=max(examples, 1),
        stateful_step_count=8,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


class MemoryFencing(FencingMachine):
    """The machine on the in-memory store."""

    backend = "memory"


class SqliteFencing(FencingMachine):
    """The machine on a SQLite file."""

    backend = "sqlite"


class PostgresFencing(FencingMachine):
    """The machine on PostgreSQL."""

    backend = "postgres"


def test_no_write_runs_twice_on_the_memory_store() -> None:
    """The model-based search finds no counterexample on the memory store."""
    MemoryFencing.TestCase.settings = _settings(BASE)
    MemoryFencing.TestCase().runTest()


def test_no_write_runs_twice_on_sqlite() -> None:
    """The model-based search finds no counterexample on SQLite."""
    SqliteFencing.TestCase.settings = _settings(BASE // 3)
    SqliteFencing.TestCase().runTest()


def test_no_write_runs_twice_on_postgres() -> None:
    """The model-based search finds no counterexample on PostgreSQL."""
    postgres_dsn()  # skip (or fail in CI) without a server
    PostgresFencing.TestCase.settings = _settings(BASE // 10)
    PostgresFencing.TestCase().runTest()


@pytest.fixture(autouse=True, scope="module")
def _close_shared_stores() -> Any:
    """Close the shared SQLite store after the module."""
    yield
    if _Backends.sqlite is not None:
        asyncio.run(_Backends.sqlite.close())
        _Backends.sqlite = None


IDENTITY_EXAMPLES = int(os.environ.get("OWNLOOP_IDENTITY_EXAMPLES", str(max(BASE // 700, 2))))
IN_PROCESS_IDENTITY_EXAMPLES = max(BASE // 40, 2)


def _identity_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=5,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking re-runs processes
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


class MemoryIdentity(IdentityMachine):
    """The identity machine on the memory store, every segment in this process."""

    backend = "memory"


class PostgresIdentity(IdentityMachine):
    """The identity machine on PostgreSQL, every segment a fresh interpreter."""

    backend = "postgres"


def test_a_calls_identity_survives_crashes_and_deploys_on_the_memory_store() -> None:
    """Generated argument types, crashes, deploys and decisions in one process: none runs twice."""
    MemoryIdentity.TestCase.settings = _identity_settings(IN_PROCESS_IDENTITY_EXAMPLES)
    MemoryIdentity.TestCase().runTest()


def test_a_calls_identity_survives_fresh_interpreters_and_deploys() -> None:
    """Generated argument types, hash seeds, crashes, deploys and decisions: no write runs twice."""
    if IDENTITY_EXAMPLES == 0:
        pytest.skip("OWNLOOP_IDENTITY_EXAMPLES=0 (the mutation gate: its segments are processes)")
    IdentityMachine.TestCase.settings = _identity_settings(IDENTITY_EXAMPLES)
    IdentityMachine.TestCase().runTest()


def test_a_calls_identity_survives_fresh_interpreters_and_deploys_on_postgres() -> None:
    """The identity machine's search, every segment a fresh interpreter, on PostgreSQL."""
    if IDENTITY_EXAMPLES == 0:
        pytest.skip("OWNLOOP_IDENTITY_EXAMPLES=0 (the mutation gate: its segments are processes)")
    postgres_dsn()  # skip (or fail in CI) without a server
    PostgresIdentity.TestCase.settings = _identity_settings(IDENTITY_EXAMPLES)
    PostgresIdentity.TestCase().runTest()
