"""Streamed chat completions, assembled into the shape of a whole completion.

Chunks are folded into one completion body that `parse_completion` then reads, so streamed and
whole replies follow one set of rules. The assembly survives what real servers send: tool-call
deltas without ``index`` (the position in the delta is the slot), with ``index`` always 0 (a new id
opens a new slot) or starting at 1 (slots are keys, not positions), continuations whose ``id`` or
``name`` is ``""``, ``tool_calls`` as an object instead of a list, leading chunks without choices,
usage-only chunks, and errors inside a 200 stream (an ``event: error`` or a chunk with ``error``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ownloop.exceptions import ProviderError, TransientModelError
from ownloop.models._deltas import report_text_delta
from ownloop.models._normalize import as_dict
from ownloop.models._sse import ServerSentEvent

__all__ = ["ChatStreamAssembler"]


@dataclass(slots=True)
class _Slot:
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    whole: Any = None
    extra: Any = None


@dataclass(slots=True)
class _Choice:
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    other_reasoning: list[str] = field(default_factory=list)  # sent as "reasoning"
    slots: dict[int, _Slot] = field(default_factory=dict)
    finish: str | None = None


class ChatStreamAssembler:
    """Fold chat-completion chunks into one completion body.

    Args:
        fail: Builds the error to raise for an error payload found in the stream.

    Attributes:
        first_token_at: `time.perf_counter` reading when the first text, reasoning or tool-call
            delta arrived.
    """

    def __init__(self, fail: Callable[[Any], ProviderError]) -> None:
        self._fail = fail
        self._choices: dict[int, _Choice] = {}
        self._usage: Any = None
        self._model: str | None = None
        self._id: str | None = None
        self._done = False
        self.first_token_at: float | None = None

    def feed(self, event: ServerSentEvent) -> None:
        """Take one event of the stream.

        Args:
            event: The event.

        Raises:
            ProviderError: If the event is an error, or its data is not JSON.
        """
        if event.data.strip() == "[DONE]":
            self._done = True
            return
        try:
            chunk = json.loads(event.data)
        except ValueError:
            raise TransientModelError(
                "stream_error: the stream carried data that is not JSON",
                category="stream_error",
                status=200,
            ) from None
        if event.event == "error" or (isinstance(chunk, dict) and chunk.get("error")):
            raise self._fail(chunk)
        if not isinstance(chunk, dict):
            return
        if isinstance(chunk.get("model"), str) and chunk["model"] and self._model is None:
            self._model = chunk["model"]
        if isinstance(chunk.get("id"), str) and chunk["id"] and self._id is None:
            self._id = chunk["id"]
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict):
                self._take_choice(choice)

    def _take_choice(self, choice: dict[str, Any]) -> None:
        index = choice.get("index")
        state = self._choices.setdefault(index if isinstance(index, int) else 0, _Choice())
        delta = as_dict(choice.get("delta"))
        content = delta.get("content")
        reasoning = delta.get("reasoning_content")
        if isinstance(content, str) and content:
            state.text.append(content)
            report_text_delta(content)
            self._mark_first_token()
        if isinstance(reasoning, str) and reasoning:
            state.reasoning.append(reasoning)
        other = delta.get("reasoning")
        if isinstance(other, str) and other:
            state.other_reasoning.append(other)
        if reasoning or other:
            self._mark_first_token()
        calls = delta.get("tool_calls")
        if isinstance(calls, dict):
            calls = [calls]  # TGI sends one object instead of a list
        for position, entry in enumerate(calls if isinstance(calls, list) else ()):
            if isinstance(entry, dict):
                self._take_call(state, position, entry)
                self._mark_first_token()
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            state.finish = finish

    def _take_call(self, state: _Choice, position: int, entry: dict[str, Any]) -> None:
        index = entry.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else position
        slot = state.slots.get(key)
        new_id = entry.get("id") if isinstance(entry.get("id"), str) else ""
        if slot is not None and new_id and slot.id and new_id != slot.id:
            key = max(state.slots) + 1  # the same index with a new id: another call
            slot = None
        if slot is None:
            slot = state.slots.setdefault(key, _Slot())
        if new_id and not slot.id:
            slot.id = new_id
        function = as_dict(entry.get("function"))
        name = function.get("name")
        if isinstance(name, str) and name and not slot.name:
            slot.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.fragments.append(arguments)
        elif isinstance(arguments, dict):
            slot.whole = arguments
        if isinstance(entry.get("extra_content"), dict):
            slot.extra = entry["extra_content"]

    def _mark_first_token(self) -> None:
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    @property
    def finished(self) -> bool:
        """Whether ``[DONE]`` arrived: nothing more is read after it."""
        return self._done

    @property
    def complete(self) -> bool:
        """Whether the stream ended properly: ``[DONE]`` or a finish reason was seen."""
        return self._done or any(choice.finish for choice in self._choices.values())

    def body(self) -> dict[str, Any]:
        """Return the assembled completion, shaped like a non-streamed one."""
        choices = []
        for index, state in sorted(self._choices.items()):
            message: dict[str, Any] = {"role": "assistant", "content": "".join(state.text)}
            if state.reasoning:
                message["reasoning_content"] = "".join(state.reasoning)
            if state.other_reasoning:
                message["reasoning"] = "".join(state.other_reasoning)
            calls = []
            for slot in state.slots.values():
                arguments = "".join(slot.fragments) if slot.whole is None else slot.whole
                call: dict[str, Any] = {
                    "id": slot.id,
                    "type": "function",
                    "function": {"name": slot.name, "arguments": arguments},
                }
                if slot.extra is not None:
                    call["extra_content"] = slot.extra
                calls.append(call)
            if calls:
                message["tool_calls"] = calls
            choices.append({"index": index, "message": message, "finish_reason": state.finish})
        return {"id": self._id, "model": self._model, "choices": choices, "usage": self._usage}
