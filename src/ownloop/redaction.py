"""Bounding and redaction of values before they enter a trace event.

The trace explains a run without carrying its secrets or its bulk: values of parameters a tool marks
sensitive are replaced by a marker with a short stable digest (so equal values still look equal),
and strings, lists and nesting are cut to fixed bounds with explicit truncation markers. Functions
here are pure and never raise on JSON-shaped input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

__all__ = ["Bounds", "bound_value", "redact_marker", "redact_sensitive"]


class Bounds:
    """Size bounds for traced values.

    Args:
        max_string: The longest string kept whole.
        max_items: The most list items or mapping entries kept.
        max_depth: The deepest nesting kept.
    """

    __slots__ = ("max_depth", "max_items", "max_string")

    def __init__(self, max_string: int = 512, max_items: int = 32, max_depth: int = 6) -> None:
        self.max_string = max_string
        self.max_items = max_items
        self.max_depth = max_depth

    def __repr__(self) -> str:
        return (
            f"Bounds(max_string={self.max_string}, max_items={self.max_items}, "
            f"max_depth={self.max_depth})"
        )


DEFAULT_BOUNDS = Bounds()


def redact_marker(value: Any) -> str:
    """Return the marker that stands for a redacted value: a short digest, no content.

    Args:
        value: The secret value.

    Returns:
        ``"[redacted:" + 8 hex digits + "]"``, equal for equal values.
    """
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except ValueError:  # circular structures: fall back to the repr
        text = repr(value)
    return f"[redacted:{hashlib.sha256(text.encode()).hexdigest()[:8]}]"


def redact_sensitive(arguments: Any, sensitive: Collection[str]) -> Any:
    """Replace the values of sensitive top-level arguments with redaction markers.

    Args:
        arguments: A mapping of arguments (anything else is returned unchanged).
        sensitive: Names of the parameters to redact.

    Returns:
        A copy with those values redacted.
    """
    if not sensitive or not isinstance(arguments, dict):
        return arguments
    return {
        key: redact_marker(value) if key in sensitive else value for key, value in arguments.items()
    }


def bound_value(value: Any, bounds: Bounds = DEFAULT_BOUNDS, _depth: int = 0) -> Any:  # noqa: PLR0911 - one return per JSON type
    """Cut a JSON-shaped value to the bounds, marking every cut.

    Args:
        value: Any JSON-shaped value (other objects are turned into bounded strings).
        bounds: The limits to apply.

    Returns:
        The bounded copy.
    """
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        if len(value) <= bounds.max_string:
            return value
        return f"{value[: bounds.max_string]}…[truncated {len(value) - bounds.max_string} chars]"
    if _depth >= bounds.max_depth:
        return "…[truncated: too deep]"
    if isinstance(value, dict):
        return _bound_mapping(value, bounds, _depth)
    if isinstance(value, list | tuple):
        kept = [bound_value(item, bounds, _depth + 1) for item in value[: bounds.max_items]]
        if len(value) > bounds.max_items:
            kept.append(f"…[truncated {len(value) - bounds.max_items} items]")
        return kept
    return bound_value(repr(value), bounds, _depth)


def _bound_mapping(value: dict[Any, Any], bounds: Bounds, depth: int) -> dict[str, Any]:
    items = list(value.items())
    bounded = {
        str(key)[: bounds.max_string]: bound_value(item, bounds, depth + 1)
        for key, item in items[: bounds.max_items]
    }
    if len(items) > bounds.max_items:
        bounded["…"] = f"[truncated {len(items) - bounds.max_items} entries]"
    return bounded
