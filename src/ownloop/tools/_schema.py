"""Rewrite Pydantic's JSON schema of a tool's arguments into OpenAI strict-mode form.

Rules this module enforces on every strict schema (the tests state them as a checker):

1. Every object has ``type: "object"``, ``properties``, ``additionalProperties: false`` and a
   ``required`` list naming every property.
2. A field with a default becomes required *and nullable* (``anyOf: [<type>, {"type": "null"}]``);
   its description says that ``null`` selects the default. A field whose type already admits
   ``None`` is left as it is: there ``null`` means ``None``.
3. Only keywords strict mode accepts remain (`STRICT_KEYWORDS`); ``title``, ``default`` and the like
   are dropped. ``minLength``, ``maxLength`` and ``uniqueItems`` are dropped and restated in the
   description (validation still enforces them); ``format`` stays only for the formats strict mode
   knows. ``oneOf`` becomes ``anyOf``; a single-element ``allOf`` is merged.
4. Named models stay in ``$defs`` and are referenced by ``$ref`` (this keeps recursive models
   expressible); a ``$ref`` with sibling keywords (a description) is inlined, and unreferenced
   definitions are pruned.
5. What strict mode cannot express fails with `ToolDefinitionError` naming the function and the
   parameter: free-form maps (``dict[str, X]``, models allowing extra fields), fixed-length tuples
   (``prefixItems``), values of any type (``Any``, bare ``list``, the schema ``true``), the schema
   ``false``, a type list naming ``object`` or ``array``, multi-element ``allOf``, a ``$ref`` that
   is not ``#/$defs/<name>``. No valid JSON schema makes the converter raise anything else.
6. Whether a field admits ``null`` is decided by `admits_null` alone (here, in argument
   validation and in the MCP conversion): it follows local references and ``allOf``, ``anyOf``
   and ``oneOf``, bounded, and says yes when it cannot tell.

Nothing here validates arguments; `ownloop.tools._arguments` does that with the Pydantic model.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ownloop.tools._signature import definition_error

__all__ = [
    "MAX_NULL_DEPTH",
    "STRICT_KEYWORDS",
    "admits_null",
    "plain_schema",
    "resolve_ref",
    "strict_schema",
]

STRICT_KEYWORDS = frozenset(
    {
        "type", "description", "properties", "required", "additionalProperties", "items",
        "anyOf", "enum", "const", "$ref", "$defs", "pattern", "format", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
"""The JSON schema keywords a strict schema may contain."""

_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_RESTATED = {
    "minLength": "minimum length {}",
    "maxLength": "maximum length {}",
    "uniqueItems": "items must be unique",
}
_STRUCTURAL = frozenset(
    {"properties", "required", "items", "anyOf", "additionalProperties", "$ref", "$defs"}
)  # rebuilt by the converter, never copied
_MAP_KEYWORDS = ("patternProperties", "propertyNames", "unevaluatedProperties")
_LOCAL = "#/$defs/"

MAX_NULL_DEPTH = 64
"""How many references and branches `admits_null` follows by default (MCP's deepest schema)."""


def resolve_ref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Follow ``node``'s local ``$ref`` (``#/$defs/<name>``) into ``defs``; else return ``node``."""
    name = _definition_name(node.get("$ref"))
    target = None if name is None else defs.get(name)
    return target if isinstance(target, dict) else node


def admits_null(node: Any, defs: Mapping[str, Any], limit: int = MAX_NULL_DEPTH) -> bool:
    """Whether the schema ``node`` accepts JSON ``null``: the one rule every caller follows.

    Every keyword present must allow ``null`` (``type``, ``const``, ``enum``, a local ``$ref``
    into ``defs``, every part of ``allOf``, some branch of ``anyOf`` and of ``oneOf``). Each
    reference followed and each part or branch entered spends one of ``limit``. When it cannot
    tell, it says yes, which only keeps ``null`` meaning ``None`` (or an MCP tool's own schema):
    a schema that runs out of ``limit`` (a cycle of references), a reference to nothing, and an
    untyped schema (``{}``, ``true``). The schema ``false`` accepts nothing.

    Args:
        node: A JSON schema: an object, ``true`` or ``false``.
        defs: The definitions local references point into.
        limit: How many references and branches may be followed.
    """
    if isinstance(node, bool):
        return node
    if not isinstance(node, dict) or limit <= 0:
        return True
    kind = node.get("type", "null")
    name = _definition_name(node.get("$ref"))
    target = True if name is None else defs.get(name, True)  # no reference, or one to nothing
    inner = limit - 1
    return (
        "null" in (kind if isinstance(kind, list) else [kind])
        and node.get("const") is None
        and None in node.get("enum", [None])
        and admits_null(target, defs, inner)
        and all(admits_null(part, defs, inner) for part in node.get("allOf", []))
        and all(
            any(admits_null(branch, defs, inner) for branch in node[key])
            for key in ("anyOf", "oneOf")
            if key in node
        )
    )


def plain_schema(raw: dict[str, Any]) -> dict[str, Any]:
    """Return the non-strict schema: Pydantic's own, without the internal model's title."""
    schema = copy.deepcopy(raw)
    schema.pop("title", None)
    return schema


def strict_schema(raw: dict[str, Any], label: str) -> dict[str, Any]:
    """Rewrite Pydantic's schema ``raw`` of a tool's arguments into strict-mode form.

    Args:
        raw: ``model_json_schema(by_alias=True)`` of the arguments model.
        label: The function, for error messages.

    Raises:
        ToolDefinitionError: A parameter uses a construct strict mode cannot express.
    """
    return _Strictifier(raw, label).run()


class _Strictifier:
    """One conversion: converts reachable definitions once, remembers the parameter path."""

    def __init__(self, raw: dict[str, Any], label: str) -> None:
        self.raw = raw
        self.label = label
        self.defs: dict[str, Any] = raw.get("$defs", {})
        self.done: dict[str, dict[str, Any]] = {}
        self.in_progress: set[str] = set()

    def run(self) -> dict[str, Any]:
        root = {key: value for key, value in self.raw.items() if key != "$defs"}
        schema = self.convert(root, ())
        used = _referenced(schema, self.done)
        if used:
            schema["$defs"] = {name: self.done[name] for name in sorted(used)}
        return schema

    def fail(self, path: tuple[str, ...], problem: str) -> Exception:
        parameter = path[0] if path else None
        where = f"(at {_format_path(path)}) " if len(path) > 1 else ""
        hint = "; change the type or register the tool with strict=False"
        return definition_error(self.label, parameter, f"{where}{problem}{hint}")

    def refuse_boolean(self, node: Any, path: tuple[str, ...]) -> Exception:
        """The error for the schema ``true`` or ``false`` (which a listed MCP tool may hold)."""
        what = "accepts no value (the schema false)" if node is False else "accepts any value"
        return self.fail(path, f"{what}, which strict mode cannot express")

    def convert(self, node: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise self.refuse_boolean(node, path)
        kind = node.get("type")
        if isinstance(kind, list) and ("object" in kind or "array" in kind):
            raise self.fail(path, f"has the type list {kind}, which strict mode cannot express")
        if "$ref" in node:
            return self.convert_ref(node, path)
        if "allOf" in node:
            return self.convert(self.merge_all_of(node, path), path)
        if "oneOf" in node:
            node = {**{k: v for k, v in node.items() if k != "oneOf"}, "anyOf": node["oneOf"]}
        out = self.keywords(node)
        if "anyOf" in node:
            out["anyOf"] = [self.convert(branch, path) for branch in node["anyOf"]]
        elif node.get("type") == "object":
            out.update(self.convert_object(node, path))
        elif node.get("type") == "array":
            out["items"] = self.convert_array_items(node, path)
        elif "type" not in node and "enum" not in node and "const" not in node:
            raise self.fail(path, "accepts a value of any type, which strict mode cannot express")
        return out

    def keywords(self, node: dict[str, Any]) -> dict[str, Any]:
        """Keep the allowed scalar keywords; restate dropped constraints in the description."""
        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in node.items():
            if key in _RESTATED:
                notes.append(_RESTATED[key].format(value))
            elif key in _STRUCTURAL or key not in STRICT_KEYWORDS:
                continue
            elif key != "format" or value in _STRICT_FORMATS:
                out[key] = value
        if notes:
            note = "; ".join(notes)
            out["description"] = _append(out.get("description"), f"{note[0].upper()}{note[1:]}.")
        return out

    def convert_ref(self, node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        ref = node["$ref"]
        name = _definition_name(ref)
        if name is None or name not in self.defs:
            raise self.fail(path, f"refers to {ref!r}, which is not a local definition")
        if name not in self.done and name not in self.in_progress:
            self.in_progress.add(name)
            self.done[name] = self.convert(self.defs[name], path)
            self.in_progress.discard(name)
        siblings = self.keywords({k: v for k, v in node.items() if k != "$ref"})
        if not siblings or name in self.in_progress:
            return {"$ref": ref}
        return {**copy.deepcopy(self.done[name]), **siblings}

    def merge_all_of(self, node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        parts = node["allOf"]
        if len(parts) != 1:
            raise self.fail(path, "combines several schemas (allOf)")
        if not isinstance(parts[0], dict):
            raise self.refuse_boolean(parts[0], path)
        rest = {key: value for key, value in node.items() if key != "allOf"}
        return {**parts[0], **rest}

    def convert_object(self, node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        extra = node.get("additionalProperties", False)
        if extra is not False or "properties" not in node or any(k in node for k in _MAP_KEYWORDS):
            raise self.fail(
                path,
                "is a free-form mapping (dict or a model allowing extra fields), which strict "
                "mode cannot express; use a model or dataclass with named fields",
            )
        required = set(node.get("required", ()))
        properties: dict[str, Any] = {}
        for key, child in node["properties"].items():
            converted = self.convert(child, (*path, key))
            if key not in required and not admits_null(converted, {**self.defs, **self.done}):
                converted = _nullable(converted, child)
            properties[key] = converted
        return {
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    def convert_array_items(self, node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        if "prefixItems" in node:
            raise self.fail(
                path, "is a fixed-length tuple, which strict mode cannot express; use list[X]"
            )
        items = node.get("items")
        if not isinstance(items, dict):
            raise self.fail(path, "is an array without an item type")
        return self.convert(items, (*path, "[]"))


def _nullable(converted: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """Make an optional field required-but-nullable; the description says what null means."""
    description = converted.pop("description", None)
    if "default" in raw:
        default = json.dumps(raw["default"], ensure_ascii=False)
        note = f"Send null for the default ({default})."
    else:
        note = "Send null for the default."
    if "anyOf" in converted and len(converted) == 1:
        wrapped: dict[str, Any] = {"anyOf": [*converted["anyOf"], {"type": "null"}]}
    else:
        wrapped = {"anyOf": [converted, {"type": "null"}]}
    wrapped["description"] = _append(description, note)
    return wrapped


def _append(description: Any, note: str) -> str:
    text = str(description).rstrip() if description else ""
    if text and not text.endswith((".", "!", "?")):
        text += "."
    return f"{text} {note}".strip()


def _definition_name(ref: Any) -> str | None:
    """The name in a local reference ``#/$defs/<name>``; ``None`` for any other reference."""
    if not isinstance(ref, str) or not ref.startswith(_LOCAL) or "/" in ref[len(_LOCAL) :]:
        return None
    return ref[len(_LOCAL) :]


def _format_path(path: tuple[str, ...]) -> str:
    text = ""
    for part in path:
        text += "[]" if part == "[]" else (f".{part}" if text else part)
    return text


def _referenced(schema: dict[str, Any], defs: dict[str, dict[str, Any]]) -> set[str]:
    """The names in ``defs`` reachable through ``$ref`` from ``schema``."""
    found: set[str] = set()
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            name = _definition_name(node.get("$ref"))
            if name is not None and name not in found:
                found.add(name)
                pending.append(defs.get(name))
            pending.extend(value for key, value in node.items() if key != "$defs")
        elif isinstance(node, list):
            pending.extend(node)
    return found
