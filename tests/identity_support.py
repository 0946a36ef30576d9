"""Build the Python inputs of the stored identity vectors from their JSON description.

A vector's input is JSON where ``{"$py": kind, ...}`` stands for a value JSON has no type for
(a set, a secret, a datetime with an offset ...), so the file states every input exactly.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel, SecretBytes, SecretStr

VECTORS = Path(__file__).parent / "fixtures" / "identity_vectors.json"


class Color(enum.Enum):
    """An enum for the vectors."""

    RED = "red"
    BLUE = 2


class Address(BaseModel):
    """A nested model for the vectors."""

    street: str
    tags: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Point:
    """A dataclass for the vectors."""

    x: int
    y: float


_BUILDERS: dict[str, Any] = {
    "set": lambda d: {build(item) for item in d["items"]},
    "frozenset": lambda d: frozenset(build(item) for item in d["items"]),
    "tuple": lambda d: tuple(build(item) for item in d["items"]),
    "float": lambda d: float(d["repr"]),
    "decimal": lambda d: Decimal(d["text"]),
    "datetime": lambda d: datetime.fromisoformat(d["iso"]),
    "date": lambda d: date.fromisoformat(d["iso"]),
    "time": lambda d: time.fromisoformat(d["iso"]),
    "timedelta": lambda d: timedelta(seconds=d["seconds"]),
    "uuid": lambda d: UUID(d["text"]),
    "bytes": lambda d: base64.b64decode(d["b64"]),
    "secret": lambda d: SecretStr(d["value"]),
    "secret_bytes": lambda d: SecretBytes(base64.b64decode(d["b64"])),
    "enum": lambda d: Color(d["value"]),
    "address": lambda d: Address(**{k: build(v) for k, v in d["fields"].items()}),
    "point": lambda d: Point(**d["fields"]),
    "map": lambda d: {build(k): build(v) for k, v in d["pairs"]},
    "int": lambda d: int(d["text"]),
}


def build(value: Any) -> Any:
    """Turn a vector's JSON input into the Python value it describes."""
    if isinstance(value, list):
        return [build(item) for item in value]
    if isinstance(value, dict):
        if "$py" in value:
            return _BUILDERS[value["$py"]](value)
        return {key: build(item) for key, item in value.items()}
    return value


def load_vectors() -> list[dict[str, Any]]:
    """Return the stored vectors."""
    vectors: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))["vectors"]
    return vectors
