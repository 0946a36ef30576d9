"""Typed answers over real HTTP: each adapter asks with its provider's strongest mechanism.

The local server enforces structured output as OpenAI does: a request must validate against the
OpenAPI request schema, a strict ``response_format`` / ``text.format`` schema must be closed with
every property required (else 400 ``invalid_json_schema``), and the server only ever answers
with JSON that conforms to the schema it was given.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, field_validator

from ownloop import Agent, Limits, RunStatus, StopReason
from ownloop.contracts import TextDelta
from ownloop.models import (
    OpenAIChatModel,
    OpenAIResponsesModel,
    ReActTextModel,
    allow_model_requests,
)

from .openai_server import (
    OpenAIServer,
    Received,
    Reply,
    json_reply,
    request_schema_errors,
    sse,
    stream_reply,
)


class Comparison(BaseModel):
    """How two populations compare."""

    difference: int
    percent: float

    @field_validator("difference")
    @classmethod
    def _non_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError("difference must be the larger minus the smaller, never negative")
        return value


def _unstrict(schema: Any, path: str = "$") -> str | None:
    """Where a schema breaks OpenAI's strict rules, or None."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            properties = schema.get("properties", {})
            if schema.get("additionalProperties") is not False:
                return f"{path}: additionalProperties must be false"
            if sorted(schema.get("required", [])) != sorted(properties):
                return f"{path}: every property must be required"
        for key, value in schema.items():
            found = _unstrict(value, f"{path}.{key}")
            if found:
                return found
    if isinstance(schema, list):
        for index, value in enumerate(schema):
            found = _unstrict(value, f"{path}[{index}]")
            if found:
                return found
    return None


def _schema_error(message: str) -> Reply:
    error = {"message": message, "type": "invalid_request_error", "param": "response_format"}
    return json_reply({"error": {**error, "code": "invalid_json_schema"}}, 400)


def _completion(message: dict[str, Any]) -> Reply:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return json_reply({"id": "c1", "model": "m", "choices": [choice], "usage": usage})


def structured_server(answers: Iterator[Any]) -> Callable[[Received], Reply]:
    """A server that takes json_schema response formats (chat or Responses) and conforms to them."""

    def brain(received: Received) -> Reply:
        errors = request_schema_errors(received)
        if errors:
            return json_reply({"error": {"message": "; ".join(errors), "param": None}}, 400)
        body = received.body
        if received.path == "/v1/responses":
            text_format = body["text"]["format"]
            schema, strict = text_format["schema"], text_format.get("strict")
        else:
            response_format = body.get("response_format")
            if response_format is None or response_format["type"] != "json_schema":
                return _schema_error("this test server needs a json_schema response_format")
            schema = response_format["json_schema"]["schema"]
            strict = response_format["json_schema"].get("strict")
        problem = _unstrict(schema) if strict else None
        if problem:
            return _schema_error(f"Invalid schema for response_format: {problem}")
        answer = next(answers)
        jsonschema.validate(answer, schema)  # a real server only emits conforming JSON
        text = json.dumps(answer)
        if received.path == "/v1/responses":
            content = [{"type": "output_text", "text": text, "annotations": []}]
            item = {"type": "message", "id": "m1", "role": "assistant", "status": "completed"}
            return json_reply(
                {
                    "id": "resp_1",
                    "object": "response",
                    "status": "completed",
                    "model": "m",
                    "output": [{**item, "content": content}],
                    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
                }
            )
        return _completion({"content": text})

    return brain


def _run(model_type: type, brain: Callable[[Received], Reply], **options: Any) -> Any:
    compat = options.pop("compat", None)
    with OpenAIServer(brain) as server, allow_model_requests(True):
        model = model_type("m", api_key="sk-test", base_url=server.url, compat=compat)
        agent = Agent(model, output_type=Comparison, limits=Limits(max_steps=4), **options)
        return agent.run_sync("Compare the populations of Lyon and Marseille"), server.requests


def test_chat_sends_a_strict_json_schema_response_format_and_reads_the_instance() -> None:
    """Chat Completions asks with response_format json_schema strict; output is a Comparison."""
    answers = iter([{"difference": 355_000, "percent": 68.6}])
    result, requests = _run(OpenAIChatModel, structured_server(answers))
    assert result.status is RunStatus.COMPLETED, result.detail
    assert result.output == Comparison(difference=355_000, percent=68.6)
    response_format = requests[0].body["response_format"]
    assert response_format["json_schema"]["name"] == "Comparison"
    assert response_format["json_schema"]["strict"] is True


def test_responses_sends_text_format_json_schema() -> None:
    """The Responses adapter asks with text.format json_schema (strict)."""
    answers = iter([{"difference": 1, "percent": 0.5}])
    result, requests = _run(OpenAIResponsesModel, structured_server(answers))
    assert result.output == Comparison(difference=1, percent=0.5), result.detail
    text_format = requests[0].body["text"]["format"]
    assert (text_format["type"], text_format["strict"]) == ("json_schema", True)


def test_a_schema_valid_answer_failing_a_validator_is_re_asked_over_http() -> None:
    """The server's output conforms to the schema; ownloop's validator still rejects it once."""
    answers = iter([{"difference": -5, "percent": 1.0}, {"difference": 5, "percent": 1.0}])
    result, requests = _run(OpenAIChatModel, structured_server(answers))
    assert result.output == Comparison(difference=5, percent=1.0)
    assert len(requests) == 2
    assert "never negative" in requests[1].body["messages"][-1]["content"]


def test_the_compatible_profile_uses_a_final_result_tool() -> None:
    """A server without json_schema support (compatible profile) gets a final-result tool."""

    def brain(received: Received) -> Reply:
        assert request_schema_errors(received) == []
        assert "response_format" not in received.body
        (tool,) = received.body["tools"]
        assert tool["function"]["name"] == "final_result"
        arguments = json.dumps({"difference": 2, "percent": 3.5})
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "final_result", "arguments": arguments}  # type: ignore[assignment]
        return _completion({"content": None, "tool_calls": [call]})

    result, _ = _run(OpenAIChatModel, brain, compat="compatible")
    assert result.output == Comparison(difference=2, percent=3.5), result.detail


def test_the_llamacpp_profile_sends_a_json_object_schema() -> None:
    """llama-cpp-python constrains output by {type: json_object, schema}: that is what is sent."""

    def brain(received: Received) -> Reply:
        response_format = received.body["response_format"]
        assert response_format["type"] == "json_object"
        jsonschema.validate({"difference": 1, "percent": 2.0}, response_format["schema"])
        return _completion({"content": '{"difference": 1, "percent": 2.0}'})

    result, _ = _run(OpenAIChatModel, brain, compat="llamacpp")
    assert result.output == Comparison(difference=1, percent=2.0), result.detail


def test_react_answers_in_prompted_json() -> None:
    """The text ReAct adapter asks in prompted mode and reads the JSON of its final answer."""

    def brain(received: Received) -> Reply:
        system = received.body["messages"][0]["content"]
        assert "JSON schema" in system
        assert "response_format" not in received.body
        return _completion({"content": 'Final Answer: {"difference": 3, "percent": 4.0}'})

    result, _ = _run(ReActTextModel, brain)
    assert result.output == Comparison(difference=3, percent=4.0), result.detail


def test_a_server_rejecting_response_format_points_to_output_mode() -> None:
    """A 400 on response_format fails the run with a hint naming output_mode."""

    def brain(received: Received) -> Reply:
        error = {"message": "Unrecognized request argument supplied: response_format"}
        return json_reply({"error": {**error, "param": "response_format"}}, 400)

    result, _ = _run(OpenAIChatModel, brain)
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert "output_mode='tool'" in result.detail


def test_output_mode_overrides_the_adapter_choice() -> None:
    """output_mode='prompted' on the chat adapter sends no response_format, only instructions."""

    def brain(received: Received) -> Reply:
        assert "response_format" not in received.body
        return _completion({"content": '{"difference": 0, "percent": 0.0}'})

    result, _ = _run(OpenAIChatModel, brain, output_mode="prompted")
    assert result.output == Comparison(difference=0, percent=0.0), result.detail


@pytest.mark.parametrize("model_type", [OpenAIChatModel, OpenAIResponsesModel, ReActTextModel])
def test_each_adapter_names_its_default_mode(model_type: type) -> None:
    """The adapters say which mode they prefer; the agent takes it when none is chosen."""
    model = model_type("m", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    expected = {"OpenAIChatModel": "native", "OpenAIResponsesModel": "native"}
    assert model.output_mode == expected.get(model_type.__name__, "prompted")
    assert OpenAIChatModel("m", api_key="k", compat="deepseek").output_mode == "tool"


def test_a_profile_without_strict_tools_sends_the_schema_without_strict() -> None:
    """VLLM's profile takes json_schema output but not the strict flag."""
    answers = iter([{"difference": 1, "percent": 1.0}])
    result, requests = _run(OpenAIChatModel, structured_server(answers), compat="vllm")
    assert result.output == Comparison(difference=1, percent=1.0), result.detail
    assert "strict" not in requests[0].body["response_format"]["json_schema"]


def test_a_streamed_json_answer_streams_its_text_and_ends_typed() -> None:
    """Text deltas of the JSON answer reach the stream; its last event holds the Comparison."""
    pieces = ['{"difference": ', "7, ", '"percent": 1.5}']

    def brain(received: Received) -> Reply:
        assert received.body["stream"] is True
        assert received.body["response_format"]["type"] == "json_schema"
        chunks = [
            {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": piece}}]}
            for piece in pieces
        ]
        done = {"index": 0, "delta": {}, "finish_reason": "stop"}
        chunks.append({"id": "c", "model": "m", "choices": [done]})
        return stream_reply(sse(*chunks))

    async def scenario(url: str) -> tuple[list[str], Any]:
        model = OpenAIChatModel("m", api_key="sk-test", base_url=url)
        agent = Agent(model, output_type=Comparison, stream=True)
        async with agent.run_stream("Compare") as stream:
            deltas = [event.text async for event in stream if isinstance(event, TextDelta)]
        return deltas, stream.result

    with OpenAIServer(brain) as server, allow_model_requests(True):
        deltas, result = asyncio.run(scenario(server.url))
    assert "".join(deltas) == "".join(pieces)
    assert result is not None
    assert result.output == Comparison(difference=7, percent=1.5)
