"""Size bounds for traced values: strings, lists, mappings and nesting, cut with explicit markers.

Bounding is idempotent (a bounded value is left as it is) and keeps identity: a value already
within its bounds is returned as the very same object, so callers can tell cheaply whether
anything was cut. Nothing here raises on JSON-shaped input, cyclic structures included.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from ownloop.exceptions import ConfigurationError

__all__ = ["DEFAULT_BOUNDS", "TOO_DEEP", "Bounds", "bound_value"]

TOO_DEEP = "…[too deep, truncated]"
"""What stands for a container nested deeper than `Bounds.max_depth`."""

_MIN_STRING = 40  # room for a truncation marker and a useful prefix
_MAX_DEPTH = 100  # far below the interpreter's recursion limit


class Bounds:
    """Size bounds for traced values; every cut leaves a marker that says what was cut.

    A bounded string has at most ``max_string`` characters, marker included; a list or a mapping
    at most ``max_items`` items or entries, the last one a marker when some were dropped; and
    containers nest at most ``max_depth`` levels, deeper ones replaced by a marker. Bounds are
    also a structlog processor that bounds every value of an event dict.

    Args:
        max_string: The longest string kept, marker included (at least 40).
        max_items: The most list items or mapping entries kept (at least 2).
        max_depth: The deepest container nesting kept (1 to 100).

    Raises:
        ConfigurationError: If a bound is out of range.
    """

    __slots__ = ("max_depth", "max_items", "max_string")

    def __init__(self, max_string: int = 512, max_items: int = 32, max_depth: int = 6) -> None:
        if not isinstance(max_string, int) or max_string < _MIN_STRING:
            raise ConfigurationError(f"Bounds.max_string must be >= {_MIN_STRING}")
        if not isinstance(max_items, int) or max_items < 2:
            raise ConfigurationError("Bounds.max_items must be >= 2")
        if not isinstance(max_depth, int) or not 1 <= max_depth <= _MAX_DEPTH:
            raise ConfigurationError(f"Bounds.max_depth must be between 1 and {_MAX_DEPTH}")
        self.max_string = max_string
        self.max_items = max_items
        self.max_depth = max_depth

    def tightest(self, other: Bounds) -> Bounds:
        """Return the bounds that are within both these and ``other``.

        Args:
            other: Other bounds.

        Returns:
            The smaller value of every bound.
        """
        return Bounds(
            min(self.max_string, other.max_string),
            min(self.max_items, other.max_items),
            min(self.max_depth, other.max_depth),
        )

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """Bound every value of a structlog event dict (a processor).

        Args:
            logger: The wrapped logger (unused).
            method_name: The log method's name (unused).
            event_dict: The event.

        Returns:
            The same dict, its values bounded.
        """
        for key, value in event_dict.items():
            event_dict[key] = bound_value(value, self)
        return event_dict

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Bounds):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[int, int, int]:
        return (self.max_string, self.max_items, self.max_depth)

    def __repr__(self) -> str:
        return (
            f"Bounds(max_string={self.max_string}, max_items={self.max_items}, "
            f"max_depth={self.max_depth})"
        )


DEFAULT_BOUNDS = Bounds()
"""The bounds used when none are given: 512 characters, 32 items, 6 levels."""


def bound_value(value: Any, bounds: Bounds = DEFAULT_BOUNDS) -> Any:
    """Cut a JSON-shaped value to the bounds, marking every cut.

    Tuples are treated as lists; mapping keys become strings; any other object becomes its
    bounded ``repr``. A value already within the bounds is returned unchanged (the same object).

    Args:
        value: Any value.
        bounds: The limits to apply.

    Returns:
        The bounded value.
    """
    return _bound(value, bounds, 0)


def cut_text(text: str, max_chars: int) -> str:
    """Cut a string to ``max_chars`` characters, an explicit marker included.

    Args:
        text: The string.
        max_chars: The most characters returned (at least 40).

    Returns:
        ``text`` itself when short enough, else a prefix and ``…[N chars, truncated]``.
    """
    if len(text) <= max_chars:
        return text
    marker = f"…[{len(text)} chars, truncated]"
    return text[: max(max_chars - len(marker), 0)] + marker


def _bound(value: Any, bounds: Bounds, depth: int) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return cut_text(value, bounds.max_string)
    if isinstance(value, dict | list | tuple) and depth >= bounds.max_depth:
        return TOO_DEEP
    if isinstance(value, dict):
        return _bound_mapping(value, bounds, depth)
    if isinstance(value, list | tuple):
        return _bound_sequence(value, bounds, depth)
    return cut_text(_safe_text(value, repr), bounds.max_string)


def _bound_sequence(value: list[Any] | tuple[Any, ...], bounds: Bounds, depth: int) -> Any:
    limit = bounds.max_items
    kept = value if len(value) <= limit else value[: limit - 1]
    items = [_bound(item, bounds, depth + 1) for item in kept]
    if len(value) > limit:
        items.append(f"…[{len(value)} items, truncated]")
        return items
    if all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return items


def _bound_mapping(value: dict[Any, Any], bounds: Bounds, depth: int) -> dict[str, Any]:
    limit = bounds.max_items
    entries = list(value.items())
    kept = entries if len(entries) <= limit else entries[: limit - 1]
    changed = len(entries) > limit
    bounded: dict[str, Any] = {}
    for key, item in kept:
        new_key = cut_text(key if isinstance(key, str) else _safe_text(key, str), bounds.max_string)
        new_item = _bound(item, bounds, depth + 1)
        changed = changed or new_key is not key or new_item is not item
        bounded[new_key] = new_item
    if len(entries) > limit:
        bounded["…"] = f"[{len(entries)} entries, truncated]"
    return bounded if changed else value


def _safe_text(value: Any, render: Callable[[Any], str]) -> str:
    try:
        return render(value)
    except Exception:  # a broken __str__ or __repr__ must not break the trace
        return f"<{type(value).__name__}>"
