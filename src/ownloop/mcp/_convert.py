"""Turn an MCP tool listing into registry tools, and an MCP call result into a receipt or value.

Schema: the tool's ``inputSchema`` is rewritten into OpenAI strict form by the same converter the
Python tools use (optional properties become required-but-nullable, and a ``null`` sent for one is
removed before the call, so the server applies its own default). Where strict mode cannot express
the schema (free-form maps, ``allOf``, values of any type...), the tool keeps the server's schema
with ``strict=False``: validation is still complete, only the provider's constrained decoding is
lost. Arguments are validated against the server's own schema (JSON Schema, by ``jsonschema``)
before any call is sent.

Effects: ``readOnlyHint: true`` means ``read``; anything else (no annotations, ``false``) means
``write``, which the default policy denies. An application overrides this per tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import mcp.types as mcp_types
from jsonschema.exceptions import SchemaError

from ownloop.contracts import Effect, JsonValue, Receipt, ToolSpec
from ownloop.exceptions import ConfigurationError, ToolDefinitionError
from ownloop.mcp._config import ServerOptions
from ownloop.tools import ArgumentCheck, ExternalHandler, ExternalTool, to_jsonable
from ownloop.tools._schema import strict_schema

__all__ = ["build_tool", "call_result", "effect_of", "schema_check"]

_MAX_ERROR_CHARS = 2000


def effect_of(tool: mcp_types.Tool, options: ServerOptions) -> Effect:
    """The tool's effect: the application's override, else ``read`` only when read-only."""
    override = options.effects.get(tool.name)
    if override is not None:
        return override
    hints = tool.annotations
    return "read" if hints is not None and hints.read_only_hint is True else "write"


def schema_check(schema: dict[str, Any], tool: str) -> ArgumentCheck:
    """Build the validator of arguments against the server's JSON schema.

    Raises:
        ToolDefinitionError: The server's schema is not a valid JSON schema.
    """
    validator_class = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except SchemaError as error:
        raise ToolDefinitionError(
            f"cannot take MCP tool {tool!r}: its inputSchema is invalid ({error.message})"
        ) from None
    validator = validator_class(schema)

    def check(arguments: dict[str, Any]) -> str | None:
        errors = sorted(validator.iter_errors(arguments), key=lambda error: list(error.path))
        if not errors:
            return None
        problems = []
        for error in errors[:8]:
            where = ".".join(str(part) for part in error.absolute_path) or "(arguments)"
            problems.append(f"{where}: {error.message}")
        return "; ".join(problems)

    return check


def build_tool(
    tool: mcp_types.Tool, options: ServerOptions, handler: ExternalHandler
) -> ExternalTool:
    """Make the registry tool for one MCP tool of a server.

    Args:
        tool: The tool as the server listed it.
        options: The server's record (prefix, overrides, idempotency argument).
        handler: Performs the call on the server.

    Raises:
        ToolDefinitionError: The prefixed name is not a valid tool name, or the schema is invalid.
    """
    source = _source_schema(tool.input_schema)
    key_argument = options.idempotency_argument
    takes_key = key_argument is not None and key_argument in source.get("properties", {})
    visible = _without(source, key_argument) if takes_key else source
    try:
        parameters, strict = strict_schema(visible, f"MCP tool {tool.name}"), True
    except ToolDefinitionError:
        parameters, strict = _plain(visible), False  # documented fallback: the server's schema
    effect = effect_of(tool, options)
    check = schema_check(visible, tool.name)
    name = f"{options.prefix}{tool.name}"
    try:
        spec = ToolSpec(
            name=name,
            description=(tool.description or tool.title or "")[:4096],
            parameters=parameters,
            strict=strict,
            effect=effect,
            requires_approval=tool.name in options.approval_required,
            idempotent=takes_key,
            timeout_s=options.call_timeout_s,
        )
    except ValueError as error:
        problem = f"cannot take MCP tool {tool.name!r} as {name!r}: {error}"
        raise ToolDefinitionError(problem) from None
    lookup = options.reconcile.get(tool.name)
    if lookup is not None and effect != "write":
        raise ConfigurationError(f"reconcile= for MCP tool {tool.name!r}, which is a read tool")
    return ExternalTool(spec, handler, check=check, source_schema=visible, reconcile=lookup)


def call_result(
    result: mcp_types.CallToolResult, *, call_id: str, tool: str
) -> Receipt | JsonValue:
    """Turn a call's result into what the runtime records.

    ``isError`` becomes an ``error`` receipt (the model sees the message and can act on it);
    otherwise the structured content when the server sent one, else the content blocks: the text
    of a single text block, or each block as JSON.
    """
    if result.is_error:
        text = _text(result.content) or "the tool reported an error"
        return Receipt(
            call_id=call_id,
            tool=tool,
            status="error",
            effect="none",
            message=text[:_MAX_ERROR_CHARS],
        )
    if result.structured_content is not None:
        return to_jsonable(result.structured_content)
    blocks = result.content
    if len(blocks) == 1 and isinstance(blocks[0], mcp_types.TextContent):
        return _maybe_json(blocks[0].text)
    return [to_jsonable(block.model_dump(mode="json", by_alias=True)) for block in blocks]


def _text(blocks: list[mcp_types.ContentBlock]) -> str:
    return "\n".join(block.text for block in blocks if isinstance(block, mcp_types.TextContent))


def _maybe_json(text: str) -> JsonValue:
    """A text block holding a JSON object or array becomes that value; other text stays text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            value: JsonValue = json.loads(stripped)
        except ValueError:
            return text
        return value
    return text


def _source_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    schema = dict(raw)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def _without(schema: dict[str, Any], name: str | None) -> dict[str, Any]:
    properties = {k: v for k, v in schema.get("properties", {}).items() if k != name}
    required = [k for k in schema.get("required", []) if k != name]
    return {**schema, "properties": properties, "required": required}


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key not in ("title", "$schema")}
