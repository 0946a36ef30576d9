"""Which argument names hold pydantic secrets (`SecretStr`, `SecretBytes`, `Secret[...]`).

A value typed as a secret is as sensitive as one marked `Sensitive()`: the registry records the
names under which such values may appear, at any depth of a parameter's type (a model's fields,
a dataclass's, a TypedDict's, inside unions, containers and ``Annotated``), in
`ToolSpec.sensitive`, and every run's redactor hides the values under those names.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from pydantic import BaseModel, Secret, SecretBytes, SecretStr

__all__ = ["secret_names"]

_SECRETS = (SecretStr, SecretBytes, Secret)


def secret_names(name: str, annotation: Any) -> tuple[str, ...]:
    """Return the names, at any depth of `annotation`, whose values are pydantic secrets.

    Args:
        name: The parameter's name (returned when the parameter itself is a secret).
        annotation: The parameter's resolved annotation.

    Returns:
        The names in the order found, each once; empty when the type holds no secret.
    """
    names: dict[str, None] = {}
    _collect(name, annotation, names, set())
    return tuple(names)


def _collect(name: str, annotation: Any, names: dict[str, None], seen: set[Any]) -> None:
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, _SECRETS):
        names[name] = None
        return
    if isinstance(annotation, type):
        if annotation in seen:  # a recursive model
            return
        seen.add(annotation)
        if issubclass(annotation, BaseModel):
            for field_name, field in annotation.model_fields.items():
                _collect(field.alias or field_name, field.annotation, names, seen)
            return
        if dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation):
            for field_name, field_type in _hints(annotation).items():
                _collect(field_name, field_type, names, seen)
            return
    for argument in typing.get_args(annotation):  # unions, containers, Annotated
        _collect(name, argument, names, seen)


def _hints(owner: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except (NameError, TypeError):  # a field type that names nothing: the registry refuses it
        return {}
