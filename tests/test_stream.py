"""`Agent.run_stream`: a run's events as they happen, in trace order, redacted, cancellable."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop import (
    Agent,
    Limits,
    Redactor,
    RunStatus,
    Sensitive,
    StopReason,
    ToolContext,
    ToolRegistry,
)
from ownloop.contracts import (
    BudgetWarning,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    RunStarted,
    StreamEnded,
    TextDelta,
    TokenUsage,
    ToolFinished,
    ToolMessage,
    ToolProposed,
    ToolStarted,
)
from ownloop.exceptions import ConfigurationError, InputRejected, UnexpectedModelCall
from ownloop.models import (
    OpenAIChatModel,
    OpenAIResponsesModel,
    allow_model_requests,
    report_text_delta,
)
from ownloop.policy import allow_writes
from ownloop.store import SqliteRunStore
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call

from .openai_server import OpenAIServer, sse, stream_reply

OPENAI_KEY = "sk-proj-Canary0penAIkey1234567890abcdEF"
AWS_KEY = "AKIACANARY0EXAMPLE12"
BEARER = "ya29.CanaryBearerToken-1234567890"
PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjCanaryBody\n"
    "-----END PRIVATE KEY-----"
)
CANARIES = (OPENAI_KEY, AWS_KEY, BEARER, "CanaryBody")


def lookup_registry() -> ToolRegistry:
    """A registry with one read tool."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def lookup(topic: str) -> dict[str, str]:
        """Look a topic up.

        Args:
            topic: What to look up.
        """
        return {"topic": topic, "fact": "42"}

    return registry


def chunk(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One chat completion chunk."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if calls is not None:
        delta["tool_calls"] = calls
    return {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}


def streamed_agent(server: OpenAIServer, **options: Any) -> Agent:
    """An agent on the real chat adapter, streaming from the local server."""
    model = OpenAIChatModel("test-model", base_url=server.url, api_key="sk-test-0123456789")
    return Agent(model, lookup_registry(), stream=True, **options)


async def collect(agent: Agent, task: str, **options: Any) -> list[Any]:
    """Every event of a streamed run."""
    return [event async for event in agent.run_stream(task, **options)]


def test_events_follow_the_trace_with_text_deltas_inside_their_step() -> None:
    """Trace events arrive in trace order; a reply's deltas sit between its request and response."""
    call = {"index": 0, "id": "t1", "function": {"name": "lookup", "arguments": '{"topic":"x"}'}}
    with OpenAIServer() as server, allow_model_requests(True):
        server.add(
            stream_reply(sse(chunk("Let me "), chunk("look."), chunk(calls=[call]))),
            stream_reply(sse(chunk("The answer "), chunk("is "), chunk("42."))),
        )
        events = asyncio.run(collect(streamed_agent(server), "what is x?"))
    ended = events[-1]
    assert isinstance(ended, StreamEnded)
    result = ended.result
    assert result.status is RunStatus.COMPLETED
    assert result.output == "The answer is 42."
    traced = [event for event in events if hasattr(event, "seq")]
    assert traced == list(result.trace)
    assert [event.seq for event in traced] == list(range(1, len(traced) + 1))
    for step, text in ((1, "Let me look."), (2, "The answer is 42.")):
        positions = [i for i, e in enumerate(events) if isinstance(e, TextDelta) and e.step == step]
        assert "".join(events[i].text for i in positions) == text
        requested = next(
            i for i, e in enumerate(events) if isinstance(e, ModelRequested) and e.step == step
        )
        responded = next(
            i for i, e in enumerate(events) if isinstance(e, ModelResponded) and e.step == step
        )
        assert requested < min(positions) <= max(positions) < responded
    kinds = [event.kind for event in events if not isinstance(event, TextDelta)]
    assert kinds[0] == "run_started"
    assert kinds.index("tool_proposed") < kinds.index("tool_started") < kinds.index("tool_finished")


def test_events_arrive_while_the_run_is_still_going() -> None:
    """The reader sees the tool finish before the model's next reply exists (no batch at end)."""

    async def scenario() -> list[str]:
        seen_tool = asyncio.Event()

        async def respond(request: ModelRequest) -> ModelResponse:
            if not any(isinstance(message, ToolMessage) for message in request.messages):
                return tool_call("lookup", "t1", topic="x")
            await asyncio.wait_for(seen_tool.wait(), timeout=5)  # only the reader can set it
            return final("done")

        agent = Agent(FunctionModel(respond), lookup_registry())
        kinds = []
        async with agent.run_stream("go") as events:
            async for event in events:
                kinds.append(event.kind)
                if isinstance(event, ToolFinished):
                    seen_tool.set()
        return kinds

    kinds = asyncio.run(scenario())
    assert kinds[-2:] == ["run_finished", "stream_ended"]


def test_a_secret_split_across_deltas_never_leaves_the_stream() -> None:
    """Deltas are redacted with the run's rules even when a secret arrives in pieces."""
    pieces = [
        "my key is sk-proj-Canary0pen",
        "AIkey1234567890abcdEF and ",
        "aws AKIACANA",
        "RY0EXAMPLE12.",
    ]
    with OpenAIServer() as server, allow_model_requests(True):
        server.add(stream_reply(sse(*(chunk(piece) for piece in pieces))))
        events = asyncio.run(collect(streamed_agent(server), "tell me"))
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    joined = "".join(deltas)
    assert joined == Redactor().redact_text("".join(pieces))
    assert "[redacted:" in joined
    for delta in deltas:
        for fragment in ("Canary0pen", "AIkey1234", "AKIACANA", "RY0EXAMPLE"):
            assert fragment not in delta


def test_trace_events_in_the_stream_are_the_redacted_ones() -> None:
    """A secret in a tool's arguments is as redacted in the stream as in the stored trace."""
    model = ScriptedModel([tool_call("lookup", "t1", topic=f"token {OPENAI_KEY}"), final("ok")])
    events = asyncio.run(collect(Agent(model, lookup_registry()), "go"))
    proposed = next(event for event in events if isinstance(event, ToolProposed))
    assert OPENAI_KEY not in json.dumps(proposed.arguments)
    assert "[redacted:" in json.dumps(proposed.arguments)
    assert OPENAI_KEY not in "".join(
        event.model_dump_json() for event in events if not isinstance(event, StreamEnded)
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(
        st.sampled_from(
            [
                "alpha",
                "key:",
                "is",
                "\n",
                OPENAI_KEY,
                AWS_KEY,
                f"Authorization: Bearer {BEARER}",
                PEM,
            ]
        ),
        min_size=1,
        max_size=12,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_no_way_of_cutting_a_reply_leaks_a_secret(words: list[str], cuts: list[int]) -> None:
    """Whatever the chunking, no delta holds a secret and the deltas join to safe text."""
    text = " ".join(words)
    bounds = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    pieces = [text[start:end] for start, end in itertools.pairwise(bounds)]

    def respond(request: ModelRequest) -> ModelResponse:
        for piece in pieces:
            report_text_delta(piece)
        return final("done")

    events = asyncio.run(collect(Agent(FunctionModel(respond)), "go"))
    joined = "".join(event.text for event in events if isinstance(event, TextDelta))
    for canary in CANARIES:
        assert canary not in joined
        assert not any(canary in event.text for event in events if isinstance(event, TextDelta))
    assert joined == Redactor().redact_text(text)


def test_a_budget_warning_comes_once_when_a_budget_is_nearly_spent() -> None:
    """Passing the threshold emits one warning per budget, before the run ends."""
    model = ScriptedModel(
        [tool_call("lookup", "t1", topic="a"), tool_call("lookup", "t2", topic="b"), final("ok")]
    )
    agent = Agent(model, lookup_registry(), limits=Limits(max_steps=4, max_tool_calls=2))
    events = asyncio.run(collect(agent, "go", warn_at=0.75))
    warnings = [event for event in events if isinstance(event, BudgetWarning)]
    assert {warning.budget for warning in warnings} == {"max_steps", "max_tool_calls"}
    assert len(warnings) == 2
    tool_calls = next(warning for warning in warnings if warning.budget == "max_tool_calls")
    assert (tool_calls.used, tool_calls.limit, tool_calls.ratio) == (2, 2, 1.0)
    assert events.index(tool_calls) < len(events) - 1
    assert isinstance(events[-1], StreamEnded)
    assert events[-1].result.status is RunStatus.COMPLETED


def test_each_budget_warns_with_what_the_run_used_so_far() -> None:
    """Requests, calls, attempts and tokens are counted event by event: each warns at its second."""
    used = TokenUsage(input_tokens=300, output_tokens=100)
    model = ScriptedModel(
        [
            tool_call("lookup", "t1", topic="a").model_copy(update={"usage": used}),
            tool_call("lookup", "t2", topic="b").model_copy(update={"usage": used}),
            final("ok").model_copy(update={"usage": used}),
        ]
    )
    limits = Limits(
        max_steps=100,
        max_model_attempts=3,
        max_tool_calls=4,
        max_tool_attempts=4,
        max_total_tokens=2000,
        deadline_s=3600,
    )
    agent = Agent(model, lookup_registry(), limits=limits)
    events = asyncio.run(collect(agent, "go", warn_at=0.35))
    warned = {event.budget: event for event in events if isinstance(event, BudgetWarning)}
    counted = {
        "max_model_attempts": (ModelRequested, 2),
        "max_tool_calls": (ToolProposed, 2),
        "max_tool_attempts": (ToolStarted, 2),
        "max_total_tokens": (ModelResponded, 800),
    }
    assert set(warned) == set(counted)
    for budget, (kind, value) in counted.items():
        second = [at for at, event in enumerate(events) if isinstance(event, kind)][1]
        assert (budget, warned[budget].used) == (budget, value)
        assert events.index(warned[budget]) > second
    assert warned["max_model_attempts"].ratio == 0.6667
    assert warned["max_total_tokens"].name == "tokens"


def test_an_invalid_threshold_or_task_is_refused_before_anything_runs() -> None:
    """Bad inputs fail at the call, not at the first read."""
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="warn_at"):
        agent.run_stream("go", warn_at=0)
    with pytest.raises(ConfigurationError, match="warn_at"):
        agent.run_stream("go", warn_at=1.5)
    assert repr(agent.run_stream("go", warn_at=1)).endswith("warn_at=1)")  # the whole budget
    with pytest.raises(InputRejected):
        agent.run_stream("  ")


def test_an_error_of_the_run_reaches_the_reader() -> None:
    """A run that raises (a scripted model out of steps) raises from the iteration."""

    async def scenario() -> list[str]:
        kinds: list[str] = []
        stream = Agent(ScriptedModel([])).run_stream("go")

        async def read() -> None:
            async for event in stream:
                kinds.append(event.kind)  # noqa: PERF401 - kept even when the run raises

        with pytest.raises(UnexpectedModelCall):
            await read()
        assert [event async for event in stream] == []  # ended: nothing more
        return kinds

    assert asyncio.run(scenario())[0] == "run_started"


def test_closing_before_reading_runs_nothing() -> None:
    """A stream closed before its first read never starts the run."""
    model = ScriptedModel([final("never")])

    async def scenario() -> list[Any]:
        stream = Agent(model).run_stream("go")
        assert repr(stream) == f"RunStream(run_id={stream.run_id!r}, not started, warn_at=0.8)"
        await stream.aclose()
        return [event async for event in stream]

    assert asyncio.run(scenario()) == []
    assert model.remaining == 1


def write_agent(store: SqliteRunStore, started: asyncio.Event, calls: list[str]) -> Agent:
    """An agent whose one write blocks until cancelled, recording how it ended."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    async def transfer(amount: int, ctx: ToolContext) -> dict[str, int]:
        """Move money.

        Args:
            amount: Cents.
            ctx: Injected by the runtime.
        """
        calls.append("started")
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            calls.append("cancelled")
            raise
        return {"moved": amount}

    model = ScriptedModel([tool_call("transfer", "w1", amount=500), final("moved")])
    return Agent(model, registry, policy=allow_writes("transfer"), store=store, lease_ttl_s=30)


async def _resume_after(store: SqliteRunStore, run_id: str, calls: list[str]) -> Any:
    """Resume with a fresh agent (the lease must have been released) and report."""
    agent = write_agent(store, asyncio.Event(), calls)
    return await agent.resume(run_id)


@pytest.mark.parametrize("how", ["break", "cancel_reader"])
def test_cancelling_the_stream_leaves_a_write_in_flight_unknown(how: str, tmp_path: Path) -> None:
    """Leaving mid-write cancels the run; a resume marks the write unknown, never runs it again."""
    calls: list[str] = []

    async def scenario() -> Any:
        async with SqliteRunStore(tmp_path / "runs.db") as store:
            started = asyncio.Event()
            agent = write_agent(store, started, calls)

            async def read() -> list[str]:
                kinds = []
                async with agent.run_stream("pay", run_id="r1") as events:
                    async for event in events:
                        kinds.append(event.kind)
                        if isinstance(event, ToolStarted) and how == "break":
                            await started.wait()
                            break
                return kinds

            reader = asyncio.create_task(read())
            if how == "cancel_reader":
                await asyncio.wait_for(started.wait(), timeout=5)
                reader.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await reader
            else:
                assert (await reader)[-1] == "tool_started"
            journal = await store.journal("r1")
            assert [(entry.intent.tool, entry.receipt) for entry in journal] == [("transfer", None)]
            return await _resume_after(store, "r1", calls)

    result = asyncio.run(scenario())
    assert calls == ["started", "cancelled"]  # the handler never ran again
    assert result.status is RunStatus.UNRESOLVED
    assert result.stop_reason is StopReason.UNRESOLVED_EFFECT
    assert [operation.call_id for operation in result.pending] == ["w1"]


def test_the_stream_reports_its_state_and_result() -> None:
    """The stream's result is set once it handed out the last event."""

    async def scenario() -> None:
        stream = Agent(ScriptedModel([final("hi")])).run_stream("go", run_id="named")
        assert stream.result is None
        first = await anext(stream)
        assert isinstance(first, RunStarted)
        assert stream.result is None
        assert repr(stream) == "RunStream(run_id='named', running, warn_at=0.8)"
        rest = [event async for event in stream]
        assert stream.result is not None
        assert stream.result == rest[-1].result
        assert stream.result.output == "hi"
        assert repr(stream) == "RunStream(run_id='named', ended, warn_at=0.8)"

    asyncio.run(scenario())


def test_text_reported_outside_a_stream_goes_nowhere() -> None:
    """With no stream listening, reporting a delta is a no-op (plain runs pay nothing)."""
    report_text_delta("nobody listens")
    result = Agent(ScriptedModel([final("hi")])).run_sync("go")
    assert result.output == "hi"


def test_the_responses_adapter_streams_text_deltas_too() -> None:
    """output_text.delta events of the Responses API arrive as deltas of their step."""
    part = {"type": "output_text", "text": "Hello there."}
    message = {"type": "message", "id": "m1", "role": "assistant", "content": [part]}
    final_response = {"id": "resp_1", "status": "completed", "model": "m", "output": [message]}
    deltas = [
        {"type": "response.output_text.delta", "item_id": "m1", "delta": piece}
        for piece in ("Hello ", "there.")
    ]
    with OpenAIServer() as server, allow_model_requests(True):
        server.add(
            stream_reply(
                sse(*deltas, {"type": "response.completed", "response": final_response}, done=False)
            )
        )
        model = OpenAIResponsesModel("m", base_url=server.url, api_key="sk-test-0123456789")
        events = asyncio.run(collect(Agent(model, stream=True), "hi"))
    assert [(e.step, e.text) for e in events if isinstance(e, TextDelta)] == [
        (1, "Hello "),
        (1, "there."),
    ]
    assert events[-1].result.output == "Hello there."


def test_the_deadline_warns_as_the_clock_runs_down() -> None:
    """A run that has used 80% of its deadline (by the trace's clock) gets a deadline warning."""
    clock = FakeClock()
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def slow(topic: str) -> str:
        """Take a while.

        Args:
            topic: What.
        """
        clock.advance(9)
        return topic

    model = ScriptedModel([tool_call("slow", "t1", topic="a"), final("ok")])
    agent = Agent(model, registry, clock=clock, limits=Limits(deadline_s=10))
    events = asyncio.run(collect(agent, "go"))
    (warning,) = [event for event in events if isinstance(event, BudgetWarning)]
    assert (warning.budget, warning.limit, warning.used) == ("deadline_s", 10, 9)
    assert events[-1].result.status is RunStatus.COMPLETED


def test_the_deadline_warning_comes_at_the_event_that_passed_it() -> None:
    """A tool that uses most of the deadline is warned of right after it ends, not a step later."""
    clock = FakeClock()
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def slow(topic: str) -> str:
        """Take a while.

        Args:
            topic: What.
        """
        clock.advance(9)
        return topic

    model = ScriptedModel([tool_call("slow", "t1", topic="a"), final("ok")])
    agent = Agent(model, registry, clock=clock, limits=Limits(deadline_s=10))
    events = asyncio.run(collect(agent, "go"))
    kinds = [event.kind for event in events]
    at = kinds.index("budget_warning")
    assert kinds[at - 1] == "tool_finished"
    assert events[at].used == 9


def test_a_learned_sensitive_value_with_spaces_never_streams_in_part() -> None:
    """A `Sensitive()` argument with spaces, repeated by the model in pieces, leaves as a marker."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def unlock(passphrase: Annotated[str, Sensitive()]) -> str:
        """Unlock the vault.

        Args:
            passphrase: The passphrase.
        """
        return "unlocked"

    pieces = ["the passphrase was correct ", "horse ", "battery ", "staple, ", "keep it safe"]

    def respond(request: ModelRequest) -> ModelResponse:
        if not any(isinstance(message, ToolMessage) for message in request.messages):
            return tool_call("unlock", "c1", passphrase="correct horse battery staple")
        for piece in pieces:
            report_text_delta(piece)
        return final("".join(pieces))

    events = asyncio.run(collect(Agent(FunctionModel(respond), registry), "open it"))
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    joined = "".join(deltas)
    assert "horse" not in joined
    assert "correct" not in joined
    expected = Redactor().with_values("correct horse battery staple").redact_text("".join(pieces))
    assert joined == expected


def test_an_application_pattern_with_spaces_never_streams_in_part() -> None:
    """A card number pattern of the agent's redactor holds its groups back until it is whole."""
    rules = Redactor().with_patterns(r"\b\d{4}(?: \d{4}){3}\b")
    pieces = ["card 4111 ", "1111 ", "1111 ", "1111 on file"]

    def respond(request: ModelRequest) -> ModelResponse:
        for piece in pieces:
            report_text_delta(piece)
        return final("".join(pieces))

    events = asyncio.run(collect(Agent(FunctionModel(respond), redactor=rules), "card?"))
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert "".join(deltas) == rules.redact_text("".join(pieces))
    assert not any("4111" in delta or "1111" in delta for delta in deltas)


def test_bearer_deltas_join_to_the_redacted_reply() -> None:
    """A bearer header cut into 5-character deltas joins exactly to the redacted reply."""
    text = f"send Authorization: Bearer {BEARER} and then bearer {BEARER} please"
    pieces = [text[start : start + 5] for start in range(0, len(text), 5)]
    with OpenAIServer() as server, allow_model_requests(True):
        server.add(stream_reply(sse(*(chunk(piece) for piece in pieces))))
        events = asyncio.run(collect(streamed_agent(server), "tell me"))
    joined = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert joined == Redactor().redact_text(text)
    assert "Canary" not in joined


def test_the_run_goes_in_a_task_named_after_it() -> None:
    """The run's task is named `ownloop-run-<id>` (for a debugger's or a monitor's task list)."""
    names: list[str] = []
    registry = ToolRegistry()

    @registry.tool(effect="read")
    async def where(topic: str) -> str:
        """Say which task runs this.

        Args:
            topic: Anything.
        """
        task = asyncio.current_task()
        names.append(task.get_name() if task is not None else "")
        return topic

    model = ScriptedModel([tool_call("where", "t1", topic="a"), final("ok")])
    asyncio.run(collect(Agent(model, registry), "go", run_id="named"))
    assert names == ["ownloop-run-named"]
