"""Redaction markers, and the redaction of a tool's sensitive arguments at the point of emission."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from typing import Any

__all__ = ["MARKER", "redact_marker", "redact_sensitive"]

MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")
"""What a redaction marker looks like; markers are never redacted again."""


def redact_marker(value: Any) -> str:
    """Return the marker that stands for a redacted value: a short digest, no content.

    The digest is the first 8 hex digits of the SHA-256 of the value's JSON, so equal values get
    equal markers (equality stays visible) while the value stays hidden. It is not keyed: whoever
    reads a trace can confirm a guess of a low-entropy secret, so do not rely on it to hide
    short passwords from someone who can guess them.

    Args:
        value: The secret value.

    Returns:
        ``"[redacted:" + 8 hex digits + "]"``, equal for equal values.
    """
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):  # circular structures, unsortable keys: fall back to repr
        text = repr(value)
    return f"[redacted:{hashlib.sha256(text.encode(errors='replace')).hexdigest()[:8]}]"


def redact_sensitive(arguments: Any, sensitive: Collection[str]) -> Any:
    """Replace the values of sensitive top-level arguments with redaction markers.

    Arguments given as a JSON object string (as providers send them) are parsed, redacted and
    serialised again; a string that does not parse is replaced whole, since it cannot be shown
    to be free of the sensitive values.

    Args:
        arguments: A mapping of arguments, or their JSON text (anything else is returned as is).
        sensitive: Names of the parameters to redact.

    Returns:
        A copy with those values redacted, or ``arguments`` itself when there is nothing to do.
    """
    if not sensitive:
        return arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return redact_marker(arguments)
        if not isinstance(parsed, dict) or not any(key in sensitive for key in parsed):
            return arguments
        return json.dumps(redact_sensitive(parsed, sensitive), ensure_ascii=False)
    if not isinstance(arguments, dict):
        return arguments
    return {
        key: redact_marker(value) if key in sensitive else value for key, value in arguments.items()
    }
