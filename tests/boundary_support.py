"""What "a clean result" means at every boundary, checked the same way by the cases and the fuzz.

A run ends in a typed `RunResult` (or a documented error before it starts); its result and trace
serialise to JSON and back; its SQLite store, opened again from the file, holds a snapshot that
round-trips; and resuming it gives a result or the documented "finished" refusal, never a crash.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ownloop import Agent, RunResult, RunStatus
from ownloop.contracts import RunSnapshot
from ownloop.exceptions import ConfigurationError
from ownloop.store import SqliteRunStore

settings.register_profile(
    "boundaries",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "boundaries-long",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FUZZ = settings.get_profile(os.environ.get("OWNLOOP_FUZZ_PROFILE", "boundaries"))
"""The fuzz settings: 25 examples per entry point in CI, ``OWNLOOP_FUZZ_PROFILE=boundaries-long``
for a long search."""

NASTY_FRAGMENTS = (
    "\ud83d",  # an unpaired high surrogate, as json.loads('"\\ud83d"') gives
    "\udc80",  # a surrogateescape byte
    "\ud83d\ude00",  # a surrogate pair kept as two code points
    "\x00",
    "\u202e",  # right-to-left override
    "\ufeff",
    "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX",
    "postgresql://root:p@ssW0rd!@db/x",
    "[" * 300,
    '{"a":' * 100,
)

nasty_text = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=40),
    st.lists(st.sampled_from(NASTY_FRAGMENTS) | st.text(max_size=5), max_size=5).map("".join),
)
"""Text including unpaired surrogates, control characters, secrets and bracket runs."""


def nested(depth: int, leaf: object = 1) -> object:
    """Return ``[[...[leaf]...]]`` nested ``depth`` levels deep."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | nasty_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(nasty_text, children, max_size=4)
    ),
    max_leaves=12,
) | st.integers(60, 300).map(nested)
"""JSON-shaped values, shallow ones and ones nested past the 64-level bound."""


@contextmanager
def store_file() -> Iterator[Path]:
    """Yield the path of a fresh SQLite store file, removed afterwards."""
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder) / "runs.db"


def run_with_store(path: Path, build: Callable[[SqliteRunStore], Agent], task: str) -> RunResult:
    """Run ``task`` on the agent ``build`` makes with a SQLite store at ``path``; check it."""

    async def go() -> RunResult:
        async with SqliteRunStore(path) as store:
            return await build(store).run(task)

    result = asyncio.run(go())
    assert_sound(result)
    assert_store_sound(path, result.run_id, build)
    return result


def assert_sound(result: RunResult) -> None:
    """The result is typed, and it and its trace survive a JSON round trip."""
    assert isinstance(result, RunResult)
    assert result.status in set(RunStatus)
    text = result.model_dump_json()
    assert RunResult.model_validate_json(text) == RunResult.model_validate_json(text)
    json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")
    seqs = [event.seq for event in result.trace]
    assert seqs == list(range(1, len(seqs) + 1))


def assert_store_sound(path: Path, run_id: str, build: Callable[[SqliteRunStore], Agent]) -> None:
    """The stored run loads from the file again, round-trips, and can be resumed or is finished."""

    async def go() -> None:
        async with SqliteRunStore(path) as store:
            stored = await store.get(run_id)
            assert stored is not None
            snapshot = stored.snapshot
            assert RunSnapshot.model_validate_json(snapshot.model_dump_json()) == snapshot
            for entry in await store.journal(run_id):
                entry.model_dump_json()
            if snapshot.state == "finished":
                with pytest.raises(ConfigurationError, match="cannot be resumed"):
                    await build(store).resume(run_id)
            else:
                assert_sound(await build(store).resume(run_id))

    asyncio.run(go())
