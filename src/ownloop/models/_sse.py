r"""Server-sent events, decoded from bytes: the framing every streaming endpoint shares.

Only the framing lives here: bounded line splitting, ``event:`` and ``data:`` fields, multi-line
data, comment lines (``: OPENROUTER PROCESSING``) and the blank line that ends an event. What an
event means is the stream assemblers' business. Nothing here does I/O; the caller supplies the
body's (decompressed) bytes.

Lines end at ``\n`` or ``\r\n`` only. Unicode line separators (U+2028, U+0085...) are valid
inside JSON strings, and servers that write JSON with ``ensure_ascii=False`` send them raw: a
splitter that honours them (as ``str.splitlines`` does) cuts a good event in two. Bytes are
counted as they arrive, before any line is assembled, so one endless line cannot outgrow the
bound.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Callable
from dataclasses import dataclass

__all__ = ["ServerSentEvent", "iter_events", "split_lines"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event of a stream.

    Attributes:
        event: The ``event:`` field, when the server sent one (``error`` for in-band errors).
        data: The ``data:`` lines, joined with newlines.
    """

    event: str | None
    data: str


def _text(line: bytes | bytearray) -> str:
    if line.endswith(b"\r"):
        line = line[:-1]
    return bytes(line).decode("utf-8", "replace")


async def split_lines(
    chunks: AsyncIterable[bytes], max_bytes: int, too_large: Callable[[], Exception]
) -> AsyncGenerator[str, None]:
    r"""Split a body into lines at ``\n`` or ``\r\n``, counting every byte as it arrives.

    Args:
        chunks: The body's bytes, decompressed, in pieces of any size.
        max_bytes: The most bytes read in total; one byte more raises ``too_large()``.
        too_large: Builds the error raised past ``max_bytes``.

    Yields:
        Each line, decoded as UTF-8 (invalid bytes replaced), without its terminator.
    """
    buffer = bytearray()
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise too_large()
        searched = len(buffer)
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", max(searched, start))) >= 0:
            yield _text(buffer[start:end])
            start = end + 1
        if start:
            del buffer[:start]
    if buffer:
        yield _text(buffer)


async def iter_events(lines: AsyncIterable[str]) -> AsyncGenerator[ServerSentEvent, None]:
    """Decode server-sent events from the lines of a response body.

    Args:
        lines: The body's lines, without line terminators (see `split_lines`).

    Yields:
        Each complete event with data, in order; a last event not followed by a blank line is
        yielded too.
    """
    event: str | None = None
    data: list[str] = []
    async for line in lines:
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
