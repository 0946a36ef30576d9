"""`OpenAIChatModel`: our messages to chat messages and back, as the compatibility profile says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ownloop.contracts import (
    AssistantMessage,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from ownloop.exceptions import ProviderError
from ownloop.models import CompatProfile, OpenAIChatModel

from .openai_server import WEATHER, Reply, ask, json_reply, play, request_schema_errors


def completion(message: dict[str, Any], finish: str | None = "stop", **extra: Any) -> Reply:
    """A whole chat completion with one choice."""
    body = {"id": "chatcmpl-1", "model": "served-model", **extra}
    body["choices"] = [
        {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    ]
    return json_reply(body)


def call(
    name: str, arguments: Any = "{}", call_id: str | None = "call_1", **extra: Any
) -> dict[str, Any]:
    """One tool call of a chat message."""
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        entry["id"] = call_id
    return {**entry, **extra}


def respond(reply: Reply, request: Any = None, **options: Any) -> tuple[Any, dict[str, Any]]:
    """One exchange: the outcome and the request body the server received."""
    (outcome,), received = play(OpenAIChatModel, [reply], [request or ask("hi")], **options)
    assert request_schema_errors(received[0]) == []
    return outcome, received[0].body


HISTORY = (
    SystemMessage(content="Be brief."),
    UserMessage(content="Weather in Paris?"),
    AssistantMessage(
        tool_calls=(
            ToolCall(id="c1", name="weather", arguments={"city": "Paris"}),
            ToolCall(id="c2", name="weather", arguments=None),
        )
    ),
    ToolMessage(call_id="c1", name="weather", content="sunny"),
    ToolMessage(call_id="c2", name="weather", content="error: city required"),
)


def test_the_openai_profile_sends_everything_openai_documents() -> None:
    """Strict tools, null assistant content, max_completion_tokens, parallel calls, stream usage."""
    request = ask(
        *HISTORY, temperature=0.2, max_output_tokens=50, parallel_tool_calls=False, stream=True
    )
    events = ['data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n']
    _, body = respond(Reply(200, {"content-type": "text/event-stream"}, events=events), request)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assistant = body["messages"][2]
    assert assistant["content"] is None
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        '{"city": "Paris"}',
        "{}",
    ]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert body["tools"][0]["function"]["strict"] is True
    assert (body["temperature"], body["max_completion_tokens"]) == (0.2, 50)
    assert body["parallel_tool_calls"] is False
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})


def test_the_compatible_profile_sends_only_what_every_server_takes() -> None:
    """No strict, no stream_options, no parallel_tool_calls; max_tokens; "" for empty content."""
    request = ask(*HISTORY, max_output_tokens=50, parallel_tool_calls=True, stream=True)
    events = ['data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n']
    reply = Reply(200, {"content-type": "text/event-stream"}, events=events)
    _, body = respond(reply, request, compat="compatible")
    assert body["messages"][2]["content"] == ""
    assert "strict" not in body["tools"][0]["function"]
    assert body["max_tokens"] == 50
    assert not {"stream_options", "parallel_tool_calls", "max_completion_tokens"} & set(body)


def test_a_tool_that_is_not_strict_is_sent_without_strict() -> None:
    """ToolSpec.strict=False keeps `strict` out of the function, even with the openai profile."""
    loose = WEATHER.model_copy(update={"strict": False, "description": ""})
    _, body = respond(completion({"content": "ok"}), ask("hi", tools=(loose,)))
    assert body["tools"][0]["function"] == {"name": "weather", "parameters": WEATHER.parameters}


def test_a_plain_answer_maps_text_usage_model_and_request_id() -> None:
    """Text, usage (with reasoning and cached tokens), the served model and the request id."""
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 7,
        "total_tokens": 17,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    reply = completion({"content": "Paris."}, usage=usage)
    reply.headers["x-request-id"] = "req_42"
    response, body = respond(reply)
    assert response.final_output == "Paris."
    assert response.usage.model_dump() == {
        "input_tokens": 10,
        "output_tokens": 7,
        "reasoning_tokens": 3,
        "cached_tokens": 4,
        "estimated": False,
    }
    assert (response.model, response.provider_request_id) == ("served-model", "req_42")
    assert body["model"] == "test-model"


@pytest.mark.parametrize(
    "usage",
    [None, {"prompt_tokens": "many", "completion_tokens": -3}, {"prompt_cache_hit_tokens": 5}],
)
def test_missing_or_malformed_usage_is_estimated(usage: Any) -> None:
    """Usage that is missing, textual or negative is estimated (DeepSeek's cache hits count)."""
    response, _ = respond(completion({"content": "ok"}, usage=usage))
    assert response.usage.estimated
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens == 1  # "ok": one token by the heuristic
    assert response.usage.cached_tokens == (
        5 if usage and "prompt_cache_hit_tokens" in usage else 0
    )
    assert response.usage.cached_tokens == (
        5 if usage and "prompt_cache_hit_tokens" in usage else 0
    )


def test_ids_are_unique_in_the_run_and_stable() -> None:
    """Empty, oversized, repeated and used ids are replaced by the same fresh ids each time."""
    calls = [
        call("weather", '{"city": "A"}', "c1"),
        call("weather", '{"city": "B"}', ""),
        call("weather", '{"city": "C"}', "x" * 200),
        call("weather", '{"city": "D"}', "dup"),
        call("weather", '{"city": "E"}', "dup"),
    ]
    reply = completion({"content": None, "tool_calls": calls}, "tool_calls")
    outcomes, _ = play(OpenAIChatModel, [reply, reply], [ask(*HISTORY), ask(*HISTORY)])
    first, second = outcomes
    ids = [c.id for c in first.tool_calls]
    assert ids[3] == "dup"
    assert "c1" not in ids
    assert len(set(ids)) == 5
    assert all(0 < len(i) <= 128 for i in ids)
    assert ids == [c.id for c in second.tool_calls]


def test_arguments_missing_or_given_as_an_object_are_kept_usable() -> None:
    """Missing arguments become "{}", an object stays an object, text stays the raw text."""
    calls = [
        {"id": "a", "function": {"name": "weather"}},
        call("weather", {"city": "Rome"}, "b"),
        call("weather", '{"city": ', "c"),
    ]
    response, _ = respond(completion({"tool_calls": calls}, "tool_calls"))
    assert [c.arguments for c in response.tool_calls] == ["{}", {"city": "Rome"}, '{"city": ']


def test_zero_value_placeholders_and_legacy_function_calls() -> None:
    """Empty placeholders are ignored; a legacy function_call is read when no tool call exists."""
    placeholder = {"content": "", "refusal": "", "function_call": {"name": "", "arguments": ""}}
    response, _ = respond(
        completion({**placeholder, "tool_calls": [{"custom": {"name": ""}}]}, "stop")
    )
    assert isinstance(response, ProviderError)
    assert response.category == "invalid_response"
    legacy = completion(
        {"function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'}}, "function_call"
    )
    response, _ = respond(legacy)
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("weather", '{"city": "Oslo"}')]


@pytest.mark.parametrize(
    ("message", "finish", "stop"),
    [
        ({"content": None, "refusal": "I can't help with that."}, "stop", "refusal: I can't help"),
        ({"content": None}, "content_filter", "content_filter"),
        ({"content": "The answer is cut"}, "length", "max_output_tokens"),
    ],
)
def test_refusals_filters_and_cut_off_replies_are_explicit_stops(
    message: dict[str, Any], finish: str, stop: str
) -> None:
    """A refusal, a content filter or a reply cut at the token limit stops the run explicitly."""
    response, _ = respond(completion(message, finish))
    assert isinstance(response, ModelResponse)
    assert response.stop_reason is not None
    assert response.stop_reason.startswith(stop)


def test_content_given_as_parts_is_joined() -> None:
    """Content as a list of text parts becomes one text."""
    parts = [{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}, "junk"]
    response, _ = respond(completion({"content": parts}))
    assert response.final_output == "Hello world"


def test_a_hallucinated_parallel_wrapper_fans_out() -> None:
    """An undeclared multi_tool_use.parallel becomes the calls it wraps, with derived ids."""
    uses = {
        "tool_uses": [{"recipient_name": "functions.weather", "parameters": {"city": "Rome"}}] * 2
    }
    wrapper = call("multi_tool_use.parallel", json.dumps(uses), "call_w")
    response, _ = respond(completion({"tool_calls": [wrapper]}, "tool_calls"))
    assert [(c.id, c.name) for c in response.tool_calls] == [
        ("call_w#0", "weather"),
        ("call_w#1", "weather"),
    ]
    broken = call("parallel", '{"tool_uses": "nope"}', "call_x")
    response, _ = respond(completion({"tool_calls": [broken]}, "tool_calls"))
    assert [c.name for c in response.tool_calls] == ["parallel"]
    declared = ToolSpec(name="parallel", parameters={"type": "object"}, strict=False)
    response, _ = respond(
        completion({"tool_calls": [wrapper]}, "tool_calls"), ask("hi", tools=(declared,))
    )
    assert [c.name for c in response.tool_calls] == ["multi_tool_use.parallel"]


def test_the_deepseek_profile_replays_reasoning_within_the_tool_loop_only() -> None:
    """reasoning_content comes back on assistant turns after the last user message, not before."""
    reply = completion(
        {"content": None, "reasoning_content": "think", "tool_calls": [call("weather", "{}")]},
        "tool_calls",
    )
    (first,), _ = play(OpenAIChatModel, [reply], [ask("q")], compat="deepseek")
    assert first.provider_items == ({"type": "chat.reasoning_content", "text": "think"},)
    turn = AssistantMessage(tool_calls=first.tool_calls, provider_items=first.provider_items)
    result = ToolMessage(call_id=first.tool_calls[0].id, name="weather", content="sunny")
    loop_request = ask("q", turn, result)
    later_request = ask("q", turn, result, "next question")
    _, received = play(
        OpenAIChatModel,
        [completion({"content": "ok"})] * 2,
        [loop_request, later_request],
        compat="deepseek",
    )
    assert received[0].body["messages"][1]["reasoning_content"] == "think"
    assert "reasoning_content" not in received[1].body["messages"][1]
    (plain,), _ = play(OpenAIChatModel, [reply], [ask("q")])
    assert plain.provider_items == ()


def test_the_gemini_profile_round_trips_extra_content_with_the_assigned_id() -> None:
    """Gemini's thought signature returns on the call it belongs to, even when its id was empty."""
    extra = {"google": {"thought_signature": "sig"}}
    reply = completion(
        {"tool_calls": [call("weather", "{}", "", extra_content=extra)]}, "tool_calls"
    )
    (first,), _ = play(OpenAIChatModel, [reply], [ask("q")], compat="gemini")
    call_id = first.tool_calls[0].id
    assert first.provider_items[0]["call_id"] == call_id
    turn = AssistantMessage(tool_calls=first.tool_calls, provider_items=first.provider_items)
    request = ask("q", turn, ToolMessage(call_id=call_id, name="weather", content="noon"))
    _, received = play(OpenAIChatModel, [completion({"content": "ok"})], [request], compat="gemini")
    sent = received[0].body["messages"][1]["tool_calls"][0]
    assert (sent["id"], sent["extra_content"]) == (call_id, extra)


XML = (
    "<tool_call>\n<function=weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)


@pytest.mark.parametrize(
    ("content", "calls", "text"),
    [
        (
            '{"name": "weather", "arguments": {"city": "Oslo"}}',
            [("weather", {"city": "Oslo"})],
            None,
        ),
        (
            '```json\n[{"name": "weather", "parameters": {"city": "A"}}]\n```',
            [("weather", {"city": "A"})],
            None,
        ),
        (
            'Checking.\n<tool_call>{"name": "weather", "arguments": "{}"}</tool_call>',
            [("weather", {})],
            "Checking.",
        ),
        (XML, [("weather", {"city": "Paris"})], None),
        (
            "<tool_call>\n<function=weather>\n<parameter=days>\n3\n\n",
            [("weather", {"days": 3})],
            None,
        ),
        ('{"name": "search", "arguments": {}}', [], '{"name": "search", "arguments": {}}'),
        ("<tool_call>not json</tool_call>", [], "<tool_call>not json</tool_call>"),
        ('{"city": "no name"}', [], '{"city": "no name"}'),
    ],
)
def test_text_tool_calls_are_recognised_only_for_declared_tools_when_asked(
    content: str, calls: list[tuple[str, Any]], text: str | None
) -> None:
    """With the ollama profile, JSON or XML calls in the text become calls to declared tools."""
    (response,), _ = play(
        OpenAIChatModel, [completion({"content": content})], [ask("q")], compat="ollama"
    )
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == calls
    assert response.final_output == text
    (default,), _ = play(OpenAIChatModel, [completion({"content": content})], [ask("q")])
    assert (default.tool_calls, default.final_output) == ((), content)


def test_a_custom_profile_can_send_the_developer_role() -> None:
    """A profile built by hand decides each field, for example the system messages' role."""
    profile = CompatProfile("mine", system_role="developer")
    _, body = respond(
        completion({"content": "ok"}), ask(SystemMessage(content="s"), "q"), compat=profile
    )
    assert body["messages"][0]["role"] == "developer"
    assert repr(profile) == "CompatProfile('mine')"
