"""The SQLite memory store: recall by relevance, strict scopes, bounds, both search paths."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from ownloop import Actor, ConfigurationError, InputRejected, SchemaVersionError, StoreError
from ownloop.memory import (
    MemoryLimits,
    MemoryScope,
    MemoryStore,
    SqliteMemoryStore,
    _sqlite,
    fts5_available,
)

SEARCHES = [
    pytest.param(
        "fts5",
        marks=pytest.mark.skipif(not fts5_available(), reason="this SQLite has no FTS5"),
    ),
    "keyword",
]
ALICE = MemoryScope(tenant="acme", actor="alice")
BOB = MemoryScope(tenant="acme", actor="bob")
ACME = MemoryScope(tenant="acme", actor=None)
MALLORY = MemoryScope(tenant="evil", actor="alice")  # same actor id, another tenant


def run(awaitable):
    """Run one store coroutine to its end."""
    return asyncio.run(awaitable)


@pytest.fixture(params=SEARCHES)
def store(request, tmp_path):
    """A store on a file, for each search path."""
    opened = SqliteMemoryStore(tmp_path / "memory.db", search=request.param)
    yield opened
    opened.close()


def remember_all(store, scope, *texts, tags=()):
    """Remember each text in the scope, in order."""
    return [run(store.remember(text, tags, scope=scope)) for text in texts]


def test_the_sqlite_store_is_a_memory_store(store) -> None:
    """SqliteMemoryStore implements the MemoryStore port and reports its search path."""
    assert isinstance(store, MemoryStore)
    assert store.search in ("fts5", "keyword")
    assert repr(store) == f"SqliteMemoryStore(path={store.path!r}, search={store.search!r})"


def test_recall_returns_the_best_matches_first(store) -> None:
    """A memory matching more of the query ranks first; k bounds the answer."""
    remember_all(
        store,
        ALICE,
        "The user prefers answers in French.",
        "The user's favourite city is Hangzhou.",
        "Reports go to the finance team every Friday.",
    )
    found = run(store.recall("which city does the user like, Hangzhou?", 2, scope=ALICE))
    assert found[0].text == "The user's favourite city is Hangzhou."
    assert len(found) == 2
    assert found[0].score is not None
    assert found[0].id.startswith("mem-")
    assert run(store.recall("finance friday", scope=ALICE))[0].text.startswith("Reports")
    assert run(store.recall("nothing like this", scope=ALICE)) == []


def test_tags_are_searchable_and_returned(store) -> None:
    """A memory is found by its tags, and carries them back."""
    run(
        store.remember(
            "Always cite the quarterly report.", ["preference", "citations"], scope=ALICE
        )
    )
    (found,) = run(store.recall("preference", scope=ALICE))
    assert found.tags == ("preference", "citations")


def test_a_query_without_words_returns_the_newest(store) -> None:
    """With no word to search for, the newest memories come back, newest first."""
    remember_all(store, ALICE, "first fact", "second fact", "third fact")
    assert [m.text for m in run(store.recall("  ?! ", 2, scope=ALICE))] == [
        "third fact",
        "second fact",
    ]


def test_one_tenant_never_recalls_another_tenants_memories(store) -> None:
    """Scopes are walls: same words, same actor id, another tenant — nothing comes back."""
    remember_all(store, ALICE, "The launch code word is ORCHID.")
    assert run(store.recall("launch code word ORCHID", scope=MALLORY)) == []
    assert run(store.recall("", scope=MALLORY)) == []
    assert run(store.recall("ORCHID", scope=ALICE))[0].text == "The launch code word is ORCHID."


def test_actor_private_and_tenant_shared_scopes_are_separate(store) -> None:
    """An actor's private memories are not the tenant's shared ones, nor another actor's."""
    remember_all(store, ALICE, "alice likes tea")
    remember_all(store, ACME, "acme closes on Fridays")
    assert run(store.recall("tea", scope=BOB)) == []
    assert run(store.recall("tea", scope=ACME)) == []
    assert run(store.recall("fridays", scope=ALICE)) == []
    assert [m.text for m in run(store.recall("fridays", scope=ACME))] == ["acme closes on Fridays"]


def test_forget_deletes_only_within_the_scope(store) -> None:
    """A memory is forgotten in its scope; naming it from another scope changes nothing."""
    (stored,) = remember_all(store, ALICE, "temporary fact about invoices")
    memory_id = stored.memory.id
    assert run(store.forget(memory_id, scope=MALLORY)) is False
    assert run(store.recall("invoices", scope=ALICE))
    assert run(store.forget(memory_id, scope=ALICE)) is True
    assert run(store.recall("invoices", scope=ALICE)) == []
    assert run(store.forget(memory_id, scope=ALICE)) is False


@pytest.mark.parametrize(
    ("text", "tags", "message"),
    [
        ("   ", (), "needs some text"),
        ("x" * 101, (), "101 characters, more than max_entry_chars=100"),
        ("fact", ("a", "b", "c"), "3 tags, more than max_tags=2"),
        ("fact", ("t" * 11,), "1-10 characters"),
        ("fact", ("",), "1-10 characters"),
    ],
)
def test_oversized_or_empty_memories_are_refused(tmp_path, text, tags, message) -> None:
    """Text and tags past the limits are refused, never cut; nothing is stored."""
    limits = MemoryLimits(max_entry_chars=100, max_tags=2, max_tag_chars=10)
    store = SqliteMemoryStore(tmp_path / "m.db", limits=limits)
    with pytest.raises(InputRejected, match=message):
        run(store.remember(text, tags, scope=ALICE))
    assert run(store.count(scope=ALICE)) == 0


def test_a_full_scope_evicts_its_oldest_memories(tmp_path) -> None:
    """With evict_oldest, the oldest memories of that scope make room and are reported."""
    store = SqliteMemoryStore(tmp_path / "m.db", limits=MemoryLimits(max_entries=3))
    first, second, *_ = remember_all(store, ALICE, "one apple", "two apples", "three apples")
    remember_all(store, BOB, "bob's apple")
    stored = run(store.remember("four apples", scope=ALICE))
    assert stored.evicted == (first.memory.id,)
    assert run(store.count(scope=ALICE)) == 3
    assert run(store.count(scope=BOB)) == 1  # other scopes are untouched
    texts = [m.text for m in run(store.recall("apple apples", 10, scope=ALICE))]
    assert "one apple" not in texts
    assert second.memory.id in [m.id for m in run(store.recall("two", scope=ALICE))]


def test_a_full_scope_refuses_when_asked_to(tmp_path) -> None:
    """With refuse, a full scope rejects the new memory and keeps the old ones."""
    limits = MemoryLimits(max_entries=2, on_full="refuse")
    store = SqliteMemoryStore(tmp_path / "m.db", limits=limits)
    remember_all(store, ALICE, "one", "two")
    with pytest.raises(StoreError, match="is full"):
        run(store.remember("three", scope=ALICE))
    assert run(store.count(scope=ALICE)) == 2
    run(store.remember("bob's first", scope=BOB))


def test_an_idempotency_key_stores_a_memory_once_per_scope(store) -> None:
    """Repeating a remember with the same key returns the stored memory and adds nothing."""
    first = run(store.remember("fact", scope=ALICE, idempotency_key="k1"))
    again = run(store.remember("fact, retried", scope=ALICE, idempotency_key="k1"))
    assert (again.duplicate, again.memory.id) == (True, first.memory.id)
    assert again.memory.text == "fact"
    assert run(store.count(scope=ALICE)) == 1
    other = run(store.remember("fact", scope=BOB, idempotency_key="k1"))
    assert other.duplicate is False


@pytest.mark.parametrize("query", ['"quoted" OR', "100%_done", "x' OR 1=1 --", "NEAR(a b)", "a*"])
def test_queries_are_data_never_syntax(store, query) -> None:
    """Quotes, wildcards and query operators in a query never break or widen the search."""
    remember_all(store, ALICE, "100%_done report", "unrelated")
    remember_all(store, MALLORY, "x OR 1=1 a NEAR")
    found = run(store.recall(query, scope=ALICE))
    assert all(m.text in ("100%_done report", "unrelated") for m in found)


def test_cjk_queries_match_substrings(store) -> None:
    """Chinese text has no spaces: its queries match substrings on either search path."""
    remember_all(store, ALICE, "这位用户长期关注长三角城市数据", "用户偏好简短的回答")
    assert [m.text for m in run(store.recall("长三角", scope=ALICE))] == [
        "这位用户长期关注长三角城市数据"
    ]
    assert run(store.recall("偏好", scope=ALICE))[0].text == "用户偏好简短的回答"


def test_memories_persist_and_a_keyword_file_is_indexed_when_opened_with_fts5(tmp_path) -> None:
    """Memories outlive the store object; FTS5 reindexes what keyword mode wrote."""
    path = tmp_path / "m.db"
    keyword = SqliteMemoryStore(path, search="keyword")
    remember_all(keyword, ALICE, "the deploy window is Tuesday", "old note about lunch")
    (lunch,) = run(keyword.recall("lunch", scope=ALICE))
    run(keyword.forget(lunch.id, scope=ALICE))
    keyword.close()
    if not fts5_available():
        pytest.skip("this SQLite has no FTS5")
    full_text = SqliteMemoryStore(path, search="fts5")
    assert [m.text for m in run(full_text.recall("deploy tuesday", scope=ALICE))] == [
        "the deploy window is Tuesday"
    ]
    assert run(full_text.recall("lunch", scope=ALICE)) == []
    remember_all(full_text, ALICE, "lunch is at noon")
    full_text.close()
    reopened = SqliteMemoryStore(path, search="auto")
    assert run(reopened.recall("noon", scope=ALICE))[0].text == "lunch is at noon"
    reopened.close()


def test_search_auto_falls_back_to_keywords_without_fts5(tmp_path, monkeypatch) -> None:
    """Where SQLite lacks FTS5, auto uses keyword search and fts5 is a configuration error."""
    monkeypatch.setattr(_sqlite, "fts5_available", lambda: False)
    store = SqliteMemoryStore(tmp_path / "m.db")
    assert store.search == "keyword"
    remember_all(store, ALICE, "the printer is on floor two")
    assert run(store.recall("printer", scope=ALICE))
    with pytest.raises(ConfigurationError, match="has no FTS5"):
        SqliteMemoryStore(tmp_path / "n.db", search="fts5")


def test_fts5_probe_matches_this_sqlite() -> None:
    """The probe says whether this Python's SQLite can create an FTS5 table."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        expected = True
    except sqlite3.OperationalError:
        expected = False
    finally:
        connection.close()
    assert fts5_available() is expected


def test_store_misuse_is_reported(tmp_path) -> None:
    """Unknown search modes, closed stores, unreadable files and newer schemas are errors."""
    with pytest.raises(ConfigurationError, match="search must be"):
        SqliteMemoryStore(tmp_path / "m.db", search="vector")  # type: ignore[arg-type]
    store = SqliteMemoryStore(":memory:")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        run(store.recall("x", scope=ALICE))
    with pytest.raises(StoreError, match="cannot open"):
        SqliteMemoryStore(tmp_path / "missing" / "m.db")
    path = tmp_path / "future.db"
    SqliteMemoryStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE memory_meta SET value = '99' WHERE key = 'schema_version'")
    connection.close()
    with pytest.raises(SchemaVersionError, match="memory schema 99"):
        SqliteMemoryStore(path)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError):
        SqliteMemoryStore(corrupt)


def test_scopes_and_limits_refuse_impossible_values() -> None:
    """A scope names a tenant or an actor; limits are positive; sharing needs a tenant."""
    with pytest.raises(ConfigurationError, match="names a tenant, an actor or both"):
        MemoryScope(tenant=None, actor=None)
    with pytest.raises(ConfigurationError, match="may not be empty"):
        MemoryScope(tenant="", actor="a")
    assert MemoryScope.for_actor(Actor(id="a", tenant="t")) == MemoryScope("t", "a")
    assert MemoryScope.for_actor(Actor(id="a", tenant="t"), sharing="tenant") == ACME.__class__(
        "t", None
    )
    assert MemoryScope.for_actor(Actor(id="a")) == MemoryScope(None, "a")
    with pytest.raises(ConfigurationError, match="has no tenant"):
        MemoryScope.for_actor(Actor(id="a"), sharing="tenant")
    assert str(ACME) == "tenant=acme actor=(shared)"
    for bad in ({"max_entries": 0}, {"max_results": 0}, {"max_tags": -1}, {"on_full": "drop"}):
        with pytest.raises(ConfigurationError):
            MemoryLimits(**bad)


def test_recall_caps_k_and_the_query_length(tmp_path) -> None:
    """The k argument is held to 1..max_results and a long query is cut to max_query_chars."""
    store = SqliteMemoryStore(
        tmp_path / "m.db", limits=MemoryLimits(max_results=2, max_query_chars=5)
    )
    remember_all(store, ALICE, "apple one", "apple two", "apple three")
    assert len(run(store.recall("apple", 50, scope=ALICE))) == 2
    assert len(run(store.recall("apple", 0, scope=ALICE))) == 1
    assert run(store.recall("zzzzz apple", scope=ALICE)) == []  # "apple" is past the cut


def test_fts5_probe_reports_a_sqlite_without_it(monkeypatch) -> None:
    """A SQLite that cannot create an FTS5 table is reported as lacking it."""

    class NoFts5:
        def execute(self, statement):
            raise sqlite3.OperationalError("no such module: fts5")

        def close(self):
            pass

    fts5_available.cache_clear()
    monkeypatch.setattr(sqlite3, "connect", lambda path: NoFts5())
    try:
        assert fts5_available() is False
    finally:
        fts5_available.cache_clear()
