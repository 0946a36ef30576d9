r"""Make untrusted text safe to keep: encodable, printable and shallow enough to walk.

Text enters a run from places ownloop does not control: the task, a tool's return value or
exception, a model's response, a server's error body. Python strings may hold what UTF-8 cannot
encode (an unpaired surrogate, from JSON's ``"\\ud83d"`` escape or ``surrogateescape`` decoding),
and an object's ``__str__`` may raise. Past this module neither can happen: an unpaired surrogate
becomes U+FFFD (a surrogate *pair* is joined into its character), and rendering an object never
raises. It also measures nesting without recursion, so a boundary can refuse structure too deep to
walk before anything recursive sees it. It imports nothing from ownloop and does no I/O.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_NESTING",
    "clean_json",
    "clean_text",
    "describe_error",
    "nesting_depth",
    "safe_str",
    "strip_userinfo",
]

MAX_NESTING = 64
"""How deeply arguments and tool outputs may nest (objects and arrays) before they are refused."""

_SURROGATE = re.compile("[\ud800-\udfff]")
# scheme://userinfo@host: the userinfo runs to the *last* "@" before the path, so a password that
# holds a raw "@" is removed whole.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@")


def clean_text(text: str) -> str:
    """Return ``text`` with every unpaired surrogate replaced by U+FFFD (never raises).

    A surrogate pair stored as two code points becomes the character it encodes; text that is
    already valid comes back as the same object.

    Args:
        text: Any string.
    """
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_json(value: Any) -> Any:
    """Return a JSON-shaped value with every string (keys included) passed through `clean_text`.

    Dicts, lists and tuples are rebuilt only when they hold something to clean; anything else is
    returned as it is. The walk is iterative, so no depth makes it raise.

    Args:
        value: A JSON-shaped value (dicts, lists, tuples, strings, numbers, booleans, ``None``).
    """
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, dict | list | tuple) or not _has_dirty_text(value):
        return value
    return _rebuild(value)


def _has_dirty_text(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _rebuild(root: Any) -> Any:
    """Copy a container tree, cleaning strings, without recursion (post-order on a stack)."""
    done: dict[int, Any] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else list(node)
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in children if isinstance(c, dict | list | tuple))
            continue
        built = [_leaf(c, done) for c in children]
        if isinstance(node, dict):
            done[id(node)] = {_leaf(k, done): v for k, v in zip(node, built, strict=True)}
        else:
            done[id(node)] = tuple(built) if isinstance(node, tuple) else built
    return done[id(root)]


def _leaf(value: Any, done: dict[int, Any]) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict | list | tuple):
        return done[id(value)]
    return value


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """Return how deeply dicts, lists and tuples nest in ``value``, counting at most ``limit + 1``.

    A scalar has depth 0, ``[]`` depth 1, ``[[1]]`` depth 2. The walk stops as soon as the depth
    passes ``limit``, so a huge or self-referencing value costs no more than that.

    Args:
        value: Any value.
        limit: The depth past which counting stops.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth) for child in children)
    return deepest


def safe_str(value: object) -> str:
    """Return ``str(value)``, cleaned; a ``__str__`` that raises gives a placeholder instead.

    Args:
        value: Anything.
    """
    try:
        text = str(value)
    except Exception:  # a broken __str__ is the caller's data, not our failure
        return f"<unprintable {_type_name(value)}>"
    return clean_text(text) if isinstance(text, str) else f"<unprintable {_type_name(value)}>"


def describe_error(error: BaseException, limit: int = 1000) -> str:
    """Return ``"TypeName: message"`` for an exception, cleaned and cut; never raises.

    Args:
        error: The exception.
        limit: The most characters returned.
    """
    message = safe_str(error)
    text = f"{_type_name(error)}: {message}" if message else _type_name(error)
    return text[:limit]


def strip_userinfo(text: str) -> str:
    """Remove the ``user:password@`` part of every URL in ``text``.

    Args:
        text: A URL, or text that may contain URLs.
    """
    return _USERINFO.sub(r"\1", text) if "@" in text else text


def _type_name(value: object) -> str:
    try:
        return clean_text(str(type(value).__name__))
    except Exception:  # a metaclass with a broken __name__: still never raise
        return "object"
