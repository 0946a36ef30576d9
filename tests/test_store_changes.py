"""Checkpoints that carry only what changed: the SQL stores append a run's new items.

An agent whose store takes a checkpoint's changes alone (`ChangeStore`) sends, after a run's first
checkpoint, only the trace events, receipts and evidence added since the last one; the store keeps
the rest. Proves that what is loaded — by this instance or another — is the whole run, that a
rewritten evidence item is saved whole, that a resumed run starts whole again, and that stores or
wrappers that cannot take changes get whole snapshots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop import Agent, Approval, ContextPolicy, Limits, RunStatus
from ownloop.contracts import (
    ContextCompacted,
    Lease,
    ModelRequested,
    Receipt,
    RunResult,
    RunSnapshot,
    StopReason,
    UserMessage,
)
from ownloop.policy import allow_writes
from ownloop.store import (
    MemoryRunStore,
    PostgresRunStore,
    RunStore,
    SqliteRunStore,
    takes_changes,
)
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry
from tests.durable_support import T0, VERSIONS, fresh_schema, postgres_dsn, snapshot


class Recording:
    """Forwards to a store and keeps each saved snapshot with the ``kept`` it came with."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.saves: list[tuple[RunSnapshot, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def save(self, snapshot: RunSnapshot, **options: Any) -> int:
        """Record, then save."""
        self.saves.append((snapshot, options.get("kept")))
        return await self.store.save(snapshot, **options)


class WholeOnly(Recording):
    """A wrapper whose own ``save`` takes no ``kept``: it must get whole snapshots."""

    async def save(  # type: ignore[override]
        self, snapshot: RunSnapshot, *, expected_version: int | None, lease: Lease | None = None
    ) -> int:
        """Record, then save."""
        self.saves.append((snapshot, None))
        return await self.store.save(snapshot, expected_version=expected_version, lease=lease)


def _registry(approve: bool = False) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(key: str) -> dict[str, Any]:
        """Read a record.

        Args:
            key: The record.
        """
        return {"id": key, "title": f"record {key}"}

    @registry.tool(effect="write", requires_approval=approve)
    def record(key: str) -> str:
        """Write a record.

        Args:
            key: The record.
        """
        return f"stored {key}"

    return registry


def _script(keys: list[str]) -> list[Any]:
    calls = [tool_call("lookup", f"r{n}", key=key) for n, key in enumerate(keys)]
    return [*calls, tool_call("record", "w1", key="done"), final("done")]


def _agent(store: Any, keys: list[str], approve: bool = False) -> Agent:
    return Agent(
        ScriptedModel(_script(keys)), _registry(approve), policy=allow_writes("record"), store=store
    )


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop per test, so PostgreSQL stores keep their connections."""
    running = asyncio.new_event_loop()
    yield running
    running.close()


@pytest.fixture(params=["sqlite", "postgres"])
def opener(
    request: pytest.FixtureRequest, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> Iterator[Any]:
    """Opens store instances on one fresh database of each SQL kind."""
    schema, opened = fresh_schema(), []
    dsn = postgres_dsn() if request.param == "postgres" else ""

    def open_store() -> SqliteRunStore | PostgresRunStore:
        store = (
            SqliteRunStore(tmp_path / "runs.db")
            if request.param == "sqlite"
            else PostgresRunStore(dsn, schema=schema)
        )
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        loop.run_until_complete(store.close())


def _seqs(snapshot: RunSnapshot) -> list[int]:
    return [event.seq for event in snapshot.trace]


def test_checkpoints_after_the_first_carry_only_new_items_and_load_whole(
    opener: Any, loop: asyncio.AbstractEventLoop
) -> None:
    """After the first checkpoint each carries only its new items; any instance loads them all."""
    recording = Recording(opener())
    result = loop.run_until_complete(_agent(recording, ["a", "b", "c"]).run("go", run_id="run"))
    assert result.status is RunStatus.COMPLETED
    (first, none), *later = recording.saves
    assert none is None
    assert _seqs(first)[0] == 1
    assert later
    assert all(kept is not None for _, kept in later)
    for saved, kept in later:  # each continues exactly where the stored items end
        seqs = _seqs(saved)
        assert seqs == list(range(kept["trace"] + 1, kept["trace"] + 1 + len(seqs)))
        assert len(saved.trace) < len(result.trace)
    receipts = [len(saved.receipts) for saved, _ in later]
    assert sum(receipts) + len(first.receipts) == len(result.receipts) == 4
    for store in (recording.store, opener()):  # this instance and another process's
        stored = loop.run_until_complete(store.get("run"))
        assert stored is not None
        assert stored.snapshot.trace == result.trace
        assert stored.snapshot.receipts == result.receipts
        assert stored.snapshot.evidence == result.evidence
        assert stored.snapshot.messages == result.messages
        assert stored.snapshot.result is not None
        assert stored.snapshot.result.trace == result.trace  # stored once, shared


def test_an_evidence_item_cited_again_is_saved_whole(
    opener: Any, loop: asyncio.AbstractEventLoop
) -> None:
    """A known evidence item changed in place makes the next checkpoint carry all evidence."""
    recording = Recording(opener())
    result = loop.run_until_complete(_agent(recording, ["a", "b", "a"]).run("go", run_id="run"))
    assert [item.call_ids for item in result.evidence] == [("r0", "r2"), ("r1",)]
    whole = [kept for _, kept in recording.saves if kept is not None and kept["evidence"] == 0]
    assert whole, "the save after the rewrite sends every evidence item"
    stored = loop.run_until_complete(opener().get("run"))
    assert stored is not None
    assert stored.snapshot.evidence == result.evidence


def test_a_resumed_run_saves_whole_once_then_only_changes(
    opener: Any, loop: asyncio.AbstractEventLoop
) -> None:
    """A resumed run's first checkpoint is whole; the stored trace is the whole run's."""
    paused = loop.run_until_complete(_agent(opener(), ["a", "b"], True).run("go", run_id="run"))
    assert paused.status is RunStatus.PAUSED
    recording = Recording(opener())
    request = paused.approval_requests[0]
    approval = Approval(request_id=request.id, approved=True, approver="ops")
    agent = Agent(
        ScriptedModel([final("done")]),
        _registry(True),
        policy=allow_writes("record"),
        store=recording,
    )
    result = loop.run_until_complete(agent.resume("run", approvals=[approval]))
    assert result.status is RunStatus.COMPLETED
    kinds = [kept for _, kept in recording.saves]
    assert kinds[0] is None
    assert all(kept is not None for kept in kinds[1:])
    assert len(kinds) > 1
    assert _seqs(recording.saves[0][0])[0] == 1
    stored = loop.run_until_complete(opener().get("run"))
    assert stored is not None
    assert stored.snapshot.trace == result.trace
    assert _seqs(stored.snapshot) == list(range(1, len(result.trace) + 1))


def test_a_wrapper_whose_save_takes_no_kept_gets_whole_snapshots(
    opener: Any, loop: asyncio.AbstractEventLoop
) -> None:
    """A store wrapper that cannot take changes gets every checkpoint whole."""
    wrapper = WholeOnly(opener())
    result = loop.run_until_complete(_agent(wrapper, ["a", "b"]).run("go", run_id="run"))
    assert result.status is RunStatus.COMPLETED
    assert all(_seqs(snapshot)[0] == 1 for snapshot, _ in wrapper.saves)
    assert wrapper.saves[-1][0].trace == result.trace


class _Says:
    saves_changes: Any = True

    def __init__(self, says: Any) -> None:
        self.saves_changes = says

    async def save(self, snapshot: RunSnapshot, *, kept: Any = None) -> int:
        """A save that takes ``kept`` by name."""
        return 1


def test_which_stores_take_changes(tmp_path: Path) -> None:
    """Only a store that says so, with a ``save`` taking ``kept``, is handed changes alone."""
    sqlite = SqliteRunStore(tmp_path / "runs.db")
    try:
        assert takes_changes(sqlite)
        assert takes_changes(Recording(sqlite))  # forwards ``**options``
        assert not takes_changes(WholeOnly(sqlite))
    finally:
        asyncio.run(sqlite.close())
    assert not takes_changes(MemoryRunStore())
    assert takes_changes(_Says(True))
    assert not takes_changes(_Says(1))  # only True says so
    assert not takes_changes(_Says(False))
    bare = _Says(True)
    bare.save = len  # type: ignore[method-assign,assignment]  # a builtin: no signature
    assert not takes_changes(bare)
    nothing = _Says(True)
    nothing.save = None  # type: ignore[method-assign,assignment]
    assert not takes_changes(nothing)
    assert not takes_changes(object())
    assert not takes_changes(type("NoSave", (), {"saves_changes": True})())


def test_a_long_run_holds_a_bounded_trace_and_the_store_holds_it_all(tmp_path: Path) -> None:
    """Past 2,000 events a run holds only its latest; its result ends the whole stored trace."""
    steps = 420  # about six events a step: past 2,000 events
    script = [tool_call("lookup", f"r{n}", key=f"k{n}") for n in range(steps)] + [final("done")]
    agent = Agent(
        ScriptedModel(script),
        _registry(),
        policy=allow_writes("record"),
        store=SqliteRunStore(tmp_path / "runs.db"),
        context=ContextPolicy(max_request_tokens=1_000),
        limits=Limits(
            max_steps=steps + 1,
            max_tool_calls=steps,
            max_tool_attempts=steps,
            max_model_attempts=steps + 1,
        ),
    )
    result = agent.run_sync("go", run_id="long")
    assert result.status is RunStatus.COMPLETED

    async def load() -> Any:
        async with SqliteRunStore(tmp_path / "runs.db") as other:  # another process's view
            return await other.get("long")

    stored = asyncio.run(load())
    assert stored is not None
    whole = stored.snapshot.trace
    assert [event.seq for event in whole] == list(range(1, len(whole) + 1))
    assert len(whole) > 2_000
    assert 1_000 <= len(result.trace) <= 2_000  # the latest events, ending where the run ended
    assert result.trace == whole[len(whole) - len(result.trace) :]
    assert stored.snapshot.result is not None
    assert stored.snapshot.result.trace == whole  # the stored result holds the whole trace
    assert len(result.receipts) == len(stored.snapshot.receipts) == steps
    compactions = [event for event in whole if isinstance(event, ContextCompacted)]
    assert len(compactions) > 1
    placeholders = [
        message.content
        for message in result.messages
        if isinstance(message, UserMessage) and message.content.startswith("[Context compacted")
    ]
    assert placeholders
    total = sum(event.dropped_turns for event in compactions)
    assert placeholders[-1].startswith(f"[Context compacted by the runtime: {total} earlier")


def _event(seq: int) -> Any:
    return ModelRequested(
        run_id="r", seq=seq, at=T0, step=1, attempt=1, messages=0, request_chars=0, tools=0
    )


def _receipt(n: int) -> Receipt:
    return Receipt(call_id=f"c{n}", tool="t", status="ok", effect="none")


@pytest.mark.parametrize(
    ("result_seqs", "result_receipts", "loaded_seqs", "loaded_receipts"),
    [
        ((2, 3, 4, 5), 2, (1, 2, 3, 4, 5), 2),  # the run's latest events: shared, loads whole
        ((5,), 2, (1, 2, 3, 4, 5), 2),  # fewer than the new items, ending with them: shared
        ((1, 2, 3, 4, 5), 0, (1, 2, 3, 4, 5), 0),  # no receipts in the result: its own ()
        ((3, 5), 1, (3, 5), 1),  # not the run's end: kept as the result's own
        ((1, 2, 3, 4, 4, 5), 2, (1, 2, 3, 4, 4, 5), 2),  # longer than the whole part: its own
        ((1, 2, 3, 4, 9), 2, (1, 2, 3, 4, 9), 2),  # ends elsewhere: its own
    ],
)
def test_a_finished_run_given_new_items_alone_shares_its_results_tail(
    tmp_path: Path,
    result_seqs: tuple[int, ...],
    result_receipts: int,
    loaded_seqs: tuple[int, ...],
    loaded_receipts: int,
) -> None:
    """A result ending with the new items is stored once and loads whole; any other is its own."""

    async def scenario() -> tuple[RunSnapshot, RunSnapshot]:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            first = snapshot("run").model_copy(
                update={"trace": tuple(map(_event, (1, 2, 3))), "receipts": (_receipt(1),)}
            )
            version = await store.save(first, expected_version=None)
            result = RunResult(
                run_id="run",
                status=RunStatus.COMPLETED,
                stop_reason=StopReason.FINAL_OUTPUT,
                versions=VERSIONS,
                trace=tuple(map(_event, result_seqs)),
                receipts=tuple(map(_receipt, range(1, result_receipts + 1))),
            )
            last = first.model_copy(
                update={
                    "state": "finished",
                    "trace": tuple(map(_event, (4, 5))),
                    "receipts": (_receipt(2),),
                    "result": result,
                }
            )
            kept = {"trace": 3, "receipts": 1, "evidence": 0}
            await store.save(last, expected_version=version, kept=kept)
            mine = await store.get("run")
        async with SqliteRunStore(tmp_path / "runs.db") as other:
            theirs = await other.get("run")
        assert mine is not None
        assert theirs is not None
        return mine.snapshot, theirs.snapshot

    for loaded in asyncio.run(scenario()):
        assert _seqs(loaded) == [1, 2, 3, 4, 5]
        assert [receipt.call_id for receipt in loaded.receipts] == ["c1", "c2"]
        assert loaded.result is not None
        assert tuple(event.seq for event in loaded.result.trace) == loaded_seqs
        assert len(loaded.result.receipts) == loaded_receipts


def test_other_drivers_get_a_configuration_of_whole_checkpoints(tmp_path: Path) -> None:
    """`Agent.loop_config` (for drivers other than the built-in one) asks for whole snapshots."""
    store = SqliteRunStore(tmp_path / "runs.db")
    try:
        agent = _agent(store, ["a"])
        assert agent.loop_config.durable
        assert not agent.loop_config.checkpoint_changes
    finally:
        asyncio.run(store.close())
