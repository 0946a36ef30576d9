"""The MCP conversion's contract: what the model is shown, what is checked, and what is sent.

Through the public entry points: `ownloop.mcp` toolsets over the in-process hostile server, and
the conversion of one listed tool (``build_tool``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import types

from ownloop import Agent, ConfigurationError, ToolCall, ToolDefinitionError
from ownloop.mcp import InProcessServer, MCPToolset, StdioServer
from ownloop.mcp._convert import build_tool
from ownloop.policy import allow_writes
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ExternalTool, ToolContext, ValidatedCall
from tests.mcp_hostile import Hostile, tool


async def _never(arguments: dict[str, Any], context: ToolContext) -> Any:
    raise AssertionError("not called in these tests")


def _build(schema: dict[str, Any], **options: Any) -> ExternalTool:
    listed = types.Tool(name="t", input_schema=schema)
    return build_tool(listed, StdioServer(name="s", command="x", **options), _never)


def _sent(built: ExternalTool, arguments: dict[str, Any]) -> dict[str, Any]:
    validated = built.validate(ToolCall(id="c", name="t", arguments=arguments))
    assert isinstance(validated, ValidatedCall), validated
    return dict(validated.arguments)


def _chain(hops: int, last: dict[str, Any]) -> dict[str, Any]:
    """An object whose optional ``p`` reaches ``last`` through ``hops`` local references."""
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(hops - 1)}
    defs[f"d{hops - 1}"] = last
    return {"type": "object", "properties": {"p": {"$ref": "#/$defs/d0"}}, "$defs": defs}


NULLABLE = {"type": ["string", "null"]}


@pytest.mark.parametrize(
    "email",
    [
        {"$ref": "#/$defs/MaybeEmail"},
        {"$ref": "#/$defs/Alias"},
        {"allOf": [{"$ref": "#/$defs/MaybeEmail"}]},
        {"anyOf": [{"type": "integer"}, {"allOf": [{"$ref": "#/$defs/Alias"}]}]},
        {"oneOf": [{"$ref": "#/$defs/MaybeEmail"}]},
    ],
)
def test_an_optional_ref_to_a_nullable_definition_keeps_absent_apart_from_null(
    email: dict[str, Any],
) -> None:
    """Null via $ref, a chain of them or allOf: an omitted field is not sent, a null one is."""
    schema = {
        "type": "object",
        "properties": {"phone": {"type": "string"}, "email": email},
        "required": ["phone"],
        "$defs": {"MaybeEmail": NULLABLE, "Alias": {"$ref": "#/$defs/MaybeEmail"}},
    }
    hostile = Hostile(tool("update_contact", schema))
    server = InProcessServer(
        name="hostile", server=hostile.server(), effects={"update_contact": "write"}
    )
    with MCPToolset(server) as tools:
        (spec,) = tools.specs()
        assert not spec.strict
        assert spec.parameters["required"] == ["phone"]
        model = ScriptedModel(
            [
                tool_call("update_contact", phone="1"),
                tool_call("update_contact", phone="2", email=None),
                final("ok"),
            ]
        )
        Agent(model, tools, policy=allow_writes("update_contact")).run_sync("update")
    assert [arguments for _, arguments, _ in hostile.calls] == [
        {"phone": "1"},
        {"phone": "2", "email": None},
    ]


@pytest.mark.parametrize(
    "last",
    [
        NULLABLE,
        {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/null"}]},
        {"oneOf": [{"type": "integer"}, {}]},
        {"enum": ["a", None]},
        {"const": None},
    ],
)
def test_references_are_followed_to_a_null_however_it_is_said(last: dict[str, Any]) -> None:
    """Through references and branches, a definition that admits null keeps the field absent."""
    schema = _chain(2, last)
    schema["$defs"]["null"] = {"type": "null"}
    built = _build(schema)
    assert not built.spec.strict
    assert _sent(built, {}) == {}


@pytest.mark.parametrize(
    "last",
    [
        {"type": "string"},
        {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/s"}]},
        {"enum": ["a"]},
        {"const": "a"},
    ],
)
def test_references_to_definitions_without_null_are_offered_strict(last: dict[str, Any]) -> None:
    """An optional $ref to a definition that refuses null becomes required-but-nullable."""
    schema = _chain(2, last)
    schema["$defs"]["s"] = {"type": "integer"}
    built = _build(schema, max_schema_depth=16)
    assert built.spec.strict
    assert built.spec.parameters["required"] == ["p"]
    assert _sent(built, {"p": None}) == {}


def test_references_are_followed_as_far_as_max_schema_depth() -> None:
    """References spend max_schema_depth; a chain that runs out keeps the server's schema."""
    assert _build(_chain(3, {"type": "string"}), max_schema_depth=4).spec.strict
    assert not _build(_chain(4, {"type": "string"}), max_schema_depth=4).spec.strict
    assert _build(_chain(4, {"type": "string"}), max_schema_depth=5).spec.strict
    cycle = {"type": "object", "properties": {"p": {"$ref": "#/$defs/a"}}}
    cycle["$defs"] = {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}
    assert not _build(cycle).spec.strict  # refused by strict mode, and no endless loop


def test_branches_spend_the_depth_too() -> None:
    """Each anyOf entered spends one of max_schema_depth, as each reference does."""

    def branching(hops: int) -> dict[str, Any]:
        defs: dict[str, Any] = {
            f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"type": "integer"}]}
            for i in range(hops)
        }
        defs[f"d{hops}"] = {"type": "string"}
        return {"type": "object", "properties": {"p": {"$ref": "#/$defs/d0"}}, "$defs": defs}

    assert _build(branching(2), max_schema_depth=6).spec.strict
    assert not _build(branching(3), max_schema_depth=6).spec.strict


def test_defs_that_are_not_a_map_are_refused() -> None:
    """A non-object $defs is an invalid schema."""
    broken = {"type": "object", "properties": {"p": {"$ref": "#/$defs/x"}}, "$defs": 5}
    with pytest.raises(ToolDefinitionError, match="invalid"):
        _build(broken)


def test_a_listing_without_type_or_properties_is_an_empty_closed_object() -> None:
    """An inputSchema of {} is offered as an object with no property, strict and closed."""
    built = _build({})
    assert built.spec.strict
    assert built.spec.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert built.parameter_names == ()
    typed_only = _build({"properties": {"a": {"type": "string"}}, "required": ["a"]})
    assert typed_only.spec.parameters["type"] == "object"
    assert typed_only.parameter_names == ("a",)


def test_the_spec_carries_the_records_choices() -> None:
    """Name prefix, description (else title, cut at 4096), approval and timeout come through."""
    record = StdioServer(
        name="s", command="x", prefix="p_", approval_required=["t"], call_timeout_s=7.5
    )
    listed = types.Tool(name="t", title="Title", description="d" * 5000, input_schema={})
    spec = build_tool(listed, record, _never).spec
    assert (spec.name, spec.description, spec.requires_approval, spec.timeout_s) == (
        "p_t",
        "d" * 4096,
        True,
        7.5,
    )
    titled = types.Tool(name="u", title="Title", input_schema={})
    assert build_tool(titled, record, _never).spec.description == "Title"
    assert not build_tool(titled, record, _never).spec.requires_approval
    bare = types.Tool(name="u", input_schema={})
    assert build_tool(bare, record, _never).spec.description == ""


def test_a_name_that_cannot_be_a_tool_name_is_refused_with_both_names() -> None:
    """The prefixed name must be a valid tool name; the refusal names the server's and ours."""
    record = StdioServer(name="s", command="x", prefix="p_")
    listed = types.Tool(name="has space", input_schema={})
    with pytest.raises(
        ToolDefinitionError, match=r"^cannot take MCP tool 'has space' as 'p_has space': "
    ):
        build_tool(listed, record, _never)


def test_the_idempotency_argument_is_hidden_from_the_model_and_makes_the_call_idempotent() -> None:
    """A declared key property is filled by the runtime: not shown, not required, idempotent."""
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "key": {"type": "string"}},
        "required": ["q", "key"],
    }
    keyed = _build(schema, idempotency_argument="key")
    assert keyed.spec.idempotent
    assert keyed.spec.parameters["required"] == ["q"]
    assert list(keyed.spec.parameters["properties"]) == ["q"]
    assert keyed.parameter_names == ("q",)
    plain = _build(schema, idempotency_argument=None)
    assert not plain.spec.idempotent
    assert plain.parameter_names == ("q", "key")
    other = _build(schema, idempotency_argument="token")
    assert not other.spec.idempotent
    assert other.spec.parameters["required"] == ["q", "key"]
    unrequired = _build({"properties": schema["properties"]}, idempotency_argument="key")
    assert unrequired.spec.idempotent
    assert unrequired.parameter_names == ("q",)


def test_a_new_listing_never_relaxes_the_spec_offered_before() -> None:
    """Against a floor, a write stays a write and a call not idempotent stays so; else it may."""
    record = StdioServer(name="s", command="x", trust_annotations=True)
    hints = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
    listed = types.Tool(name="t", input_schema={}, annotations=hints)
    first = build_tool(listed, record, _never).spec
    assert (first.effect, first.idempotent) == ("read", True)
    strict_floor = first.model_copy(update={"effect": "write", "idempotent": False})
    held = build_tool(listed, record, _never, floor=strict_floor).spec
    assert (held.effect, held.idempotent) == ("write", False)
    again = build_tool(listed, record, _never, floor=first).spec
    assert (again.effect, again.idempotent) == ("read", True)
    unhinted = types.Tool(name="t", input_schema={})
    lowered = build_tool(unhinted, record, _never, floor=first).spec
    assert (lowered.effect, lowered.idempotent) == ("write", False)


def test_a_reconcile_lookup_is_kept_for_a_write_tool() -> None:
    """The record's lookup for a write tool is the tool's reconcile; other tools have none."""

    def lookup(arguments: Any, context: Any) -> None:
        return None

    record = StdioServer(name="s", command="x", reconcile={"t": lookup})
    assert build_tool(types.Tool(name="t", input_schema={}), record, _never).reconcile is lookup
    assert build_tool(types.Tool(name="u", input_schema={}), record, _never).reconcile is None


@pytest.mark.parametrize(
    ("optional", "strict"),
    [
        ({"type": ["string", "integer"]}, True),
        ({"type": "null"}, False),
        ({"allOf": [NULLABLE]}, False),
        ({"allOf": [{"type": "string"}]}, True),
        ({"oneOf": [{"type": "string"}, {"$ref": "#/$defs/null"}]}, False),
        ({"anyOf": [True, {"type": "string"}]}, False),
        (True, False),
    ],
)
def test_what_admits_null_decides_the_form(optional: Any, strict: bool) -> None:
    """Type lists, allOf, oneOf references and boolean schemas: null decides strict or not."""
    schema = {
        "type": "object",
        "properties": {"p": optional, "q": {"type": "string"}},
        "$defs": {"null": {"type": "null"}},
    }
    built = _build(schema)
    assert built.spec.strict is strict
    assert _sent(built, {"q": "x"}) == {"q": "x"}
    # Argument validation decides null as the conversion did: a null kept means null, not absent.
    assert _sent(built, {"p": None, "q": "x"}) == ({"q": "x"} if strict else {"p": None, "q": "x"})


def test_refusals_name_the_servers_tool() -> None:
    """Limits, an invalid schema and a lookup on a read tool: each refusal names the tool."""
    deep = {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}
    with pytest.raises(
        ToolDefinitionError, match=r"^cannot take MCP tool 't': its inputSchema is nested"
    ):
        _build(deep, max_schema_depth=3)
    with pytest.raises(
        ToolDefinitionError, match=r"^cannot take MCP tool 't': its inputSchema is \d+ bytes"
    ):
        _build({"description": "x" * 2000}, max_schema_bytes=1024)
    with pytest.raises(
        ToolDefinitionError, match=r"^cannot take MCP tool 't': its inputSchema is invalid"
    ):
        _build({"type": "object", "properties": {"a": {"type": 5}}})
    record = StdioServer(
        name="s", command="x", effects={"t": "read"}, reconcile={"t": lambda a, c: None}
    )
    with pytest.raises(ConfigurationError) as refused:
        build_tool(types.Tool(name="t", input_schema={}), record, _never)
    assert str(refused.value) == "reconcile= for MCP tool 't', which is a read tool"


def test_references_are_followed_at_any_depth_of_the_schema() -> None:
    """A nested object's optional $ref, inside properties or a branch, is followed too."""
    inner = {"type": "object", "properties": {"r": {"$ref": "#/$defs/N"}}}
    for holder in (inner, {"anyOf": [inner, {"type": "string"}]}):
        schema = {
            "type": "object",
            "properties": {"p": holder},
            "required": ["p"],
            "$defs": {"N": NULLABLE},
        }
        built = _build(schema)
        assert not built.spec.strict
        assert _sent(built, {"p": {}}) == {"p": {}}
        assert _sent(built, {"p": {"r": None}}) == {"p": {"r": None}}


@pytest.mark.parametrize(
    ("properties", "required"),
    [
        ({"p": True}, ["p"]),
        ({"p": False}, ["p"]),
        ({"p": False}, []),
        ({"p": {"anyOf": [False, {"type": "string"}]}}, ["p"]),
        ({"p": {"allOf": [True]}}, ["p"]),
        ({"p": {"type": "array", "items": False}}, ["p"]),
        ({"p": {"$ref": "#/$defs/anything"}}, ["p"]),
        ({"p": {"$ref": "#/$defs/nothing"}}, []),
        ({"p": {"$ref": "#/properties/q"}}, ["p"]),
        ({"p": {"type": ["object", "null"], "properties": {}}}, ["p"]),
        ({"p": {"type": ["array", "null"], "items": {"type": "string"}}}, ["p"]),
        ({"p": {"$ref": "#/$defs/holder/properties/inner"}}, ["p"]),
    ],
)
def test_a_schema_strict_mode_cannot_take_falls_back_instead_of_raising(
    properties: dict[str, Any], required: list[str]
) -> None:
    """Schemas true and false, type lists with object or array, deep refs: the server's schema."""
    schema = {
        "type": "object",
        "properties": {**properties, "q": {"type": "string"}},
        "required": [*required, "q"],
        "$defs": {
            "anything": True,
            "nothing": False,
            "holder": {"type": "object", "properties": {"inner": {"type": "string"}}},
            "inner": {"type": "integer"},
        },
    }
    built = _build(schema)
    assert not built.spec.strict
    shown = built.spec.parameters["properties"]["p"]
    closing = ("additionalProperties", "unevaluatedProperties")  # ownloop closes every object
    opened = (
        {k: v for k, v in shown.items() if k not in closing} if isinstance(shown, dict) else shown
    )
    assert opened == properties["p"]
    assert built.spec.parameters["required"] == [*required, "q"]


def test_the_schema_false_refuses_every_value_and_true_takes_any() -> None:
    """Offered with the server's schema, false refuses any value sent and true takes one as is."""
    schema = {"type": "object", "properties": {"no": False, "any": True}}
    built = _build(schema)
    assert _sent(built, {"any": {"x": [1]}}) == {"any": {"x": [1]}}
    refused = built.validate(ToolCall(id="c", name="t", arguments={"no": 1}))
    assert not isinstance(refused, ValidatedCall)


@pytest.mark.parametrize(
    ("where", "ref"),
    [
        ({"p": {"$ref": "#/$defs/gone"}}, "#/$defs/gone"),
        ({"p": {"type": "object", "properties": {"r": {"$ref": "#/$defs/gone"}}}}, None),
        ({"p": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a/x"}]}}, "#/$defs/a/x"),
        ({"p": {"$ref": "#/$defs/a/type"}}, None),  # a string, not a schema
        ({"p": {"$ref": "#/$defs/b/0"}}, None),  # through false
        ({"p": {"$ref": "#/$defs/list/anyOf/1"}}, None),
        ({"p": {"$ref": "#/$defs/list/anyOf/x"}}, None),
        ({"p": {"$ref": "#/$defs/list/anyOf/\u0660"}}, None),  # a digit, but not an ASCII one
        ({"p": {"$ref": "https://example.com/s.json"}}, "https://example.com/s.json"),
        ({"p": {"$ref": "#anchor"}}, "#anchor"),
        ({"default": {"$ref": "#/$defs/gone"}}, "#/$defs/gone"),  # named like a keyword
        ({"p": {"type": "object", "default": {"$ref": "#/x"}}}, "#/x"),  # a value: refused too
        ({"p": {"$defs": {"inner": {"$ref": "#/gone"}}}}, "#/gone"),
    ],
)
def test_a_reference_the_validator_could_not_follow_is_refused_at_listing(
    where: dict[str, Any], ref: str | None
) -> None:
    """A $ref that does not reach a schema inside the listing is a ToolDefinitionError."""
    schema = {
        "type": "object",
        "properties": where,
        "$defs": {"a": {"type": "string"}, "b": False, "list": {"anyOf": [{"type": "string"}]}},
    }
    with pytest.raises(ToolDefinitionError, match=r"^cannot take MCP tool 't': its inputSchema "):
        _build(schema)
    if ref is not None:
        message = f"its inputSchema refers to {ref!r}, which is not a schema inside it"
        with pytest.raises(
            ToolDefinitionError, match=f"^cannot take MCP tool 't': {re.escape(message)}$"
        ):
            _build(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {"p": {"$id": "http://x/p"}}}, "uses $id below its root"),
        ({"not": {"$id": "http://x/n"}, "properties": {}}, "uses $id below its root"),
        ({"allOf": [{"$id": "http://x/a"}], "properties": {}}, "uses $id below its root"),
        ({"properties": {"p": {"$anchor": "p"}}}, "uses $anchor"),
        ({"$dynamicAnchor": "node", "properties": {}}, "uses $dynamicAnchor"),
        ({"properties": {"p": {"$dynamicRef": "#node"}}}, "uses $dynamicRef"),
        ({"properties": {"p": {"items": {"$recursiveRef": "#"}}}}, "uses $recursiveRef"),
    ],
)
def test_keywords_that_move_how_references_resolve_are_refused(
    schema: dict[str, Any], message: str
) -> None:
    """$id below the root, anchors and dynamic references are refused at listing."""
    expected = f"cannot take MCP tool 't': its inputSchema {message}"
    with pytest.raises(ToolDefinitionError, match=f"^{re.escape(expected)}$"):
        _build(schema)


@pytest.mark.parametrize(
    "ref",
    [
        "#",
        "#/$defs/a",
        "#/$defs/yes",
        "#/$defs/no",
        "#/$defs/list/anyOf/0",
        "#/$defs/a~1b",
        "#/$defs/c~0d",
        "#/$defs/e%25f",
    ],
)
def test_a_reference_into_the_schema_itself_is_taken(ref: str) -> None:
    """Pointers into the listing (escapes decoded as the validator does) and a root $id list."""
    schema = {
        "$id": "https://example.com/tool",
        "type": "object",
        "properties": {"p": {"$ref": ref}, "$id": {"type": "string"}, "$ref": {"enum": [1]}},
        "$defs": {
            "a": {"type": "string"},
            "list": {"anyOf": [{"type": "string"}]},
            "a/b": {"type": "string"},
            "c~d": {"type": "string"},
            "e%f": {"type": "string"},
            "yes": True,
            "no": False,
        },
    }
    built = _build(schema)
    assert "p" in built.parameter_names
