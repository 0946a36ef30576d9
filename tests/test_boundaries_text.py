"""Text and structure that used to break a run: each case ends in a clean, stored, resumable result.

Unpaired surrogates in the task, a tool's output or exception, the final answer or a server's error
body; arguments nested past the stack; a raising trace sink; objects whose ``__str__``,
``__iter__`` or ``__int__`` raise; a sync tool that returns a coroutine; ``remember()`` of text
UTF-8 cannot encode.
"""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from ownloop import Agent, ContextPolicy, Limits, RunStatus, StopReason, ToolCall, ToolRegistry
from ownloop.contracts import ModelResponse, Receipt
from ownloop.exceptions import InputRejected
from ownloop.memory import MemoryScope, SqliteMemoryStore
from ownloop.models import OpenAIChatModel, allow_model_requests
from ownloop.policy import allow_all
from ownloop.redaction import Redactor
from ownloop.store import SqliteRunStore
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import ToolContext, to_jsonable
from ownloop.validators import Reject

from .boundary_support import nested, run_with_store, store_file
from .context_kit import INSTRUCTIONS, TASK, page_registry, paging_script
from .openai_server import OpenAIServer, Reply

LONE = "\ud83d"
REPLACEMENT = "\ufffd"


def _registry(value: Any = None, error: BaseException | None = None) -> ToolRegistry:
    """A registry whose read tool ``look`` and write tool ``save`` return ``value`` or raise."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look(topic: str) -> Any:
        """Look something up.

        Args:
            topic: What to look up.
        """
        if error is not None:
            raise error
        return value

    @registry.tool(effect="write")
    def save(topic: str) -> Any:
        """Save something.

        Args:
            topic: What to save.
        """
        if error is not None:
            raise error
        return value

    return registry


def _agent(steps: list[Any], registry: ToolRegistry, **options: Any) -> Any:
    """A factory of agents playing ``steps`` with every tool allowed, on a given store."""
    return lambda store: Agent(
        ScriptedModel(list(steps)), registry, store=store, policy=allow_all(), **options
    )


def _observations(result: Any) -> list[str]:
    return [m.content for m in result.messages if m.role == "tool"]


@pytest.mark.parametrize("tool", ["look", "save"])
def test_a_tool_output_with_a_lone_surrogate_is_stored_with_a_replacement(tool: str) -> None:
    """A tool returning an unpaired surrogate completes, stores and records U+FFFD instead."""
    steps = [tool_call(tool, topic="x"), final("done")]
    with store_file() as path:
        result = run_with_store(path, _agent(steps, _registry({"t": f"a{LONE}b"})), "go")
    assert result.status is RunStatus.COMPLETED
    assert result.receipts[0].data == {"t": f"a{REPLACEMENT}b"}
    assert REPLACEMENT in _observations(result)[0]


@pytest.mark.parametrize(("tool", "status"), [("look", "error"), ("save", "unknown")])
def test_a_tool_exception_message_with_a_lone_surrogate_keeps_its_receipt(
    tool: str, status: str
) -> None:
    """An exception message holding a surrogate becomes a clean receipt message, journaled."""
    steps = [tool_call(tool, topic="x"), final("done")]
    registry = _registry(error=ValueError(f"bad {LONE} input"))
    with store_file() as path:
        result = run_with_store(path, _agent(steps, registry), "go")
        receipt = result.receipts[0]
        assert (receipt.status, receipt.message) == (status, f"ValueError: bad {REPLACEMENT} input")
        if tool == "save":
            journal = asyncio.run(_journal(path, result.run_id))
            assert journal[0].receipt == receipt


async def _journal(path: Path, run_id: str) -> list[Any]:
    async with SqliteRunStore(path) as store:
        return await store.journal(run_id)


def test_a_task_with_a_lone_surrogate_runs_with_a_replacement() -> None:
    """The task is cleaned where it enters: the model and the store see U+FFFD."""
    model = ScriptedModel([final("done")])
    with store_file() as path:
        result = run_with_store(
            path, lambda store: Agent(model, ToolRegistry(), store=store), f"do {LONE} this"
        )
    assert result.status is RunStatus.COMPLETED
    assert model.requests[0].messages[-1].content == f"do {REPLACEMENT} this"


def test_a_final_answer_with_a_lone_surrogate_completes() -> None:
    """A model's answer holding a surrogate is stored with U+FFFD instead of crashing the run."""
    with store_file() as path:
        result = run_with_store(path, _agent([final(f"ok {LONE}")], ToolRegistry()), "go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, f"ok {REPLACEMENT}")


def test_a_server_error_body_with_a_lone_surrogate_fails_cleanly() -> None:
    """An error body escaping a lone surrogate ends the run failed, its detail cleaned."""
    body = b'{"error": {"message": "broken \\ud83d model", "code": "bad\\udc80"}}'
    reply = Reply(status=400, headers={"content-type": "application/json"}, body=body)
    with OpenAIServer(lambda received: reply) as server, allow_model_requests(True):

        def build(store: SqliteRunStore) -> Agent:
            model = OpenAIChatModel("m", api_key="sk-test-0123456789abcdef", base_url=server.url)
            return Agent(model, ToolRegistry(), store=store)

        with store_file() as path:
            result = run_with_store(path, build, "go")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert f"broken {REPLACEMENT} model" in result.detail


@pytest.mark.parametrize(
    "arguments",
    ["[" * 5000 + "]" * 5000, json.dumps({"topic": nested(100, "x")}), {"topic": nested(150)}],
    ids=["5000-brackets", "json-text-100-deep", "object-150-deep"],
)
def test_arguments_nested_past_the_bound_are_refused_as_an_observation(arguments: Any) -> None:
    """Deep arguments are a rejection the model reads, never a RecursionError or a stuck store."""
    steps = [
        ModelResponse(tool_calls=(ToolCall(id="c1", name="look", arguments=arguments),)),
        final("done"),
    ]
    with store_file() as path:
        result = run_with_store(path, _agent(steps, _registry("hit")), "go")
    assert result.status is RunStatus.COMPLETED
    rejected = next(event for event in result.trace if event.kind == "tool_rejected")
    assert "nest more than 64 levels" in rejected.reason
    assert "nest more than 64 levels" in _observations(result)[0]


def test_the_same_deep_arguments_twice_count_as_a_repeat_without_recursion() -> None:
    """The repeat detector compares arguments too deep to parse by their text."""
    deep = "[" * 5000 + "]" * 5000
    call = ModelResponse(tool_calls=(ToolCall(id="c1", name="look", arguments=deep),))
    again = ModelResponse(tool_calls=(ToolCall(id="c2", name="look", arguments=deep),))
    agent = Agent(ScriptedModel([call, again, final("x")]), _registry("hit"))
    result = agent.run_sync("go")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.tool_calls == 2


def test_a_tool_output_nested_past_the_bound_is_cut_with_a_marker() -> None:
    """Output deeper than 64 levels is cut to a marker; the run stores and completes."""
    steps = [tool_call("look", topic="x"), final("done")]
    with store_file() as path:
        result = run_with_store(path, _agent(steps, _registry(nested(500))), "go")
    assert result.status is RunStatus.COMPLETED
    assert "nested deeper than 64 levels: cut" in json.dumps(result.receipts[0].data)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class _BadIter(list[int]):
    def __iter__(self) -> Any:
        raise RuntimeError("no iteration")


class _BadInt(int):
    def __int__(self) -> int:
        raise RuntimeError("no int")

    def __index__(self) -> int:
        raise RuntimeError("no index")


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_to_jsonable_never_raises_on_hostile_values() -> None:
    """Values whose __iter__, __int__ or __str__ raise become placeholders, never exceptions."""
    value = {"items": _BadIter([1, 2]), "n": _BadInt(5), "s": _BadStr(), "ok": [1, f"a{LONE}"]}
    converted = to_jsonable(value)
    assert converted["ok"] == [1, f"a{REPLACEMENT}"]
    assert converted["n"] == 5
    assert converted["s"] == "<unprintable _BadStr>"
    assert isinstance(converted["items"], str)
    assert to_jsonable({f"k{LONE}": _BadStr()}) == {f"k{REPLACEMENT}": "<unprintable _BadStr>"}


@pytest.mark.parametrize("tool", ["look", "save"])
def test_a_tool_exception_whose_str_raises_becomes_a_receipt(tool: str) -> None:
    """A tool raising an exception with a broken __str__ still gets its receipt."""
    steps = [tool_call(tool, topic="x"), final("done")]
    with store_file() as path:
        result = run_with_store(path, _agent(steps, _registry(error=_Unprintable())), "go")
    assert result.receipts[0].message == "_Unprintable: <unprintable _Unprintable>"


def test_a_model_exception_whose_str_raises_fails_the_run_cleanly() -> None:
    """A model port raising an exception with a broken __str__ fails the run with a reason."""

    def respond(request: Any) -> ModelResponse:
        raise _Unprintable

    with store_file() as path:
        result = run_with_store(
            path, lambda store: Agent(FunctionModel(respond), store=store), "go"
        )
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert "<unprintable _Unprintable>" in result.detail


def test_tool_values_whose_iter_or_int_raise_keep_the_receipt() -> None:
    """A write returning hostile values is applied once and recorded with placeholders."""
    steps = [tool_call("save", topic="x"), final("done")]
    with store_file() as path:
        registry = _registry([_BadIter([1]), _BadInt(3), _BadStr()])
        result = run_with_store(path, _agent(steps, registry), "go")
    receipt = result.receipts[0]
    assert (receipt.status, receipt.effect) == ("ok", "applied")
    assert receipt.data[1:] == [3, "<unprintable _BadStr>"]


def test_a_sync_tool_returning_a_coroutine_gets_an_error_receipt() -> None:
    """A forgotten await is an error receipt naming the fix, and the coroutine is closed."""
    registry = ToolRegistry()
    ran: list[str] = []

    async def really_save(topic: str) -> str:
        ran.append(topic)
        return "saved"

    @registry.tool(effect="write")
    def save(topic: str) -> Any:
        """Save something.

        Args:
            topic: What to save.
        """
        return really_save(topic)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would surface here
        model = ScriptedModel([tool_call("save", topic="x"), final("d")])
        result = Agent(model, registry, policy=allow_all()).run_sync("go")
        gc.collect()
    receipt = result.receipts[0]
    assert (receipt.status, receipt.effect) == ("error", "none")
    assert "returned a coroutine" in (receipt.message or "")
    assert "async def" in (receipt.message or "")
    assert ran == []


def test_a_raising_sink_never_touches_the_run_and_is_reported_once() -> None:
    """A sink failing on every event: the write keeps its receipt, one warning, one event."""
    seen: list[int] = []

    def broken_sink(event: Any) -> None:
        seen.append(event.seq)
        raise OSError("disk full")

    class Unnamed:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        def __call__(self, event: Any) -> None:
            raise ValueError("not today")

    steps = [tool_call("save", topic="x"), final("done")]
    sinks = [broken_sink, Unnamed()]
    with store_file() as path, pytest.warns(RuntimeWarning) as caught:
        result = run_with_store(path, _agent(steps, _registry("ok"), trace_sinks=sinks), "go")
    assert result.status is RunStatus.COMPLETED
    assert (result.receipts[0].status, result.receipts[0].effect) == ("ok", "applied")
    failures = [event for event in result.trace if event.kind == "sink_failed"]
    assert [(f.sink, f.error) for f in failures] == [
        (repr(broken_sink), "OSError: disk full"),
        ("<Unnamed>", "ValueError: not today"),
    ]
    assert len([w for w in caught if "trace sink" in str(w.message)]) == 2
    assert len(seen) == len(result.trace)  # it kept receiving every event


def test_remember_refuses_text_utf8_cannot_encode(tmp_path: Path) -> None:
    """remember() of a lone surrogate (text or tag) is InputRejected; recall() cleans its query."""
    scope = MemoryScope(tenant="acme", actor="alice")

    async def go() -> None:
        memory = SqliteMemoryStore(tmp_path / "memory.db")
        with pytest.raises(InputRejected, match="surrogate"):
            await memory.remember(f"fact {LONE}", scope=scope)
        with pytest.raises(InputRejected, match="surrogate"):
            await memory.remember("fact", ["t" + LONE], scope=scope)
        await memory.remember("the sky is blue", scope=scope)
        assert [m.text for m in await memory.recall(f"sky {LONE}", scope=scope)] == [
            "the sky is blue"
        ]

    asyncio.run(go())


def test_a_summary_with_a_lone_surrogate_is_cleaned_where_it_enters() -> None:
    """A summarizer is a model too: its text reaches the conversation with U+FFFD."""
    summarizer = FunctionModel(lambda request: final(f"summary {LONE}"), model_name="summarizer")

    def build(store: SqliteRunStore) -> Agent:
        return Agent(
            ScriptedModel(paging_script(5)),
            page_registry(),
            instructions=INSTRUCTIONS,
            context=ContextPolicy(max_request_tokens=1_500, keep_last_turns=2),
            summarizer=summarizer,
            limits=Limits(max_steps=20),
            store=store,
        )

    with store_file() as path:
        result = run_with_store(path, build, TASK)
    assert result.status is RunStatus.COMPLETED
    assert result.usage.compactions > 0
    assert any(f"summary {REPLACEMENT}" in (m.content or "") for m in result.messages)


def test_a_provider_item_nested_past_the_bound_is_dropped_so_the_store_loads() -> None:
    """An opaque item 196 levels deep would make a checkpoint no store can load: it is dropped."""
    deep = ModelResponse(final_output="done", provider_items=({"x": nested(196)}, {"id": "r1"}))
    with store_file() as path:
        result = run_with_store(path, _agent([deep], ToolRegistry()), "go")
    assert result.status is RunStatus.COMPLETED
    assert result.messages[-1].provider_items == ({"id": "r1"},)


def test_a_run_id_with_a_lone_surrogate_is_rejected() -> None:
    """A run id is matched exactly, so it is refused (InputRejected), never repaired."""
    agent = Agent(ScriptedModel([final("ok")]), ToolRegistry())
    with pytest.raises(InputRejected, match="run_id"):
        agent.run_sync("go", run_id=f"run-{LONE}")


def test_a_receipt_a_handler_builds_is_made_storable() -> None:
    """Data in a handler's own receipt is cleaned and cut like any return value."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def save(topic: str, ctx: ToolContext) -> Receipt:
        """Save something.

        Args:
            topic: What to save.
            ctx: The run's context.
        """
        data = {"text": f"a{LONE}", "deep": nested(196)}
        return Receipt(call_id=ctx.call_id, tool="save", status="ok", effect="applied", data=data)

    steps = [tool_call("save", topic="x"), final("done")]
    with store_file() as path:
        result = run_with_store(path, _agent(steps, registry), "go")
    data = result.receipts[0].data
    assert data["text"] == f"a{REPLACEMENT}"
    assert "nested deeper than 64 levels" in json.dumps(data)


def test_a_validator_reason_with_a_lone_surrogate_reaches_the_model_cleaned() -> None:
    """The application's rejection reason is text entering the run: cleaned for store and trace."""
    answers = iter([Reject(f"cite {LONE} a source"), None])

    def check(output: str, evidence: Any) -> Any:
        return next(answers)

    def build(store: SqliteRunStore) -> Agent:
        model = ScriptedModel([final("first"), final("second")])
        return Agent(model, ToolRegistry(), validators=[check], store=store)

    with store_file() as path:
        result = run_with_store(path, build, "go")
    assert result.status is RunStatus.COMPLETED
    rejected = next(event for event in result.trace if event.kind == "completion_rejected")
    assert f"cite {REPLACEMENT} a source" in rejected.reason


def test_the_redactor_never_passes_on_unencodable_text() -> None:
    """Whatever text reaches the trace pipeline comes out encodable, markers included."""
    redactor = Redactor().with_values(f"secret{LONE}value")
    assert redactor.redact_text(f"x{LONE}y") == f"x{REPLACEMENT}y"
    redacted = redactor.redact_text(f"has secret{LONE}value and sk-proj-{'A' * 24}{LONE}")
    redacted.encode("utf-8")
    assert "secret" not in redacted
    assert "AAAA" not in redacted
