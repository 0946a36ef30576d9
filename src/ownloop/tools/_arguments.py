"""Prepare a model's raw tool arguments for validation, and explain why they failed.

Three steps happen before Pydantic sees the arguments: the size cap (measured on the JSON text),
a strict JSON parse (no ``NaN``, infinities, duplicate keys, unpaired surrogates or nesting
deeper than 64 levels) into a fresh object, and the restoration of optional semantics: where the
schema made a defaulted field required-but-nullable, a ``null`` is removed so that Pydantic
restores the Python default (unless the field's own type admits ``None``; then ``null`` means
``None``). Errors become messages a model can act on. Nothing here raises for bad input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ownloop._text import MAX_NESTING, nesting_depth
from ownloop.contracts import JsonValue
from ownloop.redaction import Redactor
from ownloop.tools._outcomes import RejectionCode
from ownloop.tools._schema import admits_null, resolve_ref
from ownloop.tools._serialize import to_jsonable

__all__ = [
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "ArgumentProblem",
    "bound",
    "describe_validation_error",
    "echo",
    "load_arguments",
    "restore_defaults",
]

DEFAULT_MAX_ARGUMENT_BYTES = 64 * 1024
"""The default cap on one call's raw arguments, in bytes of UTF-8 JSON text."""

MAX_MESSAGE_CHARS = 2000
MAX_ECHO_CHARS = 200
_MAX_ERRORS = 8
_EXTRA_ERRORS = frozenset({"extra_forbidden", "unexpected_keyword_argument"})
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """Why raw arguments could not even be handed to validation.

    Attributes:
        code: The rejection code.
        message: The explanation for the model.
    """

    code: RejectionCode
    message: str


def bound(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Cut ``text`` to at most ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Names like "password" or "api_key" that a model invents are quoted back no more than declared
# sensitive parameters: the rejection reaches the trace.
_DEFAULT_REDACTOR = Redactor()


def echo(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """Render a piece of model input as bounded JSON text, to quote it back in a message."""
    text = json.dumps(to_jsonable(value), ensure_ascii=False)
    return bound(text, limit)


def load_arguments(
    raw: JsonValue, *, tool: str, parameters: Sequence[str], max_bytes: int
) -> dict[str, Any] | ArgumentProblem:
    """Turn raw arguments (JSON text, an object, or nothing) into a fresh ``dict``.

    Args:
        raw: ``ToolCall.arguments``: a JSON string (empty or ``None`` mean ``{}``), an object,
            or anything else (rejected).
        tool: The tool's name, for messages.
        parameters: The tool's parameter names, for messages.
        max_bytes: The cap on the UTF-8 JSON text of the arguments.
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    text = _json_text(raw, tool=tool, parameters=parameters, max_bytes=max_bytes)
    if isinstance(text, ArgumentProblem):
        return text
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )  # fmt: skip
    except RecursionError:
        return _too_deep(tool, parameters)
    except ValueError as error:
        return _not_json(tool, parameters, bound(str(error), MAX_ECHO_CHARS))
    problem = _shape_problem(value, text, tool=tool, parameters=parameters)
    return value if problem is None else problem


def _shape_problem(
    value: Any, text: str, *, tool: str, parameters: Sequence[str]
) -> ArgumentProblem | None:
    """Why parsed arguments cannot be used: unencodable text, too deep, or not an object."""
    if _SURROGATE_ESCAPE.search(text) and not _encodable(value):
        return _not_json(tool, parameters, "it escapes an unpaired surrogate")
    if nesting_depth(value) > MAX_NESTING:
        return _too_deep(tool, parameters)
    if not isinstance(value, dict):
        return ArgumentProblem(
            "invalid_arguments",
            f"Arguments for tool {tool!r} must be a JSON object with the parameters "
            f"{_names(parameters)}; got {_json_kind(value)} {echo(value)}.",
        )
    return None


def _json_text(
    raw: JsonValue, *, tool: str, parameters: Sequence[str], max_bytes: int
) -> str | ArgumentProblem:
    """Return the arguments as JSON text, measured against the cap."""
    try:
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as error:
        return ArgumentProblem("invalid_arguments", f"Arguments for tool {tool!r}: {error}")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return _not_json(tool, parameters, "it contains an unpaired surrogate")
    if size > max_bytes:
        return ArgumentProblem(
            "arguments_too_large",
            f"Arguments for tool {tool!r} are {size} bytes of JSON; the limit is {max_bytes}. "
            "Send shorter arguments.",
        )
    return text


def _not_json(tool: str, parameters: Sequence[str], reason: str) -> ArgumentProblem:
    return ArgumentProblem(
        "invalid_json",
        f"Arguments for tool {tool!r} are not valid JSON ({reason}). "
        f"Send one JSON object with the parameters: {_names(parameters)}.",
    )


def _too_deep(tool: str, parameters: Sequence[str]) -> ArgumentProblem:
    return ArgumentProblem(
        "invalid_arguments",
        f"Arguments for tool {tool!r} nest more than {MAX_NESTING} levels deep. "
        f"Send one flat JSON object with the parameters: {_names(parameters)}.",
    )


def _encodable(value: Any) -> bool:
    """Whether ``value`` holds only valid Unicode (no unpaired surrogates)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def restore_defaults(value: Any, schema: Any, defs: dict[str, Any]) -> None:
    """Remove ``null`` from optional fields whose type does not admit ``None`` (in place).

    Walks ``value`` alongside Pydantic's own schema of the arguments, where a defaulted field is
    one missing from ``required``. A union is followed only when exactly one of its branches can
    hold the value's JSON kind; anything ambiguous is left to validation.

    Args:
        value: The parsed arguments (or a part of them).
        schema: The Pydantic schema (or sub-schema) describing ``value``.
        defs: The schema's ``$defs``.
    """
    if not isinstance(schema, dict):
        return  # the schemas true and false (an MCP tool's) say nothing about defaults
    schema = resolve_ref(schema, defs)
    branches = schema.get("anyOf", schema.get("oneOf", schema.get("allOf")))
    if isinstance(branches, list):
        fitting = [
            b for b in branches if isinstance(b, dict) and _holds(resolve_ref(b, defs), value)
        ]
        if len(fitting) == 1:
            restore_defaults(value, fitting[0], defs)
    elif isinstance(value, dict):
        _restore_in_object(value, schema, defs)
    elif isinstance(value, list):
        positional = schema.get("prefixItems")
        items = schema.get("items")
        for index, item in enumerate(value):
            if isinstance(positional, list) and index < len(positional):
                restore_defaults(item, positional[index], defs)
            elif isinstance(items, dict):
                restore_defaults(item, items, defs)


def _restore_in_object(value: dict[str, Any], schema: dict[str, Any], defs: dict[str, Any]) -> None:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                restore_defaults(item, extra, defs)
        return
    required = set(schema.get("required", ()))
    for key in list(value):
        child = properties.get(key)
        if not isinstance(child, dict):
            continue  # an undeclared field: validation rejects it
        if value[key] is None and key not in required and not admits_null(child, defs):
            del value[key]
        else:
            restore_defaults(value[key], child, defs)


def _holds(schema: dict[str, Any], value: Any) -> bool:
    """Whether a (resolved) schema branch can hold ``value``: its JSON kind, and its tags.

    An object branch whose ``const`` properties (the tags of a discriminated union) disagree
    with the value cannot hold it.
    """
    kind = schema.get("type")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        tags_match = all(
            value[key] == sub["const"]
            for key, sub in properties.items()
            if key in value and isinstance(sub, dict) and "const" in sub
        )
        is_object = kind == "object" or "properties" in schema or "additionalProperties" in schema
        return is_object and tags_match
    if isinstance(value, list):
        return kind == "array" or "items" in schema or "prefixItems" in schema
    return False


def describe_validation_error(
    error: ValidationError,
    *,
    tool: str,
    parameters: Sequence[str],
    sensitive: Collection[str] = (),
) -> str:
    """Explain a Pydantic validation error to the model: field, expectation, what came.

    Args:
        error: The error from validating the arguments.
        tool: The tool's name.
        parameters: The tool's parameter names, listed so the model can correct itself.
        sensitive: Parameters whose values are never quoted back (they would reach the trace).
    """
    details = error.errors(include_url=False)
    lines = [f"Arguments for tool {tool!r} are invalid:"]
    lines.extend(f"- {_describe(detail, sensitive)}" for detail in details[:_MAX_ERRORS])
    if len(details) > _MAX_ERRORS:
        lines.append(f"- … and {len(details) - _MAX_ERRORS} more errors")
    lines.append(f"Parameters: {_names(parameters)}. Fix the arguments and call the tool again.")
    return bound("\n".join(lines))


def _describe(detail: ErrorDetails, sensitive: Collection[str]) -> str:
    loc = detail["loc"]
    where = _format_loc(loc)
    hidden = bool(loc) and (loc[0] in sensitive or _DEFAULT_REDACTOR.is_secret_key(loc[-1]))
    came = "a value of a sensitive parameter (not shown)" if hidden else echo(detail["input"])
    if detail["type"] in _EXTRA_ERRORS:
        return f"{where}: unexpected field (not a parameter); got {came}"
    if detail["type"] == "missing":
        return f"{where}: required field is missing"
    return f"{where}: {detail['msg']}; got {came}"


def _format_loc(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(arguments)"


def _names(parameters: Sequence[str]) -> str:
    return ", ".join(parameters) if parameters else "(none)"


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number"}
    return kinds.get(type(value), "a number" if isinstance(value, float) else "null")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result
