"""JSON lines: a sink that appends one event a line, and the reader that loads such files back.

The sink writes each event as one line and flushes it at once, so a file can be followed with
``tail -f`` while a run is going, and several runs can append to the same file. It opens the file
lazily and closes it when a run finishes (or pauses), when `JsonlSink.close` is called, at the end
of a ``with`` block, or when the sink is garbage-collected — never leaving a file handle open.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from os import PathLike
from pathlib import Path
from typing import IO, Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from ownloop.contracts import EventBase, RunFinished, TraceEvent
from ownloop.exceptions import InputRejected

__all__ = ["JsonlSink", "UnknownEvent", "read_trace"]

_EVENTS: TypeAdapter[TraceEvent] = TypeAdapter(TraceEvent)


class UnknownEvent(EventBase):
    """An event whose kind this version of ownloop does not know (or whose fields it does not).

    Traces written by a newer version still load: inspection tools show such events generically.

    Attributes:
        kind: The event's kind, as written.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str


class JsonlSink:
    """A trace sink that appends every event to a file as one JSON line, flushed at once.

    Args:
        path: The file; created if missing, appended to otherwise (parent directories too).
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._finalizer: weakref.finalize[Any, JsonlSink] | None = None

    def __call__(self, event: TraceEvent) -> None:
        """Append one event and flush it.

        Args:
            event: The event (already redacted by the recorder).
        """
        line = event.model_dump_json() + "\n"
        with self._lock:
            file = self._file if self._file is not None else self._open()
            file.write(line)
            file.flush()
            if isinstance(event, RunFinished):
                self._close()

    def _open(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self._file = self.path.open("a", encoding="utf-8", newline="\n")
        self._finalizer = weakref.finalize(self, file.close)
        return file

    def _close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the file, once
        self._file = self._finalizer = None

    def close(self) -> None:
        """Close the file if it is open; the next event opens it again."""
        with self._lock:
            self._close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "open" if self._file is not None else "closed"
        return f"JsonlSink({str(self.path)!r}, {state})"


def read_trace(path: str | PathLike[str]) -> list[TraceEvent | UnknownEvent]:
    """Load the events of a JSON lines trace file, in file order.

    Blank lines are skipped, and so is an unfinished last line (a run still writing). Events of
    kinds this version does not know load as `UnknownEvent`.

    Args:
        path: The file.

    Returns:
        The events (of every run in the file).

    Raises:
        InputRejected: If the file is not UTF-8 text (a SQLite store is named as one), or a
            line is not a JSON object with an event's ``run_id``, ``seq``, ``at`` and ``kind``.
        OSError: If the file cannot be read.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputRejected(_not_text(path, data)) from None
    lines = text.split("\n")
    events: list[TraceEvent | UnknownEvent] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(_parse(line))
        except (ValueError, ValidationError) as error:
            if number == len(lines):  # no newline yet: the writer is mid-line
                break
            raise InputRejected(f"{path}:{number}: not a trace event ({_reason(error)})") from None
    return events


def _not_text(path: str | os.PathLike[str], data: bytes) -> str:
    """Say why a file that is not UTF-8 text cannot be a trace, and what it may be instead."""
    if data.startswith(b"SQLite format 3\x00"):
        return (
            f"{path} is a SQLite database (a run store?), not a JSONL trace: show a stored run's "
            f"trace with `ownloop runs show RUN_ID --trace --db {path}`"
        )
    return f"{path} is not a JSONL trace: it is not UTF-8 text (a binary file?)"


def _parse(line: str) -> TraceEvent | UnknownEvent:
    try:
        return _EVENTS.validate_json(line)
    except ValidationError:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("a line must be a JSON object") from None
        return UnknownEvent.model_validate(data)


def _reason(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
            for item in error.errors()[:3]
        )
    return str(error)
