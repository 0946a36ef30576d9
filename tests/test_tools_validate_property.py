"""Property: validation never raises, whatever a model sends, and admitted calls are consistent."""

import enum
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from ownloop.contracts import ToolCall
from ownloop.tools import ToolContext, ToolRegistry, ToolRejection, ValidatedCall, to_jsonable


class Level(enum.Enum):
    """A level."""

    LOW = "low"
    HIGH = "high"


class Inner(BaseModel):
    """A nested model."""

    name: str
    weight: float = 1.0
    tags: list[str] = []


@dataclass
class Span:
    """A nested dataclass."""

    start: int
    end: int | None = None


class Branch(BaseModel):
    """A recursive model."""

    value: int = 0
    children: list["Branch"] = []


registry = ToolRegistry(max_argument_bytes=4096)
DEFAULT_TREE = Branch()


@registry.tool(effect="read")
def everything(
    text: str,
    *,
    count: Annotated[int, Field(ge=0, le=100)] = 1,
    flag: bool = False,
    mode: Literal["a", "b"] = "a",
    level: Level = Level.LOW,
    inner: Inner | None = None,
    spans: list[Span] = [],  # noqa: B006
    tree: Branch = DEFAULT_TREE,
    ctx: ToolContext | None = None,
) -> None:
    """Take every kind of parameter."""


@registry.tool(effect="read")
def nothing() -> None:
    """Take no parameters."""


@registry.tool(effect="read", strict=False)
def loose(values: dict[str, int], pair: tuple[int, str] = (0, "")) -> None:
    """Take constructs only non-strict tools allow."""


TOOL_NAMES = ["everything", "nothing", "loose"]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(
    ["text", "count", "flag", "mode", "level", "inner", "spans", "tree", "name", "weight",
     "tags", "start", "end", "value", "children", "values", "pair", "ctx", "admin"]
)  # fmt: skip
plausible_objects = st.recursive(
    st.dictionaries(field_names, json_scalars, max_size=6),
    lambda children: st.dictionaries(
        field_names, children | st.lists(children, max_size=3) | json_scalars, max_size=6
    ),
    max_leaves=25,
)
arguments = (
    json_values
    | plausible_objects
    | plausible_objects.map(json.dumps)
    | st.text(max_size=200)
    | json_values.map(lambda value: json.dumps(value)[:-1])
)
finite = st.floats(allow_nan=False, allow_infinity=False)
branches = st.recursive(
    st.fixed_dictionaries({}, optional={"value": st.none() | st.integers()}),
    lambda children: st.fixed_dictionaries(
        {},
        optional={"value": st.integers(), "children": st.none() | st.lists(children, max_size=2)},
    ),
    max_leaves=6,
)
well_formed = st.fixed_dictionaries(
    {"text": st.text(max_size=30)},
    optional={
        "count": st.none() | st.integers(-5, 105),
        "flag": st.none() | st.booleans(),
        "mode": st.sampled_from(["a", "b", "c", None]),
        "level": st.sampled_from(["low", "high", None]),
        "inner": st.none()
        | st.fixed_dictionaries(
            {"name": st.text(max_size=10)},
            optional={
                "weight": st.none() | finite,
                "tags": st.none() | st.lists(st.text(max_size=5), max_size=3),
            },
        ),
        "spans": st.none()
        | st.lists(
            st.fixed_dictionaries(
                {"start": st.integers()}, optional={"end": st.none() | st.integers()}
            ),
            max_size=3,
        ),
        "tree": st.none() | branches,
        "admin": st.booleans(),
    },
)
proposals = st.one_of(
    st.tuples(st.sampled_from(TOOL_NAMES), arguments),
    st.tuples(st.just("everything"), well_formed | well_formed.map(json.dumps)),
    st.tuples(st.text(max_size=80), arguments),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proposal_parts=proposals, call_id=st.text(min_size=1, max_size=40))
def test_validate_never_raises(proposal_parts: tuple[str, Any], call_id: str) -> None:
    """Any payload yields a ValidatedCall or a ToolRejection; admitted calls are self-consistent."""
    name, raw = proposal_parts
    try:
        proposal = ToolCall(id=call_id, name=name, arguments=raw)
    except ValueError:
        return  # not a proposal an adapter could build (e.g. lone surrogates in the name)
    result = registry.validate(proposal)
    assert isinstance(result, ValidatedCall | ToolRejection)
    event(getattr(result, "code", "validated"))
    if isinstance(result, ToolRejection):
        assert result.call_id == call_id
        assert result.tool == name
        assert 0 < len(result.message) <= 2000
        return
    assert result.tool.name == name
    assert set(result.arguments) == set(result.tool.parameter_names)
    assert set(result.canonical) == set(result.tool.parameter_names)
    again = registry.validate(ToolCall(id="again", name=name, arguments=result.canonical))
    assert isinstance(again, ValidatedCall)
    assert again.digest == result.digest
    assert to_jsonable(again.canonical) == result.canonical
