"""Any valid listed schema becomes a tool or a `ToolDefinitionError`; its calls never raise."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import types

from ownloop import ToolCall, ToolDefinitionError
from ownloop.mcp import StdioServer
from ownloop.mcp._convert import build_tool
from ownloop.tools import ToolContext, ToolRejection, ValidatedCall
from ownloop.tools._schema import admits_null

NAMES = ("a", "b", "gone")

LEAVES = st.sampled_from(
    [
        True,
        False,
        {},
        {"type": "string"},
        {"type": "null"},
        {"type": ["string", "null"]},
        {"type": ["object", "null"]},
        {"const": None},
        {"enum": ["x", None]},
        {"type": "string", "enum": ["x", None]},
        {"$ref": "#/$defs/a/properties/p"},
        *({"$ref": f"#/$defs/{name}"} for name in NAMES),
    ]
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    listed = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda parts: {"anyOf": parts}, listed),
        st.builds(lambda parts: {"oneOf": parts}, listed),
        st.builds(lambda parts: {"allOf": parts}, listed),
        st.builds(lambda item: {"type": "array", "items": item}, children),
        st.builds(
            _object, st.dictionaries(st.sampled_from("pqr"), children, max_size=3), st.data()
        ),
    )


def _object(properties: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    required = data.draw(st.lists(st.sampled_from(sorted(properties) or ["p"]), unique=True))
    return {"type": "object", "properties": properties, "required": required}


SCHEMAS = st.recursive(LEAVES, _extend, max_leaves=8)


async def _never(arguments: dict[str, Any], context: ToolContext) -> Any:
    raise AssertionError("not called")


def _optional_admits_null(schema: Any, defs: dict[str, Any]) -> bool:
    """Whether some object in ``schema`` has an optional property that admits null."""
    if isinstance(schema, list):
        return any(_optional_admits_null(item, defs) for item in schema)
    if not isinstance(schema, dict):
        return False
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = set(schema.get("required", ()))
        if any(admits_null(v, defs) for k, v in properties.items() if k not in required):
            return True
    return any(_optional_admits_null(value, defs) for value in schema.values())


EXAMPLES = int(os.environ.get("OWNLOOP_SCHEMA_EXAMPLES", "100"))  # 10 to 100 ms each


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(
    properties=st.dictionaries(st.sampled_from("pq"), SCHEMAS, max_size=2),
    required=st.lists(st.sampled_from("pq"), unique=True),
    defs=st.fixed_dictionaries({"a": SCHEMAS, "b": SCHEMAS}),
)
def test_a_hostile_listing_is_a_tool_or_a_definition_error_and_never_crashes_a_call(
    properties: dict[str, Any], required: list[str], defs: dict[str, Any]
) -> None:
    """Boolean schemas, refs, combinators: a tool or ToolDefinitionError; validate never raises."""
    schema = {"type": "object", "properties": properties, "required": required, "$defs": defs}
    listed = types.Tool(name="t", input_schema=schema)
    try:
        built = build_tool(listed, StdioServer(name="s", command="x"), _never)
    except ToolDefinitionError:
        return
    if built.spec.strict:  # strict would make every property required: none may admit null
        assert not _optional_admits_null(schema, defs)
    for arguments in ({}, {"p": None}, {"p": "x", "q": {"p": None}}, {"q": [None, 1]}):
        outcome = built.validate(ToolCall(id="c", name="t", arguments=arguments))
        assert isinstance(outcome, ValidatedCall | ToolRejection)
