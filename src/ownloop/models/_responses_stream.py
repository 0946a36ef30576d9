"""Streamed Responses API events, assembled into the final response object.

The final ``response.completed`` (or ``response.incomplete``) event carries the whole response;
items gathered from ``output_item`` events and argument deltas fill in what a server left out of it
(LM Studio sends arguments only in ``function_call_arguments.done``; some servers send an empty
``output`` at the end). ``response.failed`` and ``error`` events raise the mapped error, and a
stream that ends without a final event is a transient stream error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ownloop.exceptions import ProviderError, TransientModelError
from ownloop.models._deltas import report_text_delta
from ownloop.models._sse import ServerSentEvent

__all__ = ["ResponsesStreamAssembler"]

_FIRST_TOKEN = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
    }
)


class ResponsesStreamAssembler:
    """Fold Responses API stream events into the final response object.

    Args:
        fail: Builds the error to raise for an error payload found in the stream.

    Attributes:
        first_token_at: `time.perf_counter` reading when the first output delta arrived.
    """

    def __init__(self, fail: Callable[[Any], ProviderError]) -> None:
        self._fail = fail
        self._items: dict[int, dict[str, Any]] = {}
        self._arguments: dict[str, list[str]] = {}
        self._final: dict[str, Any] | None = None
        self.first_token_at: float | None = None

    def feed(self, event: ServerSentEvent) -> None:
        """Take one event of the stream.

        Args:
            event: The event.

        Raises:
            ProviderError: If the event reports an error or a failed response, or its data is not
                JSON.
        """
        if event.data.strip() == "[DONE]":
            return
        try:
            data = json.loads(event.data)
        except ValueError:
            raise TransientModelError(
                "stream_error: the stream carried data that is not JSON",
                category="stream_error",
                status=200,
            ) from None
        if not isinstance(data, dict):
            return
        kind = data.get("type") or event.event
        if kind == "error" or event.event == "error":
            raise self._fail(data)
        if kind == "response.failed":
            response = data.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise self._fail(error or data)
        if kind in _FIRST_TOKEN and self.first_token_at is None:
            self.first_token_at = time.perf_counter()
        self._take(kind, data)

    def _take(self, kind: Any, data: dict[str, Any]) -> None:
        if kind in {"response.completed", "response.incomplete"}:
            response = data.get("response")
            self._final = response if isinstance(response, dict) else {}
        elif kind in {"response.output_item.added", "response.output_item.done"}:
            item, index = data.get("item"), data.get("output_index")
            if isinstance(item, dict):
                position = index if isinstance(index, int) else len(self._items)
                self._items[position] = dict(item)
        elif kind == "response.output_text.delta":
            text = data.get("delta")
            report_text_delta(text if isinstance(text, str) else "")
        elif kind == "response.function_call_arguments.delta":
            delta = data.get("delta")
            if isinstance(delta, str):
                self._arguments.setdefault(str(data.get("item_id")), []).append(delta)
        elif kind == "response.function_call_arguments.done":
            arguments = data.get("arguments")
            if isinstance(arguments, str):
                self._arguments[str(data.get("item_id"))] = [arguments]

    @property
    def finished(self) -> bool:
        """Whether the final event arrived: nothing more is read after it."""
        return self._final is not None

    @property
    def complete(self) -> bool:
        """Whether a final ``response.completed`` or ``response.incomplete`` event arrived."""
        return self._final is not None

    def body(self) -> dict[str, Any]:
        """Return the final response, completed from the gathered items where it lacks them."""
        final = dict(self._final or {})
        gathered = [self._items[index] for index in sorted(self._items)]
        output = final.get("output")
        if not isinstance(output, list) or not output:
            output = gathered
        filled = []
        for item in output:
            streamed = self._arguments.get(str(item.get("id"))) if isinstance(item, dict) else None
            if streamed is not None and item.get("type") == "function_call":
                filled.append({**item, "arguments": item.get("arguments") or "".join(streamed)})
            else:
                filled.append(item)
        final["output"] = filled
        return final
