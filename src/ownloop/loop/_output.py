"""Typed final answers: an ``output_type``'s strict schema, and reading an answer into a value.

`OutputSpec` is built once per agent from its ``output_type`` (a Pydantic model, a dataclass, a
``TypedDict``, a scalar, ``list[...]`` or a union of them). Its schema comes from the same strict
schema generator as tool arguments; a type whose schema is not an object (a scalar, a list, a
union) is wrapped as ``{"result": ...}`` because providers require an object at the root.
`OutputSpec.read` turns the model's raw answer into the typed value or into a problem the model
can act on; it never raises for bad model output. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, to_jsonable_python

from ownloop.contracts import OutputFormat, OutputMode, ToolSpec
from ownloop.exceptions import ConfigurationError, ToolDefinitionError
from ownloop.tools._arguments import restore_defaults
from ownloop.tools._schema import strict_schema

__all__ = ["OUTPUT_TOOL", "InvalidOutput", "OutputSpec", "build_output"]

OUTPUT_TOOL = "final_result"
"""The final-result tool's name in ``tool`` mode."""

_MODES = ("native", "tool", "prompted")
_MAX_ERRORS = 8
_MAX_PROBLEM_CHARS = 2_000
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class InvalidOutput:
    """An answer that is not a valid value of the output type.

    Attributes:
        problem: What is wrong, phrased so the model can fix it.
    """

    problem: str


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """An agent's typed answer: the type, its strict schema, and how the model is asked for it.

    Attributes:
        output_type: The declared type.
        format: What every model request carries (schema, name, mode).
        raw_schema: Pydantic's own schema of the (wrapped) answer, to restore defaults.
        adapter: Validates an answer into the type.
    """

    output_type: Any
    format: OutputFormat
    raw_schema: dict[str, Any]
    adapter: TypeAdapter[Any]

    @property
    def mode(self) -> OutputMode:
        """How the model is asked for the answer."""
        return self.format.mode

    @property
    def digest(self) -> str:
        """A short digest of the schema and mode (part of the recorded configuration)."""
        text = json.dumps(
            {"schema": self.format.json_schema, "mode": self.mode, "name": self.format.name},
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def tool_spec(self) -> ToolSpec:
        """The final-result tool offered in ``tool`` mode (its arguments are the answer)."""
        return ToolSpec(
            name=OUTPUT_TOOL,
            description=(
                "Give your final answer by calling this tool; its arguments are the answer "
                f"({self.format.name}). Call it once, when you are done."
            ),
            parameters=self.format.json_schema,
            effect="read",
        )

    def instructions(self) -> str:
        """What the model is told in ``prompted`` mode: answer with JSON matching the schema."""
        schema = json.dumps(self.format.json_schema, separators=(",", ":"))
        return (
            "When you give your final answer, reply with only a JSON value (no prose, no code "
            f"fence) that matches this JSON schema: {schema}"
        )

    def read(self, answer: str, max_chars: int) -> Any:
        """Read a raw answer into the typed value.

        Args:
            answer: The model's final text (or the final-result tool's arguments).
            max_chars: The longest answer accepted (``limits.max_output_chars``): a typed
                answer cannot be cut, so a longer one is invalid.

        Returns:
            The value, or `InvalidOutput` saying what to fix.
        """
        if len(answer) > max_chars:
            return InvalidOutput(
                f"Your final answer has {len(answer)} characters, more than the {max_chars} "
                "allowed. Give a shorter answer."
            )
        text = answer.strip()
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1).strip()
        try:
            value = json.loads(text)
        except ValueError as error:
            return InvalidOutput(
                f"Your final answer is not JSON ({error}). Answer with only a JSON value "
                f"matching the {self.format.name} schema."
            )
        if self.format.wrapped:
            if isinstance(value, dict) and set(value) == {"result"}:
                value = value["result"]
            elif self.mode == "native":
                return InvalidOutput(
                    'Your final answer must be a JSON object {"result": ...}, as the schema says.'
                )
        restore_defaults(value, self._unwrapped_schema(), self.raw_schema.get("$defs", {}))
        try:
            return self.adapter.validate_python(value)
        except ValidationError as error:
            return InvalidOutput(_describe(error, self.format.name))

    def _unwrapped_schema(self) -> dict[str, Any]:
        if not self.format.wrapped:
            return self.raw_schema
        inner: dict[str, Any] = self.raw_schema["properties"]["result"]
        return inner


def build_output(output_type: Any, mode: OutputMode) -> OutputSpec:
    """Build the output spec of a type.

    Args:
        output_type: The declared answer type.
        mode: How the model is asked for it.

    Returns:
        The spec.

    Raises:
        ConfigurationError: If the type has no JSON schema, or a schema strict mode cannot
            express (a free-form ``dict``, ``Any``), or the mode is unknown.
    """
    if mode not in _MODES:
        raise ConfigurationError(f"output_mode must be one of {', '.join(_MODES)}, not {mode!r}")
    name = _name_of(output_type)
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        raw = adapter.json_schema(by_alias=True)
    except Exception as error:  # pydantic raises several kinds for types it cannot handle
        raise ConfigurationError(
            f"output_type {output_type!r} has no JSON schema: {error}"
        ) from None
    wrapped = not (raw.get("type") == "object" and "properties" in raw)
    if wrapped:
        defs = raw.pop("$defs", None)
        raw = {"type": "object", "properties": {"result": raw}, "required": ["result"]}
        if defs:
            raw["$defs"] = defs
    try:
        schema = strict_schema(raw, f"output_type {name}")
    except ToolDefinitionError as error:
        raise ConfigurationError(f"output_type {name} cannot be a strict schema: {error}") from None
    return OutputSpec(
        output_type=output_type,
        format=OutputFormat(name=name, json_schema=schema, mode=mode, wrapped=wrapped),
        raw_schema=raw,
        adapter=adapter,
    )


def _name_of(output_type: Any) -> str:
    name = getattr(output_type, "__name__", None) if isinstance(output_type, type) else None
    if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        return name
    return "result"


def _describe(error: ValidationError, name: str) -> str:
    details: Sequence[ErrorDetails] = error.errors(include_url=False)
    lines = [f"Your final answer is not a valid {name}:"]
    lines.extend(f"- {_line(detail)}" for detail in details[:_MAX_ERRORS])
    if len(details) > _MAX_ERRORS:
        lines.append(f"- … and {len(details) - _MAX_ERRORS} more errors")
    lines.append("Fix these and give the whole answer again.")
    return "\n".join(lines)[:_MAX_PROBLEM_CHARS]


def _line(detail: ErrorDetails) -> str:
    where = ".".join(str(part) for part in detail["loc"]) or "(answer)"
    if detail["type"] == "missing":
        return f"{where}: required field is missing"
    came = json.dumps(to_jsonable_python(detail["input"], fallback=repr), ensure_ascii=False)
    return f"{where}: {detail['msg']}; got {came[:120]}"
