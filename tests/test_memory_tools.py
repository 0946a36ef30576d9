"""The remember and recall tools through the Agent: scope from the trusted actor, not arguments."""

from __future__ import annotations

import asyncio
import json

import pytest

from ownloop import Actor, Agent, ConfigurationError, RunStatus, ToolDefinitionError
from ownloop.contracts import Receipt, ToolMessage
from ownloop.memory import MemoryLimits, MemoryScope, SqliteMemoryStore, register_memory_tools
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolContext, ToolRegistry
from ownloop.validators import citations_observed

from .context_kit import run_markdown

ALICE = Actor(id="alice", tenant="acme")
BOB = Actor(id="bob", tenant="acme")
EVE = Actor(id="alice", tenant="globex")  # the same id in another tenant


@pytest.fixture
def store(tmp_path):
    """A memory store on a file."""
    opened = SqliteMemoryStore(tmp_path / "memory.db", limits=MemoryLimits(max_entry_chars=200))
    yield opened
    opened.close()


def _agent(store, script, *, sharing="actor", recall_evidence=True, **options):
    registry = ToolRegistry()
    register_memory_tools(registry, store, sharing=sharing, recall_evidence=recall_evidence)
    model = ScriptedModel(script)
    return Agent(model, registry, policy=allow_writes("remember"), **options), model


def _observations(result):
    return [
        json.loads(m.content) if m.content.startswith("{") else m.content
        for m in result.messages
        if isinstance(m, ToolMessage)
    ]


def _remember(store, actor, text, *, sharing="actor"):
    agent, _ = _agent(
        store, [tool_call("remember", text=text, tags=["note"]), final("ok")], sharing=sharing
    )
    return agent.run_sync("Remember this.", actor=actor)


def _recall(store, actor, query, *, sharing="actor"):
    agent, _ = _agent(store, [tool_call("recall", query=query, k=3), final("ok")], sharing=sharing)
    result = agent.run_sync("What do you remember?", actor=actor)
    return result, _observations(result)[0]


def test_a_fact_remembered_in_one_run_is_recalled_in_the_next() -> None:
    """Run 1 remembers; run 2, for the same actor, recalls it and may cite its id."""
    store = SqliteMemoryStore(":memory:")
    first = _remember(store, ALICE, "Alice wants reports in French.")
    assert first.status is RunStatus.COMPLETED
    stored = _observations(first)[0]
    assert stored["stored"] is True
    memory_id = stored["id"]
    agent, _ = _agent(
        store,
        [tool_call("recall", query="report language", k=3), final(f"In French [{memory_id}].")],
        validators=[citations_observed()],
    )
    second = agent.run_sync("Which language for reports?", actor=ALICE)
    assert second.status is RunStatus.COMPLETED
    (recalled,) = _observations(second)[0]["memories"]
    assert recalled == {
        "id": memory_id,
        "text": "Alice wants reports in French.",
        "tags": ["note"],
        "remembered_at": recalled["remembered_at"],
    }
    assert [item.id for item in second.evidence] == [memory_id]


def test_another_tenant_never_recalls_the_memory(store) -> None:
    """An actor with the same id in another tenant, or another actor, recalls nothing."""
    _remember(store, ALICE, "The vault code is 1234.")
    assert _recall(store, EVE, "vault code")[1] == {"memories": []}
    assert _recall(store, BOB, "vault code")[1] == {"memories": []}
    assert (
        _recall(store, ALICE, "vault code")[1]["memories"][0]["text"] == "The vault code is 1234."
    )


def test_tenant_sharing_lets_colleagues_recall_but_not_other_tenants(store) -> None:
    """With sharing='tenant', actors of one tenant share memories; other tenants still see none."""
    _remember(store, ALICE, "The office closes at six.", sharing="tenant")
    assert _recall(store, BOB, "office", sharing="tenant")[1]["memories"]
    assert _recall(store, EVE, "office", sharing="tenant")[1] == {"memories": []}
    assert _recall(store, BOB, "office")[1] == {"memories": []}  # private scope is separate


def test_tenant_sharing_needs_a_tenant(store) -> None:
    """An actor without a tenant gets an error observation under tenant sharing."""
    result, observation = _recall(store, Actor(id="solo"), "anything", sharing="tenant")
    assert result.status is RunStatus.COMPLETED
    assert "has no tenant" in observation


def test_a_run_without_an_actor_gets_an_error_observation(store) -> None:
    """Without an authenticated actor the tools refuse, clearly, and the run goes on."""
    agent, _ = _agent(
        store,
        [
            tool_call("remember", text="x", tags=[]),
            tool_call("recall", query="x", k=1),
            final("ok"),
        ],
    )
    result = agent.run_sync("Remember x.")
    assert result.status is RunStatus.COMPLETED
    first, second = _observations(result)
    for observation in (first, second):
        assert "no authenticated actor" in observation
        assert observation.startswith("Tool ")
    assert asyncio.run(store.count(scope=MemoryScope("acme", "alice"))) == 0
    assert [r.status for r in result.receipts] == ["error", "error"]


def test_the_scope_cannot_be_chosen_by_the_model(store) -> None:
    """The schemas have no tenant or actor; a call that names one is rejected unexecuted."""
    registry = ToolRegistry()
    remember, recall = register_memory_tools(registry, store)
    for spec in (remember.spec, recall.spec):
        assert set(spec.parameters["properties"]).isdisjoint({"tenant", "actor", "scope", "ctx"})
        assert spec.parameters["additionalProperties"] is False
    agent, _ = _agent(store, [tool_call("recall", query="x", k=1, tenant="globex"), final("ok")])
    result = agent.run_sync("q", actor=ALICE)
    assert [e.code for e in result.trace if e.kind == "tool_rejected"] == ["invalid_arguments"]
    assert result.receipts == ()


def test_remember_is_a_write_the_default_policy_does_not_offer(store) -> None:
    """Remembering changes durable state: without allow_writes it is not offered at all."""
    registry = ToolRegistry()
    remember, recall = register_memory_tools(registry, store)
    assert (remember.spec.effect, remember.spec.idempotent, recall.spec.effect) == (
        "write",
        True,
        "read",
    )
    model = ScriptedModel([final("ok")])
    Agent(model, registry).run_sync("q", actor=ALICE)
    assert [spec.name for spec in model.requests[0].tools] == ["recall"]


def test_a_too_long_fact_is_refused_with_the_reason(store) -> None:
    """The store's bounds come back as an error observation the model can act on."""
    result = _remember(store, ALICE, "y" * 500)
    assert result.status is RunStatus.COMPLETED
    assert "more than max_entry_chars=200" in _observations(result)[0]


def test_evictions_are_reported_to_the_model(tmp_path) -> None:
    """When the scope is full, the observation names the memories evicted to make room."""
    store = SqliteMemoryStore(tmp_path / "m.db", limits=MemoryLimits(max_entries=1))
    first = _observations(_remember(store, ALICE, "first"))[0]
    second = _observations(_remember(store, ALICE, "second"))[0]
    assert second["evicted"] == [first["id"]]


def test_a_retried_remember_stores_the_fact_once(store) -> None:
    """The runtime's idempotency key makes a repeated call with the same key a no-op."""
    registry = ToolRegistry()
    remember, _ = register_memory_tools(registry, store)
    context = ToolContext(
        run_id="r", call_id="c1", tool="remember", actor=ALICE, idempotency_key="key-1"
    )
    one = asyncio.run(remember.invoke({"text": "fact", "tags": []}, context))
    two = asyncio.run(remember.invoke({"text": "fact", "tags": []}, context))
    assert one["id"] == two["id"]
    assert asyncio.run(store.count(scope=MemoryScope.for_actor(ALICE))) == 1


def test_store_failures_become_error_receipts(store) -> None:
    """A closed store answers with an error receipt naming the failure, not an exception."""
    registry = ToolRegistry()
    remember, recall = register_memory_tools(registry, store)
    store.close()
    context = ToolContext(run_id="r", call_id="c1", tool="recall", actor=ALICE)
    receipt = asyncio.run(recall.invoke({"query": "x", "k": 1}, context))
    assert isinstance(receipt, Receipt)
    assert (receipt.status, receipt.call_id, receipt.tool) == ("error", "c1", "recall")
    assert "is closed" in receipt.message
    written = asyncio.run(remember.invoke({"text": "x", "tags": []}, context))
    assert written.status == "error"


def test_registration_options_and_misuse(store) -> None:
    """Names can be changed; an unknown sharing or a name taken twice is an error."""
    registry = ToolRegistry()
    register_memory_tools(registry, store, remember_name="note_down", recall_name="look_up")
    assert registry.names() == ("note_down", "look_up")
    with pytest.raises(ToolDefinitionError):
        register_memory_tools(registry, store, remember_name="note_down", recall_name="other")
    with pytest.raises(ConfigurationError, match="sharing must be"):
        register_memory_tools(ToolRegistry(), store, sharing="world")  # type: ignore[arg-type]


def test_the_memory_page_runs_as_written(capsys) -> None:
    """docs/concepts/memory.md runs as written and shows tenant isolation through the tools."""
    page = run_markdown("docs/concepts/memory.md")
    printed = capsys.readouterr().out
    assert "['Alice wants reports in French.']\n[]\n" in printed
    second = page["second"]
    assert (second.status, second.output) == (
        "completed",
        f"Your report is due on the 5th [{page['memory_id']}].",
    )
    assert page["stranger"].receipts[0].data == {"memories": []}
