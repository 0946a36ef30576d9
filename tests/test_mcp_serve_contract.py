"""`ownloop mcp serve`'s contract pinned in this process: run ids, stored tasks, lookups by id.

Fast forms of two slower tests of tests/test_hostile_serve.py (kept there): the repeat under
another hash seed (a child process) and the approval found among 1,001 pending calls (1,001
served calls). Here the run id and task of a served call are checked against values derived from
the documented canonical inputs only (never ``hash()``), and the pending runs are stored directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import types

from ownloop import Actor, Approval, ConfigurationError, ToolRegistry, ToolSpec
from ownloop.identity import canonical_text, encode
from ownloop.mcp import IDEMPOTENCY_META_KEY, RegistryServer, served_call_key
from ownloop.policy import Allow, Decision, Deny, Policy, allow_writes, require_approval_for
from ownloop.store import MemoryRunStore, SqliteRunStore
from tests.mcp_hostile import piped_stdio

ACTOR = Actor(id="ops-bot", roles=("ops",))


def _labeller(ran: list[frozenset[str]]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def label(labels: frozenset[str]) -> str:
        """Label a thing.

        Args:
            labels: The labels.
        """
        ran.append(labels)
        return "labelled"

    @registry.tool(effect="read")
    def look(thing: str) -> str:
        """Look at a thing.

        Args:
            thing: The thing.
        """
        return f"saw {thing}"

    return registry


def _task(tool: str, arguments: dict[str, Any]) -> str:
    """The documented task of a served call: the canonical text of what the client sent."""
    return canonical_text(encode({"tool": tool, "arguments": arguments}))


def _digest(actor: Actor | None, text: str) -> str:
    """The documented derivation: sha256 of the actor's JSON (or nothing), a colon, the text."""
    who = actor.model_dump_json() if actor is not None else ""
    return hashlib.sha256(f"{who}:{text}".encode()).hexdigest()[:24]


@pytest.mark.parametrize("actor", [ACTOR, None])
def test_a_keyed_calls_run_and_task_come_from_the_canonical_inputs_alone(
    actor: Actor | None,
) -> None:
    """A keyed call's run id is the actor and key's digest; its task, the canonical call sent."""
    ran: list[frozenset[str]] = []
    store = MemoryRunStore()
    labels = [f"label-{i}" for i in range(12)]
    key = served_call_key({IDEMPOTENCY_META_KEY: "k-seed"}, "s", 1)

    def server() -> RegistryServer:
        return RegistryServer(
            _labeller(ran), store=store, actor=actor, policy=allow_writes("label")
        )

    async def scenario() -> list[Any]:
        first = await server().call("label", {"labels": labels}, key=key)
        again = await server().call("label", {"labels": labels}, key=key)  # another process
        return [first, again]

    first, again = asyncio.run(scenario())
    run_id = f"mcp-k-{_digest(actor, 'key:k-seed')}"
    stored = asyncio.run(store.get(run_id))
    assert stored is not None
    assert stored.snapshot.task == _task("label", {"labels": labels})
    assert (first.is_error, first.content[0].text) == (False, "labelled")
    assert (again.is_error, again.content[0].text) == (False, "labelled")
    assert ran == [frozenset(labels)]
    assert [run.run_id for run in asyncio.run(store.list_runs(limit=10))] == [run_id]


@pytest.mark.parametrize("actor", [ACTOR, None])
def test_a_call_without_a_key_is_run_under_its_identitys_digest(actor: Actor | None) -> None:
    """Without a key, the run id is mcp-<digest of actor and canonical call>-<generation>."""
    ran: list[frozenset[str]] = []
    store = MemoryRunStore()
    server = RegistryServer(_labeller(ran), store=store, actor=actor, policy=allow_writes("label"))
    arguments = {"labels": ["b", "a", "c"]}

    answer = asyncio.run(server.call("label", arguments))
    assert answer.content[0].text == "labelled"  # type: ignore[union-attr]
    task = _task("label", arguments)
    stored = asyncio.run(store.get(f"mcp-{_digest(actor, task)}-1"))
    assert stored is not None
    assert stored.snapshot.task == task
    assert stored.snapshot.actor == actor


@pytest.mark.parametrize("earlier", [1, 2, 3, 5, 8, 9, 17, 1000])
def test_the_next_call_follows_the_latest_generation_however_many_there_are(
    earlier: int,
) -> None:
    """With n earlier runs of a read stored, the same read runs as generation n + 1."""
    store = MemoryRunStore()
    server = RegistryServer(_labeller([]), store=store)
    identity = _digest(None, _task("look", {"thing": "x"}))

    async def scenario() -> Any:
        assert (await server.call("look", {"thing": "x"})).content[0].text == "saw x"  # type: ignore[union-attr]
        first = await store.get(f"mcp-{identity}-1")
        assert first is not None
        for generation in range(2, earlier + 1):
            run_id = f"mcp-{identity}-{generation}"
            await store.save(
                first.snapshot.model_copy(update={"run_id": run_id}), expected_version=None
            )
        await server.call("look", {"thing": "x"})
        return [await store.get(f"mcp-{identity}-{n}") for n in (earlier + 1, earlier + 2)]

    following, beyond = asyncio.run(scenario())
    assert following is not None
    assert beyond is None


def test_an_approval_is_found_among_a_thousand_other_pending_calls() -> None:
    """The approved call resumes by its identity with 1,001 other calls paused in the store."""
    ran: list[dict[str, Any]] = []
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def transfer(account: str, amount: int) -> dict[str, object]:
        """Move money.

        Args:
            account: The account id.
            amount: How much.
        """
        ran.append({"account": account, "amount": amount})
        return {"transferred": amount}

    document = {"allowed_writes": ["transfer"], "approval_required": ["transfer"]}
    store = MemoryRunStore()
    server = RegistryServer(registry, store=store, policy=Policy.from_document(document))

    async def ask(amount: int) -> Any:
        return await server.call("transfer", {"account": "a1", "amount": amount})

    async def scenario() -> tuple[Any, Any, int]:
        facts = (await ask(5)).structured_content
        assert facts is not None
        assert facts["status"] == "approval_required"
        paused = await store.get(facts["run_id"])
        assert paused is not None
        approval = Approval(request_id=facts["request_id"], approved=True, approver="ops")
        await store.submit_approval(facts["run_id"], approval)
        for amount in range(100, 1101):  # 1,001 others, each paused under its own identity
            task = _task("transfer", {"account": "a1", "amount": amount})
            other = paused.snapshot.model_copy(
                update={"run_id": f"mcp-{_digest(None, task)}-1", "task": task}
            )
            await store.save(other, expected_version=None)
        count = (await store.run_stats()).runs["paused"]
        return facts, await ask(5), count

    facts, approved, count = asyncio.run(scenario())
    assert count == 1002
    assert approved.structured_content == {"transferred": 5}
    assert ran == [{"account": "a1", "amount": 5}]
    again = asyncio.run(ask(5)).structured_content
    assert again is not None
    assert again["status"] == "approval_required"
    assert again["run_id"] == facts["run_id"].rsplit("-", 1)[0] + "-2"


def test_a_request_id_that_is_not_json_is_keyed_by_its_text() -> None:
    """A request id JSON cannot encode is keyed by its string form, within the session."""

    class Opaque:
        def __str__(self) -> str:
            return "opaque-7"

    assert served_call_key(None, "s", Opaque()) == 'request:s:"opaque-7"'
    assert served_call_key({}, "s", "7") == 'request:s:"7"'


def test_a_server_is_built_over_a_registry_only() -> None:
    """Anything but a ToolRegistry is refused, naming what was given."""
    with pytest.raises(ConfigurationError) as refused:
        RegistryServer(object(), store=MemoryRunStore())  # type: ignore[arg-type]
    assert str(refused.value) == "expected a ToolRegistry, got object"


def test_the_listing_shows_the_offered_tools_with_schemas_and_read_only_hints() -> None:
    """tools() lists what the actor may call: name, description, schema, read-only for reads."""
    registry = _labeller([])
    allowed = RegistryServer(registry, store=MemoryRunStore(), policy=allow_writes("label"))
    reads_only = RegistryServer(registry, store=MemoryRunStore())
    specs = {spec.name: spec for spec in registry.specs()}
    listed = {tool.name: tool for tool in allowed.tools()}
    assert sorted(listed) == ["label", "look"]
    for name, tool in listed.items():
        assert tool.description == specs[name].description
        assert tool.input_schema == specs[name].parameters
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name == "look")
    assert [tool.name for tool in reads_only.tools()] == ["look"]
    roles = Policy.from_document({"allowed_writes": ["label"], "required_roles": {"label": "ops"}})
    operator = RegistryServer(registry, store=MemoryRunStore(), actor=ACTOR, policy=roles)
    clerk = RegistryServer(registry, store=MemoryRunStore(), actor=Actor(id="c"), policy=roles)
    assert [tool.name for tool in operator.tools()] == ["label", "look"]
    assert [tool.name for tool in clerk.tools()] == ["look"]
    done = asyncio.run(operator.call("label", {"labels": ["a"]}))
    refused = asyncio.run(clerk.call("label", {"labels": ["a"]}))
    assert (done.is_error, done.content[0].text) == (False, "labelled")
    assert refused.structured_content == {"status": "rejected", "code": "unknown_tool"}
    assert repr(allowed) == "RegistryServer(name='ownloop', tools=['label', 'look'])"


def test_an_unknown_tool_is_refused_naming_only_the_offered_ones() -> None:
    """A tool not offered to this actor is unknown; the answer lists the offered, sorted."""
    registry = _labeller([])
    server = RegistryServer(registry, store=MemoryRunStore(), policy=allow_writes("label"))
    nothing = ToolRegistry()

    @nothing.tool(effect="write")
    def erase(what: str) -> str:
        """Erase a thing.

        Args:
            what: The thing.
        """
        return what

    closed = RegistryServer(nothing, store=MemoryRunStore())
    for name, answer, offered in (
        ("nope", asyncio.run(server.call("nope", {})), "label, look"),
        ("erase", asyncio.run(closed.call("erase", {"what": "x"})), "none"),
    ):
        assert answer.is_error
        assert answer.content[0].text == (  # type: ignore[union-attr]
            f"Unknown tool {name!r}. Available tools: {offered}."
        )
        assert answer.structured_content == {"status": "rejected", "code": "unknown_tool"}
    assert asyncio.run(closed.store.list_runs(limit=10)) == []


def test_a_served_calls_run_is_one_proposal_by_the_client_model_then_done() -> None:
    """The stored run: model mcp-client, budget of one tool call in three steps, output served."""
    store = MemoryRunStore()
    server = RegistryServer(_labeller([]), store=store, actor=ACTOR)
    asyncio.run(server.call("look", {"thing": "x"}))
    (listed,) = asyncio.run(store.list_runs(limit=10))
    stored = asyncio.run(store.get(listed.run_id))
    assert stored is not None
    snapshot = stored.snapshot
    assert snapshot.versions.model == "mcp-client"
    responded = [event for event in snapshot.trace if event.kind == "model_responded"]
    assert [getattr(event, "model", None) for event in responded] == ["mcp-client"] * 2
    assert (snapshot.limits.max_steps, snapshot.limits.max_tool_calls) == (3, 1)
    assert snapshot.result is not None
    assert snapshot.result.status.value == "completed"
    assert snapshot.result.output == "served"
    assert snapshot.result.usage.tool_calls == 1


def test_a_read_left_running_elsewhere_runs_again_but_a_write_is_unknown() -> None:
    """A keyless read whose latest run never finished is a new call; such a write is not."""
    ran: list[frozenset[str]] = []
    store = MemoryRunStore()
    server = RegistryServer(_labeller(ran), store=store, policy=allow_writes("label"))
    calls: dict[str, dict[str, Any]] = {"look": {"thing": "x"}, "label": {"labels": ["a"]}}

    async def scenario() -> dict[str, Any]:
        answers = {}
        for tool, arguments in calls.items():
            await server.call(tool, arguments)
            run_id = f"mcp-{_digest(None, _task(tool, arguments))}-1"
            done = await store.get(run_id)
            assert done is not None
            crashed = done.snapshot.model_copy(update={"state": "running", "result": None})
            await store.save(crashed, expected_version=done.version)
            answers[tool] = (await server.call(tool, arguments), run_id)
        return answers

    answers = asyncio.run(scenario())
    read, read_run = answers["look"]
    assert read.content[0].text == "saw x"
    assert asyncio.run(store.get(read_run[:-1] + "2")) is not None
    write, write_run = answers["label"]
    assert write.structured_content == {"status": "unknown", "run_id": write_run}
    assert ran == [frozenset({"a"})]


def _outcomes() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def words(n: int) -> list[str]:
        """Some words.

        Args:
            n: How many.
        """
        return ["é"] * n

    @registry.tool(effect="read")
    def broken(n: int) -> str:
        """Always fails.

        Args:
            n: Ignored.
        """
        raise ValueError("broken on purpose")

    @registry.tool(effect="write")
    def send(n: int) -> str:
        """Its effect is always lost.

        Args:
            n: Ignored.
        """
        raise OSError("lost")

    @registry.tool(effect="write")
    def pay(n: int) -> str:
        """Needs an approval.

        Args:
            n: Ignored.
        """
        return "paid"

    return registry


def test_each_outcome_is_answered_with_its_text_and_facts() -> None:
    """Data, a failed read, an unknown write, a pending approval and a denial, answered exactly."""
    store = MemoryRunStore()
    document = {"allowed_writes": ["send", "pay"], "approval_required": ["pay"]}
    server = RegistryServer(_outcomes(), store=store, policy=Policy.from_document(document))

    def run_id(tool: str) -> str:
        return f"mcp-{_digest(None, _task(tool, {'n': 2}))}-1"

    async def scenario() -> list[Any]:
        answers = [await server.call(tool, {"n": 2}) for tool in ("words", "broken", "send", "pay")]
        facts = answers[-1].structured_content
        assert facts is not None
        denial = Approval(request_id=facts["request_id"], approved=False, approver="ops")
        await store.submit_approval(run_id("pay"), denial)
        return [*answers, await server.call("pay", {"n": 2})]

    words, broken, send, pay, denied = asyncio.run(scenario())
    assert (words.is_error, words.content[0].text) == (False, '["é", "é"]')
    assert words.structured_content is None  # only a dict is structured content
    assert broken.is_error
    assert broken.content[0].text == "ValueError: broken on purpose"
    assert broken.structured_content == {
        "run_id": run_id("broken"),
        "status": "completed",
        "receipt_status": "error",
        "effect": "none",
    }
    assert send.is_error
    assert send.content[0].text == (
        f"The outcome of this write is unknown (run {run_id('send')}); it is recorded as a "
        "pending operation. Do not repeat it."
    )
    assert send.structured_content == {
        "run_id": run_id("send"),
        "status": "unresolved",
        "receipt_status": "unknown",
        "effect": "unknown",
    }
    request = pay.structured_content["request_id"]
    assert pay.is_error
    assert pay.content[0].text == (
        f"This call needs an approval: run {run_id('pay')}, request {request} (a person must "
        f"approve this call). After `ownloop approve {run_id('pay')} {request}`, make the same "
        "call again to perform it once."
    )
    assert pay.structured_content == {
        "run_id": run_id("pay"),
        "status": "approval_required",
        "request_id": request,
        "reason": "a person must approve this call",
    }
    assert denied.is_error
    assert denied.content[0].text == "The call was not performed: ops denied 'pay': no reason given"
    assert denied.structured_content == {
        "run_id": run_id("pay"),
        "status": "failed",
        "stop_reason": "approval_denied",
    }


def test_a_call_resumed_in_another_server_is_told_to_try_again(tmp_path: Path) -> None:
    """While one server performs an approved call, the same call to another is not performed."""
    release, started, ran = threading.Event(), threading.Event(), []
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def pay(n: int) -> str:
        """Pay, once the test releases it.

        Args:
            n: How much.
        """
        ran.append(n)
        started.set()
        if not release.wait(30):
            raise TimeoutError("the test never released the payment")
        return "paid"

    document = {"allowed_writes": ["pay"], "approval_required": ["pay"]}
    here, there = (
        RegistryServer(
            registry,
            store=SqliteRunStore(tmp_path / "runs.db"),
            policy=Policy.from_document(document),
        )
        for _ in range(2)
    )

    async def scenario() -> list[Any]:
        facts = (await here.call("pay", {"n": 1})).structured_content
        assert facts is not None
        approval = Approval(request_id=facts["request_id"], approved=True, approver="ops")
        await here.store.submit_approval(facts["run_id"], approval)
        first = asyncio.ensure_future(here.call("pay", {"n": 1}))
        while not started.is_set():
            await asyncio.sleep(0.01)
        other = await there.call("pay", {"n": 1})
        release.set()
        return [other, await first]

    other, first = asyncio.run(scenario())
    assert other.is_error
    assert other.content[0].text == "this call is being served already; try again shortly"
    assert other.structured_content is None
    assert (first.is_error, first.content[0].text) == (False, "paid")
    assert ran == [1]


def test_a_server_has_its_documented_defaults() -> None:
    """By default: named ownloop, no actor, repeats wait 30 s, 10,000 requests remembered."""
    server = RegistryServer(_labeller([]), store=MemoryRunStore())
    assert (server.name, server.actor) == ("ownloop", None)
    assert (server.repeat_wait_s, server.remembered_requests) == (30.0, 10_000)


def test_a_request_replayed_on_its_connection_is_answered_from_its_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tools/call id sent twice on one stdio connection writes once; another id, again."""
    # The SDK builds a ServerSession for each request; the session is known by the connection
    # it holds, `_connection` (private in mcp 2.3). An mcp release without it gives each request
    # a session of its own, and this replay runs twice: this test is what says so.
    ran: list[frozenset[str]] = []
    server = RegistryServer(_labeller(ran), store=MemoryRunStore(), policy=allow_writes("label"))
    call = {"name": "label", "arguments": {"labels": ["a"]}}
    answers = []
    with piped_stdio(server.run_stdio, monkeypatch) as client:
        client.initialize()
        for request in (3, 3, 4):  # a replay, then another request of the same call
            client.send({"id": request, "method": "tools/call", "params": call})
            answers.append(client.reply(request)["result"])
    assert [answer["content"][0]["text"] for answer in answers] == ["labelled"] * 3
    assert ran == [frozenset({"a"})] * 2


def test_keyed_calls_take_no_room_among_the_remembered_requests() -> None:
    """With room for one request, keyed calls after it leave its replay answered from its run."""
    ran: list[frozenset[str]] = []
    server = RegistryServer(
        _labeller(ran), store=MemoryRunStore(), policy=allow_writes("label"), remembered_requests=1
    )
    request = served_call_key(None, "s", 1)

    async def scenario() -> None:
        await server.call("label", {"labels": ["a"]}, key=request)
        for name in ("k1", "k2"):
            keyed = served_call_key({IDEMPOTENCY_META_KEY: name}, "s", 2)
            await server.call("label", {"labels": [name]}, key=keyed)
        await server.call("label", {"labels": ["a"]}, key=request)

    asyncio.run(scenario())
    assert ran == [frozenset({"a"}), frozenset({"k1"}), frozenset({"k2"})]


def test_a_paused_call_the_policy_now_refuses_is_answered_refused_not_pending() -> None:
    """A resumed call the policy denies ends failed, and its run waits for no approval any more."""
    frozen: list[bool] = []

    def freeze(actor: Actor | None, spec: ToolSpec, arguments: Any) -> Decision:
        return Deny("payments are frozen") if arguments is not None and frozen else Allow()

    policy = allow_writes("pay") & require_approval_for("pay") & Policy(freeze, "freeze")
    store = MemoryRunStore()
    server = RegistryServer(_outcomes(), store=store, policy=policy)

    async def scenario() -> Any:
        facts = (await server.call("pay", {"n": 2})).structured_content
        assert facts is not None
        approval = Approval(request_id=facts["request_id"], approved=True, approver="ops")
        await store.submit_approval(facts["run_id"], approval)
        frozen.append(True)  # the same policy (same digest) now refuses the call
        answer = await server.call("pay", {"n": 2})
        stored = await store.get(facts["run_id"])
        assert stored is not None
        assert stored.snapshot.result is not None
        assert stored.snapshot.result.approval_requests == ()  # withdrawn with the call
        assert stored.snapshot.result.receipts == ()  # never performed
        return facts, answer

    facts, answer = asyncio.run(scenario())
    assert answer.is_error
    assert answer.content[0].text == "The call was not performed: 'pay' denied: payments are frozen"
    assert answer.structured_content == {
        "run_id": facts["run_id"],
        "status": "failed",
        "stop_reason": "tool_denied",
    }


class _Session:
    """A session object that holds no ``_connection`` (as another SDK's might)."""


def test_a_session_holding_no_connection_is_the_session_itself() -> None:
    """Where the SDK's session object holds no connection, request ids are per that object."""
    ran: list[frozenset[str]] = []
    server = RegistryServer(_labeller(ran), store=MemoryRunStore(), policy=allow_writes("label"))
    entry = server.server().get_request_handler("tools/call")
    assert entry is not None
    params = types.CallToolRequestParams(name="label", arguments={"labels": ["a"]})
    one, two = _Session(), _Session()

    async def scenario() -> list[Any]:
        return [
            await entry.handler(SimpleNamespace(session=session, request_id=1), params)
            for session in (one, one, two)
        ]

    answers = asyncio.run(scenario())
    assert [answer.content[0].text for answer in answers] == ["labelled"] * 3
    assert ran == [frozenset({"a"})] * 2  # one's replay is answered from its run; two's runs


def _transfers(version: int, ran: list[int]) -> ToolRegistry:
    registry = ToolRegistry()
    if version == 1:

        @registry.tool(effect="write")
        def transfer(amount: int) -> str:
            """Move money.

            Args:
                amount: How much.
            """
            ran.append(amount)
            return "moved"

    else:

        @registry.tool(effect="write")
        def transfer(amount: int, memo: str = "") -> str:  # the redeploy
            """Move money, with a memo.

            Args:
                amount: How much.
                memo: What for.
            """
            ran.append(amount)
            return "moved"

    return registry


def test_an_approved_call_paused_before_a_deploy_is_answered_not_performed() -> None:
    """A paused call whose tool changed since is answered "not performed", typed, and not run."""
    ran: list[int] = []
    store = MemoryRunStore()
    document = {"allowed_writes": ["transfer"], "approval_required": ["transfer"]}

    def server(version: int) -> RegistryServer:
        policy = Policy.from_document(document)
        return RegistryServer(_transfers(version, ran), store=store, policy=policy)

    async def scenario() -> tuple[Any, Any]:
        facts = (await server(1).call("transfer", {"amount": 5})).structured_content
        assert facts is not None
        approval = Approval(request_id=facts["request_id"], approved=True, approver="ops")
        await store.submit_approval(facts["run_id"], approval)
        return facts, await server(2).call("transfer", {"amount": 5})

    facts, answer = asyncio.run(scenario())
    assert answer.is_error
    assert answer.structured_content == {"status": "not_performed"}
    text = answer.content[0].text
    assert text.startswith(
        f"The call was not performed: run {facts['run_id']} was recorded with another "
        "configuration: tool 'transfer' signature (its schema or options changed) differ."
    )
    assert ran == []
    stored = asyncio.run(store.get(facts["run_id"]))
    assert stored is not None
    assert stored.snapshot.state == "paused"  # an operator can still resume or settle it
