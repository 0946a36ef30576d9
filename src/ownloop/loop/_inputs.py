"""Where a model's response enters the run: made safe to keep before anything records it.

A response comes from code the runtime does not control (an adapter, a user's model port, a test
script). Before the core traces, stores or answers it, every string in it is made encodable
(unpaired surrogates become U+FFFD); tool-call arguments given as objects nested deeper than
`ownloop._text.MAX_NESTING` become their JSON text, which validation then refuses as an
observation the model can act on; and an opaque provider item nested that deep (no real provider
sends one) is dropped. Either would otherwise be stored as a checkpoint no store could load back.
"""

from __future__ import annotations

import json

from ownloop._text import MAX_NESTING, clean_json, nesting_depth
from ownloop.contracts import ModelResponse, ToolCall

__all__ = ["clean_response"]


def clean_response(response: ModelResponse) -> ModelResponse:
    """Return the response with nothing a contract, a trace or a store could not hold.

    A clean response comes back as the same object.

    Args:
        response: What the model port returned.
    """
    calls = tuple(_flatten(call) for call in response.tool_calls)
    changed = any(new is not old for new, old in zip(calls, response.tool_calls, strict=True))
    if changed:
        response = response.model_copy(update={"tool_calls": calls})
    items = response.provider_items
    kept = tuple(item for item in items if nesting_depth(item) <= MAX_NESTING)
    if len(kept) != len(items):
        response = response.model_copy(update={"provider_items": kept})
    try:
        response.model_dump_json()
    except ValueError:  # pydantic's serialisation error: text UTF-8 cannot encode
        return ModelResponse.model_validate(clean_json(response.model_dump(mode="python")))
    return response


def _flatten(call: ToolCall) -> ToolCall:
    arguments = call.arguments
    if isinstance(arguments, str) or nesting_depth(arguments) <= MAX_NESTING:
        return call
    return call.model_copy(update={"arguments": json.dumps(arguments, ensure_ascii=False)})
