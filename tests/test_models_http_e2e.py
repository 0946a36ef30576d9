"""End to end over HTTP: the research demo run by `Agent` against a local OpenAI-compatible server.

The server plays a scripted model at the wire level (it reads the tool results in the request and
answers with the next call, or the cited answer), so every layer runs for real: the loop, the
adapter, the official `openai` client, HTTP, SSE streaming, retries and the budgets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from ownloop import Agent, Limits, RunResult, RunStatus, StopReason
from ownloop.demo.research import build_agent, build_registry
from ownloop.models import (
    OpenAIChatModel,
    OpenAIResponsesModel,
    ReActTextModel,
    allow_model_requests,
)
from ownloop.testing import FakeClock
from ownloop.validators import citations_observed

from .openai_server import (
    OpenAIServer,
    Received,
    Reply,
    json_reply,
    request_schema_errors,
    sse,
    stream_reply,
)

QUESTION = "How should a safe AI agent be evaluated?"
USAGE = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
DOCUMENT_ID = re.compile(r"R-0\d")


def _plan(results: list[str]) -> tuple[str, Any]:
    """The scripted model's next move from the tool results so far: search, read, answer."""
    if not results:
        return "call", [("search_documents", {"query": "safe agent evaluated"})]
    if len(results) == 1:
        hits = DOCUMENT_ID.findall(results[0])[:2]
        return "call", [("read_document", {"document_id": hit}) for hit in hits]
    cited = sorted({found for result in results[1:] for found in DOCUMENT_ID.findall(result)})
    return "answer", "Evaluate before autonomy. " + " ".join(f"[{doc}]" for doc in cited)


def _chat_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def chat_brain(received: Received) -> Reply:
    """Answer chat requests as a tool-calling model would."""
    step = len([m for m in received.body["messages"] if m["role"] == "assistant"])
    kind, plan = _plan(_chat_results(received.body))
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if kind == "call":
        message["tool_calls"] = [
            {
                "id": f"call_{step}_{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for index, (name, arguments) in enumerate(plan)
        ]
    else:
        message["content"] = plan
    finish = "tool_calls" if kind == "call" else "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    completion = {"id": f"chatcmpl-{step}", "model": "scripted", "choices": [choice]}
    if not received.body.get("stream"):
        return json_reply({**completion, "usage": USAGE}, **{"x-request-id": f"req-{step}"})
    return stream_reply(sse(*_chat_chunks(message, finish, step)))


def _chat_chunks(message: dict[str, Any], finish: str, step: int) -> list[dict[str, Any]]:
    """Split one reply into realistic deltas: id and name first, then argument fragments."""
    head = {"id": f"chatcmpl-{step}", "model": "scripted"}
    chunks: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
    ]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        first = {"index": index, "id": call["id"], "type": "function"}
        first["function"] = {"name": call["function"]["name"], "arguments": ""}
        pieces = [first] + [
            {"index": index, "function": {"arguments": arguments[i : i + 7]}}
            for i in range(0, len(arguments), 7)
        ]
        chunks += [
            {**head, "choices": [{"index": 0, "delta": {"tool_calls": [p]}}]} for p in pieces
        ]
    text = message.get("content") or ""
    for i in range(0, len(text), 9):
        chunks.append({**head, "choices": [{"index": 0, "delta": {"content": text[i : i + 9]}}]})
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**head, "choices": [], "usage": USAGE})
    return chunks


def responses_brain(received: Received) -> Reply:
    """Answer Responses requests, with an encrypted reasoning item that must come back inline."""
    items = received.body["input"]
    step = len([i for i in items if i.get("type") == "reasoning"])
    results = [str(i["output"]) for i in items if i.get("type") == "function_call_output"]
    kind, plan = _plan(results)
    output: list[dict[str, Any]] = [
        {
            "type": "reasoning",
            "id": f"rs_{step}",
            "summary": [],
            "encrypted_content": f"opaque-{step}",
        }
    ]
    if kind == "call":
        output += [
            {
                "type": "function_call",
                "id": f"fc_{step}_{index}",
                "call_id": f"call_{step}_{index}",
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
            for index, (name, arguments) in enumerate(plan)
        ]
    else:
        part = {"type": "output_text", "text": plan, "annotations": []}
        output.append(
            {"type": "message", "id": f"msg_{step}", "role": "assistant", "content": [part]}
        )
    usage = {"input_tokens": 30, "output_tokens": 8, "total_tokens": 38}
    response = {
        "id": f"resp_{step}",
        "status": "completed",
        "model": "scripted",
        "output": output,
        "usage": usage,
    }
    if not received.body.get("stream"):
        return json_reply(response)
    events = [
        {
            "type": "response.created",
            "response": {**response, "output": [], "status": "in_progress"},
        }
    ]
    for index, item in enumerate(output):
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return stream_reply(sse(*events, done=False))


def react_brain(received: Received) -> Reply:
    """Answer as a text-only model in the ReAct format; its very first reply ignores the format."""
    said = [m["content"] for m in received.body["messages"] if m["role"] == "user"]
    observations = [text for text in said if text.startswith("Observation:")]
    results = [text for text in observations if "did not follow the format" not in text]
    if not observations:
        text = "I think I should look this up somewhere."
    elif not results:
        text = 'Thought: search first.\nAction: search_documents\nAction Input: {"query": "safe"}'
    elif len(results) == 1:
        hit = DOCUMENT_ID.findall(results[0])[0]
        text = f'Thought: read it.\nAction: read_document\nAction Input: {{"document_id": "{hit}"}}'
    else:
        cited = sorted({found for result in results[1:] for found in DOCUMENT_ID.findall(result)})
        text = "Thought: done.\nFinal Answer: Evaluate first. " + " ".join(f"[{d}]" for d in cited)
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    return json_reply({"id": "react", "model": "scripted", "choices": [choice], "usage": USAGE})


def _run(
    model_type: type, brain: Callable[[Received], Reply], stream: bool = False
) -> tuple[RunResult, OpenAIServer]:
    with OpenAIServer(brain) as server, allow_model_requests(True):
        model = model_type("scripted", api_key="sk-e2e", base_url=server.url)
        agent = Agent(
            model,
            build_registry(),
            limits=Limits(max_steps=6, max_tool_calls=6),
            validators=[citations_observed(min_citations=1)],
            instructions="Answer with citations.",
            stream=stream,
        )
        result = agent.run_sync(QUESTION)
    return result, server


def _assert_cited_answer(result: RunResult, server: OpenAIServer) -> None:
    assert (result.status, result.stop_reason) == (RunStatus.COMPLETED, StopReason.FINAL_OUTPUT), (
        result.detail
    )
    assert "[R-02]" in (result.output or "")
    assert {item.id for item in result.evidence} >= {"R-02"}
    assert [error for r in server.requests for error in request_schema_errors(r)] == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_research_demo_over_chat_completions(stream: bool) -> None:
    """The demo completes over chat (search, parallel reads, cited answer); streams record TTFT."""
    result, server = _run(OpenAIChatModel, chat_brain, stream=stream)
    _assert_cited_answer(result, server)
    assert result.usage.steps == 3
    assert result.usage.input_tokens == 60
    assert all(bool(r.body.get("stream")) is stream for r in server.requests)
    responded = [event for event in result.trace if event.kind == "model_responded"]
    assert [event.model for event in responded] == ["scripted"] * 3
    if stream:
        assert all(event.time_to_first_token_s is not None for event in responded)
    else:
        assert [event.provider_request_id for event in responded] == ["req-0", "req-1", "req-2"]
    assert result.versions.model == "scripted"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_research_demo_over_responses_carries_reasoning_inline(stream: bool) -> None:
    """Over Responses, each reasoning item is replayed inline (store=false) before its calls."""
    result, server = _run(OpenAIResponsesModel, responses_brain, stream=stream)
    _assert_cited_answer(result, server)
    last = server.requests[-1].body
    assert last["store"] is False
    kinds = [item.get("type", item.get("role")) for item in last["input"]]
    assert kinds[:2] == ["system", "user"]
    assert kinds.count("reasoning") == 2
    for index, kind in enumerate(kinds):
        if kind == "reasoning":
            assert kinds[index + 1] == "function_call"
    encrypted = [
        item["encrypted_content"] for item in last["input"] if item.get("type") == "reasoning"
    ]
    assert encrypted == ["opaque-0", "opaque-1"]


def test_research_demo_over_text_react() -> None:
    """A model without tool calling completes in ReAct text; a bad first reply is re-asked."""
    result, server = _run(ReActTextModel, react_brain)
    _assert_cited_answer(result, server)
    first = server.requests[0].body
    assert "tools" not in first
    assert first["stop"] == ["Observation:"]
    assert "search_documents" in first["messages"][0]["content"]
    assert "did not follow the format" in server.requests[1].body["messages"][-1]["content"]
    assert result.usage.input_tokens == 20 * len(server.requests)


def test_rate_limit_then_success_is_retried_after_the_hint() -> None:
    """A 429 with retry-after is retried after exactly that wait, and the retry is in the trace."""
    replies = iter(
        [
            json_reply(
                {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
                429,
                **{"retry-after": "2"},
            )
        ]
    )

    def brain(received: Received) -> Reply:
        return next(replies, None) or chat_brain(received)

    clock = FakeClock()
    with OpenAIServer(brain) as server, allow_model_requests(True):
        model = OpenAIChatModel("scripted", api_key="sk-e2e", base_url=server.url)
        agent = Agent(
            model, build_registry(), clock=clock, validators=[citations_observed(min_citations=1)]
        )
        result = agent.run_sync(QUESTION)
    assert result.status is RunStatus.COMPLETED, result.detail
    assert clock.slept == [2.0]
    failed = next(event for event in result.trace if event.kind == "model_failed")
    assert (failed.error["category"], failed.error["status"], failed.retryable) == (
        "rate_limit",
        429,
        True,
    )
    retry = next(event for event in result.trace if event.kind == "retry_scheduled")
    assert (retry.delay_s, retry.next_attempt) == (2.0, 2)
    assert result.usage.model_attempts == result.usage.steps + 1


def test_server_error_storm_exhausts_the_attempt_budget() -> None:
    """Endless 500s are retried with backoff until the run's model attempt budget runs out."""
    storm = json_reply(
        {"error": {"message": "The server had an error", "type": "server_error"}}, 500
    )
    clock = FakeClock()
    with OpenAIServer(lambda received: storm) as server, allow_model_requests(True):
        model = OpenAIChatModel("scripted", api_key="sk-e2e", base_url=server.url)
        agent = Agent(
            model,
            build_registry(),
            clock=clock,
            limits=Limits(max_model_attempts=3, max_retries_per_call=5),
        )
        result = agent.run_sync(QUESTION)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_MODEL_ATTEMPTS)
    assert len(server.requests) == 3
    assert len(clock.slept) == 2
    assert all(
        event.error["category"] == "server_error"
        for event in result.trace
        if event.kind == "model_failed"
    )


def test_permanent_error_fails_the_run_without_retry_or_key() -> None:
    """A 401 fails the run at once; the planted key appears nowhere in the result or the trace."""
    key = "sk-planted-SECRET-0123456789abcdef"
    body = {"error": {"message": f"Incorrect API key provided: {key}.", "code": "invalid_api_key"}}
    with OpenAIServer(lambda received: json_reply(body, 401)) as server, allow_model_requests(True):
        model = OpenAIChatModel("scripted", api_key=key, base_url=server.url)
        result = build_agent(model).run_sync(QUESTION)
        assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert result.usage.model_attempts == 1
    assert key not in result.model_dump_json()
    assert key not in repr(model)
    assert "authentication" in result.detail
