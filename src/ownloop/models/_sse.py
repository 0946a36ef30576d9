"""Server-sent events, decoded from lines: the framing every streaming endpoint shares.

Only the framing lives here: ``event:`` and ``data:`` fields, multi-line data, comment lines
(``: OPENROUTER PROCESSING``) and the blank line that ends an event. What an event means is the
stream assemblers' business. Nothing here does I/O; the caller supplies the lines.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass

__all__ = ["ServerSentEvent", "iter_events"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event of a stream.

    Attributes:
        event: The ``event:`` field, when the server sent one (``error`` for in-band errors).
        data: The ``data:`` lines, joined with newlines.
    """

    event: str | None
    data: str


async def iter_events(lines: AsyncIterable[str]) -> AsyncGenerator[ServerSentEvent, None]:
    """Decode server-sent events from the lines of a response body.

    Args:
        lines: The body's lines, without line terminators.

    Yields:
        Each complete event with data, in order; a last event not followed by a blank line is
        yielded too.
    """
    event: str | None = None
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield ServerSentEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        if line.startswith(("{", "[")) and not data:
            # A bare JSON line: some servers stream JSON lines without SSE framing.
            yield ServerSentEvent(event, line)
            event = None
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value or None
    if data:
        yield ServerSentEvent(event, "\n".join(data))
