"""Threads: `agent.run(task, thread_id=...)` continues a stored conversation, one point at once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop import (
    Agent,
    Approval,
    ConfigurationError,
    InputRejected,
    MemoryRunStore,
    RunStatus,
    SqliteRunStore,
    ThreadBusy,
    ToolRegistry,
    UnknownEffectError,
    citations_observed,
)
from ownloop.cli import main
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore, RunStore, ThreadStore
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call
from tests.durable_support import fresh_schema, postgres_dsn

ROOT = Path(__file__).resolve().parents[1]
Run = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture
def run() -> Iterator[Run]:
    """One event loop per test, so a PostgreSQL store keeps its connection."""
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    loop.close()


def _open(kind: str, tmp_path: Path, schema: str) -> RunStore:
    if kind == "memory":
        return MemoryRunStore()
    if kind == "sqlite":
        return SqliteRunStore(tmp_path / "runs.db")
    return PostgresRunStore(postgres_dsn(), schema=schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(
    request: pytest.FixtureRequest, tmp_path: Path, run: Run
) -> Iterator[Callable[[], RunStore]]:
    """Opens each store on one empty database: a second opening is another worker's view."""
    schema, opened = fresh_schema(), []
    memory = MemoryRunStore()

    def open_store() -> RunStore:
        store = memory if request.param == "memory" else _open(request.param, tmp_path, schema)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        close = getattr(store, "close", None)
        if close is not None:
            run(close())


@pytest.fixture
def store(stores: Callable[[], RunStore]) -> RunStore:
    """Each store, empty."""
    return stores()


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def weather(city: str) -> list[dict[str, str]]:
        """Look up the weather.

        Args:
            city: The city.
        """
        return [{"id": f"W-{city}", "title": f"{city}: sunny"}]

    @registry.tool(effect="write", requires_approval=True)
    def send_reply(text: str) -> dict[str, str]:
        """Send a reply.

        Args:
            text: The reply.
        """
        return {"sent": text}

    return registry


def _agent(store: RunStore, *steps: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(steps))
    agent = Agent(model, _registry(), store=store, validators=[citations_observed()])
    return agent, model


def test_a_store_records_a_thread_with_a_compare_and_set_on_its_end(
    store: RunStore, run: Run
) -> None:
    """Runs are appended in order only after the thread's last run; a stale append is refused."""
    assert isinstance(store, ThreadStore)
    assert run(store.thread_runs("t-1")) == []
    assert run(store.append_to_thread("t-1", "r1", after=None)) == 1
    assert run(store.append_to_thread("t-1", "r2", after="r1")) == 2
    with pytest.raises(ThreadBusy, match="thread t-1 moved on: run r3 was to continue run r1, but"):
        run(store.append_to_thread("t-1", "r3", after="r1"))
    with pytest.raises(ThreadBusy, match="its start, but its last run is now run r2"):
        run(store.append_to_thread("t-1", "r3", after=None))
    with pytest.raises(ThreadBusy, match="run r1 is already in thread t-1"):
        run(store.append_to_thread("t-2", "r1", after=None))
    assert run(store.append_to_thread("t-2", "r9", after=None)) == 1
    assert run(store.thread_runs("t-1")) == ["r1", "r2"]
    assert run(store.thread_runs("t-2")) == ["r9"]
    with pytest.raises(InputRejected, match="thread_id must be"):
        run(store.append_to_thread("", "r4", after=None))


def test_a_thread_continues_its_last_run_and_cites_its_evidence(
    stores: Callable[[], RunStore], run: Run
) -> None:
    """Another worker's follow-up starts from the thread's last turns and may cite its evidence."""
    store = stores()
    agent, _ = _agent(store, tool_call("weather", city="Shanghai"), final("Sunny [W-Shanghai]."))
    first = run(agent.run("Weather in Shanghai?", thread_id="chat-1"))
    follow, model = _agent(stores(), final("As I said, sunny [W-Shanghai]."))
    second = run(follow.run("And tomorrow?", thread_id="chat-1"))
    assert second.status is RunStatus.COMPLETED
    assert second.conversation is not None
    assert (second.conversation.continues, second.conversation.thread_id) == (
        first.run_id,
        "chat-1",
    )
    assert first.conversation is not None
    assert first.conversation.thread_id == "chat-1"
    assert [getattr(m, "content", None) for m in model.requests[0].messages][-2:] == [
        "Sunny [W-Shanghai].",
        "And tomorrow?",
    ]
    assert run(store.thread_runs("chat-1")) == [first.run_id, second.run_id]
    reloaded = run(stores().get(second.run_id)).snapshot  # as a third worker reads it
    assert reloaded.conversation == second.conversation
    assert [(item.id, item.from_run) for item in reloaded.evidence] == [
        ("W-Shanghai", first.run_id)
    ]


class _Gate:
    """A store whose thread reads wait for each other: two follow-ups read the same last run."""

    def __init__(self, inner: RunStore, barrier: asyncio.Barrier) -> None:
        self._inner = inner
        self._barrier = barrier

    async def thread_runs(self, thread_id: str) -> list[str]:
        runs: list[str] = await self._inner.thread_runs(thread_id)  # type: ignore[attr-defined]
        await self._barrier.wait()
        return runs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_two_follow_ups_of_one_point_the_second_is_refused(
    stores: Callable[[], RunStore], run: Run
) -> None:
    """Two workers' follow-ups that read the same last run: one runs, the other is refused unrun."""
    store = stores()
    agent, _ = _agent(store, final("hello"))
    first = run(agent.run("hi", thread_id="chat-2"))
    barrier = asyncio.Barrier(2)
    one, one_model = _agent(_Gate(stores(), barrier), final("one"))  # type: ignore[arg-type]
    two, two_model = _agent(_Gate(stores(), barrier), final("two"))  # type: ignore[arg-type]

    async def both() -> list[Any]:
        return await asyncio.gather(
            one.run("first follow-up", thread_id="chat-2"),
            two.run("second follow-up", thread_id="chat-2"),
            return_exceptions=True,
        )

    outcomes = run(both())
    refused = [outcome for outcome in outcomes if isinstance(outcome, ThreadBusy)]
    finished = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    assert len(refused) == len(finished) == 1
    assert f"was to continue run {first.run_id}, but its last run is now run" in str(refused[0])
    assert len(one_model.requests) + len(two_model.requests) == 1  # the refused one never ran
    assert run(store.thread_runs("chat-2")) == [first.run_id, finished[0].run_id]


def test_a_follow_up_while_the_last_run_is_running_is_refused(run: Run) -> None:
    """A follow-up that finds the thread's last run still running is refused, naming it."""
    store = MemoryRunStore()
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request: Any) -> Any:
        entered.set()
        await release.wait()
        return final("done")

    slow_agent = Agent(FunctionModel(slow), _registry(), store=store)
    follow, model = _agent(store, final("never"))

    async def race() -> str:
        task = asyncio.ensure_future(slow_agent.run("long", thread_id="chat-r"))
        await entered.wait()
        try:
            await follow.run("next", thread_id="chat-r")
        except ThreadBusy as busy:
            return str(busy)
        finally:
            release.set()
            await task
        return "not refused"

    message = run(race())
    assert "is still running" in message
    assert model.requests == []


def test_a_thread_whose_last_run_is_paused_waits_for_its_decision(
    store: RunStore, run: Run
) -> None:
    """A follow-up is refused, naming the paused run, until its approval is decided and resumed."""
    agent, _ = _agent(store, tool_call("send_reply", text="hi"), final("Sent."))
    paused = run(agent.run("reply", thread_id="chat-3"))
    assert paused.status is RunStatus.PAUSED
    follow, model = _agent(store, final("next"))
    with pytest.raises(ThreadBusy, match=f"last run {paused.run_id} is paused waiting for"):
        run(follow.run("and then?", thread_id="chat-3"))
    assert model.requests == []
    (request,) = paused.approval_requests
    decision = Approval(request_id=request.id, approved=True, approver="alice")
    assert run(agent.resume(paused.run_id, approvals=[decision])).status is RunStatus.COMPLETED
    assert run(follow.run("and then?", thread_id="chat-3")).status is RunStatus.COMPLETED


def test_a_thread_needs_a_store_that_keeps_threads() -> None:
    """Without a store, or with history too, a thread run is refused before anything runs."""
    agent = Agent(ScriptedModel([]), _registry())
    with pytest.raises(ConfigurationError, match="needs Agent"):
        agent.run_sync("x", thread_id="t")
    stored = Agent(ScriptedModel([]), _registry(), store=MemoryRunStore())
    with pytest.raises(ConfigurationError, match="not both"):
        stored.run_sync("x", thread_id="t", history=[])
    with pytest.raises(InputRejected, match="thread_id must be"):
        stored.run_sync("x", thread_id="t" * 200)
    with pytest.raises(InputRejected, match="unpaired surrogate"):
        stored.run_sync("x", thread_id="t\ud800")


def test_a_thread_is_continued_in_another_process(tmp_path: Path) -> None:
    """A second process continues the thread from the SQLite file: the earlier turns are read."""
    database = tmp_path / "runs.db"
    agent, _ = _agent(
        SqliteRunStore(database), tool_call("weather", city="Suzhou"), final("Sunny [W-Suzhou].")
    )
    first = agent.run_sync("Weather in Suzhou?", thread_id="chat-p")
    script = (
        "import sys\n"
        "from ownloop import Agent, SqliteRunStore\n"
        "from ownloop.testing import ScriptedModel, final\n"
        "from tests.test_threads import _registry\n"
        "from ownloop import citations_observed\n"
        "model = ScriptedModel([final('Still sunny [W-Suzhou].')])\n"
        "agent = Agent(model, _registry(), store=SqliteRunStore(sys.argv[1]),\n"
        "              validators=[citations_observed()])\n"
        "result = agent.run_sync('And later?', thread_id='chat-p')\n"
        "texts = [getattr(m, 'content', None) for m in model.requests[0].messages]\n"
        "print(result.status.value, result.conversation.continues, texts[0], texts[-1], sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(database)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split("|") == [
        "completed",
        first.run_id,
        "Weather in Suzhou?",
        "And later?",
    ]


def test_runs_list_shows_a_threads_runs_first_to_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ownloop runs list --thread T`` lists the thread's runs in order, filters applying."""
    database = tmp_path / "runs.db"
    store = SqliteRunStore(database)
    first = _agent(store, final("one"))[0].run_sync("hi", thread_id="chat-c", run_id="r-one")
    second = _agent(store, final("two"))[0].run_sync("and?", thread_id="chat-c", run_id="r-two")
    _agent(store, final("other"))[0].run_sync("elsewhere", run_id="r-other")
    capsys.readouterr()
    assert main(["runs", "list", "--db", str(database), "--thread", "chat-c"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == [first.run_id, second.run_id]
    argv = ["runs", "list", "--db", str(database), "--thread", "chat-c", "--json", "--limit", "1"]
    assert main(argv) == 0
    assert [json.loads(line)["run_id"] for line in capsys.readouterr().out.splitlines()] == [
        "r-one"
    ]
    assert main([*argv[:6], "--state", "paused"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    assert main(["runs", "show", "r-two", "--db", str(database)]) == 0
    assert "continues:   run r-one in thread chat-c (2 earlier messages, 0 evidence items)" in (
        capsys.readouterr().out
    )
    assert main(["runs", "show", "r-one", "--db", str(database)]) == 0
    assert "continues:   nothing yet (the thread's first run) in thread chat-c" in (
        capsys.readouterr().out
    )
    assert main(["runs", "show", "r-other", "--db", str(database)]) == 0
    assert "continues:" not in capsys.readouterr().out
    with sqlite3.connect(database) as raw:  # as a prune would: the thread's record stays
        raw.execute("DELETE FROM runs WHERE run_id = 'r-one'")
    assert main(argv[:6]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["r-two"]


class _NoThreads:
    """A custom store without thread methods."""

    def __init__(self, inner: RunStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("append_to_thread", "thread_runs"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_threads_is_refused_for_a_thread_run() -> None:
    """A custom store that keeps no threads cannot run a thread; a plain run still works."""
    store: Any = _NoThreads(MemoryRunStore())
    agent, _ = _agent(store, final("fine"))
    with pytest.raises(ConfigurationError, match="keeps no threads"):
        agent.run_sync("x", thread_id="t")
    assert agent.run_sync("x").status is RunStatus.COMPLETED


def test_a_thread_whose_last_run_is_not_stored_or_unresolved_is_refused(run: Run) -> None:
    """A last run not stored (starting, or pruned) or with an unknown effect blocks a follow-up."""
    store = MemoryRunStore()
    run(store.append_to_thread("chat-u", "ghost", after=None))
    follow, model = _agent(store, final("never"))
    with pytest.raises(ThreadBusy, match="its last run ghost is not stored yet"):
        run(follow.run("next", thread_id="chat-u"))
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def transfer(amount: int) -> dict[str, int]:
        """Move money.

        Args:
            amount: How much.
        """
        raise UnknownEffectError("the bank timed out after the request was sent")

    unsure = Agent(
        ScriptedModel([tool_call("transfer", amount=5), final("It may have gone through.")]),
        registry,
        store=store,
        policy=allow_writes("transfer"),
    )
    unresolved = run(unsure.run("pay", thread_id="chat-v"))
    assert unresolved.status is RunStatus.UNRESOLVED
    with pytest.raises(ThreadBusy, match=f"{unresolved.run_id} has writes whose effect is unknown"):
        run(follow.run("next", thread_id="chat-v"))
    assert model.requests == []
