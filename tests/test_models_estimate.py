"""Without reported usage, every token a server sends is estimated: reasoning, refusals, calls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ownloop import Agent, Limits, StopReason, ToolRegistry
from ownloop.models import OpenAIChatModel, OpenAIResponsesModel, allow_model_requests
from ownloop.models._compat import PROFILES

from .openai_server import OpenAIServer, Received, Reply, ask, json_reply, play, sse, stream_reply

HUGE = "Let me think about this very carefully. " * 10_000  # 400,000 characters: ~100k tokens


def registry() -> ToolRegistry:
    """One read tool the model keeps calling."""
    tools = ToolRegistry()

    @tools.tool(effect="read")
    def look(topic: str) -> str:
        """Look a topic up.

        Args:
            topic: What to look up.
        """
        return "nothing new"

    return tools


def thinking(received: Received) -> Reply:
    """A reply without usage: huge reasoning, then one more tool call."""
    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": HUGE,
        "tool_calls": [
            {
                "id": f"c{len(received.body['messages'])}",
                "type": "function",
                "function": {"name": "look", "arguments": '{"topic": "more"}'},
            }
        ],
    }
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return json_reply({"id": "x", "model": "m", "choices": [choice]})


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_huge_reasoning_without_usage_is_stopped_by_the_token_budget(profile: str) -> None:
    """A server that omits usage and reasons at length is stopped by `max_total_tokens`."""
    with OpenAIServer(thinking) as server, allow_model_requests(True):
        model = OpenAIChatModel(
            "m", base_url=server.url, api_key="sk-test-0123456789", compat=profile
        )
        agent = Agent(model, registry(), limits=Limits(max_total_tokens=150_000, max_steps=20))
        result = asyncio.run(agent.run("research it"))
        requests = len(server.requests)
    assert result.stop_reason is StopReason.MAX_TOTAL_TOKENS
    assert requests <= 2  # ~100k tokens each: the budget holds after the first or second reply
    assert result.usage.total_tokens >= 100_000


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        ({"content": "ok", "reasoning": "r" * 400}, 100),
        ({"content": "ok", "refusal": "n" * 400}, 100),
        (
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "look", "arguments": '{"topic": "' + "a" * 400 + '"}'},
                    }
                ],
            },
            100,
        ),
    ],
)
def test_reasoning_refusal_and_call_arguments_count_in_the_estimate(
    message: dict[str, Any], tokens: int
) -> None:
    """Each kind of text a reply carries adds to the estimated output tokens."""
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
    (outcome,), _ = play(
        OpenAIChatModel, [json_reply({"id": "x", "choices": [choice]})], [ask("hi", tools=())]
    )
    assert outcome.usage.estimated
    assert outcome.usage.output_tokens >= tokens


def test_streamed_reasoning_without_usage_is_estimated() -> None:
    """Reasoning deltas (`reasoning_content` or `reasoning`) count when the stream has no usage."""
    events = sse(
        {"choices": [{"index": 0, "delta": {"reasoning_content": "r" * 400}}]},
        {"choices": [{"index": 0, "delta": {"reasoning": "s" * 400}}]},
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
    )
    (outcome,), _ = play(
        OpenAIChatModel,
        [stream_reply(events)],
        [ask("hi", tools=(), stream=True)],
        compat="llamacpp",
    )
    assert outcome.usage.estimated
    assert outcome.usage.output_tokens >= 200


def test_responses_reasoning_summaries_count_without_usage() -> None:
    """A Responses reply's reasoning summary and content text count when usage is missing."""
    body = {
        "id": "resp",
        "status": "completed",
        "output": [
            {
                "type": "reasoning",
                "id": "rs",
                "summary": [{"type": "summary_text", "text": "s" * 400}],
                "content": [{"type": "reasoning_text", "text": "r" * 400}],
            },
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ],
    }
    (outcome,), _ = play(OpenAIResponsesModel, [json_reply(body)], [ask("hi", tools=())])
    assert outcome.usage.estimated
    assert outcome.usage.output_tokens >= 200
