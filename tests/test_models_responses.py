"""`OpenAIResponsesModel`: input items out, output items kept opaque and replayed in place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ownloop.contracts import AssistantMessage, SystemMessage, ToolCall, ToolMessage
from ownloop.exceptions import ProviderError
from ownloop.models import OpenAIResponsesModel

from .openai_server import WEATHER, ask, json_reply, play, request_schema_errors

USAGE = {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}


def response(*output: dict[str, Any], **extra: Any) -> Any:
    """A completed Responses API response."""
    return json_reply(
        {
            "id": "resp_1",
            "status": "completed",
            "model": "m",
            "output": list(output),
            "usage": USAGE,
            **extra,
        }
    )


def exchange(reply: Any, request: Any = None, **options: Any) -> tuple[Any, dict[str, Any]]:
    """One exchange: the outcome and the request body the server received."""
    (outcome,), received = play(OpenAIResponsesModel, [reply], [request or ask("hi")], **options)
    assert request_schema_errors(received[0]) == []
    return outcome, received[0].body


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "s"}],
    "encrypted_content": "opaque",
    "status": None,
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": '{"city": "Oslo"}',
    "status": "completed",
}
MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "phase": "commentary",
    "content": [
        {"type": "output_text", "text": "Checking.", "annotations": [{"x": 1}], "logprobs": [1]}
    ],
}


def test_the_request_is_stateless_and_strict() -> None:
    """store=false with encrypted reasoning included, strict tools, settings mapped."""
    request = ask(
        SystemMessage(content="Be brief."),
        "hi",
        temperature=0.5,
        max_output_tokens=64,
        parallel_tool_calls=True,
    )
    _, body = exchange(response(MESSAGE), request, model="gpt-5-mini")
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert body["input"][:2] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": WEATHER.description,
            "parameters": WEATHER.parameters,
            "strict": True,
        }
    ]
    assert (body["temperature"], body["max_output_tokens"], body["parallel_tool_calls"]) == (
        0.5,
        64,
        True,
    )
    _, body = exchange(response(MESSAGE), request, compat="compatible")
    assert not {"store", "include", "parallel_tool_calls"} & set(body)
    assert body["tools"][0]["strict"] is False


def test_output_items_are_kept_replay_ready_and_come_back_in_place() -> None:
    """Reasoning, message and call items are kept in order without output-only fields, resent."""
    first, _ = exchange(response(REASONING, MESSAGE, CALL, {"type": "web_search_call", "id": "ws"}))
    assert first.final_output == "Checking."
    assert [(c.id, c.arguments) for c in first.tool_calls] == [("call_1", '{"city": "Oslo"}')]
    reasoning, message, call = first.provider_items
    assert reasoning == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": REASONING["summary"],
        "encrypted_content": "opaque",
    }
    assert message["content"] == [
        {"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}
    ]
    assert (message["phase"], message["status"]) == ("commentary", "completed")
    assert "status" not in call
    turn = AssistantMessage(
        content=first.final_output, tool_calls=first.tool_calls, provider_items=first.provider_items
    )
    request = ask("hi", turn, ToolMessage(call_id="call_1", name="weather", content="sunny"))
    _, body = exchange(response(MESSAGE), request)
    assert body["input"][1:] == [
        reasoning,
        message,
        call,
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]


def test_history_from_another_adapter_becomes_items() -> None:
    """Assistant turns without Responses items are sent as a message and function calls."""
    turn = AssistantMessage(
        content="Looking.", tool_calls=(ToolCall(id="c9", name="weather", arguments={"city": "A"}),)
    )
    request = ask("hi", turn, ToolMessage(call_id="c9", name="weather", content="rain"))
    _, body = exchange(response(MESSAGE), request)
    assert body["input"][1:] == [
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c9", "name": "weather", "arguments": '{"city": "A"}'},
        {"type": "function_call_output", "call_id": "c9", "output": "rain"},
    ]


def test_a_parallel_wrapper_fans_out_and_its_results_return_together() -> None:
    """The wrapper's calls run separately; their results go back as one output for the wrapper."""
    uses = [{"recipient_name": "functions.weather", "parameters": {"city": c}} for c in ("A", "B")]
    wrapper = {
        **CALL,
        "call_id": "call_p",
        "name": "parallel",
        "arguments": json.dumps({"tool_uses": uses}),
    }
    first, _ = exchange(response(wrapper))
    assert [c.id for c in first.tool_calls] == ["call_p#0", "call_p#1"]
    turn = AssistantMessage(tool_calls=first.tool_calls, provider_items=first.provider_items)
    results = [
        ToolMessage(call_id=c.id, name=c.name, content=f"r{i}")
        for i, c in enumerate(first.tool_calls)
    ]
    _, body = exchange(response(MESSAGE), ask("hi", turn, *results))
    outputs = [item for item in body["input"] if item.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_p"]
    assert json.loads(outputs[0]["output"]) == [
        {"recipient_name": "functions.weather", "output": "r0"},
        {"recipient_name": "functions.weather", "output": "r1"},
    ]


def test_refusals_incomplete_and_failed_responses() -> None:
    """A refusal stops, an incomplete response for a filter stops, a failed response raises."""
    refusal = {**MESSAGE, "content": [{"type": "refusal", "refusal": "No."}]}
    stopped, _ = exchange(response(refusal))
    assert stopped.stop_reason == "refusal: No."
    filtered, _ = exchange(
        response(MESSAGE, status="incomplete", incomplete_details={"reason": "content_filter"})
    )
    assert (filtered.stop_reason or "").startswith("content_filter")
    assert filtered.final_output == "Checking."
    failed, _ = exchange(
        response(status="failed", error={"code": "rate_limit_exceeded", "message": "slow"})
    )
    assert isinstance(failed, ProviderError)
    assert (failed.category, failed.retryable) == ("rate_limit", True)


def test_top_level_output_text_is_read_when_there_are_no_message_items() -> None:
    """A server that only fills the convenience output_text still yields the text."""
    reply, _ = exchange(response(output_text="Plain."))
    assert reply.final_output == "Plain."
    assert reply.usage.total_tokens == 13


@pytest.mark.parametrize(
    ("model", "reasoning", "asked"),
    [
        ("gpt-4o", None, False),
        ("gpt-5-chat-latest", None, False),
        ("o4-mini", None, True),
        ("openai.gpt-5.6-luna", None, True),
        ("my-azure-deployment", None, False),
        ("my-azure-deployment", True, True),
        ("o3", False, False),
    ],
)
def test_encrypted_reasoning_is_asked_of_reasoning_models_only(
    model: str, reasoning: bool | None, asked: bool
) -> None:
    """Only reasoning models get include=reasoning.encrypted_content (others reject it)."""
    _, body = exchange(response(MESSAGE), model=model, reasoning=reasoning)
    assert ("include" in body) is asked
    assert body["store"] is False


def test_a_model_rejecting_encrypted_reasoning_gets_a_hint() -> None:
    """The 400 for include names the parameter and says to pass reasoning=False."""
    body = {
        "error": {
            "message": "Encrypted content is not supported with this model.",
            "param": "include",
        }
    }
    error, _ = exchange(json_reply(body, 400), model="o3")
    assert (error.category, error.parameter) == ("unsupported_parameter", "include")
    assert "reasoning=False" in error.message
