"""The canonical encoding of a call's arguments: one form for digests, keys and the journal.

A call's identity (its approval digest, its idempotency key, the arguments its intent journals) is
computed from one encoding, defined here and nowhere else, so that it is the same in every
process, under every ``PYTHONHASHSEED``, on every platform and in every release that keeps
`DIGEST_VERSION`. It must not change without a new version: ``tests/fixtures/identity_vectors.json``
pins inputs to digests, and every release must reproduce them.

Encoding, version 1 (`encode`; JSON values in, JSON values out):

- ``None``, booleans and strings stay as they are (strings exactly, code point for code point: no
  Unicode normalisation, so NFC and NFD texts are different arguments, as the handler sees them).
- Integers stay integers, of any size; ``bool`` is never an integer.
- Finite floats stay JSON numbers (``repr``, the shortest text that round-trips; ``-0.0`` is kept
  apart from ``0.0``); NaN and the infinities become ``{"$float": "nan" | "inf" | "-inf"}``.
- ``Decimal`` becomes ``{"$decimal": str(d)}`` (``1.10`` and ``1.1`` differ); ``datetime``,
  ``date`` and ``time`` their ISO 8601 text under ``$datetime``, ``$date``, ``$time`` (the
  offset kept: the same instant at two offsets is two values); ``timedelta`` becomes
  ``{"$timedelta": [days, seconds, microseconds]}``; ``UUID`` its text under ``$uuid``; a URL
  (``AnyUrl`` and its kinds) its text under ``$url``; a path its POSIX text under ``$path``.
- ``bytes`` become ``{"$bytes": base64}``; ``SecretStr`` and ``SecretBytes`` their *real* value
  under ``$secret`` / ``$secret_bytes`` (never the mask: an approval binds what runs).
- An enum member becomes ``{"$enum": <its value, encoded>}``.
- Lists and tuples become arrays; sets and frozensets ``{"$set": [...]}`` with the items sorted
  by their canonical text (never by hash order).
- A mapping with string keys becomes an object (a key starting with ``$`` gets one more ``$``, so
  no key is mistaken for a tag); any other mapping ``{"$map": [[key, value], ...]}`` sorted by
  the keys' canonical text.
- A Pydantic model becomes ``{"$model": {field name: value}}`` (every field, defaults included,
  then any extra fields); a dataclass ``{"$dataclass": {field name: value}}``.
- Anything else is refused (`ConfigurationError`); a tool whose parameter type could hold such a
  value is refused when it is registered (`unsupported_type`).

The canonical text of an encoded value is its JSON with sorted keys, no spaces, non-ASCII kept,
encoded as UTF-8 (unpaired surrogates passed through); a digest is the SHA-256 of that text.
`decode` turns an encoded value back into Python values that the tool's own validation accepts,
which is how a resumed call gets back the exact arguments it was proposed with.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import PurePath
from typing import Any, get_args, get_origin
from uuid import UUID

from pydantic import AnyUrl, BaseModel, SecretBytes, SecretStr
from pydantic_core import Url

from ownloop.exceptions import ConfigurationError

__all__ = [
    "DIGEST_VERSION",
    "call_digest",
    "canonical_text",
    "decode",
    "digest",
    "encode",
    "unsupported_type",
]

DIGEST_VERSION = 1
"""The version of the canonical encoding (and of every digest and key derived from it)."""

_TAGS = frozenset(
    {
        "$float", "$decimal", "$datetime", "$date", "$time", "$timedelta", "$uuid", "$bytes",
        "$secret", "$secret_bytes", "$enum", "$set", "$map", "$model", "$dataclass", "$url",
        "$path",
    }
)  # fmt: skip
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def encode(value: Any) -> Any:  # noqa: PLR0911 - one return per kind of value
    """Encode a Python value in the canonical form (version `DIGEST_VERSION`).

    Args:
        value: A validated argument value (or a whole arguments mapping).

    Returns:
        A JSON value (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``).

    Raises:
        ConfigurationError: The value, or a part of it, has no canonical form.
    """
    if isinstance(value, enum.Enum):
        return {"$enum": encode(value.value)}
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        return str.__str__(value)
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    return _composite(value)


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def _scalar(value: Any) -> dict[str, Any] | None:  # noqa: PLR0911 - one per type
    """Encode a scalar that JSON has no type for, or return ``None`` when ``value`` is not one."""
    if isinstance(value, SecretStr):
        return {"$secret": value.get_secret_value()}
    if isinstance(value, SecretBytes):
        return {"$secret_bytes": _b64(value.get_secret_value())}
    if isinstance(value, bytes | bytearray):
        return {"$bytes": _b64(bytes(value))}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, datetime):  # before date: a datetime is a date
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, time):
        return {"$time": value.isoformat()}
    if isinstance(value, timedelta):
        return {"$timedelta": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, UUID):
        return {"$uuid": str(value)}
    if isinstance(value, AnyUrl | Url):
        return {"$url": str(value)}
    if isinstance(value, PurePath):
        return {"$path": value.as_posix()}
    return None


def _composite(value: Any) -> Any:
    if isinstance(value, BaseModel):
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        fields.update(value.model_extra or {})
        return {"$model": {name: encode(item) for name, item in fields.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$dataclass": items}
    if isinstance(value, Mapping):
        return _mapping(value)
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, set | frozenset):
        return {"$set": sorted((encode(item) for item in value), key=canonical_text)}
    raise ConfigurationError(
        f"a value of type {type(value).__qualname__} has no canonical encoding (see "
        "ownloop.identity for the types a tool argument may hold)"
    )


def _mapping(value: Mapping[Any, Any]) -> Any:
    if all(isinstance(key, str) and not isinstance(key, enum.Enum) for key in value):
        return {_escape(str.__str__(key)): encode(item) for key, item in value.items()}
    pairs = [[encode(key), encode(item)] for key, item in value.items()]
    pairs.sort(key=lambda pair: canonical_text(pair[0]))
    return {"$map": pairs}


def _escape(key: str) -> str:
    return "$" + key if key.startswith("$") else key


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def canonical_text(encoded: Any) -> str:
    """Return the canonical JSON text of an already encoded value.

    Args:
        encoded: What `encode` returned (or JSON built from such values).

    Raises:
        ConfigurationError: The value is not JSON (a float that is not finite, an integer
            longer than Python converts to text).
    """
    try:
        return json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)  # fmt: skip
    except (TypeError, ValueError) as error:
        raise ConfigurationError(f"a value has no canonical text: {error}") from error


def digest(encoded: Any) -> str:
    """Return the SHA-256 hex digest of an encoded value's canonical text.

    Args:
        encoded: What `encode` returned (or JSON built from such values).
    """
    text = canonical_text(encoded)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def call_digest(tool: str, arguments: Mapping[str, Any]) -> str:
    """Return the digest of one call: its tool and its encoded arguments, under this version.

    Args:
        tool: The tool name.
        arguments: The encoded arguments (`encode` of the validated values by parameter name).
    """
    return digest({"digest_version": DIGEST_VERSION, "tool": tool, "arguments": dict(arguments)})


def decode(encoded: Any) -> Any:
    """Turn an encoded value back into Python values the tool's validation accepts.

    Sets become lists, models and dataclasses mappings of their fields, enum members their
    values, secrets their real value; validation under the tool's signature restores the types.

    Args:
        encoded: What `encode` returned (possibly after a JSON round trip).
    """
    if isinstance(encoded, list):
        return [decode(item) for item in encoded]
    if not isinstance(encoded, dict):
        return encoded
    if len(encoded) == 1:
        ((tag, inner),) = encoded.items()
        if tag in _TAGS:
            return _decode_tagged(tag, inner)
    return {
        (key[1:] if key.startswith("$") else key): decode(item) for key, item in encoded.items()
    }


def _decode_tagged(tag: str, inner: Any) -> Any:
    decoders: dict[str, Any] = {
        "$float": lambda: _NON_FINITE[inner],
        "$decimal": lambda: Decimal(inner),
        "$datetime": lambda: datetime.fromisoformat(inner),
        "$date": lambda: date.fromisoformat(inner),
        "$time": lambda: time.fromisoformat(inner),
        "$timedelta": lambda: timedelta(days=inner[0], seconds=inner[1], microseconds=inner[2]),
        "$uuid": lambda: UUID(inner),
        "$url": lambda: inner,
        "$path": lambda: inner,
        "$bytes": lambda: base64.b64decode(inner),
        "$secret": lambda: inner,
        "$secret_bytes": lambda: base64.b64decode(inner),
        "$enum": lambda: decode(inner),
        "$set": lambda: [decode(item) for item in inner],
        "$map": lambda: {_hashable(decode(key)): decode(item) for key, item in inner},
        "$model": lambda: decode(inner),
        "$dataclass": lambda: decode(inner),
    }
    return decoders[tag]()


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, dict):
        return tuple((key, _hashable(item)) for key, item in value.items())
    return value


_SCALAR_TYPES: tuple[type[Any], ...] = (
    bool, int, float, str, bytes, bytearray, Decimal, datetime, date, time, timedelta, UUID,
    SecretStr, SecretBytes, enum.Enum, type(None), AnyUrl, Url, PurePath,
)  # fmt: skip
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})


def unsupported_type(annotation: Any) -> str | None:
    """Say which part of a parameter's type has no canonical encoding, or ``None`` if none.

    Args:
        annotation: A parameter's resolved annotation.

    Returns:
        The offending type's name, or ``None`` when every value of the type can be encoded.
    """
    return _unsupported(annotation, set())


def _unsupported(annotation: Any, seen: set[int]) -> str | None:  # noqa: PLR0911 - one per kind
    if annotation in (Any, object, None, type(None), Ellipsis) or id(annotation) in seen:
        return None
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _unsupported(get_args(annotation)[0], seen)
    if origin is typing.Literal:
        return None  # literals are strings, numbers, booleans, None or enum members
    if origin is not None:
        base = origin if isinstance(origin, type) else None
        if origin in (typing.Union, types.UnionType) or _is_container(base):
            return _first(get_args(annotation), seen)
        return _name(annotation)
    if not isinstance(annotation, type):
        return _name(annotation)
    if issubclass(annotation, _SCALAR_TYPES) or annotation in _CONTAINERS:
        return None
    seen.add(id(annotation))
    if issubclass(annotation, BaseModel):
        return _first([field.annotation for field in annotation.model_fields.values()], seen)
    if dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation):
        return _first(list(typing.get_type_hints(annotation).values()), seen)
    if issubclass(annotation, Mapping | list | tuple | set | frozenset):
        return None  # a subclass of a container holds values the container's rules encode
    return _name(annotation)


def _is_container(base: type[Any] | None) -> bool:
    from_abc = base is not None and base.__module__ == "collections.abc"
    return base in _CONTAINERS or from_abc


def _first(annotations: Any, seen: set[int]) -> str | None:
    for argument in annotations:
        problem = _unsupported(argument, seen)
        if problem is not None:
            return problem
    return None


def _name(annotation: Any) -> str:
    return annotation.__qualname__ if isinstance(annotation, type) else str(annotation)
