"""Text deltas of streamed replies, handed to whoever listens in the current context.

Streaming adapters call `report_text_delta` for every piece of reply text they receive. Nothing
listens by default (the call costs one context-variable read); `Agent.run_stream` listens for the
run it drives. A context variable keeps the model port unchanged and keeps concurrent runs apart:
each asyncio task sees only its own listener.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["listen_to_text_deltas", "report_text_delta"]

TextListener = Callable[[str], None]

_listener: ContextVar[TextListener | None] = ContextVar("ownloop_text_listener", default=None)


def report_text_delta(text: str) -> None:
    """Hand a piece of reply text to the current listener, if any.

    Args:
        text: The new text.
    """
    listener = _listener.get()
    if listener is not None and text:
        listener(text)


@contextmanager
def listen_to_text_deltas(listener: TextListener) -> Iterator[None]:
    """Receive the text deltas reported in this context (and tasks started from it).

    Args:
        listener: Called with each piece of reply text.

    Yields:
        Nothing; the listener is removed on exit.
    """
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
