"""Turn whatever a tool returns into JSON, and into the text the model reads.

`to_jsonable` never raises: a tool's return value is untrusted in shape, and a failure to render
it must not lose the receipt. Values without a JSON form become their ``str()``; cycles, runaway
depth, non-finite floats and text UTF-8 cannot encode (unpaired surrogates) are cut or replaced
rather than crashing, and a value whose ``__str__``, ``__iter__`` or ``__int__`` raises becomes a
placeholder. Nothing here bounds sizes (the runtime
truncates observations) or redacts (the trace processors do).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any

from pydantic import BaseModel

from ownloop._text import MAX_NESTING, clean_text, safe_str
from ownloop.contracts import JsonValue

__all__ = ["render_observation", "to_jsonable"]

_DEEPER = f"<nested deeper than {MAX_NESTING} levels: cut>"


def to_jsonable(value: Any) -> JsonValue:
    """Convert a tool's return value into a JSON value; never raises.

    Strings, integers, finite floats, booleans and ``None`` pass through; mappings become objects
    (keys become strings); lists, tuples, sets and frozensets become arrays (sets sorted by their
    JSON text, so the result is deterministic); Pydantic models use
    ``model_dump(mode="json")``; dataclasses become objects of their fields; enums become their
    values; dates, times and datetimes become ISO 8601 strings; durations become seconds; bytes
    are decoded as UTF-8 (invalid bytes replaced). Anything else, including non-finite floats,
    becomes ``str(value)``. Unpaired surrogates in any string become U+FFFD; containers nested
    deeper than 64 levels are cut to a marker string; a value that raises while being converted
    (its ``__iter__``, ``__int__`` or ``__str__``) becomes ``"<unprintable TypeName>"``.

    Args:
        value: Whatever the tool returned.
    """
    return _convert(value, 0, set())


def render_observation(value: Any) -> str:
    """Render a tool's return value as the text the model reads.

    A string is returned unchanged; anything else becomes compact JSON (non-ASCII kept) of
    `to_jsonable(value)`.

    Args:
        value: Whatever the tool returned.
    """
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _convert(value: Any, depth: int, active: set[int]) -> JsonValue:
    try:
        return _convert_unguarded(value, depth, active)
    except Exception:  # a hostile __iter__, __int__, __eq__ ...: keep the rest of the value
        return _text(value)


def _convert_unguarded(value: Any, depth: int, active: set[int]) -> JsonValue:
    if depth > MAX_NESTING:
        deep = isinstance(value, Mapping | list | tuple | set | frozenset)
        return _DEEPER if deep else _text(value)
    if isinstance(value, enum.Enum):
        return _convert(value.value, depth + 1, active)
    for kinds, convert in _SCALARS:
        if isinstance(value, kinds):
            return convert(value)
    if isinstance(value, BaseModel):
        return _dump_model(value, depth, active)
    if isinstance(value, Mapping | list | tuple | set | frozenset) or _is_dataclass(value):
        return _container(value, depth, active)
    return _text(value)


def _container(value: Any, depth: int, active: set[int]) -> JsonValue:
    """Convert a mapping, sequence, set or dataclass, cutting reference cycles."""
    if id(value) in active:
        return "<cycle>"
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_key(key): _convert(item, depth + 1, active) for key, item in value.items()}
        if _is_dataclass(value):
            return {
                field.name: _convert(getattr(value, field.name, None), depth + 1, active)
                for field in dataclasses.fields(value)
            }
        items = [_convert(item, depth + 1, active) for item in value]
        if isinstance(value, set | frozenset):
            items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return items
    finally:
        active.discard(id(value))


def _dump_model(model: BaseModel, depth: int, active: set[int]) -> JsonValue:
    try:
        dumped = model.model_dump(mode="json", warnings=False)
    except Exception:  # a field Pydantic cannot serialise; fall back to the fields one by one
        dumped = dict(model)
    return _convert(dumped, depth + 1, active)


def _is_dataclass(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _plain(value: str | bool | int | None) -> JsonValue:
    """Return builtin values as they are; subclasses (other than enums) as their base type."""
    if type(value) is str:
        return clean_text(value)
    if value is None or type(value) in (bool, int):
        return value
    return clean_text(str.__str__(value)) if isinstance(value, str) else int.__int__(value)


def _float(value: float) -> JsonValue:
    return float(value) if math.isfinite(value) else str(value)


def _isoformat(value: datetime | date | time) -> JsonValue:
    return value.isoformat()


def _seconds(value: timedelta) -> JsonValue:
    return value.total_seconds()


def _decode(value: bytes | bytearray) -> JsonValue:
    return clean_text(bytes(value).decode("utf-8", errors="replace"))


_SCALARS: tuple[tuple[type[Any] | tuple[type[Any], ...], Callable[[Any], JsonValue]], ...] = (
    ((str, bool, int, type(None)), _plain),
    (float, _float),
    ((datetime, date, time), _isoformat),
    (timedelta, _seconds),
    ((bytes, bytearray), _decode),
)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return clean_text(str.__str__(key))
    converted = _convert(key, 0, set())
    return converted if isinstance(converted, str) else json.dumps(converted)


def _text(value: Any) -> str:
    return safe_str(value)  # a broken __str__ must not lose the receipt
