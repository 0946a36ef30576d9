"""Do listings stay fast as a store grows? Pages of 1,000 runs against pages of 100,000.

For each store (SQLite, and PostgreSQL when a server is named), two stores are filled — 1,000 runs
and 100,000 — with the same realistic rows: one real finished run (a scripted `Agent` run: its
state record and its item rows, laid out by the store's own `plan_save`), copied under new run
ids with a mix of statuses (every 20th paused), 50 actors, 5 agents, and save times over 90
days. Rows go in by bulk insert (``executemany`` / ``COPY``) into a store laid out by the store
itself (its listing indexes included), then analysed (PostgreSQL: ``VACUUM (ANALYZE)``, what
autovacuum does soon after a bulk insert). Then, interleaved over rounds, the median time of:

- ``first``: the first page of 50 (``list_runs(limit=50)``);
- ``filtered``: the first page of one agent's completed runs (a full page at both sizes);
- ``actor``: the first page of one actor's runs (20 runs at 1,000: not a full page there, so its
  ratio also counts the larger page);
- ``window``: a page of runs saved in a 10-day window;
- ``deep``: the page after the middle of the listing (a cursor 50% deep);
- ``ui_runs``, ``ui_deep`` and ``ui_approvals``: the UI's runs list (first page and 50% deep)
  and its pending approvals page (50 paused runs at both sizes, each read whole), through HTTP
  (httpx's ASGI transport).

The report gives each median time per store size and the ratio 100,000 / 1,000, and the ratio of
the fastest rounds (on a loaded machine the median also counts waits for a core). Run:

    .venv/bin/python benchmarks/bench_listing.py [--runs 100000] [--rounds 30] [--dsn ...] \
        [--keep DIR]

``--keep DIR`` keeps the filled stores for the next run (the SQLite files in DIR, the PostgreSQL
schemas ``bench_keep_<size>_fill<FILL>`` on the server) and reuses those already there, so
several measurements share one fill (100,000 runs take minutes per engine). A kept store is
opened as an application opens it: one kept by an older ownloop is upgraded first.
Prints JSON; docs/performance.md reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from _records import records_registry, throwaway_postgres

from ownloop import Actor, Agent, Limits
from ownloop.contracts import RunSnapshot, RunSummary
from ownloop.policy import allow_writes
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore, run_cursor
from ownloop.store._layout import plan_save
from ownloop.store._listing import Listing, listing_query
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.ui import cookie_name, create_app

PAGE = 50
TOKEN = "bench-token-0123456789abcdef"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
FILL = 2
"""The fill's version, in a kept store's name: bumped whenever `_rows` changes what it makes."""
STATUSES = [("finished", "completed", "final_output")] * 14 + [
    ("finished", "failed", "tool_error"),
    ("finished", "stopped", "max_steps"),
    ("finished", "unresolved", "unresolved_effect"),
    ("finished", "stopped", "deadline"),
    ("finished", "failed", "model_error"),
]
PAUSED = ("paused", "paused", "approval_required")
"""Every 20th run (5%): exactly 50 at 1,000 runs, so the approvals page is full at both sizes."""


async def _template() -> RunSnapshot:
    """One real finished run: three reads, a journaled write, an answer (about 8 kB stored)."""
    script = [tool_call("lookup", f"r{n}", key=f"k{n}") for n in range(3)]
    script += [tool_call("record", "w1", key="k1", value=1), final("reconciled: k1 stored")]
    store = MemoryRunStore()
    agent = Agent(
        ScriptedModel(script),
        records_registry(lambda key: {"title": f"record {key}", "text": "figures " * 10}),
        policy=allow_writes("record"),
        store=store,
        limits=Limits(max_steps=10),
    )
    result = await agent.run("reconcile the records", run_id="template-run", actor=_ACTOR)
    stored = await store.get(result.run_id)
    assert stored is not None
    return stored.snapshot


_ACTOR = Actor(id="actor-00")


def _rows(template: RunSnapshot, count: int, seed: int = 7) -> tuple[list[Any], list[Any]]:
    """The ``runs`` and ``run_items`` rows of ``count`` runs copied from the template."""
    plan = plan_save(template, None)
    state_text, digest = plan.row.snapshot, template.versions.policy_digest or "none"
    chance = random.Random(seed)
    runs: list[Any] = []
    items: list[Any] = []
    for n in range(count):
        run_id = f"run-{n:06d}-{uuid.UUID(int=chance.getrandbits(128)).hex[:8]}"
        state, status, stop = PAUSED if n % 20 == 19 else chance.choice(STATUSES)
        actor, agent = f"actor-{chance.randrange(50):02d}", f"agent-{chance.randrange(5)}"
        saved = NOW - timedelta(seconds=chance.uniform(0, 90 * 86400))
        text = (
            state_text.replace("template-run", run_id)
            .replace('"id":"actor-00"', f'"id":"{actor}"')
            .replace(digest, agent)
        )
        runs.append((run_id, 1, state, status, stop, saved, text, plan.layout, actor, agent))
        items.extend((run_id, part, position, item) for part, position, item in plan.puts)
    return runs, items


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _fill_sqlite(path: Path, runs: list[Any], items: list[Any]) -> None:
    SqliteRunStore(path)  # lays the tables out
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO runs (run_id, version, state, status, stop_reason, updated_at, snapshot, "
            "layout, actor, agent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row[:5], _iso(row[5]), *row[6:]) for row in runs],
        )
        db.executemany("INSERT INTO run_items VALUES (?, ?, ?, ?)", items)
        db.execute("ANALYZE")


async def _fill_postgres(store: PostgresRunStore, runs: list[Any], items: list[Any]) -> None:
    connection = await store._connect()  # lays the tables out, with the listing indexes
    cursor = connection.cursor()
    columns = (
        "run_id, version, state, status, stop_reason, updated_at, snapshot, layout, actor, agent"
    )
    async with cursor.copy(f"COPY {store.schema}.runs ({columns}) FROM STDIN") as copy:
        for row in runs:
            await copy.write_row(row)
    async with cursor.copy(f"COPY {store.schema}.run_items FROM STDIN") as copy:
        for row in items:
            await copy.write_row(row)


async def _vacuum_postgres(store: PostgresRunStore) -> int:
    """What autovacuum does soon after a bulk insert; return the first page's heap fetches.

    Statistics, and the visibility map that lets a listing read its covering index alone (an
    index-only scan). Run once both stores are filled: a vacuum right after a fill left the
    small store's pages unmarked once, so its pages read the table too (a slower baseline).
    """
    connection = await store._connect()
    for table in ("runs", "run_items"):
        await connection.execute(f"VACUUM (ANALYZE) {store.schema}.{table}")
    query, params = listing_query(Listing(limit=PAGE), "postgres", f"{store.schema}.runs", str)
    cursor = await connection.execute(f"EXPLAIN (ANALYZE, BUFFERS) {query}", params)
    plan = " ".join(row[0] for row in await cursor.fetchall())
    found = re.search(r"Heap Fetches: (\d+)", plan)
    return int(found.group(1)) if found else -1


def _middle_cursor(runs: list[Any]) -> str:
    ordered = sorted(runs, key=lambda row: (row[5], row[0]), reverse=True)
    row = ordered[len(ordered) // 2]
    return run_cursor(
        RunSummary(run_id=row[0], state=row[2], version=1, updated_at=row[5].astimezone(UTC))
    )


def _queries(store: RunStore, cursor: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    app = create_app(store, approver="bench", token=TOKEN)
    browser = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app.asgi),
        base_url="http://127.0.0.1:8765",
        cookies={cookie_name(TOKEN): TOKEN},
    )

    async def page(path: str, **params: str) -> None:
        response = await browser.get(path, params=params)
        assert response.status_code == 200, response.text

    return {
        "first": lambda: store.list_runs(limit=PAGE),
        "filtered": lambda: store.list_runs(agent="agent-3", status="completed", limit=PAGE),
        "actor": lambda: store.list_runs(actor="actor-07", limit=PAGE),
        "window": lambda: store.list_runs(
            since=NOW - timedelta(days=40), until=NOW - timedelta(days=30), limit=PAGE
        ),
        "deep": lambda: store.list_runs(after=cursor, limit=PAGE),
        "ui_runs": lambda: page("/"),
        "ui_deep": lambda: page("/", after=cursor),
        "ui_approvals": lambda: page("/approvals"),
    }


async def _measure(stores: dict[int, tuple[RunStore, str]], rounds: int) -> dict[str, Any]:
    queries = {size: _queries(store, cursor) for size, (store, cursor) in stores.items()}
    times: dict[tuple[int, str], list[float]] = {}
    for round_number in range(rounds + 1):
        for size, named in queries.items():
            for name, query in named.items():
                started = time.perf_counter()
                await query()
                elapsed = time.perf_counter() - started
                if round_number:  # the first round warms caches and statements
                    times.setdefault((size, name), []).append(elapsed)
    small, large = sorted(stores)
    report: dict[str, Any] = {}
    for name in queries[small]:
        low = statistics.median(times[(small, name)])
        high = statistics.median(times[(large, name)])
        fastest = min(times[(small, name)]), min(times[(large, name)])
        report[name] = {
            f"ms_{small}": round(low * 1000, 3),
            f"ms_{large}": round(high * 1000, 3),
            "ratio": round(high / low, 2),
            # the fastest round of each: what a page costs when no other process holds the cores
            "ratio_fastest": round(fastest[1] / fastest[0], 2),
        }
    return report


async def _sqlite(
    template: RunSnapshot, sizes: list[int], rounds: int, keep: Path | None
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        directory = keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stores: dict[int, tuple[RunStore, str]] = {}
        fill: dict[int, float | str] = {}
        for size in sizes:
            runs, items = _rows(template, size)
            path = directory / f"runs-{size}-fill{FILL}.db"
            started = time.perf_counter()
            if path.exists():
                fill[size] = "kept"
            else:
                _fill_sqlite(path, runs, items)
                fill[size] = round(time.perf_counter() - started, 1)
            stores[size] = (SqliteRunStore(path), _middle_cursor(runs))
        try:
            report = await _measure(stores, rounds)
            sizes_mb = {
                size: round(os.path.getsize(directory / f"runs-{size}-fill{FILL}.db") / 1e6, 1)
                for size in sizes
            }
        finally:
            for store, _ in stores.values():
                await store.close()  # type: ignore[attr-defined]
    return {"queries": report, "fill_s": fill, "file_mb": sizes_mb}


@contextlib.asynccontextmanager
async def _kept_postgres(dsn: str, size: int) -> AsyncIterator[PostgresRunStore]:
    """A PostgreSQL store in the schema ``bench_keep_<size>_fill<FILL>``, left on the server."""
    store = PostgresRunStore(dsn, schema=f"bench_keep_{size}_fill{FILL}")
    try:
        yield store
    finally:
        await store.close()


async def _postgres_rows(store: PostgresRunStore) -> int:
    connection = await store._connect()  # opens the store as an application would
    cursor = await connection.execute(f"SELECT count(*) FROM {store.schema}.runs")
    row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


async def _postgres(
    template: RunSnapshot, sizes: list[int], rounds: int, dsn: str, keep: bool
) -> dict[str, Any]:
    opened = _kept_postgres if keep else lambda dsn, size: throwaway_postgres(dsn)
    async with opened(dsn, sizes[0]) as small, opened(dsn, sizes[1]) as large:
        stores: dict[int, tuple[RunStore, str]] = {}
        fill: dict[int, float | str] = {}
        for size, store in zip(sizes, (small, large), strict=True):
            runs, items = _rows(template, size)
            started = time.perf_counter()
            found = await _postgres_rows(store) if keep else 0
            if found == size:
                fill[size] = "kept"
            else:
                if found:  # a kept store of another fill: start again
                    connection = await store._connect()
                    await connection.execute(
                        f"TRUNCATE {store.schema}.runs, {store.schema}.run_items"
                    )
                await _fill_postgres(store, runs, items)
                fill[size] = round(time.perf_counter() - started, 1)
            stores[size] = (store, _middle_cursor(runs))
        fetches = {
            size: await _vacuum_postgres(store)
            for size, store in zip(sizes, (small, large), strict=True)
        }
        return {
            "queries": await _measure(stores, rounds),
            "fill_s": fill,
            "first_page_heap_fetches": fetches,
        }


async def main() -> None:
    """Measure, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="the large store's runs")
    parser.add_argument("--baseline", type=int, default=1000, help="the small store's runs")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--dsn", default=os.environ.get("OWNLOOP_TEST_POSTGRES_DSN"))
    parser.add_argument("--keep", type=Path, help="keep and reuse the filled stores (see above)")
    arguments = parser.parse_args()
    template = await _template()
    sizes = [arguments.baseline, arguments.runs]
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "page": PAGE,
        "sqlite": await _sqlite(template, sizes, arguments.rounds, arguments.keep),
    }
    if arguments.dsn:
        report["postgres"] = await _postgres(
            template, sizes, arguments.rounds, arguments.dsn, arguments.keep is not None
        )
    else:
        print("postgres: skipped (no --dsn or OWNLOOP_TEST_POSTGRES_DSN)", file=sys.stderr)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
