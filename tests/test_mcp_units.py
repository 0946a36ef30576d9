"""The MCP adapter's pieces without a server: records, conversions, the extension point, serving."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from pydantic import ValidationError

from ownloop import (
    ConfigurationError,
    Receipt,
    ToolCall,
    ToolDefinitionError,
    ToolRegistry,
    ToolSpec,
)
from ownloop.cli import build_parser
from ownloop.cli._mcp import build_server
from ownloop.mcp import HttpServer, MCPToolset, RegistryServer, StdioServer
from ownloop.mcp._convert import build_tool, call_result
from ownloop.policy import allow_writes
from ownloop.store import PostgresRunStore, SqliteRunStore
from ownloop.tools import ExternalTool, ToolContext, ToolRejection, ValidatedCall


async def _never(arguments: dict[str, Any], context: ToolContext) -> Any:
    raise AssertionError("not called in these tests")


def _tool(schema: dict[str, Any], *, read_only: bool | None = True, name: str = "t") -> types.Tool:
    hints = None if read_only is None else types.ToolAnnotations(read_only_hint=read_only)
    return types.Tool(name=name, input_schema=schema, annotations=hints)


def test_server_records_refuse_bad_names_prefixes_and_lookups() -> None:
    """Names and prefixes must fit tool names; reconcile lookups must be callable."""
    with pytest.raises(ValidationError):
        StdioServer(name="has space", command="x")
    with pytest.raises(ValidationError):
        HttpServer(name="h", prefix="bad.prefix", url="http://127.0.0.1:1/mcp")
    with pytest.raises(ValidationError):
        StdioServer(name="s", command="x", reconcile={"t": "not callable"})


_BOUNDS = {
    # option: (its documented default, the smallest and largest accepted, a refused value each side)
    "startup_timeout_s": (30.0, [0.001, 1e9], [0.0]),
    "call_timeout_s": (60.0, [0.001, 1e9], [0.0]),
    "max_reconnects": (3, [0, 10**9], [-1]),
    "max_result_bytes": (1_000_000, [1024, 10**12], [1023]),
    "max_schema_depth": (64, [2, 64], [1, 65]),
    "max_schema_bytes": (1_000_000, [1024, 10**12], [1023]),
    "pattern_timeout_s": (0.1, [0.001, 60], [0.0, 60.001]),
}


@pytest.mark.parametrize("option", sorted(_BOUNDS))
def test_server_record_limits_have_their_documented_defaults_and_bounds(option: str) -> None:
    """Each limit defaults as documented, takes its bounds inclusive and refuses past them."""
    default, accepted, refused = _BOUNDS[option]
    assert getattr(StdioServer(name="s", command="x"), option) == default
    for value in accepted:
        assert getattr(StdioServer(name="s", command="x", **{option: value}), option) == value
    for value in refused:
        with pytest.raises(ValidationError):
            StdioServer(name="s", command="x", **{option: value})


def test_server_records_trust_nothing_and_take_everything_by_default() -> None:
    """By default: no hints believed, every tool taken, no prefix, keys in idempotency_key."""
    record = HttpServer(name="h", url="http://127.0.0.1:1/mcp")
    assert record.trust_annotations is False
    assert (record.prefix, record.tools, dict(record.effects)) == ("", None, {})
    assert (record.idempotent, record.approval_required, dict(record.reconcile)) == ((), (), {})
    assert record.idempotency_argument == "idempotency_key"
    assert dict(record.headers) == {}
    stdio = StdioServer(name="s" * 64, prefix="p" * 32, command="x")
    assert (stdio.args, stdio.env, stdio.cwd) == ((), None, None)
    for bad in ("", "s" * 65, "a/b"):
        with pytest.raises(ValidationError, match="must match"):
            StdioServer(name=bad, command="x")
    with pytest.raises(ValidationError, match="must match"):
        StdioServer(name="s", prefix="p" * 33, command="x")
    with pytest.raises(ValidationError, match=r"reconcile\.t\n  Input should be callable"):
        StdioServer(name="s", command="x", reconcile={"t": 5})


def test_a_toolset_refuses_duplicate_servers_and_other_objects() -> None:
    """Server names are unique, and only server records are accepted."""
    with pytest.raises(ConfigurationError, match="distinct"):
        MCPToolset(StdioServer(name="s", command="x"), StdioServer(name="s", command="y"))
    with pytest.raises(ConfigurationError, match="StdioServer"):
        MCPToolset(object())  # type: ignore[arg-type]
    idle = MCPToolset(StdioServer(name="s", command="x"))
    idle.close()  # closing what never started is harmless
    assert repr(idle) == "MCPToolset(servers=['s'], tools=[])"
    assert idle.stderr_tail("s") == ""


def test_conversion_keeps_optional_semantics_and_validates_against_the_source() -> None:
    """Optional becomes nullable; null is dropped before the call; the source schema validates."""
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer", "default": 3}},
        "required": ["q"],
    }
    tool = build_tool(_tool(schema), StdioServer(name="s", command="x"), _never)
    assert tool.spec.parameters["required"] == ["q", "n"]
    assert "null" in str(tool.spec.parameters["properties"]["n"])
    ok = tool.validate(ToolCall(id="c", name="t", arguments={"q": "a", "n": None}))
    assert isinstance(ok, ValidatedCall)
    assert ok.arguments == {"q": "a"}
    bad = tool.validate(ToolCall(id="c", name="t", arguments={"q": 1}))
    assert isinstance(bad, ToolRejection)
    assert "q" in bad.message
    not_json = tool.validate(ToolCall(id="c", name="t", arguments="{"))
    assert isinstance(not_json, ToolRejection)
    assert not_json.code == "invalid_json"
    assert "ExternalTool(name='t'" in repr(tool)


def test_conversion_refuses_what_cannot_be_a_tool() -> None:
    """Invalid schemas, names past the limit and lookups on reads are refused."""
    options = StdioServer(name="s", command="x")
    with pytest.raises(ToolDefinitionError, match="invalid"):
        build_tool(_tool({"type": "object", "properties": {"a": {"type": 5}}}), options, _never)
    with pytest.raises(ToolDefinitionError):
        build_tool(_tool({"type": "object"}, name="x" * 70), options, _never)
    with_lookup = StdioServer(
        name="s", command="x", reconcile={"t": lambda a, c: None}, trust_annotations=True
    )
    with pytest.raises(ConfigurationError, match="read tool"):
        build_tool(_tool({"type": "object"}), with_lookup, _never)
    written = build_tool(_tool({"type": "object"}, read_only=None), with_lookup, _never)
    assert written.spec.effect == "write"
    assert written.parameter_names == ()


def test_call_results_become_receipts_or_values() -> None:
    """An isError result makes an error receipt; text, JSON text and several blocks become data."""

    def result(*texts: str, error: bool = False) -> types.CallToolResult:
        blocks: list[types.ContentBlock] = [types.TextContent(type="text", text=t) for t in texts]
        return types.CallToolResult(content=blocks, is_error=error)

    receipt = call_result(result(error=True), call_id="c", tool="t", max_bytes=4096)
    assert isinstance(receipt, Receipt)
    assert (receipt.call_id, receipt.tool, receipt.status, receipt.effect) == (
        "c",
        "t",
        "error",
        "none",
    )
    assert receipt.message == "the tool reported an error"
    assert call_result(result('{"a": 1}'), call_id="c", tool="t", max_bytes=4096) == {"a": 1}
    assert call_result(result("plain"), call_id="c", tool="t", max_bytes=4096) == "plain"
    assert call_result(result("[1, 2]"), call_id="c", tool="t", max_bytes=4096) == [1, 2]
    assert call_result(result("{not json"), call_id="c", tool="t", max_bytes=4096) == "{not json"
    many = call_result(result("a", "b"), call_id="c", tool="t", max_bytes=4096)
    assert isinstance(many, list)
    assert [block["text"] for block in many] == ["a", "b"]  # type: ignore[index]


def test_a_result_is_cut_at_its_utf8_bytes_exactly() -> None:
    """The cap counts the JSON's UTF-8 bytes; a result at the cap is kept, past it cut by chars."""
    value = {"t": "\u00e9" * 10}  # non-ASCII: 2 bytes each in UTF-8, 6 as an ASCII escape
    size = len(b'{"t": "') + 20 + len(b'"}')

    def cut(max_bytes: int) -> Any:
        result = types.CallToolResult(content=[], structured_content=value)
        return call_result(result, call_id="c", tool="t", max_bytes=max_bytes)

    assert cut(size) == value
    assert cut(size - 1) == {
        "truncated": {"bytes": size, "kept_bytes": size - 1},
        "text": '{"t": "' + "\u00e9" * 10 + '"',
    }
    assert cut(7 + 19) == {  # the cut falls inside the tenth é, which is dropped whole
        "truncated": {"bytes": size, "kept_bytes": 7 + 18},
        "text": '{"t": "' + "\u00e9" * 9,
    }
    errors = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.TextContent(type="text", text="second"),
        ],
        is_error=True,
    )
    receipt = call_result(errors, call_id="c", tool="t", max_bytes=4096)
    assert getattr(receipt, "message", None) == "first\nsecond"


def test_a_schema_offered_as_the_server_wrote_it_loses_only_its_title_and_dialect() -> None:
    """The non-strict fallback keeps the server's schema, closed, without title and $schema."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Labels",
        "type": "object",
        "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}},
    }
    tool = build_tool(_tool(schema), StdioServer(name="s", command="x"), _never)
    assert tool.spec.strict is False
    assert tool.spec.parameters == {
        "type": "object",
        "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}},
        "additionalProperties": False,
    }


def test_content_blocks_are_kept_as_their_mcp_json() -> None:
    """Several blocks become a list of each block's JSON, with MCP's own field names."""
    blocks: list[types.ContentBlock] = [
        types.TextContent(type="text", text="a"),
        types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
    ]
    value = call_result(types.CallToolResult(content=blocks), call_id="c", tool="t", max_bytes=4096)
    assert value == [
        {"type": "text", "text": "a", "annotations": None, "_meta": None},
        {
            "type": "image",
            "data": "aGk=",
            "mimeType": "image/png",
            "annotations": None,
            "_meta": None,
        },
    ]


@pytest.mark.parametrize(
    "nullable",
    [
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"oneOf": [{"type": "string"}, {"type": "null"}]},
        {"const": None},
        {"enum": ["a", None]},
        {"type": ["string", "null"]},
        {  # every way at once
            "type": ["string", "null"],
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "oneOf": [{"type": "string"}, {"type": "null"}],
            "const": None,
            "enum": [None],
        },
    ],
)
def test_every_way_of_admitting_null_keeps_an_optional_field_absent(nullable: Any) -> None:
    """An optional property admitting null in any form, at any depth, is offered non-strict."""
    schema = {"type": "object", "properties": {"p": nullable, "q": {"type": "string"}}}
    tool = build_tool(_tool(schema), StdioServer(name="s", command="x"), _never)
    assert tool.spec.strict is False
    assert "required" not in tool.spec.parameters
    plain = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "r": {"$ref": "#/$defs/S"}},
        "$defs": {"S": {"type": "string"}},
    }
    assert build_tool(_tool(plain), StdioServer(name="s", command="x"), _never).spec.strict
    required = {"type": "object", "properties": {"p": nullable}, "required": ["p"]}
    assert build_tool(_tool(required), StdioServer(name="s", command="x"), _never).spec.strict
    inner = {"type": "object", "properties": {"p": nullable}}
    branch = {"anyOf": [inner, {"type": "string"}]}
    nested = {"type": "object", "properties": {"x": branch}, "required": ["x"]}
    assert not build_tool(_tool(nested), StdioServer(name="s", command="x"), _never).spec.strict


def test_the_registry_extension_point() -> None:
    """The registry adds built tools (replace on request), remove withdraws them."""
    registry = ToolRegistry()
    spec = ToolSpec(name="ext", parameters={"type": "object", "properties": {}})
    tool = ExternalTool(spec, _never, check=lambda arguments: None)
    assert registry.register(tool) is tool
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(tool)
    assert registry.register(tool, replace=True) is tool
    with pytest.raises(ConfigurationError, match="RegisteredTool"):
        registry.register(object())  # type: ignore[arg-type]
    assert registry.remove("ext") is tool
    assert registry.remove("ext") is None
    with pytest.raises(ToolDefinitionError, match="reconcile"):
        ExternalTool(spec, _never, check=lambda arguments: None, reconcile=lambda a, c: None)


def test_deeply_nested_arguments_are_rejected_not_raised() -> None:
    """A checker that recurses too deeply yields a rejection."""

    def deep(arguments: dict[str, Any]) -> str | None:
        raise RecursionError

    spec = ToolSpec(name="ext", parameters={"type": "object", "properties": {}})
    rejected = ExternalTool(spec, _never, check=deep).validate(ToolCall(id="c", name="ext"))
    assert isinstance(rejected, ToolRejection)
    assert "nested too deeply" in rejected.message


def _served(tmp_path: Path) -> RegistryServer:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def broken() -> str:
        """Always fails."""
        raise ValueError("no luck")

    @registry.tool(effect="write")
    def flaky_write() -> str:
        """Fails after it may have written."""
        raise OSError("lost the connection")

    return RegistryServer(
        registry, store=SqliteRunStore(tmp_path / "runs.db"), policy=allow_writes("flaky_write")
    )


def test_served_errors_and_unknown_writes_are_reported_as_errors(tmp_path: Path) -> None:
    """A failing read is an error; a failing write is an unknown effect not to repeat."""
    server = _served(tmp_path)
    failed = asyncio.run(server.call("broken", {}))
    unknown = asyncio.run(server.call("flaky_write", None))
    assert failed.is_error
    assert "no luck" in failed.content[0].text  # type: ignore[union-attr]
    assert unknown.is_error
    assert "Do not repeat it" in unknown.content[0].text  # type: ignore[union-attr]
    assert "RegistryServer(name='ownloop'" in repr(server)


def test_the_command_line_builds_the_described_server(tmp_path: Path) -> None:
    """`ownloop mcp serve` options become the server's registry, store, actor and policy."""
    policy = tmp_path / "policy.json"
    policy.write_text('{"allowed_writes": ["transfer"]}', encoding="utf-8")
    arguments = build_parser().parse_args(
        [
            "mcp",
            "serve",
            "tests.mcp_served_tools:registry",
            "--db",
            str(tmp_path / "r.db"),
            "--policy",
            str(policy),
            "--actor",
            "ide",
            "--role",
            "dev",
            "--name",
            "shop",
        ]
    )
    server = build_server(arguments)
    assert server.name == "shop"
    assert server.actor is not None
    assert (server.actor.id, server.actor.roles) == ("ide", ("dev",))
    assert {tool.name for tool in server.tools()} == {"balance", "transfer"}


def test_the_command_line_can_name_a_postgres_store() -> None:
    """--dsn serves from PostgreSQL instead of a SQLite file."""
    arguments = build_parser().parse_args(
        ["mcp", "serve", "tests.mcp_served_tools:make_registry", "--dsn", "postgresql://u@h/db"]
    )
    assert isinstance(build_server(arguments).store, PostgresRunStore)
