"""Fuzz every entry point: any input ends in a typed result or a documented error, never a crash.

Each property runs the real thing: an agent on a SQLite store file (reopened, round-tripped and
resumed after the run), a loopback HTTP server for provider bodies, policy files on disk, a SQLite
memory. CI runs the ``boundaries`` profile (25 examples each); set
``OWNLOOP_FUZZ_PROFILE=boundaries-long`` for a longer search.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, reject
from hypothesis import strategies as st
from pydantic import ValidationError

from ownloop import Agent, ToolCall, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.exceptions import (
    ConfigurationError,
    InputRejected,
    PermanentModelError,
    StoreError,
    TransientModelError,
)
from ownloop.memory import MemoryScope, SqliteMemoryStore
from ownloop.models import OpenAIChatModel, allow_model_requests
from ownloop.policy import Policy, PolicyDocument, allow_all
from ownloop.store import SqliteRunStore
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call

from .boundary_support import FUZZ, json_values, nasty_text, nested, run_with_store, store_file
from .openai_server import OpenAIServer, Reply


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _BadIter(list[Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("no iteration")


class _BadInt(int):
    def __int__(self) -> int:
        raise RuntimeError("no int")


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def _registry(behaviour: Any) -> ToolRegistry:
    """Tools ``look`` (read) and ``save`` (write) that return or raise what ``behaviour`` says."""
    registry = ToolRegistry()

    def act() -> Any:
        kind, value = behaviour
        if kind == "raise":
            raise value
        return value

    @registry.tool(effect="read")
    def look(topic: str) -> Any:
        """Look something up.

        Args:
            topic: What to look up.
        """
        return act()

    @registry.tool(effect="write")
    def save(topic: str) -> Any:
        """Save something.

        Args:
            topic: What to save.
        """
        return act()

    return registry


def _build(model: Any, registry: ToolRegistry | None = None) -> Any:
    """A factory of agents on a given store: every tool allowed, retries without real sleeps."""
    return lambda store: Agent(
        model,
        registry or _registry(("return", "ok")),
        store=store,
        policy=allow_all(),
        clock=FakeClock(),
    )


def _replay(*responses: ModelResponse) -> FunctionModel:
    """A model answering with ``responses`` in turn, then a final answer, forever."""
    calls = {"n": 0}

    def respond(request: ModelRequest) -> ModelResponse:
        calls["n"] += 1
        return responses[calls["n"] - 1] if calls["n"] <= len(responses) else final("done")

    return FunctionModel(respond)


@FUZZ
@given(task=nasty_text)
def test_fuzz_task(task: str) -> None:
    """Any task: a stored, resumable result, or InputRejected for an empty one."""
    with store_file() as path:
        try:
            run_with_store(path, _build(ScriptedModel([final("ok")])), task)
        except InputRejected:
            assert not task.strip()


@FUZZ
@given(arguments=json_values | nasty_text, tool=st.sampled_from(["look", "save", "nope"]))
def test_fuzz_tool_arguments(arguments: Any, tool: str) -> None:
    """Any raw arguments, to a read, a write or an unknown tool: a stored, resumable result."""
    try:
        call = ToolCall(id="c1", name=tool, arguments=arguments)
    except ValidationError:  # the model port itself cannot even build such a call
        reject()
    with store_file() as path:
        run_with_store(path, _build(_replay(ModelResponse(tool_calls=(call,)))), "go")


hostile_values = st.one_of(
    json_values,
    st.sampled_from([_BadStr(), _BadIter([1]), _BadInt(3), float("nan"), b"\xff\xfe", {1, 2}]),
    st.lists(st.sampled_from([_BadStr(), _BadInt(1)]) | nasty_text, max_size=3),
    st.dictionaries(nasty_text, st.sampled_from([_BadStr(), None]), max_size=2),
    st.integers(60, 2000).map(nested),
)
hostile_errors = st.one_of(
    nasty_text.map(ValueError),
    nasty_text.map(TimeoutError),
    st.just(_Unprintable()),
    nasty_text.map(lambda text: RuntimeError(text, _BadStr())),
)


@FUZZ
@given(
    behaviour=st.tuples(st.just("return"), hostile_values)
    | st.tuples(st.just("raise"), hostile_errors),
    tool=st.sampled_from(["look", "save"]),
)
def test_fuzz_tool_outputs_and_exceptions(behaviour: Any, tool: str) -> None:
    """Whatever a tool returns or raises, read or write: a receipt, a stored resumable result."""
    model = ScriptedModel([tool_call(tool, topic="x"), final("done")])
    with store_file() as path:
        result = run_with_store(path, _build(model, _registry(behaviour)), "go")
    assert len(result.receipts) >= 1


def _response(**fields: Any) -> ModelResponse | None:
    """Build a response, or ``None`` where the contract itself refuses the fields."""
    try:
        return ModelResponse(**fields)
    except ValidationError:  # e.g. a surrogate in a length-limited field: the port cannot send it
        return None


def _call(**fields: Any) -> ToolCall | None:
    try:
        return ToolCall(**fields)
    except ValidationError:
        return None


tool_calls = st.builds(
    _call,
    id=st.sampled_from(["c1", "c2"]),
    name=st.sampled_from(["look", "save"]) | nasty_text,
    arguments=json_values | nasty_text,
).filter(lambda call: call is not None)
model_responses = st.builds(
    _response,
    final_output=st.none() | nasty_text,
    stop_reason=st.none() | nasty_text,
    model=st.none() | nasty_text,
    provider_items=st.lists(st.dictionaries(nasty_text, json_values, max_size=2), max_size=2).map(
        tuple
    ),
    tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
).filter(lambda response: response is not None)
model_errors = st.one_of(
    hostile_errors,
    nasty_text.map(lambda text: PermanentModelError(text, category="invalid_request")),
    nasty_text.map(TransientModelError),
)


@FUZZ
@given(first=model_responses | model_errors)
def test_fuzz_model_responses(first: Any) -> None:
    """Any response or exception from the model port: a stored, resumable result."""
    calls = {"n": 0}

    def respond(request: ModelRequest) -> ModelResponse:
        calls["n"] += 1
        if calls["n"] > 1:
            return final("done")
        if isinstance(first, BaseException):
            raise first
        return first

    with store_file() as path:
        run_with_store(path, _build(FunctionModel(respond)), "go")


def _completion(content: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
    }  # fmt: skip


server_bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),  # surrogates as \\udXXX escapes
    json_values.map(lambda value: json.dumps({"error": {"message": value, "code": 1}}).encode()),
    nasty_text.map(lambda text: json.dumps(_completion(text)).encode()),
    st.integers(100, 20_000).map(lambda depth: b'{"error": {"message": ' + b"[" * depth + b"}}"),
)


@FUZZ
@given(
    status=st.sampled_from([200, 400, 404, 429, 500]),
    body=server_bodies,
    json_type=st.booleans(),
)
def test_fuzz_server_bodies(status: int, body: bytes, json_type: bool) -> None:
    """Any body a real HTTP server sends, at any status: a stored, resumable result."""
    headers = {"content-type": "application/json" if json_type else "text/plain"}
    reply = Reply(status=status, headers=headers, body=body)
    with OpenAIServer(lambda received: reply) as server, allow_model_requests(True):
        model = OpenAIChatModel("m", api_key="sk-test-0123456789abcdef", base_url=server.url)

        def build(store: SqliteRunStore) -> Agent:
            return Agent(model, ToolRegistry(), store=store, clock=FakeClock())

        with store_file() as path:
            run_with_store(path, build, "go")


def _outcome(load: Callable[[], Policy]) -> Policy | ConfigurationError:
    """What loading gave: the policy, or the documented error."""
    try:
        return load()
    except ConfigurationError as error:
        return error


_KEYS = sorted(PolicyDocument.model_fields)
policy_values = st.one_of(
    json_values,
    st.lists(nasty_text, max_size=3),
    st.dictionaries(nasty_text, nasty_text, max_size=2),
    st.integers(-2, 5),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1, max_value=100),
)


@FUZZ
@given(document=st.dictionaries(st.sampled_from(_KEYS) | nasty_text, policy_values, max_size=4))
def test_fuzz_policy_documents(document: dict[str, Any]) -> None:
    """Any document: a Policy whose values kept their exact types, or a ConfigurationError."""
    policy = _outcome(lambda: Policy.from_document(document))
    if isinstance(policy, ConfigurationError):
        assert str(policy).startswith("invalid policy document: ")
        return
    assert isinstance(policy, Policy)
    parsed = PolicyDocument.model_validate(document)
    for key, value in document.items():
        kept = getattr(parsed, key)
        if isinstance(value, bool) or isinstance(kept, bool):
            assert type(value) is type(kept) is bool, (key, value)
        elif isinstance(kept, int):
            assert type(value) is int, (key, value)
        elif isinstance(kept, str):
            assert type(value) is str, (key, value)


@FUZZ
@given(
    text=st.one_of(
        nasty_text,
        st.dictionaries(st.sampled_from(_KEYS), policy_values, max_size=3).map(json.dumps),
        st.sampled_from(_KEYS).map(lambda key: f'{{"{key}": 1, "{key}": 2}}'),
    ),
    suffix=st.sampled_from([".json", ".toml"]),
)
def test_fuzz_policy_files(text: str, suffix: str) -> None:
    """Any policy file text: a Policy, or a ConfigurationError naming the file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"policy{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        loaded = _outcome(lambda: Policy.from_file(path))
        assert isinstance(loaded, Policy) or "policy" in str(loaded)


@FUZZ
@given(
    entries=st.lists(st.tuples(nasty_text, st.lists(nasty_text, max_size=3)), max_size=3),
    query=nasty_text,
)
def test_fuzz_memory_inputs(entries: list[tuple[str, list[str]]], query: str) -> None:
    """Any text, tags and query: stored memories, InputRejected, and recall that always answers."""
    scope = MemoryScope(tenant="acme", actor="alice")

    async def go(path: Path) -> None:
        memory = SqliteMemoryStore(path)
        kept = 0
        for text, tags in entries:
            try:
                await memory.remember(text, tags, scope=scope)
                kept += 1
            except (InputRejected, StoreError):
                pass
        found = await memory.recall(query, 5, scope=scope)
        assert len(found) <= min(kept, 5)
        for item in found:
            item.model_dump_json()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(go(Path(folder) / "memory.db"))
