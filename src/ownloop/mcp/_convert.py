"""Turn an MCP tool listing into registry tools, and an MCP call result into a receipt or value.

Schema: the tool's ``inputSchema`` is rewritten into OpenAI strict form by the same converter the
Python tools use (optional properties become required-but-nullable, and a ``null`` sent for one is
removed before the call, so the server applies its own default). Where strict mode cannot express
the schema (free-form maps, ``allOf``, values of any type...), the tool keeps the server's schema
with ``strict=False``: validation is still complete, only the provider's constrained decoding is
lost. Arguments are validated against the schema the model was shown (every object closed) and
then the server's own (see `ownloop.mcp._validate`) before any call is sent: all but the patterns
when the call is validated, everything (patterns too) in a worker thread just before it is sent.

Effects: what the operator declares (``effects``), else ``write`` (which the default policy
denies): a server's annotations are believed only when its record says ``trust_annotations``,
and then ``readOnlyHint: true`` means ``read``. A later listing never relaxes a tool offered.

Optional properties that already admit ``null`` keep "absent" apart from ``null``: such a tool is
offered with the server's schema (closed, ``strict=False``) rather than the strict form, which
would make every property required.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import mcp.types as mcp_types

from ownloop.contracts import Effect, JsonValue, Receipt, ToolSpec
from ownloop.exceptions import ConfigurationError, ToolDefinitionError
from ownloop.mcp._config import ServerOptions
from ownloop.mcp._validate import SchemaCheck, check_limits, closed, schema_check
from ownloop.tools import ExternalHandler, ExternalTool, ToolContext, to_jsonable
from ownloop.tools._schema import admits_null, strict_schema

__all__ = ["build_tool", "call_result", "effect_of", "is_idempotent"]

_MAX_ERROR_CHARS = 2000
_SCOPE_KEYWORDS = ("$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef")


def effect_of(tool: mcp_types.Tool, options: ServerOptions) -> Effect:
    """The tool's effect: declared by the operator, else hinted ``read`` by a trusted server.

    Every other tool is a ``write``.
    """
    declared = options.effects.get(tool.name)
    if declared is not None:
        return declared
    hints = tool.annotations if options.trust_annotations else None
    return "read" if hints is not None and hints.read_only_hint is True else "write"


def is_idempotent(tool: mcp_types.Tool, options: ServerOptions) -> bool:
    """Whether a call may be sent again once sent: declared so, or hinted by a trusted server."""
    if tool.name in options.idempotent:
        return True
    hints = tool.annotations if options.trust_annotations else None
    return hints is not None and hints.idempotent_hint is True


def build_tool(
    tool: mcp_types.Tool,
    options: ServerOptions,
    handler: ExternalHandler,
    *,
    floor: ToolSpec | None = None,
) -> ExternalTool:
    """Make the registry tool for one MCP tool of a server.

    Args:
        tool: The tool as the server listed it.
        options: The server's record (prefix, overrides, idempotency argument, trust).
        handler: Performs the call on the server.
        floor: The spec this tool was offered with before, if it was: a new listing never
            relaxes it (a write stays a write, a call not idempotent stays so).

    Raises:
        ToolDefinitionError: The prefixed name is not a valid tool name, or the schema is invalid.
    """
    check_limits(
        tool.input_schema,
        tool=tool.name,
        max_depth=options.max_schema_depth,
        max_bytes=options.max_schema_bytes,
    )
    source = _source_schema(tool.input_schema)
    key_argument = options.idempotency_argument
    takes_key = key_argument is not None and key_argument in source.get("properties", {})
    visible = _without(source, key_argument) if takes_key else source
    shown = closed(visible)
    check = schema_check(shown, visible, tool.name)  # an invalid schema is refused first
    _check_references(visible, tool.name)
    try:
        defs, limit = visible.get("$defs", {}), options.max_schema_depth
        if _keeps_absent(visible, defs, limit):  # documented: strict form loses "absent"
            raise ToolDefinitionError("an optional property admits null")
        parameters, strict = strict_schema(visible, f"MCP tool {tool.name}"), True
    except ToolDefinitionError:
        parameters, strict = _plain(shown), False  # documented fallback: the server's schema
    effect = effect_of(tool, options)
    idempotent = takes_key or is_idempotent(tool, options)
    if floor is not None:
        effect = "write" if floor.effect == "write" else effect
        idempotent = idempotent and floor.idempotent
    name = f"{options.prefix}{tool.name}"
    try:
        spec = ToolSpec(
            name=name,
            description=(tool.description or tool.title or "")[:4096],
            parameters=parameters,
            strict=strict,
            effect=effect,
            requires_approval=tool.name in options.approval_required,
            idempotent=idempotent,
            timeout_s=options.call_timeout_s,
        )
    except ValueError as error:
        problem = f"cannot take MCP tool {tool.name!r} as {name!r}: {error}"
        raise ToolDefinitionError(problem) from None
    lookup = options.reconcile.get(tool.name)
    if lookup is not None and effect != "write":
        raise ConfigurationError(f"reconcile= for MCP tool {tool.name!r}, which is a read tool")
    checked = _pattern_checked(handler, check, options.pattern_timeout_s)
    return ExternalTool(spec, checked, check=check, source_schema=visible, reconcile=lookup)


def _pattern_checked(handler: ExternalHandler, check: SchemaCheck, budget_s: float) -> Any:
    """The handler, after the complete check (patterns too) in a worker thread, off the loop.

    The patterns get ``budget_s``, or the run's time left if that is less; a call they refuse
    (or that they take too long on) is answered with an error receipt and never sent.
    """

    async def checked(arguments: dict[str, Any], context: ToolContext) -> Any:
        left = context.seconds_left()
        budget = budget_s if left is None else min(budget_s, left)
        problem = await asyncio.to_thread(check.with_patterns, arguments, budget)
        if problem is not None:
            return Receipt(
                call_id=context.call_id,
                tool=context.tool,
                status="error",
                effect="none",
                message=f"Invalid arguments, not sent: {problem}"[:_MAX_ERROR_CHARS],
            )
        return await handler(arguments, context)

    return checked


def call_result(
    result: mcp_types.CallToolResult, *, call_id: str, tool: str, max_bytes: int
) -> Receipt | JsonValue:
    """Turn a call's result into what the runtime records.

    ``isError`` becomes an ``error`` receipt (the model sees the message and can act on it);
    otherwise the structured content when the server sent one, else the content blocks: the text
    of a single text block, or each block as JSON. A result whose JSON text is larger than
    ``max_bytes`` is cut: it becomes ``{"truncated": {"bytes": N, "kept_bytes": M}, "text":
    ...}`` holding the first ``M`` bytes of that text.
    """
    value = _value(result, call_id=call_id, tool=tool)
    if isinstance(value, Receipt):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return value
    kept = encoded[:max_bytes].decode(errors="ignore")
    return {"truncated": {"bytes": len(encoded), "kept_bytes": len(kept.encode())}, "text": kept}


def _value(result: mcp_types.CallToolResult, *, call_id: str, tool: str) -> Receipt | JsonValue:
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


def _keeps_absent(schema: Any, defs: dict[str, Any], limit: int) -> bool:
    """Whether an object in the schema has an optional property that already admits null.

    `admits_null` decides, as for Python tools: each ``$ref`` followed and each branch entered
    spends one of ``limit`` (``max_schema_depth``), and a schema it cannot settle (a cycle of
    references) is taken as admitting null, which only keeps the server's own schema.
    """
    if isinstance(schema, list):
        return any(_keeps_absent(item, defs, limit) for item in schema)
    if not isinstance(schema, dict):
        return False
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = set(schema.get("required", ()))
        for name, child in properties.items():
            if name not in required and admits_null(child, defs, limit):
                return True
    return any(_keeps_absent(value, defs, limit) for value in schema.values())


def _check_references(schema: dict[str, Any], tool: str) -> None:
    """Refuse a schema whose references the validator could not follow when a call comes.

    Every ``$ref`` must be a JSON pointer into the schema itself (``#``, ``#/$defs/X``,
    ``#/properties/a/items``) that reaches a schema (an object, ``true`` or ``false``), and no
    keyword may move the base or name an anchor (``$id`` below the root, ``$anchor``,
    ``$dynamicRef``...): such a reference would otherwise raise from the validator at call time.
    Every object is read so, values too (a ``default`` holding such a key is refused as well):
    a refusal too many is a `ToolDefinitionError`, one too few a crash at call time.

    Raises:
        ToolDefinitionError: A reference that does not resolve inside the schema, or a keyword
            that changes how references resolve.
    """
    pending: list[tuple[Any, bool]] = [(schema, True)]
    while pending:
        node, at_root = pending.pop()
        if isinstance(node, list):
            pending.extend((item, False) for item in node)
        if not isinstance(node, dict):
            continue
        for key in _SCOPE_KEYWORDS:
            if isinstance(node.get(key), str) and not (at_root and key == "$id"):
                raise ToolDefinitionError(
                    f"cannot take MCP tool {tool!r}: its inputSchema uses {key} below its root"
                    if key == "$id"
                    else f"cannot take MCP tool {tool!r}: its inputSchema uses {key}"
                )
        ref = node.get("$ref")
        if isinstance(ref, str) and not isinstance(_pointed(schema, ref), dict | bool):
            raise ToolDefinitionError(
                f"cannot take MCP tool {tool!r}: its inputSchema refers to {ref!r}, "
                "which is not a schema inside it"
            )
        pending.extend((value, False) for value in node.values())


def _pointed(root: Any, ref: str) -> Any:
    """What the local reference ``ref`` (``#`` or ``#/a/b``) points at in ``root``, else ``None``.

    Decoded as the validator decodes it: percent-escapes first, then ``~1`` and ``~0``.
    """
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for segment in unquote(ref[2:]).split("/"):
        if isinstance(node, dict):
            node = node.get(segment.replace("~1", "/").replace("~0", "~"))
        elif isinstance(node, list) and segment.isascii() and segment.isdigit():
            node = node[int(segment)] if int(segment) < len(node) else None
        else:
            return None
    return node


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
