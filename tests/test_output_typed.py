"""Typed final answers: output_type, modes, re-asks, validators, streaming and durability."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, field_validator
from typing_extensions import TypedDict

from ownloop import (
    Agent,
    ConfigurationError,
    Limits,
    RunResult,
    RunStatus,
    SqliteRunStore,
    StopReason,
    ToolRegistry,
    citations_observed,
)
from ownloop.contracts import ModelRequest, ModelResponse, OutputInvalid, StreamEnded, ToolCall
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call
from ownloop.tracing import event_severity


class Invoice(BaseModel):
    """An invoice the model reads out of a document."""

    number: str
    total: int
    currency: Literal["EUR", "USD"] = "EUR"

    @field_validator("total")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("total must be positive")
        return value


@dataclass
class Point:
    """A dataclass answer."""

    x: int
    y: int


class Movie(TypedDict):
    """A TypedDict answer."""

    title: str
    year: int


def _agent(steps: list[ModelResponse], output_type: Any, **options: Any) -> Agent[Any, Any]:
    return Agent(ScriptedModel(steps), output_type=output_type, **options)


def test_a_pydantic_model_answer_is_an_instance() -> None:
    """A JSON answer matching the model's schema becomes an instance in result.output."""
    result = _agent(
        [final('{"number": "F-1", "total": 120, "currency": "USD"}')], Invoice
    ).run_sync("Read the invoice")
    assert result.status is RunStatus.COMPLETED
    assert result.output == Invoice(number="F-1", total=120, currency="USD")
    assert result.raw_output == '{"number": "F-1", "total": 120, "currency": "USD"}'
    assert isinstance(result, RunResult)


def test_a_null_for_a_defaulted_field_selects_its_default() -> None:
    """The strict schema makes defaulted fields nullable; null then means the default."""
    result = _agent([final('{"number": "F-2", "total": 5, "currency": null}')], Invoice).run_sync(
        "Read it"
    )
    assert result.output == Invoice(number="F-2", total=5, currency="EUR")


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (Movie, '{"title": "Alien", "year": 1979}', {"title": "Alien", "year": 1979}),
        (int, '{"result": 42}', 42),
        (bool, '{"result": true}', True),
        (Literal["yes", "no"], '{"result": "no"}', "no"),
        (list[Point], '{"result": [{"x": 0, "y": 1}]}', [Point(0, 1)]),
        (Point | int, '{"result": 7}', 7),
    ],
    ids=["dataclass", "typeddict", "int", "bool", "literal", "list", "union"],
)
def test_every_supported_kind_of_type_is_read(output_type: Any, answer: str, expected: Any) -> None:
    """Models, dataclasses, TypedDicts, scalars, Literals, lists and unions are all answers."""
    result = _agent([final(answer)], output_type, output_mode="native").run_sync("Answer")
    assert result.status is RunStatus.COMPLETED
    assert result.output == expected


def test_the_request_carries_a_strict_schema_wrapped_for_non_objects() -> None:
    """The request's output format is strict; a scalar is wrapped as {"result": ...}."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final('{"result": 3}')

    Agent(FunctionModel(answer), output_type=int, output_mode="native").run_sync("Count")
    output = seen[0].output
    assert output is not None
    assert (output.mode, output.wrapped, output.name) == ("native", True, "int")
    assert output.json_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
    }


def test_a_model_schema_is_closed_and_every_property_required() -> None:
    """The strict generator closes the object and requires every property, as for tools."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final('{"number": "1", "total": 1, "currency": "EUR"}')

    Agent(FunctionModel(answer), output_type=Invoice).run_sync("Read")
    output = seen[0].output
    assert output is not None
    assert not output.wrapped
    assert output.name == "Invoice"
    schema = output.json_schema
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["number", "total", "currency"]


def test_an_invalid_answer_is_sent_back_with_the_errors_and_re_asked() -> None:
    """A wrong shape or a failing validator goes back to the model, which then answers again."""
    seen: list[ModelRequest] = []
    answers = iter(['{"number": "F-3", "total": -4}', '{"number": "F-3", "total": 4}'])

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final(next(answers))

    result = Agent(FunctionModel(answer), output_type=Invoice).run_sync("Read")
    assert result.status is RunStatus.COMPLETED
    assert result.output == Invoice(number="F-3", total=4)
    assert result.usage.invalid_outputs == 1
    feedback = seen[1].messages[-1]
    assert feedback.role == "user"
    assert "total" in feedback.content
    assert "total must be positive" in feedback.content
    invalid = [event for event in result.trace if isinstance(event, OutputInvalid)]
    assert [event.invalid_outputs for event in invalid] == [1]
    assert event_severity(invalid[0]) == "warning"  # the console shows it like a rejection


def test_an_answer_that_is_not_json_is_re_asked() -> None:
    """Prose instead of JSON is an invalid answer the model is told about."""
    result = _agent([final("The total is 12."), final('{"result": 12}')], int).run_sync("Sum")
    assert (result.status, result.output) == (RunStatus.COMPLETED, 12)
    assert result.usage.invalid_outputs == 1


def test_a_fenced_json_answer_is_read_in_prompted_mode() -> None:
    """A code fence around the JSON is tolerated in prompted mode."""
    answer = '```json\n{"x": 3, "y": 4}\n```'
    result = _agent([final(answer)], Point, output_mode="prompted").run_sync("Where?")
    assert result.output == Point(3, 4)


def test_when_the_budget_is_spent_the_run_stops_typed_with_the_last_raw_answer() -> None:
    """No re-ask left: stopped / invalid_output, never an exception, the raw answer kept."""
    limits = Limits(max_steps=2)
    result = _agent([final("nope"), final('{"x": "a"}')], Point, limits=limits).run_sync("Go")
    assert result.status is RunStatus.STOPPED
    assert result.stop_reason is StopReason.INVALID_OUTPUT
    assert result.output is None
    assert result.raw_output == '{"x": "a"}'
    assert "invalid 2 time(s)" in result.detail
    assert "max_steps" in result.detail
    assert result.usage.invalid_outputs == 2


def test_the_shared_attempt_budget_bounds_re_asks() -> None:
    """Each re-ask is a model attempt: max_model_attempts ends the run as invalid_output."""
    limits = Limits(max_steps=10, max_model_attempts=1)
    result = _agent([final("{}")], Point, limits=limits).run_sync("Go")
    assert result.stop_reason is StopReason.INVALID_OUTPUT
    assert "max_model_attempts" in result.detail


def test_an_answer_longer_than_max_output_chars_is_invalid_not_cut() -> None:
    """A typed answer is never truncated: one too long is re-asked."""
    limits = Limits(max_output_chars=64)
    long = json.dumps({"number": "x" * 80, "total": 1})
    result = _agent([final(long), final('{"number": "1", "total": 1}')], Invoice, limits=limits)
    outcome = result.run_sync("Read")
    assert outcome.output == Invoice(number="1", total=1)
    assert outcome.usage.invalid_outputs == 1


def test_tool_mode_offers_a_final_result_tool_and_reads_its_arguments() -> None:
    """In tool mode the answer is the final_result tool's arguments; nothing runs for it."""
    seen: list[ModelRequest] = []
    replies = iter(
        [
            ModelResponse(tool_calls=(ToolCall(id="c1", name="final_result", arguments="{}"),)),
            ModelResponse(
                tool_calls=(
                    ToolCall(id="c2", name="final_result", arguments={"x": 5, "y": 6}),
                    ToolCall(id="c3", name="other", arguments={}),
                )
            ),
        ]
    )

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return next(replies)

    result = Agent(FunctionModel(answer), output_type=Point, output_mode="tool").run_sync("Where?")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Point(5, 6))
    assert [spec.name for spec in seen[0].tools] == ["final_result"]
    assert seen[0].tools[0].parameters == seen[0].output.json_schema  # type: ignore[union-attr]
    # the invalid call was answered, then the problem given: the conversation stays valid
    roles = [message.role for message in seen[1].messages]
    assert roles[-3:] == ["assistant", "tool", "user"]
    assert result.usage.tool_calls == 0
    observed = [m for m in result.messages if m.role == "tool"]
    assert [m.content for m in observed][-2:] == [
        "Final answer received.",
        "Not run: the final answer was given in the same turn.",
    ]


def test_tool_mode_still_accepts_a_json_text_answer() -> None:
    """A model that answers in text rather than through the tool is read all the same."""
    result = _agent([final('{"x": 1, "y": 1}')], Point, output_mode="tool").run_sync("Where?")
    assert result.output == Point(1, 1)


def test_prompted_mode_tells_the_model_the_schema() -> None:
    """Prompted mode adds a system message with the schema; the request asks nothing native."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final('{"result": true}')

    Agent(FunctionModel(answer), output_type=bool, output_mode="prompted").run_sync("Is it?")
    system = [m.content for m in seen[0].messages if m.role == "system"]
    assert len(system) == 1
    assert '"result"' in system[0]
    assert "JSON" in system[0]
    assert seen[0].output is not None
    assert seen[0].output.mode == "prompted"


def test_a_model_without_a_preference_defaults_to_prompted() -> None:
    """A model port that names no output_mode gets the portable prompted mode."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final('{"result": 1}')

    Agent(FunctionModel(answer), output_type=int).run_sync("One")
    assert seen[0].output is not None
    assert seen[0].output.mode == "prompted"


def test_misconfigured_outputs_are_refused_at_construction() -> None:
    """A mode without a type, an unknown mode, a free-form type or a clashing tool are errors."""
    model = ScriptedModel([])
    with pytest.raises(ConfigurationError, match="needs an output_type"):
        Agent(model, output_mode="tool")
    with pytest.raises(ConfigurationError, match="output_mode must be one of"):
        Agent(model, output_type=int, output_mode="json")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cannot be a strict schema"):
        Agent(model, output_type=dict[str, int])
    with pytest.raises(ConfigurationError, match="cannot be a strict schema"):
        Agent(model, output_type=object)

    class Opaque:
        """A class Pydantic has no schema for."""

    with pytest.raises(ConfigurationError, match="has no JSON schema"):
        Agent(model, output_type=Opaque)
    with pytest.raises(ConfigurationError, match="has no JSON schema"):
        Agent(model, output_type=list[Opaque])
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def final_result() -> str:
        """A tool with the reserved name."""
        return "x"

    with pytest.raises(ConfigurationError, match="final_result"):
        Agent(model, registry, output_type=int, output_mode="tool")


def test_str_stays_the_default_and_keeps_truncation() -> None:
    """Without output_type (or with str) the answer is text, cut at max_output_chars."""
    limits = Limits(max_output_chars=64)
    result = Agent(ScriptedModel([final("x" * 100)]), limits=limits, output_type=str).run_sync("Go")
    assert isinstance(result.output, str)
    assert len(result.output) == 64
    assert result.raw_output is None


def test_completion_validators_receive_the_typed_value() -> None:
    """A validator sees the instance, and its rejection is fed back like any other."""
    seen: list[object] = []

    def no_usd(output: Invoice, evidence: object) -> Any:
        from ownloop import Accept, Reject

        seen.append(output)
        return Reject("answer in EUR") if output.currency == "USD" else Accept()

    steps = [
        final('{"number": "1", "total": 1, "currency": "USD"}'),
        final('{"number": "1", "total": 1, "currency": "EUR"}'),
    ]
    result = _agent(steps, Invoice, validators=[no_usd]).run_sync("Read")
    assert result.output == Invoice(number="1", total=1)
    assert [type(value) for value in seen] == [Invoice, Invoice]


class Cited(BaseModel):
    """An answer with its sources in a field."""

    answer: str
    sources: list[str]


def _research() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def read_document(document_id: str) -> dict[str, str]:
        """Read a document.

        Args:
            document_id: Its id.
        """
        return {"id": document_id, "text": "Evaluate first."}

    return registry


def test_citations_are_read_from_a_declared_field() -> None:
    """citations_observed(citation_field=...) checks the ids a typed answer lists."""
    steps = [
        tool_call("read_document", "r1", document_id="R-02"),
        final('{"answer": "Evaluate first.", "sources": ["R-09"]}'),
        final('{"answer": "Evaluate first.", "sources": ["R-02"]}'),
    ]
    check = citations_observed(citation_field="sources", min_citations=1)
    agent = Agent(ScriptedModel(steps), _research(), output_type=Cited, validators=[check])
    result = agent.run_sync("Why?")
    assert result.status is RunStatus.COMPLETED
    assert result.output == Cited(answer="Evaluate first.", sources=["R-02"])
    assert result.usage.completion_rejections == 1


def test_citations_are_read_from_the_texts_of_a_typed_answer_without_a_field() -> None:
    """Without a field, [ID] citations anywhere in the answer's texts are checked."""
    steps = [
        tool_call("read_document", "r1", document_id="R-02"),
        final('{"answer": "Evaluate first [R-07].", "sources": []}'),
        final('{"answer": "Evaluate first [R-02].", "sources": ["ignored"]}'),
    ]
    check = citations_observed(min_citations=1)
    agent = Agent(ScriptedModel(steps), _research(), output_type=Cited, validators=[check])
    result = agent.run_sync("Why?")
    assert result.status is RunStatus.COMPLETED
    assert result.usage.completion_rejections == 1


def test_a_citation_field_holding_text_or_nothing_is_read() -> None:
    """A text field is read with the pattern; a missing field cites nothing."""
    steps = [
        tool_call("read_document", "r1", document_id="R-02"),
        final('{"answer": "none", "sources": []}'),
        final('{"answer": "See [R-02].", "sources": []}'),
    ]
    check = citations_observed(citation_field="answer", min_citations=1)
    agent = Agent(ScriptedModel(steps), _research(), output_type=Cited, validators=[check])
    assert agent.run_sync("Why?").status is RunStatus.COMPLETED
    missing = citations_observed(citation_field="missing", min_citations=1)
    steps = [final('{"answer": "a", "sources": []}')]
    limits = Limits(max_completion_rejections=0)
    agent = Agent(ScriptedModel(steps), output_type=Cited, validators=[missing], limits=limits)
    assert agent.run_sync("Why?").stop_reason is StopReason.COMPLETION_REJECTED


def test_run_stream_ends_with_the_typed_value() -> None:
    """The stream's last event carries RunResult[T]; the stream's result is typed too."""

    async def scenario() -> tuple[Any, Any]:
        agent = Agent(ScriptedModel([final('{"x": 2, "y": 3}')]), output_type=Point)
        last = None
        async with agent.run_stream("Where?") as stream:
            async for event in stream:
                last = event
        return last, stream.result

    last, result = asyncio.run(scenario())
    assert isinstance(last, StreamEnded)
    assert last.result.output == Point(2, 3)
    assert result is not None
    assert result.output == Point(2, 3)


def test_a_paused_typed_run_resumes_to_the_same_type(tmp_path: Path) -> None:
    """A run paused for approval resumes from the store and ends with the typed value."""
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def send(total: int) -> str:
        """Send the invoice.

        Args:
            total: Its total.
        """
        return "sent"

    steps = [tool_call("send", "s1", total=3), final('{"number": "9", "total": 3}')]
    store = SqliteRunStore(tmp_path / "runs.db")
    agent = Agent(ScriptedModel(steps), registry, output_type=Invoice, store=store)
    paused = agent.run_sync("Send it", run_id="typed-1")
    assert paused.status is RunStatus.PAUSED
    request = paused.approval_requests[0]
    from ownloop import Approval

    approval = Approval(request_id=request.id, approved=True, approver="lead")
    result = agent.resume_sync("typed-1", approvals=[approval])
    assert result.output == Invoice(number="9", total=3)

    async def load() -> RunResult[Invoice] | None:
        return await agent.stored_result("typed-1")

    stored = asyncio.run(load())
    assert stored is not None
    assert stored.output == Invoice(number="9", total=3)
    assert type(stored).__name__ == "RunResult[Invoice]"


def test_a_changed_output_type_is_a_configuration_change(tmp_path: Path) -> None:
    """Resuming under another output_type is refused unless accepted, naming the change."""
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def send(total: int) -> str:
        """Send.

        Args:
            total: Its total.
        """
        return "sent"

    store = SqliteRunStore(tmp_path / "runs.db")
    first = Agent(
        ScriptedModel([tool_call("send", "s1", total=3)]),
        registry,
        output_type=Invoice,
        store=store,
    )
    assert first.run_sync("Send", run_id="typed-2").status is RunStatus.PAUSED
    other = Agent(ScriptedModel([final('{"result": 3}')]), registry, output_type=int, store=store)
    with pytest.raises(
        ConfigurationError, match=r"output_type \(Invoice:prompted:\w+ -> int:prompted:\w+\)"
    ):
        other.resume_sync("typed-2")
    text = Agent(ScriptedModel([final("3")]), registry, store=store)
    with pytest.raises(ConfigurationError, match=r"output_type \(Invoice:prompted:\w+ -> str\)"):
        text.resume_sync("typed-2")
    accepted = Agent(ScriptedModel([]), registry, output_type=int, store=store)
    resumed = accepted.resume_sync("typed-2", accept_changes=True)
    assert resumed.status is RunStatus.PAUSED  # still waiting for its approval, now typed int
    assert any(event.kind == "configuration_changed" for event in resumed.trace)


def test_a_stored_output_of_another_type_is_refused_when_loaded(tmp_path: Path) -> None:
    """stored_result validates the stored output into the type and says when it is not one."""
    store = SqliteRunStore(tmp_path / "runs.db")
    Agent(ScriptedModel([final("hello")]), store=store).run_sync("Greet", run_id="text-1")
    typed = Agent(ScriptedModel([]), output_type=int, store=store)
    with pytest.raises(ConfigurationError, match="is not a valid int"):
        asyncio.run(typed.stored_result("text-1"))
    with pytest.raises(ConfigurationError, match="needs Agent"):
        asyncio.run(Agent(ScriptedModel([]), output_type=int).stored_result("text-1"))
    from ownloop import RunNotFound

    with pytest.raises(RunNotFound):
        asyncio.run(typed.stored_result("missing"))


def test_native_mode_needs_the_wrapper_prompted_mode_forgives_its_absence() -> None:
    """A bare scalar breaks the native schema (re-asked); in prompted mode it is read as is."""
    native = _agent([final("5"), final('{"result": 5}')], int, output_mode="native")
    result = native.run_sync("Five")
    assert (result.output, result.usage.invalid_outputs) == (5, 1)
    assert _agent([final("5")], int, output_mode="prompted").run_sync("Five").output == 5


class Wide(BaseModel):
    """An answer with many required fields."""

    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    g: int
    h: int
    i: int
    j: int


def test_many_errors_are_summarised_and_bounded() -> None:
    """The re-ask lists the first errors and counts the rest."""
    seen: list[ModelRequest] = []
    answers = iter(["{}", json.dumps(dict.fromkeys("abcdefghij", 1))])

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return final(next(answers))

    Agent(FunctionModel(answer), output_type=Wide).run_sync("Fill")
    feedback = seen[1].messages[-1].content
    assert "a: required field is missing" in feedback
    assert "and 2 more errors" in feedback
