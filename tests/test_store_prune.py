"""``ownloop runs prune``: its output, what it spares, the space it frees, a crash mid-prune."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ownloop import Receipt, RunStatus
from ownloop.cli import main
from ownloop.contracts import RunSnapshot, UserMessage, WriteIntent
from ownloop.store import PostgresRunStore, Retention, RunStore, SqliteRunStore
from tests.durable_support import T0, fresh_schema, postgres_dsn, snapshot


def _finished(run_id: str, at: int, *, text: str = "x") -> RunSnapshot:
    done = snapshot(run_id, state="finished", status=RunStatus.COMPLETED, at=at)
    talk = tuple(UserMessage(content=f"{run_id} {n} {text}") for n in range(3))
    return done.model_copy(update={"messages": talk})


async def _fill(store: RunStore, runs: int, *, text: str = "x", journal_every: int = 1) -> None:
    """Store finished runs with conversation items; every ``journal_every``-th with a write."""
    for n in range(runs):
        run_id = f"run-{n:05d}"
        await store.save(_finished(run_id, n, text=text), expected_version=None)
        if n % journal_every:
            continue
        intent = WriteIntent(
            run_id=run_id,
            call_id="c1",
            tool="export",
            idempotency_key=f"key-{run_id}",
            arguments_digest="d" * 64,
            recorded_at=T0,
        )
        await store.record_intent(intent)
        receipt = Receipt(call_id="c1", tool="export", status="ok", effect="applied")
        await store.record_receipt(run_id, "c1", receipt)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A SQLite store with three old finished runs, one paused and one unresolved."""
    path = tmp_path / "runs.db"

    async def prepare() -> None:
        async with SqliteRunStore(path) as store:
            await _fill(store, 3)
            await store.save(
                snapshot("paused", state="paused", status=RunStatus.PAUSED, at=9),
                expected_version=None,
            )
            unresolved = snapshot("unresolved", state="finished", status=RunStatus.UNRESOLVED)
            await store.save(unresolved, expected_version=None)

    asyncio.run(prepare())
    return path


def test_a_dry_run_lists_what_would_go_and_what_is_spared(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run prints each run that would go and the spared runs with the flag to include them."""
    assert main(["runs", "prune", "--older-than", "30d", "--dry-run", "--db", str(database)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "would remove run-00000",
        "would remove run-00001",
        "would remove run-00002",
        "would remove 3 run(s)",
        "spared: 1 paused (--include-paused), 1 with an unknown effect (--include-unknown-effects)",
    ]
    assert main(["runs", "list", "--db", str(database), "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 5


def test_prune_removes_in_batches_and_flags_take_the_named_risks(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batches repeat until nothing is left; the include flags remove the spared runs."""
    argv = ["runs", "prune", "--keep", "0", "--batch", "2", "--db", str(database)]
    assert main([*argv, "--status", "completed"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["removed run-00002", "removed 3 run(s)"]  # other statuses: not covered
    assert main([*argv, "--include-paused"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "removed paused",
        "removed 1 run(s)",
        "spared: 1 with an unknown effect (--include-unknown-effects)",
    ]
    _waiting_again(database)
    assert main([*argv, "--include-paused", "--include-unknown-effects", "--vacuum"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "removed unresolved",
        "removed paused",
        "removed 2 run(s)",
    ]


def _waiting_again(path: Path) -> None:
    async def pause() -> None:
        async with SqliteRunStore(path) as store:
            paused = snapshot("paused", state="paused", status=RunStatus.PAUSED, at=9)
            await store.save(paused, expected_version=None)

    asyncio.run(pause())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "say which runs go: --older-than AGE, --keep N, or both"),
        (["--older-than", "soon"], "an age is a number and a unit (s, m, h, d, w), not 'soon'"),
        (["--keep", "-1"], "invalid retention: "),
    ],
)
def test_prune_refuses_an_unclear_retention(
    database: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """A prune naming no age or count, a bad age or a negative count is a usage error."""
    assert main(["runs", "prune", *argv, "--db", str(database)]) == 2
    assert message in capsys.readouterr().err


def test_ages_take_every_unit(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seconds to weeks are understood; a young age spares recent runs."""
    for age in ("10s", "1.5m", "2h", "3d", "1w"):
        assert main(["runs", "prune", "--older-than", age, "--dry-run", "--db", str(database)]) == 0
        assert "would remove 3 run(s)" in capsys.readouterr().out
    assert main(["runs", "prune", "--older-than", "5000w", "--dry-run", "--db", str(database)]) == 0
    assert capsys.readouterr().out.splitlines() == ["would remove 0 run(s)"]


def _pages(path: Path) -> tuple[int, int, int]:
    with sqlite3.connect(path) as db:
        return tuple(  # type: ignore[return-value]
            db.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count", "auto_vacuum")
        )


def test_a_new_file_returns_pruned_pages_as_it_goes(tmp_path: Path) -> None:
    """A store file created by this ownloop keeps no free pages after a prune."""
    path = tmp_path / "runs.db"

    async def fill_and_prune() -> None:
        async with SqliteRunStore(path) as store:
            await _fill(store, 200, text="y" * 2000)
            before = _pages(path)
            await store.prune_runs(Retention(keep_latest=0))
            after = _pages(path)
            assert after[1:] == (0, 2)
            assert after[0] < before[0] / 4

    asyncio.run(fill_and_prune())


def test_vacuum_compacts_a_file_made_before_incremental_vacuum(tmp_path: Path) -> None:
    """An older file keeps free pages after a prune; --vacuum frees them and switches it over."""
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as db:  # as an ownloop without auto_vacuum laid it out
        db.execute("CREATE TABLE earlier (x)")
    asyncio.run(_fill_and_close(path, 200))
    assert main(["runs", "prune", "--keep", "0", "--db", str(path)]) == 0
    assert _pages(path)[1] > 0
    assert main(["runs", "prune", "--keep", "0", "--vacuum", "--db", str(path)]) == 0
    assert _pages(path)[1:] == (0, 2)


async def _fill_and_close(path: Path, runs: int) -> None:
    async with SqliteRunStore(path) as store:
        await _fill(store, runs, text="y" * 2000)


_PRUNER = """
import asyncio, sys
from ownloop.store import PostgresRunStore, Retention, SqliteRunStore

async def prune(kind, where, schema):
    store = SqliteRunStore(where) if kind == "sqlite" else PostgresRunStore(where, schema=schema)
    retention = Retention(keep_latest=0, batch=20)
    while (report := await store.prune_runs(retention)).more:
        print(len(report.run_ids), flush=True)

asyncio.run(prune(*sys.argv[1:4]))
"""
_RUNS = 800


@pytest.fixture(params=["sqlite", "postgres"])
def large(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, list[str]]]:
    """A store of many finished runs, and the arguments of a process pruning it."""
    store: SqliteRunStore | PostgresRunStore
    if request.param == "sqlite":
        path = tmp_path / "runs.db"
        store, where = SqliteRunStore(path), [str(path), "-"]
    else:
        schema = fresh_schema()
        store, where = PostgresRunStore(postgres_dsn(), schema=schema), [postgres_dsn(), schema]
    asyncio.run(_fill(store, _RUNS, journal_every=10))
    yield store, [request.param, *where]
    asyncio.run(store.close())


def test_a_prune_killed_midway_leaves_every_run_whole_or_gone(
    large: tuple[RunStore, list[str]],
) -> None:
    """SIGKILL during a large prune: whole batches are gone, every other run is intact."""
    store, where = large
    pruner = subprocess.Popen(
        [sys.executable, "-c", _PRUNER, *where], stdout=subprocess.PIPE, text=True
    )
    assert pruner.stdout is not None
    assert pruner.stdout.readline().strip() == "20"  # the first batch committed: kill the next
    pruner.send_signal(signal.SIGKILL)
    pruner.wait()
    pruner.stdout.close()

    async def inspect() -> tuple[int, list[str]]:
        left = 0
        broken = []
        for n in range(_RUNS):
            run_id = f"run-{n:05d}"
            stored = await store.get(run_id)
            journal = await store.journal(run_id)
            if stored is None:
                broken.extend([run_id] if journal else [])
                continue
            left += 1
            if stored.snapshot != _finished(run_id, n) or len(journal) != (n % 10 == 0):
                broken.append(run_id)
        return left, broken

    left, broken = asyncio.run(inspect())
    assert broken == []
    assert 0 < left <= _RUNS - 20
    assert (_RUNS - left) % 20 == 0  # only whole batches went
    assert asyncio.run(_orphan_items(store)) == 0


async def _orphan_items(store: RunStore) -> int:
    """Item rows left without their run (read from the tables: no API lists them)."""
    query = "SELECT count(*) FROM {s}run_items WHERE run_id NOT IN (SELECT run_id FROM {s}runs)"
    if isinstance(store, SqliteRunStore):
        with sqlite3.connect(store.path) as db:
            return int(db.execute(query.format(s="")).fetchone()[0])
    assert isinstance(store, PostgresRunStore)
    connection = await store._connect()
    cursor = await connection.execute(query.format(s=f"{store.schema}."))
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


def test_runs_stats_prints_what_the_store_holds(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stats command prints runs by state, status and reason, the paused, unknown and usage."""
    assert main(["runs", "stats", "--db", str(database)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "runs:             5 (finished 4, paused 1)",
        "by status:        completed 3, paused 1, unresolved 1",
        "by stop reason:   approval_required 1, final_output 4",
    ]
    assert lines[3].startswith("paused, waiting:  1, the oldest for ")
    assert lines[3].endswith(" (since 2026-01-01T00:00:09+00:00)")
    assert lines[4:] == [
        "unknown effects:  0",
        "leased now:       0",
        "usage (all runs): steps 0, model_attempts 0, tool_attempts 0, input_tokens 0, "
        "output_tokens 0, cost 0",
    ]
    assert main(["runs", "stats", "--db", str(database), "--json"]) == 0
    assert '"unknown_effects": 0' in capsys.readouterr().out


def test_runs_stats_of_an_empty_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty store has no runs, statuses, paused run or usage."""
    path = tmp_path / "empty.db"
    asyncio.run(SqliteRunStore(path).close())
    assert main(["runs", "stats", "--db", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        "runs:             0 (none)",
        "by status:        none",
        "by stop reason:   none",
        "paused, waiting:  0",
    ]
