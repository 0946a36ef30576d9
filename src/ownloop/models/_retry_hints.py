"""Wait hints: how long a provider asked to wait before a retry, from headers or the message.

``retry-after-ms`` (milliseconds) wins over ``retry-after`` (seconds or an HTTP date); without a
header, a message such as "Please try again in 1.054s" is read. Whether to honour the hint is the
retry policy's decision, not this module's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

__all__ = ["hint_in_message", "parse_retry_after"]

_RETRY_IN = re.compile(
    r"(?:try again|retry)(?: after| in)?\s+(?:(\d+(?:\.\d+)?)\s*ms\b|"
    r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)\s*(?:s\b|sec|second)))",
    re.IGNORECASE,
)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Read a wait hint from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date).

    Args:
        headers: The response headers (case-insensitive mapping or lower-case keys).

    Returns:
        Seconds to wait, or ``None`` when no usable hint is present.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    milliseconds = _number(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    raw = lowered.get("retry-after")
    seconds = _number(raw)
    if seconds is not None or raw is None:
        return seconds
    try:
        moment = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if 0 <= number < float("inf") else None


def hint_in_message(message: str) -> float | None:
    """Read a wait hint from an error message ("Please try again in 1.5s", "in 250ms", "1m30s").

    Args:
        message: The provider's error message.

    Returns:
        Seconds to wait, or ``None`` when the message gives no hint.
    """
    match = _RETRY_IN.search(message)
    if match is None:
        return None
    milliseconds, hours, minutes, seconds = match.groups()
    if milliseconds is not None:
        return float(milliseconds) / 1000
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
