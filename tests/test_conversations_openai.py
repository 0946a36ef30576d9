"""A follow-up over real HTTP: the Responses API gets the whole conversation replayed, statelessly.

A two-turn conversation through `OpenAIResponsesModel` against the loopback OpenAI-compatible
server: the follow-up's request carries the earlier turn's items (its reasoning item opaque and in
place, the call and its output) and the new question, never a ``previous_response_id``, and every
body validates against the OpenAPI request schema. The same holds for Chat Completions.
"""

from __future__ import annotations

import json
from typing import Any

from ownloop import Agent, RunStatus, ToolRegistry, citations_observed
from ownloop.models import OpenAIChatModel, OpenAIResponsesModel, allow_model_requests

from .openai_server import OpenAIServer, Received, Reply, json_reply, request_schema_errors

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [],
    "encrypted_content": "opaque-state",
}
USAGE = {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def weather(city: str) -> list[dict[str, str]]:
        """Look up the weather.

        Args:
            city: The city.
        """
        return [{"id": f"W-{city}", "title": f"{city}: sunny"}]

    return registry


def _response(*output: dict[str, Any]) -> Reply:
    return json_reply(
        {
            "id": "resp_x",
            "status": "completed",
            "model": "m",
            "output": list(output),
            "usage": USAGE,
        }
    )


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _answer(received: Received) -> Reply:
    """Look the weather up once per question, then answer citing it."""
    items = received.body["input"]
    if items[-1].get("type") != "function_call_output":
        call = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": f"call_{len(items)}",
            "name": "weather",
            "arguments": json.dumps({"city": "Oslo"}),
        }
        return _response(REASONING, call)
    return _response(_message("Sunny [W-Oslo]."))


def test_a_responses_follow_up_replays_the_conversation_without_provider_state() -> None:
    """The follow-up sends every earlier item and the new turn; no previous_response_id."""
    with OpenAIServer(_answer) as server, allow_model_requests(True):
        model = OpenAIResponsesModel("m", api_key="sk-test", base_url=server.url)
        agent = Agent(model, _registry(), validators=[citations_observed()])
        first = agent.run_sync("Weather in Oslo?")
        second = agent.run_sync("And tomorrow?", history=first)
    assert (first.status, second.status) == (RunStatus.COMPLETED, RunStatus.COMPLETED)
    bodies = [received.body for received in server.requests]
    assert all(request_schema_errors(received) == [] for received in server.requests)
    assert all("previous_response_id" not in body for body in bodies)
    follow_up = bodies[2]["input"]
    assert follow_up[: len(bodies[1]["input"])] == bodies[1]["input"]  # the first turn, replayed
    assert REASONING in follow_up
    assert follow_up[-1]["role"] == "user"
    assert "And tomorrow?" in json.dumps(follow_up[-1])


def _chat(received: Received) -> Reply:
    messages = received.body["messages"]
    if messages[-1]["role"] == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": "Sunny [W-Oslo]."}
        finish = "stop"
    else:
        call = {
            "id": f"call_{len(messages)}",
            "type": "function",
            "function": {"name": "weather", "arguments": json.dumps({"city": "Oslo"})},
        }
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return json_reply(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    )


def test_a_chat_completions_follow_up_sees_the_earlier_turns() -> None:
    """Over Chat Completions the follow-up's messages start with the first turn's, calls paired."""
    with OpenAIServer(_chat) as server, allow_model_requests(True):
        model = OpenAIChatModel("m", api_key="sk-test", base_url=server.url)
        agent = Agent(model, _registry(), instructions="Be brief.")
        first = agent.run_sync("Weather in Oslo?")
        second = agent.run_sync("And tomorrow?", history=first)
    assert second.status is RunStatus.COMPLETED
    assert all(request_schema_errors(received) == [] for received in server.requests)
    bodies = [received.body["messages"] for received in server.requests]
    assert [m["role"] for m in bodies[2]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert bodies[2][:4] == bodies[1]
    assert bodies[2][-1] == {"role": "user", "content": "And tomorrow?"}
