"""Provider message ordering after compaction: every request body sent over real HTTP is valid.

An `Agent` with a tight `ContextPolicy` talks to the real `OpenAIChatModel` adapter, which talks
to a loopback OpenAI-compatible server. Every request body the server receives after compactions
must validate against the OpenAPI ``CreateChatCompletionRequest`` schema, and obey the ordering
rule providers enforce: each assistant ``tool_calls`` id is answered by a tool message before the
next assistant or user message, and no tool message answers a call that is not open.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ownloop import Agent, ContextPolicy, Limits, RunStatus
from ownloop.models import OpenAIChatModel, allow_model_requests

from .context_kit import INSTRUCTIONS, TASK, assert_wire_pairs, page_registry
from .openai_server import OpenAIServer, Received, Reply, json_reply, request_schema_errors

LAST_PAGE = 7


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-ctx",
        "object": "chat.completion",
        "created": 0,
        "model": "ctx-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }


def _call(page: int) -> dict[str, Any]:
    arguments = json.dumps({"page": page})
    return {
        "id": f"call_{page}",
        "type": "function",
        "function": {"name": "read_page", "arguments": arguments},
    }


def _respond(received: Received) -> Reply:
    """Read two pages per turn (parallel calls) until the last page, then answer."""
    read = [
        int(n)
        for m in received.body["messages"]
        if m["role"] == "tool"
        for n in re.findall(r"page-(\d+)", m["content"])
    ]
    latest = max(read, default=0)
    if latest >= LAST_PAGE:
        return json_reply(
            _completion({"role": "assistant", "content": f"done [page-{latest}]"}, "stop")
        )
    pages = [page for page in (latest + 1, latest + 2) if page <= LAST_PAGE]
    message = {"role": "assistant", "content": None, "tool_calls": [_call(page) for page in pages]}
    return json_reply(_completion(message, "tool_calls"))


@pytest.mark.parametrize("compat", ["openai", "compatible"])
def test_compacted_requests_validate_against_the_openapi_schema(compat: str) -> None:
    """After compactions each Chat Completions body is schema-valid and keeps calls paired."""
    with OpenAIServer(_respond) as server, allow_model_requests(True):
        model = OpenAIChatModel("ctx-model", api_key="sk-test", base_url=server.url, compat=compat)
        agent = Agent(
            model,
            page_registry(),
            instructions=INSTRUCTIONS,
            context=ContextPolicy(max_request_tokens=1_800, keep_last_turns=1),
            limits=Limits(max_steps=10, max_total_tokens=1_000_000),
        )
        result = agent.run_sync(TASK)
    assert (result.status, result.output) == (RunStatus.COMPLETED, f"done [page-{LAST_PAGE}]")
    assert result.usage.compactions >= 2
    bodies = [received.body for received in server.requests]
    compacted = [
        body
        for body in bodies
        if any("Context compacted" in str(m.get("content")) for m in body["messages"])
    ]
    assert len(compacted) >= 2
    for received in server.requests:
        assert request_schema_errors(received) == []
        wire = received.body["messages"]
        assert_wire_pairs(wire)
        assert [m["role"] for m in wire[:2]] == [wire[0]["role"], "user"]
        assert wire[1]["content"] == TASK
    for body in compacted:
        roles = [m["role"] for m in body["messages"]]
        assert roles[2] == "user"  # the placeholder, right after the pinned head
        assert roles[3:6] == ["assistant", "tool", "tool"]  # kept turns: two calls, two answers
