"""Streaming: server-sent events assembled into one response, whatever the server's quirks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ownloop.exceptions import ProviderError
from ownloop.models import OpenAIChatModel, OpenAIResponsesModel

from .openai_server import Reply, ask, json_reply, play, sse, stream_reply


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One chat completion chunk."""
    return {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }


def streamed(reply: Reply, adapter: type = OpenAIChatModel, **options: Any) -> Any:
    """The outcome of one streamed request."""
    (outcome,), received = play(adapter, [reply], [ask("q", stream=True)], **options)
    assert received[0].body["stream"] is True
    return outcome


def test_tool_call_fragments_and_text_assemble_with_time_to_first_token() -> None:
    """Argument fragments join by slot, text joins, usage comes last; TTFT is recorded."""
    reply = stream_reply(
        sse(
            chunk({"role": "assistant"}),
            chunk({"content": "Let me "}),
            chunk({"content": "check."}),
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "a", "function": {"name": "weather", "arguments": ""}}
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "",
                            "function": {"name": "", "arguments": 'ty": "Oslo"}'},
                        }
                    ]
                }
            ),
            chunk(finish="tool_calls"),
            {
                "choices": [],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            },
        )
    )
    response = streamed(reply)
    assert response.final_output == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("a", "weather", '{"city": "Oslo"}')
    ]
    assert response.usage.total_tokens == 7
    assert response.time_to_first_token_s is not None
    assert response.time_to_first_token_s >= 0


def test_index_always_zero_with_new_ids_opens_new_calls() -> None:
    """A server numbering every call 0 still yields one call per id."""
    reply = stream_reply(
        sse(
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "a", "function": {"name": "weather", "arguments": "{}"}}
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "b", "function": {"name": "weather", "arguments": "{}"}}
                    ]
                }
            ),
            chunk(finish="tool_calls"),
        )
    )
    assert [c.id for c in streamed(reply).tool_calls] == ["a", "b"]


def test_tool_calls_given_as_an_object_without_index_or_id() -> None:
    """TGI's object (not list) deltas without ids assemble into one call with a fresh id."""
    reply = stream_reply(
        sse(
            chunk(
                {"tool_calls": {"id": "", "function": {"name": "weather", "arguments": '{"city":'}}}
            ),
            chunk({"tool_calls": {"id": "", "function": {"name": None, "arguments": ' "Rome"}'}}}),
            chunk(finish="stop"),
            done=False,
        )
    )
    (only,) = streamed(reply).tool_calls
    assert (only.name, json.loads(str(only.arguments))) == ("weather", {"city": "Rome"})
    assert only.id.startswith("call_")


def test_reasoning_deltas_stay_out_of_the_text() -> None:
    """reasoning_content deltas never become answer text (and count as the first token)."""
    reply = stream_reply(
        sse(
            chunk({"reasoning_content": "hmm"}),
            chunk({"reasoning": "more"}),
            chunk({"content": "Hi"}, "stop"),
        )
    )
    response = streamed(reply)
    assert response.final_output == "Hi"
    assert response.provider_items == ()
    deepseek = streamed(reply, compat="deepseek")
    assert deepseek.provider_items == ({"type": "chat.reasoning_content", "text": "hmm"},)


def test_sse_framing_comments_multiline_data_and_bare_json_lines() -> None:
    """Comment lines are skipped, multi-line data joins, and unframed JSON lines are events too."""
    first = json.dumps(chunk({"content": "A"}))
    events = [
        ": OPENROUTER PROCESSING\n\n",
        f"data: {first[:10]}\ndata: {first[10:]}\n\n",
        json.dumps(chunk({"content": "B"})) + "\n",
        f"event: message\ndata: {json.dumps(chunk({'content': 'C'}, 'stop'))}",
    ]
    reply = Reply(200, {"content-type": "text/event-stream"}, events=events)
    assert streamed(reply).final_output == "ABC"


@pytest.mark.parametrize(
    ("events", "category", "retryable"),
    [
        (sse(chunk({"content": "partial"}), done=False), "stream_error", True),
        (["data: not json\n\n"], "stream_error", True),
        (
            ['event: error\ndata: {"error": {"message": "boom", "code": "tool_use_failed"}}\n\n'],
            "tool_generation_failed",
            False,
        ),
        (
            sse(chunk({"content": "x"}), {"error": {"code": 429, "message": "slow down"}}),
            "rate_limit",
            True,
        ),
        (sse({"error": {"message": "upstream died", "status_code": 502}}), "server_error", True),
    ],
)
def test_broken_streams_and_in_band_errors_raise_typed_errors(
    events: list[str], category: str, retryable: bool
) -> None:
    """An unfinished stream, garbage data and error events in a 200 stream are ProviderErrors."""
    error = streamed(Reply(200, {"content-type": "text/event-stream"}, events=events))
    assert isinstance(error, ProviderError)
    assert (error.category, error.retryable, error.status) == (category, retryable, 200)


def test_a_server_that_ignores_stream_answers_whole() -> None:
    """A JSON answer to a streaming request is read as a whole completion."""
    body = {"choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}]}
    response = streamed(json_reply(body))
    assert (response.final_output, response.time_to_first_token_s) == ("whole", None)


def response_events(*events: dict[str, Any]) -> Reply:
    """A Responses API event stream (typed data, no [DONE])."""
    return stream_reply(sse(*events, done=False))


FINAL = {
    "id": "resp_1",
    "status": "completed",
    "model": "m",
    "usage": {"input_tokens": 3, "output_tokens": 2},
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": "",
}


def test_responses_stream_fills_arguments_from_deltas_when_the_final_event_lacks_them() -> None:
    """Argument deltas (or .done) fill a function call whose final item has no arguments."""
    reply = response_events(
        {"type": "response.created", "response": {**FINAL, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": CALL},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"city"'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ': "Oslo"}'},
        {"type": "response.completed", "response": {**FINAL, "output": []}},
    )
    response = streamed(reply, OpenAIResponsesModel)
    assert [(c.id, c.arguments) for c in response.tool_calls] == [("call_1", '{"city": "Oslo"}')]
    assert response.time_to_first_token_s is not None


def test_responses_stream_uses_arguments_done_without_deltas() -> None:
    """LM Studio sends no argument deltas: function_call_arguments.done is enough."""
    reply = response_events(
        {"type": "response.output_item.added", "output_index": 0, "item": CALL},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": "{}"},
        {"type": "response.completed", "response": {**FINAL, "output": [CALL]}},
    )
    assert streamed(reply, OpenAIResponsesModel).tool_calls[0].arguments == "{}"


@pytest.mark.parametrize(
    ("events", "category", "retryable"),
    [
        ([{"type": "response.created", "response": FINAL}], "stream_error", True),
        (
            [{"type": "error", "code": "insufficient_quota", "message": "quota"}],
            "quota_exhausted",
            False,
        ),
        (
            [
                {
                    "type": "response.failed",
                    "response": {"error": {"code": "server_error", "message": "x"}},
                }
            ],
            "stream_error",
            True,
        ),
    ],
)
def test_responses_stream_failures_are_typed(
    events: list[dict[str, Any]], category: str, retryable: bool
) -> None:
    """No final event, an error event or a failed response each raise the mapped error."""
    error = streamed(response_events(*events), OpenAIResponsesModel)
    assert isinstance(error, ProviderError)
    assert (error.category, error.retryable) == (category, retryable)


def test_responses_stream_incomplete_for_tokens_is_an_explicit_stop() -> None:
    """response.incomplete for max_output_tokens stops the run with that reason."""
    part = {"type": "output_text", "text": "The answer is"}
    message = {"type": "message", "id": "m1", "role": "assistant", "content": [part]}
    incomplete = {
        **FINAL,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
    }
    reply = response_events(
        {"type": "response.output_text.delta", "item_id": "m1", "delta": "The answer is"},
        {"type": "response.incomplete", "response": {**incomplete, "output": [message]}},
    )
    response = streamed(reply, OpenAIResponsesModel)
    assert response.final_output == "The answer is"
    assert (response.stop_reason or "").startswith("max_output_tokens")
    bad = stream_reply(["data: {oops\n\n"])
    error = streamed(bad, OpenAIResponsesModel)
    assert (error.category, error.retryable) == ("stream_error", True)
