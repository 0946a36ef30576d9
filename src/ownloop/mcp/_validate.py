"""Checking arguments against a server's schema without trusting the server's schema.

A server's ``inputSchema`` is input from another party: it may be huge, deeply nested, leave
objects open, or carry a regular expression that backtracks for ever. So before a tool is taken
its schema must fit the server record's limits (``max_schema_depth``, ``max_schema_bytes``), and
arguments are checked twice before anything is sent: against the schema the model was shown (every
object closed, nested ones too: a field the model invented is refused here) and against the
server's own. The check that `validate` runs (on the caller's event loop, before approval) decides
everything but the patterns (``pattern``, ``patternProperties``): it never runs a server's regular
expression, and a property a pattern might admit is not refused there. The complete check, patterns
included, runs just before the call is sent, in a worker thread, on the ``regex`` engine with a time
bound: all the pattern matching of one call shares one budget (the server record's
``pattern_timeout_s``, never more than the run's time left), and a call whose patterns take longer
is refused unsent, not waited for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import jsonschema
import regex
from jsonschema.exceptions import SchemaError, ValidationError

from ownloop.exceptions import ToolDefinitionError

__all__ = ["SchemaCheck", "check_limits", "closed", "schema_check"]

_COMBINED = ("anyOf", "oneOf")
_SUBSCHEMAS = ("items", "not", "if", "then", "else", "contains", "propertyNames")
_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
# When the patterns of the call being checked must be decided by; None: they are not run at all.
_deadline: ContextVar[float | None] = ContextVar("ownloop_mcp_pattern_deadline", default=None)


class _TooSlow(Exception):
    """A pattern ran past the call's budget."""


def check_limits(schema: Any, *, tool: str, max_depth: int, max_bytes: int) -> None:
    """Refuse a schema deeper or larger than the server record allows, without recursing.

    Raises:
        ToolDefinitionError: The schema is nested deeper than ``max_depth`` or its JSON text is
            larger than ``max_bytes``.
    """
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise ToolDefinitionError(
                f"cannot take MCP tool {tool!r}: its inputSchema is nested deeper than "
                f"max_schema_depth ({max_depth})"
            )
        children = node.values() if isinstance(node, dict) else node
        if isinstance(node, dict | list):
            stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > max_bytes:
        raise ToolDefinitionError(
            f"cannot take MCP tool {tool!r}: its inputSchema is {size} bytes, more than "
            f"max_schema_bytes ({max_bytes})"
        )


def closed(schema: Any) -> Any:
    """The schema with every object that names its properties closed to any other property.

    An object that says nothing about other properties (no ``additionalProperties``,
    ``patternProperties`` or ``unevaluatedProperties``) gets ``additionalProperties: false``, at
    every level; where it combines parts with ``allOf``, the parts stay open and the whole gets
    ``unevaluatedProperties: false`` instead (a closed part would refuse its siblings' fields).
    Anything an object explicitly leaves open (a free-form map) stays as the server wrote it.
    """
    return _close(schema, in_all_of=False)


def _close(node: Any, *, in_all_of: bool) -> Any:
    if not isinstance(node, dict):
        return node
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _MAPS and isinstance(value, dict):
            result[key] = {name: _close(child, in_all_of=False) for name, child in value.items()}
        elif key in (*_COMBINED, "allOf", "prefixItems") and isinstance(value, list):
            result[key] = [_close(child, in_all_of=key == "allOf") for child in value]
        elif key in (*_SUBSCHEMAS, "additionalProperties"):
            result[key] = _close(value, in_all_of=False)
        else:
            result[key] = value
    said = any(
        key in node
        for key in ("additionalProperties", "patternProperties", "unevaluatedProperties")
    )
    if said or in_all_of:
        return result
    if isinstance(node.get("allOf"), list):
        result["unevaluatedProperties"] = False
    elif "properties" in node:
        result["additionalProperties"] = False
    return result


def _search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` matches in ``text``; ``None`` (undecided) outside the complete check."""
    deadline = _deadline.get()
    if deadline is None:
        return None
    # 0 makes the engine time out at once; a negative timeout would mean none at all.
    left = max(deadline - time.monotonic(), 0.0)
    try:
        return regex.search(pattern, text, timeout=left) is not None
    except TimeoutError:
        raise _TooSlow from None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and _search(pattern, instance) is False:
        yield ValidationError(f"{instance!r} does not match {pattern!r}"[:300])


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    # A key is extra only when no pattern can admit it: undecided patterns admit it for now.
    extras = [
        key
        for key in instance
        if key not in properties and all(_search(pattern, key) is False for pattern in patterns)
    ]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        names = ", ".join(repr(extra) for extra in sorted(extras)[:8])
        yield ValidationError(f"unexpected properties: {names}"[:300])


def _bounded(schema: dict[str, Any], tool: str) -> Any:
    """A validator of ``schema`` whose pattern keywords run on the time-bounded engine."""
    base = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    try:
        base.check_schema(schema)
    except SchemaError as error:
        raise ToolDefinitionError(
            f"cannot take MCP tool {tool!r}: its inputSchema is invalid ({error.message})"[:2000]
        ) from None
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    extended: Any = jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    return extended(schema)


class SchemaCheck:
    """Arguments checked against the schema shown to the model, then against the server's.

    Calling it is the `ArgumentCheck` that `validate` runs: everything but the patterns, with no
    regular expression run. `with_patterns` is the complete check, for a worker thread.
    """

    __slots__ = ("_validators",)

    def __init__(self, shown: dict[str, Any], source: dict[str, Any], tool: str) -> None:
        self._validators = (_bounded(shown, tool), _bounded(source, tool))

    def __call__(self, arguments: dict[str, Any]) -> str | None:
        """The problem with ``arguments`` that needs no pattern to see, or ``None``."""
        return self._problem(arguments)

    def with_patterns(self, arguments: dict[str, Any], budget_s: float) -> str | None:
        """The problem with ``arguments``, patterns included, or ``None``.

        Args:
            arguments: The validated arguments.
            budget_s: The seconds all the pattern matching may take together.

        Returns:
            The problem, which is that the patterns took longer than ``budget_s`` when they did.
        """
        token = _deadline.set(time.monotonic() + budget_s)
        try:
            return self._problem(arguments)
        except _TooSlow:
            return f"checking them against the tool's patterns took longer than {budget_s:.3g}s"
        finally:
            _deadline.reset(token)

    def _problem(self, arguments: dict[str, Any]) -> str | None:
        for validator in self._validators:
            problem = _problem(validator, arguments)
            if problem is not None:
                return problem
        return None


def schema_check(shown: dict[str, Any], source: dict[str, Any], tool: str) -> SchemaCheck:
    """Build the check of arguments against the schema shown to the model, then the server's.

    Args:
        shown: The schema the model saw, closed (see `closed`).
        source: The server's own schema.
        tool: The tool's name, for messages.

    Raises:
        ToolDefinitionError: A schema is not a valid JSON schema.
    """
    return SchemaCheck(shown, source, tool)


def _problem(validator: Any, arguments: dict[str, Any]) -> str | None:
    errors = sorted(validator.iter_errors(arguments), key=lambda error: list(error.path))
    if not errors:
        return None
    problems = []
    for error in errors[:8]:
        where = ".".join(str(part) for part in error.absolute_path) or "(arguments)"
        problems.append(f"{where}: {error.message}")
    return "; ".join(problems)
