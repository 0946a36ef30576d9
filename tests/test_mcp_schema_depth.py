"""A schema at the deepest `max_schema_depth` allows is taken whole, whatever shape it nests in.

The depth limit exists so that a hostile server's schema cannot exhaust Python's recursion in the
JSON Schema validator: every shape the validator descends through (array items, `not`,
`additionalProperties`, `allOf`, `anyOf`, properties, `prefixItems`) nested as deep as the limit
allows lists and validates with no `RecursionError`, from a stack already as deep as a run's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from ownloop import ToolDefinitionError
from ownloop.mcp import InProcessServer, MCPToolset
from tests.mcp_hostile import Hostile, tool

LIMIT = 64
"""The deepest `max_schema_depth` a server record accepts."""

Shape = Callable[[dict[str, Any]], dict[str, Any]]

SHAPES: dict[str, Shape] = {
    "items": lambda node: {"type": "array", "items": node},
    "not": lambda node: {"not": node},
    "additionalProperties": lambda node: {"type": "object", "additionalProperties": node},
    "allOf": lambda node: {"allOf": [node]},
    "anyOf": lambda node: {"anyOf": [node, {"type": "null"}]},
    "properties": lambda node: {"type": "object", "properties": {"a": node}},
    "prefixItems": lambda node: {"type": "array", "prefixItems": [node]},
}


def _nested(shape: Shape, levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = shape(node)
    return {"type": "object", "properties": {"x": node}}


def _deepest(shape: Shape) -> dict[str, Any]:
    """The most levels of ``shape`` that still fit the limit (each level costs one or two)."""
    levels = LIMIT
    while levels:
        schema = _nested(shape, levels)
        try:
            MCPToolset(_record(Hostile(tool("probe", schema)))).start().close()
        except ToolDefinitionError as error:
            if "deeper than max_schema_depth" not in str(error):
                raise
            levels -= 1
            continue
        return schema
    raise AssertionError("no depth fits")


def _record(hostile: Hostile) -> InProcessServer:
    return InProcessServer(name="deep", server=hostile.server(), max_schema_depth=LIMIT)


def _under(frames: int, action: Callable[[], None]) -> None:
    """Run ``action`` with ``frames`` more frames on the stack than this test has."""
    if frames:
        _under(frames - 1, action)
    else:
        action()


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_deepest_schema_the_limit_allows_lists_and_validates(name: str) -> None:
    """At the limit, from a deep stack: the listing builds the tool and offers it."""
    hostile = Hostile(tool("deep", _deepest(SHAPES[name])))
    offered: list[str] = []

    def start() -> None:
        with MCPToolset(_record(hostile)) as tools:
            offered.extend(spec.name for spec in tools.specs())

    _under(200, start)
    assert offered == ["deep"]


def test_a_record_cannot_ask_for_more_depth_than_the_validator_survives() -> None:
    """`max_schema_depth` above the limit is refused when the record is made, naming the bound."""
    with pytest.raises(ValidationError, match="less than or equal to 64"):
        InProcessServer(name="deep", server=Hostile().server(), max_schema_depth=LIMIT + 1)
