"""Validating proposed calls, invoking tools, and rendering what they return."""

import asyncio
import enum
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from ownloop.contracts import Actor, ToolCall
from ownloop.exceptions import ToolDefinitionError
from ownloop.tools import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    Sensitive,
    ToolContext,
    ToolRegistry,
    ToolRejection,
    ValidatedCall,
    render_observation,
    to_jsonable,
)


class Filters(BaseModel):
    """Search filters."""

    tags: list[str] = []
    year: int | None = 2020
    sort: Literal["asc", "desc"] = "asc"


@dataclass
class Page:
    """A page window."""

    number: int = 1
    size: int = 10


class Kind(enum.Enum):
    """A document kind."""

    NOTE = "note"
    MEMO = "memo"


class Tree(BaseModel):
    """A recursive structure."""

    children: list["Tree"] = []
    label: str = "leaf"


registry = ToolRegistry()


DEFAULT_PAGE = Page()


@registry.tool(effect="read")
def search(
    query: str,
    max_results: Annotated[int, Field(ge=1, le=5)] = 3,
    filters: Filters | None = None,
    *,
    page: Page = DEFAULT_PAGE,
    kind: Kind = Kind.NOTE,
    cursor: str | None = "start",
) -> list[str]:
    """Search documents.

    Args:
        query: Keywords.
        max_results: How many hits.
        filters: Filters.
        page: The page.
        kind: The kind.
        cursor: Where to resume.
    """
    return [query] * max_results


@registry.tool(effect="write")
async def remember(
    note: str, ctx: ToolContext, secret: Annotated[str, Sensitive()] = ""
) -> dict[str, Any]:
    """Store a note."""
    return {"note": note, "run": ctx.run_id, "attempt": ctx.attempt, "secret": bool(secret)}


@registry.tool(effect="read", strict=False)
def tally(counts: dict[str, Page], pair: tuple[int, str] = (1, "a")) -> int:
    """Count things."""
    return len(counts)


@registry.tool(effect="read")
def grow(tree: Tree, forest: list[Tree] | None = None) -> int:
    """Take a recursive tree."""
    return len(tree.children)


class Cat(BaseModel):
    """A tagged union member."""

    kind: Literal["cat"]
    indoor: bool = True


class Dog(BaseModel):
    """Another tagged union member."""

    kind: Literal["dog"]
    good: bool = True


@registry.tool(effect="read")
def adopt(pet: Annotated[Cat | Dog, Field(discriminator="kind")]) -> str:
    """Adopt a pet."""
    return pet.kind


def call(name: str, arguments: Any, call_id: str = "call-1") -> ToolCall:
    """Build a proposal as a model adapter would."""
    return ToolCall(id=call_id, name=name, arguments=arguments)


def accepted(name: str, arguments: Any, tools: ToolRegistry = registry) -> ValidatedCall:
    """Validate a call that must pass."""
    result = tools.validate(call(name, arguments))
    assert isinstance(result, ValidatedCall), result
    return result


def rejected(name: str, arguments: Any, tools: ToolRegistry = registry) -> ToolRejection:
    """Validate a call that must be rejected."""
    result = tools.validate(call(name, arguments))
    assert isinstance(result, ToolRejection), result
    return result


def context(**overrides: Any) -> ToolContext:
    """A context for direct invocations."""
    values: dict[str, Any] = {"run_id": "run-1", "call_id": "call-1", "tool": "t"}
    return ToolContext(**(values | overrides))


# ----------------------------------------------------------------------------- validate()


def test_json_string_and_object_arguments_validate_alike() -> None:
    """A JSON string and the equivalent object give the same arguments and digest."""
    from_text = accepted("search", '{"query": "agents", "max_results": 2}')
    from_object = accepted("search", {"max_results": 2, "query": "agents"})
    assert from_text.arguments == from_object.arguments
    assert from_text.digest == from_object.digest
    assert from_text.arguments["max_results"] == 2
    assert from_text.tool is registry.get("search")
    assert from_text.call.id == "call-1"


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_empty_arguments_mean_an_empty_object(raw: Any) -> None:
    """None or a blank string stand for {} (then required fields are reported missing)."""
    rejection = rejected("search", raw)
    assert rejection.code == "invalid_arguments"
    assert "query: required field is missing" in rejection.message
    assert accepted("grow", {"tree": {}}).arguments["tree"] == Tree()


def test_null_restores_python_defaults() -> None:
    """An explicit null for a defaulted parameter restores its default, nested ones included."""
    result = accepted(
        "search",
        {
            "query": "q",
            "max_results": None,
            "filters": {"tags": None, "year": None, "sort": None},
            "page": {"number": 4, "size": None},
            "kind": None,
            "cursor": None,
        },
    )
    assert result.arguments == {
        "query": "q",
        "max_results": 3,
        "filters": Filters(tags=[], year=None, sort="asc"),
        "page": Page(number=4, size=10),
        "kind": Kind.NOTE,
        "cursor": None,
    }
    # year and cursor admit None: an explicit null means None, absence means the default.
    omitted = accepted("search", {"query": "q", "filters": {}})
    assert omitted.arguments["filters"].year == 2020
    assert omitted.arguments["cursor"] == "start"


def test_null_restores_defaults_in_lists_of_recursive_models() -> None:
    """Defaults are restored at every depth, through arrays and $ref recursion."""
    result = accepted("grow", {"tree": {"children": [{"children": None, "label": None}]}})
    assert result.arguments["tree"] == Tree(children=[Tree()], label="leaf")
    loose = accepted("tally", {"counts": {"a": {"size": None}}, "pair": None})
    assert loose.arguments == {"counts": {"a": Page(number=1, size=10)}, "pair": (1, "a")}
    failed = rejected("tally", {"counts": {}, "pair": [None, "b"]})
    assert "pair[0]" in failed.message
    assert (
        "pair: Tuple should have at most 2 items"
        in rejected("tally", {"counts": {}, "pair": [1, "b", None]}).message
    )
    forest = accepted(
        "grow", {"tree": {}, "forest": [{"label": None, "children": [{"label": None}]}]}
    )
    assert forest.arguments["forest"] == [Tree(children=[Tree()])]


def test_null_restores_defaults_inside_discriminated_unions() -> None:
    """The union member named by the tag gets its defaults restored; the other is not guessed."""
    dog = accepted("adopt", {"pet": {"kind": "dog", "good": None}})
    assert dog.arguments["pet"] == Dog(kind="dog", good=True)
    cat = accepted("adopt", '{"pet": {"kind": "cat", "indoor": null}}')
    assert cat.arguments["pet"] == Cat(kind="cat", indoor=True)
    assert rejected("adopt", {"pet": {"kind": "cow"}}).code == "invalid_arguments"


def test_canonical_and_digest() -> None:
    """Canonical JSON has defaults restored and sorted keys; the digest follows the content."""
    first = accepted("search", '{"query":"q","page":{"size":5,"number":2}}')
    again = accepted("search", '{"page":{"number":2,"size":5},"query":"q","max_results":null}')
    other = accepted("search", '{"query":"q","page":{"number":3,"size":5}}')
    assert first.canonical == {
        "cursor": "start",
        "filters": None,
        "kind": "note",
        "max_results": 3,
        "page": {"number": 2, "size": 5},
        "query": "q",
    }
    assert list(first.canonical) == sorted(first.canonical)
    assert first.digest == again.digest
    assert first.digest != other.digest
    assert len(first.digest) == 64
    assert (
        repr(first)
        == f"ValidatedCall(tool='search', call_id='call-1', digest='{first.digest[:12]}')"
    )


def test_a_default_without_a_canonical_form_is_refused_at_registration() -> None:
    """A default with no canonical form is refused at registration, naming the parameter."""
    tools = ToolRegistry()
    marker = object()

    def odd(value: Any = marker) -> None:
        """Take an odd default."""

    refused = r"odd'.*parameter 'value' has a default.*no canonical encoding"
    with pytest.raises(ToolDefinitionError, match=refused):
        tools.add(odd, effect="read", strict=False)


def test_same_arguments_for_another_tool_have_another_digest() -> None:
    """The tool name is part of the digest."""
    tools = ToolRegistry()

    @tools.tool(effect="read")
    def one(x: int) -> None:
        """One."""

    @tools.tool(effect="read")
    def two(x: int) -> None:
        """Two."""

    assert accepted("one", {"x": 1}, tools).digest != accepted("two", {"x": 1}, tools).digest


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"query": ', "not valid JSON"),
        ('{"query": NaN}', "NaN is not valid JSON"),
        ('{"query": 1e999}', "out of range"),
        ('{"query": "a", "query": "b"}', "duplicate key 'query'"),
        ('{"query": "\\ud800"}', "unpaired surrogate"),
        ('{"query": "\ud800"}', "unpaired surrogate"),
    ],
)
def test_invalid_json_is_rejected(raw: str, fragment: str) -> None:
    """Malformed JSON, NaN, overflowing numbers, duplicate keys and lone surrogates are refused."""
    rejection = rejected("search", raw)
    assert rejection.code == "invalid_json"
    assert fragment in rejection.message
    assert "query, max_results, filters, page, kind, cursor" in rejection.message


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("[1, 2]", "an array"), ('"text"', "a string"), ("3", "a number"), ("2.5", "a number"),
     ("true", "a boolean"), ("null", "null"), ([1], "an array"), (7, "a number")],
)  # fmt: skip
def test_non_object_arguments_are_rejected(raw: Any, kind: str) -> None:
    """Arguments that are not a JSON object are rejected, saying what came instead."""
    rejection = rejected("search", raw)
    assert rejection.code == "invalid_arguments"
    assert "must be a JSON object with the parameters query, max_results" in rejection.message
    assert f"got {kind}" in rejection.message


def test_wrong_types_name_field_expectation_and_input() -> None:
    """A type error names the field, the expected type and the value that came."""
    rejection = rejected("search", {"query": "q", "max_results": "many", "page": {"number": "x"}})
    assert rejection.code == "invalid_arguments"
    assert rejection.call_id == "call-1"
    assert rejection.tool == "search"
    lines = rejection.message.splitlines()
    assert lines[0] == "Arguments for tool 'search' are invalid:"
    expected = "Input should be a valid integer, unable to parse string as an integer"
    assert f'- max_results: {expected}; got "many"' in lines
    assert any(line.startswith("- page.number: Input should be a valid integer") for line in lines)
    assert lines[-1].startswith("Parameters: query, max_results")


def test_constraints_literals_and_enums_are_enforced() -> None:
    """Annotated bounds, Literal values and Enum members are checked on input."""
    message = rejected(
        "search", {"query": "q", "max_results": 9, "kind": "poem", "filters": {"sort": "up"}}
    ).message
    assert "max_results: Input should be less than or equal to 5; got 9" in message
    assert "kind: Input should be 'note' or 'memo'; got \"poem\"" in message
    assert "filters.sort: Input should be 'asc' or 'desc'; got \"up\"" in message


def test_undeclared_fields_are_rejected_not_ignored() -> None:
    """An undeclared field such as admin: true is rejected, at the top and in nested models."""
    top = rejected("search", {"query": "q", "admin": True})
    assert "- admin: unexpected field (not a parameter); got true" in top.message
    nested = rejected("search", {"query": "q", "filters": {"tags": [], "admin": True}})
    assert "filters.admin: unexpected field" in nested.message
    dataclass_field = rejected("search", {"query": "q", "page": {"role": "admin"}})
    assert "page.role: unexpected field" in dataclass_field.message
    remember = rejected("remember", {"note": "n", "ctx": {"run_id": "forged"}})
    assert "ctx: unexpected field" in remember.message


def test_sensitive_values_are_never_quoted_back() -> None:
    """A rejected sensitive argument is named but its value stays out of the message."""
    rejection = rejected("remember", {"note": "n", "secret": 123456789})
    assert "secret: Input should be a valid string" in rejection.message
    assert "123456789" not in rejection.message
    assert "sensitive parameter (not shown)" in rejection.message


def test_messages_are_bounded() -> None:
    """Echoed input is cut near 200 characters and whole messages near 2000."""
    huge = "x" * 5000
    rejection = rejected("search", {"query": 1, "max_results": huge})
    echoed = rejection.message.splitlines()[2]
    assert echoed.startswith("- max_results:")
    assert len(echoed) < 320
    assert echoed.endswith("…")
    flood = rejected("search", {"query": "q", **{f"extra_{i}": huge[:1000] for i in range(30)}})
    assert len(flood.message) == 2000
    assert flood.message.endswith("…")
    many = rejected("search", {"query": "q", **{f"extra_{i}": 0 for i in range(30)}})
    assert "… and 22 more errors" in many.message
    unknown = rejected("x" * 256, {})
    assert len(unknown.message) <= 2000


def test_oversize_arguments_are_rejected_before_parsing() -> None:
    """Arguments over the byte cap are rejected whether sent as text or as an object."""
    small = ToolRegistry(max_argument_bytes=40)
    small.add(search, effect="read")
    assert small.max_argument_bytes == 40
    assert registry.max_argument_bytes == DEFAULT_MAX_ARGUMENT_BYTES == 64 * 1024
    text = rejected("search", '{"query": "' + "é" * 20 + '"}', small)
    assert text.code == "arguments_too_large"
    assert "the limit is 40" in text.message
    assert rejected("search", {"query": "q" * 40}, small).code == "arguments_too_large"
    assert rejected("search", "{" * 100, small).code == "arguments_too_large"
    assert accepted("search", {"query": "short"}, small).arguments["query"] == "short"
    default = rejected("search", {"query": "q" * (64 * 1024)})
    assert default.code == "arguments_too_large"


def test_unknown_tool_lists_the_available_tools() -> None:
    """A call to an unknown tool is rejected with the names the model may use."""
    rejection = rejected("delete_everything", {})
    assert rejection.code == "unknown_tool"
    assert rejection.tool == "delete_everything"
    assert rejection.message == (
        'Unknown tool "delete_everything". Available tools: search, remember, tally, grow, adopt.'
    )
    assert "Available tools: (none)." in rejected("x", {}, ToolRegistry()).message


def test_deep_nesting_is_rejected_not_raised() -> None:
    """Pathologically deep input becomes a rejection, not a RecursionError."""
    deep = '{"tree": ' + '{"children": [' * 3000 + "]}" * 3000 + "}"
    big = ToolRegistry(max_argument_bytes=1_000_000)
    big.add(grow, effect="read")
    assert rejected("grow", deep, big).code in {"invalid_json", "invalid_arguments"}
    nested: Any = []
    for _ in range(5000):
        nested = [nested]
    # Too deep for ToolCall's own validation: only a buggy adapter could build it, unvalidated.
    unvalidated = ToolCall.model_construct(id="c", name="grow", arguments={"tree": nested})
    result = big.validate(unvalidated)
    assert isinstance(result, ToolRejection)
    assert result.code == "invalid_arguments"
    model_deep = '{"tree": ' + '{"children": [' * 400 + "]}" * 400 + "}"
    assert rejected("grow", model_deep, big).code == "invalid_arguments"


def test_rejection_is_a_frozen_record() -> None:
    """ToolRejection forbids extra fields and edits, and round-trips through JSON."""
    rejection = rejected("nope", {})
    assert ToolRejection.model_validate_json(rejection.model_dump_json()) == rejection
    with pytest.raises(ValueError, match="frozen"):
        rejection.message = "changed"  # type: ignore[misc]
    with pytest.raises(ValueError, match="Extra inputs"):
        ToolRejection(call_id="c", tool="t", code="invalid_json", message="m", extra=1)  # type: ignore[call-arg]


# ----------------------------------------------------------------------------- invoke()


def test_sync_tool_runs_directly() -> None:
    """A sync tool without timeout is called in the running thread and returns its value."""
    validated = accepted("search", {"query": "q", "max_results": 2})
    assert asyncio.run(validated.tool.invoke(validated.arguments, context())) == ["q", "q"]


def test_async_tool_receives_the_context() -> None:
    """An async tool is awaited and receives the ToolContext in its annotated parameter."""
    validated = accepted("remember", {"note": "n", "secret": "s3cret"})
    ctx = context(attempt=2, actor=Actor(id="ada"), idempotency_key="k", revision="r1")
    result = asyncio.run(validated.tool.invoke(validated.arguments, ctx))
    assert result == {"note": "n", "run": "run-1", "attempt": 2, "secret": True}


def test_optional_context_parameter_is_injected() -> None:
    """A parameter annotated ToolContext | None is injected too, and stays out of the schema."""
    tools = ToolRegistry()

    @tools.tool(effect="read")
    def whoami(ctx: ToolContext | None = None) -> str:
        """Say which run this is."""
        return ctx.run_id if ctx else "none"

    tool = tools.get("whoami")
    assert tool is not None
    assert tool.spec.parameters["properties"] == {}
    assert asyncio.run(tool.invoke({}, context(run_id="r9"))) == "r9"


def test_timeouts_raise_timeout_error() -> None:
    """A sync or async tool exceeding timeout_s raises TimeoutError; a fast one returns."""
    tools = ToolRegistry()

    @tools.tool(effect="read", timeout_s=0.05)
    def slow_sync(seconds: float) -> str:
        """Sleep in a thread."""
        time.sleep(seconds)
        return "done"

    @tools.tool(effect="read", timeout_s=0.05)
    async def slow_async(seconds: float) -> str:
        """Sleep on the loop."""
        await asyncio.sleep(seconds)
        return "done"

    for name in ("slow_sync", "slow_async"):
        tool = tools.get(name)
        assert tool is not None
        with pytest.raises(TimeoutError):
            asyncio.run(tool.invoke({"seconds": 0.3}, context()))
        assert asyncio.run(tool.invoke({"seconds": 0}, context())) == "done"


def test_exceptions_from_tools_propagate_unchanged() -> None:
    """Whatever the function raises reaches the caller as is, sync or async."""
    tools = ToolRegistry()

    class Boom(Exception):
        pass

    @tools.tool(effect="read")
    def explode(x: int) -> None:
        """Fail."""
        raise Boom(x)

    @tools.tool(effect="read")
    async def explode_later(x: int) -> None:
        """Fail asynchronously."""
        raise Boom(x)

    for name in ("explode", "explode_later"):
        tool = tools.get(name)
        assert tool is not None
        with pytest.raises(Boom):
            asyncio.run(tool.invoke({"x": 1}, context()))


def test_tool_context_is_frozen_and_knows_time_left() -> None:
    """ToolContext is immutable and reports the seconds left before its deadline."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ctx = context(deadline=now + timedelta(seconds=30))
    assert ctx.seconds_left(now) == 30
    assert ctx.seconds_left(now + timedelta(minutes=5)) == 0
    assert context().seconds_left() is None
    assert context(deadline=datetime.now(UTC) + timedelta(hours=1)).seconds_left() > 3500  # type: ignore[operator]
    with pytest.raises(AttributeError):
        ctx.attempt = 3  # type: ignore[misc]


# ----------------------------------------------------------------------------- return values


class Color(enum.IntEnum):
    """An int enum."""

    RED = 1


class Result(BaseModel):
    """A model return value."""

    when: datetime
    kind: Kind


@dataclass
class Hit:
    """A dataclass return value."""

    id: str
    score: float
    tags: set[str] = field(default_factory=set)


class Unprintable:
    """Its __str__ fails."""

    def __str__(self) -> str:
        raise RuntimeError("no")


class Unserialisable(BaseModel):
    """A model whose field Pydantic cannot dump as JSON."""

    thing: object


class Label(str):
    """A str subclass."""


class Count(int):
    """An int subclass."""


def test_to_jsonable_covers_every_supported_type() -> None:
    """Scalars, containers, models, dataclasses, enums, dates and sets become JSON values."""
    when = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    assert to_jsonable(None) is None
    assert to_jsonable("s") == "s"
    assert to_jsonable(True) is True
    assert to_jsonable(3) == 3
    assert to_jsonable(2.5) == 2.5
    assert to_jsonable(float("nan")) == "nan"
    assert to_jsonable(float("inf")) == "inf"
    assert to_jsonable(Kind.MEMO) == "memo"
    assert to_jsonable(Color.RED) == 1
    assert to_jsonable(when) == "2026-05-01T12:00:00+00:00"
    assert to_jsonable(date(2026, 5, 1)) == "2026-05-01"
    assert to_jsonable(timedelta(minutes=1)) == 60.0
    assert to_jsonable(b"caf\xc3\xa9\xff") == "café\ufffd"
    assert to_jsonable((1, [2, {"a": (3,)}])) == [1, [2, {"a": [3]}]]
    assert to_jsonable({3, 1, 2}) == [1, 2, 3]
    assert to_jsonable(frozenset({"b", "a"})) == ["a", "b"]
    assert to_jsonable({1: "x", Kind.NOTE: "y", (1, 2): "z"}) == {
        "1": "x",
        "note": "y",
        "[1, 2]": "z",
    }
    assert to_jsonable(Result(when=when, kind=Kind.NOTE)) == {
        "when": "2026-05-01T12:00:00Z",
        "kind": "note",
    }
    assert to_jsonable(Hit("d1", 0.5, {"b", "a"})) == {"id": "d1", "score": 0.5, "tags": ["a", "b"]}
    assert to_jsonable(Decimal("1.10")) == "1.10"
    assert to_jsonable(Unprintable()) == "<unprintable Unprintable>"
    assert to_jsonable(Unserialisable(thing=Kind.NOTE)) == {"thing": "note"}
    fallback = to_jsonable(Unserialisable(thing=object()))
    assert isinstance(fallback, dict)
    assert str(fallback["thing"]).startswith("<object object at")
    assert type(to_jsonable(Label("x"))) is str
    assert type(to_jsonable(Count(4))) is int


def test_to_jsonable_cuts_cycles_and_depth() -> None:
    """Self-references and runaway depth are cut instead of raising."""
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert to_jsonable(cyclic) == [1, "<cycle>"]
    deep: Any = "bottom"
    for _ in range(200):
        deep = [deep]
    result = to_jsonable(deep)
    assert json.dumps(result)
    shared = [1]
    assert to_jsonable([shared, shared]) == [[1], [1]]


def test_render_observation() -> None:
    """Strings pass unchanged; other values become compact JSON that keeps non-ASCII text."""
    assert render_observation("plain text") == "plain text"
    assert render_observation({"b": 1, "a": "é"}) == '{"b":1,"a":"é"}'
    assert render_observation([Hit("d1", 1.0)]) == '[{"id":"d1","score":1.0,"tags":[]}]'
    assert render_observation(None) == "null"
    assert render_observation(float("nan")) == '"nan"'
