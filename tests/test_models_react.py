"""`ReActTextModel`: tools in the prompt, a strict parser, and bounded re-asks for the format."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from ownloop.contracts import AssistantMessage, SystemMessage, ToolCall, ToolMessage
from ownloop.exceptions import ConfigurationError, PermanentModelError
from ownloop.models import PROFILES, ReActTextModel

from .openai_server import (
    WEATHER,
    Reply,
    ask,
    json_reply,
    play,
    request_schema_errors,
    sse,
    stream_reply,
)


def said(text: str, prompt_tokens: int = 10) -> Reply:
    """A plain-text chat completion."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 3,
        "total_tokens": prompt_tokens + 3,
    }
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    return json_reply({"id": "r", "model": "m", "choices": [choice], "usage": usage})


def react(*replies: Reply, request: Any = None, **options: Any) -> tuple[Any, list[Any]]:
    """One step of the ReAct adapter against scripted replies."""
    (outcome,), received = play(
        ReActTextModel, replies, [request or ask("Weather in Oslo?")], **options
    )
    assert all(request_schema_errors(r) == [] for r in received)
    return outcome, received


@pytest.mark.parametrize(
    ("reply", "name", "arguments"),
    [
        (
            'Thought: look it up.\nAction: weather\nAction Input: {"city": "Oslo"}',
            "weather",
            '{"city": "Oslo"}',
        ),
        (
            'Action: `weather`\nAction Input:\n```json\n{"city": "Oslo"}\n```\n'
            "Observation: made up",
            "weather",
            '{"city": "Oslo"}',
        ),
        ("Action: weather\nAction Input: not json\nThought: later", "weather", "not json"),
        ("Action: weather\nAction Input:\nFinal Answer: sunny", "weather", "{}"),
        ('Action: nosuchtool\nAction Input: {"a": 1}', "nosuchtool", '{"a": 1}'),
    ],
)
def test_an_action_becomes_one_tool_call_left_to_strict_validation(
    reply: str, name: str, arguments: str
) -> None:
    """The first action is parsed as written (name and raw input) for the loop's validation."""
    response, received = react(said(reply))
    (call,) = response.tool_calls
    assert (call.name, call.arguments) == (name, arguments)
    assert response.final_output is None
    assert response.provider_items == ({"type": "react.reply", "text": reply},)
    assert len(received) == 1


def test_a_final_answer_before_any_action_answers() -> None:
    """Final Answer wins when it comes first; what follows it is part of the answer."""
    response, _ = react(said("Thought: I know.\nFinal Answer: Sunny in Oslo.\nAction: weather"))
    assert response.final_output == "Sunny in Oslo.\nAction: weather"
    assert response.tool_calls == ()


def test_the_prompt_lists_the_tools_and_the_format_and_stops_at_observations() -> None:
    """The prompt keeps the app's instructions and lists the tools with schemas; stop is sent."""
    request = ask(SystemMessage(content="Be brief."), "Weather in Oslo?")
    _, received = react(said("Final Answer: ok"), request=request)
    body = received[0].body
    prompt = body["messages"][0]["content"]
    assert prompt.startswith("Be brief.")
    assert "- weather: The weather in a city." in prompt
    assert json.dumps(WEATHER.parameters, separators=(",", ":")) in prompt
    assert "Final Answer:" in prompt
    assert body["stop"] == ["Observation:"]
    assert "tools" not in body
    no_stop = dataclasses.replace(PROFILES["compatible"], name="nostop", stop_sequences=False)
    _, received = react(said("Final Answer: ok"), request=request, compat=no_stop)
    assert "stop" not in received[0].body


def test_the_transcript_replays_replies_verbatim_and_tool_results_as_observations() -> None:
    """Earlier replies come back as written; other history is rendered in the format."""
    verbatim = AssistantMessage(
        tool_calls=(ToolCall(id="a", name="weather", arguments='{"city": "Oslo"}'),),
        provider_items=(
            {"type": "react.reply", "text": "Thought: t\nAction: weather\nAction Input: {}"},
        ),
    )
    rendered = AssistantMessage(
        tool_calls=(ToolCall(id="b", name="weather", arguments={"city": "Rome"}),)
    )
    answered = AssistantMessage(content="Rainy.")
    request = ask(
        "q",
        verbatim,
        ToolMessage(call_id="a", name="weather", content="sunny"),
        rendered,
        ToolMessage(call_id="b", name="weather", content="rain"),
        answered,
        "That answer was rejected.",
    )
    _, received = react(said("Final Answer: ok"), request=request)
    wire = [(m["role"], m["content"]) for m in received[0].body["messages"][1:]]
    assert wire == [
        ("user", "q"),
        ("assistant", "Thought: t\nAction: weather\nAction Input: {}"),
        ("user", "Observation: sunny"),
        ("assistant", 'Action: weather\nAction Input: {"city": "Rome"}'),
        ("user", "Observation: rain"),
        ("assistant", "Final Answer: Rainy."),
        ("user", "That answer was rejected."),
    ]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I will look it up.", "neither an 'Action:' line nor a 'Final Answer:' line"),
        ("Action: check the weather\nAction Input: {}", "only a tool name"),
        ("Action: weather", "needs an 'Action Input:' line"),
        ("Final Answer:   ", "Final Answer is empty"),
    ],
)
def test_an_unparseable_reply_is_re_asked_with_the_reason(reply: str, reason: str) -> None:
    """A reply outside the format is re-asked; usage is summed and both requests are counted."""
    response, received = react(said(reply, 10), said("Final Answer: Sunny.", 30))
    assert response.final_output == "Sunny."
    assert response.usage.input_tokens == 40
    assert response.provider_requests == 2
    feedback = received[1].body["messages"]
    assert feedback[-2] == {"role": "assistant", "content": reply}
    assert feedback[-1]["role"] == "user"
    assert reason in feedback[-1]["content"]
    assert "Rewrite this turn in the format" in feedback[-1]["content"]


def test_the_re_asks_are_bounded() -> None:
    """After max_format_retries rewrites without the format, the step fails permanently."""
    error, received = react(said("nope"), said("still no"), max_format_retries=1)
    assert isinstance(error, PermanentModelError)
    assert error.category == "invalid_response"
    assert "in 2 replies" in error.message
    assert len(received) == 2
    with pytest.raises(ConfigurationError, match="max_format_retries"):
        ReActTextModel("m", api_key="k", max_format_retries=-1)


def test_a_refusal_without_text_stops_and_streaming_works() -> None:
    """An empty, refused reply is an explicit stop; a streamed ReAct reply parses the same."""
    refusal = {"index": 0, "message": {"content": None, "refusal": "No."}, "finish_reason": "stop"}
    response, _ = react(json_reply({"choices": [refusal]}))
    assert response.stop_reason == "refusal: No."
    text = 'Action: weather\nAction Input: {"city": "Oslo"}'
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text[i : i + 5]}}]}
        for i in range(0, len(text), 5)
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    response, _ = react(stream_reply(sse(*chunks)), request=ask("q", stream=True))
    assert response.tool_calls[0].arguments == '{"city": "Oslo"}'
    assert response.time_to_first_token_s is not None
