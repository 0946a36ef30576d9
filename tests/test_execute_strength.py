"""Execution at its exact edges: deadlines, retries, handler receipts, keys and the journal."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest

from ownloop import (
    Agent,
    Limits,
    Receipt,
    RunStatus,
    Sensitive,
    StopReason,
    ToolContext,
    TransientToolError,
)
from ownloop.exceptions import RunLeased
from ownloop.policy import allow_writes
from ownloop.retry import RetryPolicy
from ownloop.store import MemoryRunStore, SqliteRunStore
from ownloop.testing import FakeClock, ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry

from .helpers import calls


def _events(result: Any, kind: str) -> list[Any]:
    return [event for event in result.trace if event.kind == kind]


def _flaky(clock: FakeClock, failures: int, *, retry_after: float | None, work_s: float = 0.0):
    registry = ToolRegistry()
    attempts = Counter[str]()

    @registry.tool(effect="read")
    def flaky(value: int) -> dict[str, int]:
        """Fail a number of times, then succeed.

        Args:
            value: Echoed back.
        """
        attempts["flaky"] += 1
        clock.advance(work_s)
        if attempts["flaky"] <= failures:
            raise TransientToolError("busy", retry_after=retry_after)
        return {"value": value}

    return registry, attempts


def test_no_tool_attempt_starts_after_the_deadline() -> None:
    """A lone call whose turn comes after the deadline passed is not started; the run stops."""
    clock = FakeClock()
    registry = ToolRegistry()
    ran = Counter[str]()

    @registry.tool(
        effect="read", parallel=False
    )  # one at a time: b's turn comes after a's eleven seconds
    def slow(key: str) -> str:
        """Take eleven seconds.

        Args:
            key: Which.
        """
        ran[key] += 1
        clock.advance(11)
        return key

    model = ScriptedModel([calls(("slow", {"key": "a"}), ("slow", {"key": "b"}))])
    result = Agent(model, registry, clock=clock, limits=Limits(deadline_s=10)).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert ran == Counter({"a": 1})
    assert result.detail == (
        "budget deadline_s exhausted before tool attempt: limit 10, "
        "observed 11.00s of wall time elapsed"
    )
    assert [e.call_id for e in _events(result, "tool_started")] == ["call-1"]


def test_no_retry_waits_past_the_deadline() -> None:
    """A retry whose wait would end after the deadline is not slept; the run stops at once."""
    clock = FakeClock()
    registry, attempts = _flaky(clock, 5, retry_after=5, work_s=6)
    model = ScriptedModel([tool_call("flaky", value=1)])
    result = Agent(model, registry, clock=clock, limits=Limits(deadline_s=10)).run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert result.detail == (
        "budget deadline_s exhausted before retry: limit 10, observed 11.00s of wall time "
        "counting the retry wait about to begin"
    )
    assert clock.slept == []
    assert attempts["flaky"] == 1
    assert _events(result, "retry_scheduled") == []


def test_a_retry_that_ends_before_the_deadline_is_waited_for() -> None:
    """A retry whose wait ends before the deadline is slept, traced and attempted."""
    clock = FakeClock()
    registry, attempts = _flaky(clock, 1, retry_after=3, work_s=2)
    model = ScriptedModel([tool_call("flaky", value=1), final("done")])
    result = Agent(model, registry, clock=clock, limits=Limits(deadline_s=10)).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert clock.slept == [3]
    (retry,) = _events(result, "retry_scheduled")
    assert (retry.target, retry.call_id, retry.next_attempt, retry.delay_s, retry.reason) == (
        "tool",
        "call-flaky",
        2,
        3,
        "TransientToolError: busy",
    )
    started = _events(result, "tool_started")
    assert [(e.call_id, e.tool, e.attempt) for e in started] == [
        ("call-flaky", "flaky", 1),
        ("call-flaky", "flaky", 2),
    ]
    assert attempts["flaky"] == 2


def test_the_last_tool_attempt_is_not_retried_past_the_attempt_budget() -> None:
    """With the tool-attempt budget spent, a transient failure ends the run before retrying."""
    clock = FakeClock()
    registry, attempts = _flaky(clock, 5, retry_after=0)
    model = ScriptedModel([tool_call("flaky", value=1)])
    limits = Limits(max_tool_attempts=2, max_retries_per_call=5)
    result = Agent(model, registry, clock=clock, limits=limits).run_sync("q")
    assert (result.status, result.stop_reason) == (
        RunStatus.STOPPED,
        StopReason.MAX_TOOL_ATTEMPTS,
    )
    assert result.detail == "budget max_tool_attempts exhausted before retry: limit 2, observed 2"
    assert attempts["flaky"] == 2
    assert len(clock.slept) == 1


def test_a_retry_policy_that_gives_up_fails_the_call() -> None:
    """A policy giving up ends the run tool_error with its reason, keeping the last receipt."""
    clock = FakeClock()
    registry, attempts = _flaky(clock, 5, retry_after=100)
    model = ScriptedModel([tool_call("flaky", value=1)])
    agent = Agent(model, registry, clock=clock, retry=RetryPolicy(max_retry_after_s=1))
    result = agent.run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_ERROR)
    assert result.detail == (
        "tool 'flaky': asked to retry after 100s, more than the policy's maximum of 1s"
    )
    assert attempts["flaky"] == 1
    assert clock.slept == []
    assert [(r.status, r.message) for r in result.receipts] == [
        ("transient", "TransientToolError: busy")
    ]


def test_retries_per_call_are_capped_with_the_attempt_count() -> None:
    """After max_retries_per_call retries the call fails, naming how many attempts it made."""
    clock = FakeClock()
    registry, attempts = _flaky(clock, 9, retry_after=0)
    model = ScriptedModel([tool_call("flaky", value=1)])
    agent = Agent(model, registry, clock=clock, limits=Limits(max_retries_per_call=2))
    result = agent.run_sync("q")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_ERROR)
    assert result.detail == "tool 'flaky' failed after 3 attempts: TransientToolError: busy"
    assert attempts["flaky"] == 3
    assert [r.status for r in result.receipts] == ["transient"]


def test_a_handler_returning_a_transient_receipt_is_retried() -> None:
    """A transient Receipt returned (not raised) is retried like a transient error."""
    clock = FakeClock()
    registry = ToolRegistry()
    attempts = Counter[str]()

    @registry.tool(effect="read")
    def poll(ctx: ToolContext) -> Receipt | dict[str, bool]:
        """Report not-ready once, then ready.

        Args:
            ctx: Injected by the runtime.
        """
        attempts["poll"] += 1
        if attempts["poll"] == 1:
            return Receipt(call_id=ctx.call_id, tool="poll", status="transient")
        return {"ready": True}

    model = ScriptedModel([tool_call("poll"), final("ready")])
    result = Agent(model, registry, clock=clock).run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert attempts["poll"] == 2
    (retry,) = _events(result, "retry_scheduled")
    assert retry.reason == "transient failure"
    assert [(r.status, r.data) for r in result.receipts] == [("ok", {"ready": True})]


def test_a_handler_receipt_without_a_revision_gets_the_current_one() -> None:
    """With revisions tracked, a handler's own receipt without one is stamped with the current."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def check(ctx: ToolContext) -> Receipt:
        """Return a receipt of its own.

        Args:
            ctx: Injected by the runtime.
        """
        return Receipt(call_id=ctx.call_id, tool="check", data={"passed": True})

    model = ScriptedModel([tool_call("check", "c1"), final("done")])
    result = Agent(model, registry, revision=lambda: "rev-9").run_sync("q")
    assert result.status is RunStatus.COMPLETED
    assert result.receipts == (
        Receipt(call_id="c1", tool="check", data={"passed": True}, revision="rev-9"),
    )
    untracked = Agent(ScriptedModel([tool_call("check", "c1"), final("done")]), registry)
    assert untracked.run_sync("q").receipts[0].revision is None


def test_a_handler_receipt_with_the_current_revision_is_kept_as_returned() -> None:
    """A handler receipt naming the current revision is kept exactly as the handler made it."""
    registry = ToolRegistry()
    mine = Receipt(call_id="c1", tool="check", revision="rev-9", message="mine")

    @registry.tool(effect="read")
    def check() -> Receipt:
        """Return a receipt of its own."""
        return mine

    model = ScriptedModel([tool_call("check", "c1"), final("done")])
    result = Agent(model, registry, revision=lambda: "rev-9").run_sync("q")
    assert result.receipts == (mine,)


def test_a_plain_return_value_becomes_an_ok_receipt_with_data() -> None:
    """A read handler's value is an ok receipt with effect none and the value as data."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look(key: str) -> dict[str, object]:
        """Look up.

        Args:
            key: Which.
        """
        return {"key": key, "n": (1, 2)}

    model = ScriptedModel([tool_call("look", "c1", key="a"), final("done")])
    result = Agent(model, registry, revision=lambda: "r1").run_sync("q")
    assert result.receipts == (
        Receipt(
            call_id="c1",
            tool="look",
            status="ok",
            effect="none",
            revision="r1",
            data={"key": "a", "n": [1, 2]},
        ),
    )
    (finished,) = _events(result, "tool_finished")
    assert (finished.call_id, finished.tool, finished.attempt) == ("c1", "look", 1)
    assert (finished.status, finished.effect, finished.message) == ("ok", "none", None)


def test_read_tools_get_no_idempotency_key_and_writes_get_a_stable_one() -> None:
    """A read handler's context has no idempotency key; a write's is its pending record's key."""
    seen: dict[str, str | None] = {}
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look(ctx: ToolContext) -> str:
        """Read.

        Args:
            ctx: Injected by the runtime.
        """
        seen["look"] = ctx.idempotency_key
        return "ok"

    @registry.tool(effect="write")
    def send(ctx: ToolContext) -> str:
        """Write, then lose the connection.

        Args:
            ctx: Injected by the runtime.
        """
        seen["send"] = ctx.idempotency_key
        raise ConnectionError("dropped")

    model = ScriptedModel([tool_call("look", "c1"), tool_call("send", "c2"), final("sent")])
    result = Agent(model, registry, policy=allow_writes("send")).run_sync("q", run_id="run-k")
    assert seen["look"] is None
    assert seen["send"] is not None
    assert [(p.call_id, p.idempotency_key) for p in result.pending] == [("c2", seen["send"])]


def test_an_in_doubt_write_is_unknown_with_the_error_named() -> None:
    """A write that raised may have happened: status and effect unknown, the error named."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def send() -> str:
        """Write, then lose the connection."""
        raise ConnectionError("dropped " + "x" * 2000)

    model = ScriptedModel([tool_call("send", "c1"), final("sent")])
    result = Agent(model, registry, policy=allow_writes("send")).run_sync("q")
    (receipt,) = result.receipts
    assert (receipt.status, receipt.effect) == ("unknown", "unknown")
    assert receipt.message == ("ConnectionError: dropped " + "x" * 2000)[:1000]
    assert result.stop_reason is StopReason.UNRESOLVED_EFFECT


def test_a_read_that_times_out_is_transient_and_other_errors_are_errors() -> None:
    """A read's TimeoutError is retried; its other exceptions are error receipts, not retried."""
    clock = FakeClock()
    registry = ToolRegistry()
    attempts = Counter[str]()

    @registry.tool(effect="read")
    def fetch(key: str) -> str:
        """Time out once, then fail for good.

        Args:
            key: Which.
        """
        attempts[key] += 1
        if attempts[key] == 1:
            raise TimeoutError("slow")
        raise ValueError("bad key")

    model = ScriptedModel([tool_call("fetch", "c1", key="a"), final("gave up")])
    result = Agent(model, registry, clock=clock).run_sync("q")
    assert attempts["a"] == 2
    assert [(r.status, r.effect, r.message) for r in result.receipts] == [
        ("error", "none", "ValueError: bad key")
    ]


def test_the_handler_is_told_the_run_deadline() -> None:
    """The context's deadline is now plus the time left before the run's deadline."""
    clock = FakeClock()
    seen: list[ToolContext] = []
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look(ctx: ToolContext) -> str:
        """Read.

        Args:
            ctx: Injected by the runtime.
        """
        seen.append(ctx)
        return "ok"

    def model_step(request: Any) -> Any:
        clock.advance(4)
        return tool_call("look", "c1") if request.step == 1 else final("done")

    from ownloop.testing import FunctionModel

    agent = Agent(FunctionModel(model_step), registry, clock=clock, limits=Limits(deadline_s=10))
    start = clock.now()
    result = agent.run_sync("q", run_id="run-d")
    assert result.status is RunStatus.COMPLETED
    (ctx,) = seen
    assert ctx.deadline == start + timedelta(seconds=10)
    assert (ctx.run_id, ctx.call_id, ctx.tool, ctx.attempt) == ("run-d", "c1", "look", 1)


def test_a_sensitive_value_quoted_in_an_error_stays_out_of_the_trace() -> None:
    """An error message quoting a Sensitive argument is redacted in the trace."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def login(user: str, password: Annotated[str, Sensitive()]) -> str:
        """Log in.

        Args:
            user: Who.
            password: The secret.
        """
        raise ValueError(f"wrong password {password} for {user}")

    model = ScriptedModel([tool_call("login", "c1", user="bob", password="pw-zebra-7"), final("x")])
    result = Agent(model, registry).run_sync("q")
    text = "".join(event.model_dump_json() for event in result.trace)
    assert "pw-zebra-7" not in text
    assert "bob" in text


def _journal_agent(path: Path, registry: ToolRegistry, steps: list[Any]) -> Agent:
    return Agent(
        ScriptedModel(steps),
        registry,
        policy=allow_writes("send"),
        store=SqliteRunStore(path),
        clock=FakeClock(),
    )


def test_the_journal_intent_records_the_idempotency_key_the_handler_saw(tmp_path: Path) -> None:
    """A durable write journals its intent with the same idempotency key its handler was given."""
    seen: list[ToolContext] = []
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def send(to: str, ctx: ToolContext) -> str:
        """Send.

        Args:
            to: Whom.
            ctx: Injected by the runtime.
        """
        seen.append(ctx)
        return "sent"

    agent = _journal_agent(
        tmp_path / "runs.db", registry, [tool_call("send", "c1", to="a"), final("sent")]
    )
    result = agent.run_sync("q", run_id="run-j")
    (entry,) = asyncio.run(agent.store.journal("run-j"))  # type: ignore[union-attr]
    assert (entry.intent.run_id, entry.intent.provider_call_id, entry.intent.tool) == (
        "run-j",
        "c1",
        "send",
    )
    assert entry.intent.call_id == "call#1"  # the loop's journal key, not the model's id
    assert entry.intent.idempotency_key == seen[0].idempotency_key
    assert entry.intent.idempotency_key is not None
    assert entry.receipt == result.receipts[0]
    assert entry.intent.recorded_at == FakeClock().now()


class _Crash(BaseException):
    """Stands for the process dying inside a write (not an Exception: nothing catches it)."""


def test_a_write_the_process_died_in_is_replayed_as_unknown(tmp_path: Path) -> None:
    """Resumed after dying mid-write, the write is not run again; its effect is unknown."""
    runs = Counter[str]()
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def send(to: str) -> str:
        """Send, dying the first time.

        Args:
            to: Whom.
        """
        runs[to] += 1
        if runs[to] == 1:
            raise _Crash
        return "sent"

    path = tmp_path / "runs.db"
    steps = [tool_call("send", "c1", to="a"), final("sent")]
    with pytest.raises(_Crash):
        _journal_agent(path, registry, steps).run_sync("q", run_id="run-x")
    result = _journal_agent(path, registry, steps[1:]).resume_sync("run-x")
    assert runs == Counter({"a": 1})
    (receipt,) = result.receipts
    assert (receipt.call_id, receipt.tool, receipt.status, receipt.effect) == (
        "c1",
        "send",
        "unknown",
        "unknown",
    )
    assert receipt.message == (
        "the process stopped after this write started and before its outcome was recorded"
    )
    finished = _events(result, "tool_finished")[-1]
    assert (finished.call_id, finished.attempt, finished.status, finished.effect) == (
        "c1",
        1,
        "unknown",
        "unknown",
    )
    assert (finished.message, finished.duration_s) == (
        "from the write journal; not executed again",
        0.0,
    )
    assert result.stop_reason is StopReason.UNRESOLVED_EFFECT


@pytest.mark.parametrize("before_s", [4.0, 9.5])
def test_the_handler_is_told_attempt_revision_and_the_exact_time_left(before_s: float) -> None:
    """Each attempt's context names its number, the revision before it, and the run's deadline."""
    clock = FakeClock()
    seen: list[ToolContext] = []
    registry = ToolRegistry()
    revision = ["r0"]

    @registry.tool(effect="read")
    def look(ctx: ToolContext) -> str:
        """Fail once, then read.

        Args:
            ctx: Injected by the runtime.
        """
        seen.append(ctx)
        revision[0] = f"r{len(seen)}"
        if len(seen) == 1:
            raise TransientToolError("busy", retry_after=0)
        return "ok"

    from ownloop.testing import FunctionModel

    def model_step(request: Any) -> Any:
        if request.step == 1:
            clock.advance(before_s)
            return tool_call("look", "c1")
        return final("done")

    agent = Agent(
        FunctionModel(model_step),
        registry,
        clock=clock,
        limits=Limits(deadline_s=10),
        revision=lambda: revision[0],
    )
    clock.advance(100)  # the run starts on a clock that has been running
    start = clock.now()
    agent.run_sync("q")
    assert [(ctx.attempt, ctx.revision) for ctx in seen] == [(1, "r0"), (2, "r1")]
    assert [ctx.deadline for ctx in seen] == [start + timedelta(seconds=10)] * 2


def test_tool_finished_reports_duration_and_the_failure_message() -> None:
    """tool_finished carries the handler's own duration and the failure's message."""
    clock = FakeClock()
    registry, _ = _flaky(clock, 1, retry_after=0, work_s=2)
    from ownloop.testing import FunctionModel

    def model_step(request: Any) -> Any:
        if request.step == 1:
            clock.advance(3)
            return tool_call("flaky", "c1", value=1)
        return final("done")

    result = Agent(FunctionModel(model_step), registry, clock=clock).run_sync("q")
    finished = _events(result, "tool_finished")
    assert [(e.attempt, e.status, e.duration_s, e.message) for e in finished] == [
        (1, "transient", 2.0, "TransientToolError: busy"),
        (2, "ok", 2.0, None),
    ]


def test_an_unbelievable_write_receipt_is_pending_at_its_own_revision() -> None:
    """A write whose receipt is invalid is pending with the revision its receipt named."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def publish() -> Receipt:
        """Return a receipt for another call."""
        return Receipt(call_id="other", tool="publish", effect="applied", revision="r-x")

    model = ScriptedModel([tool_call("publish", "c1")])
    result = Agent(model, registry, policy=allow_writes("publish")).run_sync("q")
    (pending,) = result.pending
    assert (pending.call_id, pending.revision) == ("c1", "r-x")
    assert pending.reason == (
        "invalid receipt: receipt names call 'other' of tool 'publish', "
        "expected call 'c1' of 'publish'"
    )
    assert result.detail == (
        "'publish': receipt names call 'other' of tool 'publish', expected call 'c1' of 'publish'"
    )


def _taken_over_on_first_attempt(effect: str) -> tuple[MemoryRunStore, ToolRegistry, Counter[str]]:
    """A tool that fails transiently after another worker took its run over (first attempt)."""
    store = MemoryRunStore()
    registry = ToolRegistry()
    runs = Counter[str]()

    @registry.tool(effect=effect)
    def push(to: str) -> str:
        """Push; the first attempt loses the run to another worker, then fails transiently.

        Args:
            to: Where.
        """
        runs[to] += 1
        if runs[to] == 1:
            asyncio.run(store.acquire_lease("run-t", "worker-b", 60, take_over=True))
            raise TransientToolError("busy", retry_after=0)
        return "pushed"

    return store, registry, runs


def test_a_retried_write_is_fenced_from_its_first_retry() -> None:
    """A write's second attempt first confirms the lease: a worker that lost the run stops there."""
    store, registry, runs = _taken_over_on_first_attempt("write")
    model = ScriptedModel([tool_call("push", "c1", to="a"), final("done")])
    agent = Agent(model, registry, policy=allow_writes("push"), store=store)
    with pytest.raises(RunLeased):
        agent.run_sync("q", run_id="run-t")
    assert runs == Counter({"a": 1})


def test_a_retried_read_is_not_fenced() -> None:
    """Only writes confirm the lease before a retry; a read is retried, harmless to repeat."""
    store, registry, runs = _taken_over_on_first_attempt("read")
    model = ScriptedModel([tool_call("push", "c1", to="a"), final("done")])
    agent = Agent(model, registry, store=store)
    with pytest.raises(RunLeased):
        agent.run_sync("q", run_id="run-t")
    assert runs == Counter({"a": 2})
