"""Every provider failure becomes a `ProviderError` with a category, a retry decision and hints."""

from __future__ import annotations

import asyncio
import socket
from email.utils import formatdate
from time import time

import pytest

from ownloop import Agent, RunStatus
from ownloop.exceptions import ConfigurationError, ProviderError, TransientModelError
from ownloop.models import OpenAIChatModel, OpenAIResponsesModel, allow_model_requests
from ownloop.retry import RetryPolicy
from ownloop.testing import FakeClock

from .openai_server import OpenAIServer, Reply, ask, json_reply, play

KEY = "sk-planted-SECRET-abcdef0123456789"


def fail(reply: Reply, adapter: type = OpenAIChatModel, **options: object) -> ProviderError:
    """Send one request to a server answering ``reply`` and return the error raised."""
    (outcome,), _ = play(adapter, [reply], [ask("hi")], **options)
    assert isinstance(outcome, ProviderError), outcome
    return outcome


def error_body(message: str, code: object = None, **fields: object) -> dict[str, object]:
    """An OpenAI-style error envelope."""
    return {"error": {"message": message, "code": code, **fields}}


@pytest.mark.parametrize(
    ("headers", "message", "expected"),
    [
        ({"retry-after": "2"}, "Rate limit reached", 2.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, "Rate limit reached", 1.5),
        ({}, "Rate limit reached. Please try again in 20s.", 20.0),
        ({}, "Rate limit reached. Please try again in 1.054s.", 1.054),
        ({}, "Rate limit reached. Please try again in 250ms.", 0.25),
        ({}, "Limit reached; try again in 1m30s", 90.0),
        ({"retry-after": "soon"}, "Rate limit reached", None),
    ],
)
def test_rate_limit_hints_become_retry_after(
    headers: dict[str, str], message: str, expected: float | None
) -> None:
    """Retry-After (seconds), retry-after-ms and 'try again in …' hints become retry_after."""
    error = fail(json_reply(error_body(message, "rate_limit_exceeded"), 429, **headers))
    assert (error.category, error.retryable, error.status) == ("rate_limit", True, 429)
    if expected is None:
        assert error.retry_after is None
    else:
        assert error.retry_after == pytest.approx(expected)


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    """A Retry-After given as an HTTP date is the seconds from now until then."""
    error = fail(
        json_reply(error_body("busy"), 503, **{"retry-after": formatdate(time() + 30, usegmt=True)})
    )
    assert error.category == "overloaded"
    assert error.retry_after is not None
    assert 25 <= error.retry_after <= 31


def test_hints_on_permanent_errors_are_not_retry_hints() -> None:
    """A permanent error carries no retry_after, whatever its headers say."""
    error = fail(json_reply(error_body("bad request"), 400, **{"retry-after": "5"}))
    assert (error.category, error.retryable, error.retry_after) == ("invalid_request", False, None)


def test_a_hint_beyond_the_policy_fails_the_run_fast_with_the_value() -> None:
    """A retry-after longer than the policy's maximum fails the run at once and names the value."""
    reply = json_reply(error_body("Rate limit"), 429, **{"retry-after": "3600"})
    clock = FakeClock()
    with OpenAIServer(lambda received: reply) as server, allow_model_requests(True):
        model = OpenAIChatModel("m", api_key=KEY, base_url=server.url)
        agent = Agent(model, clock=clock, retry=RetryPolicy(max_retry_after_s=60))
        result = agent.run_sync("q")
    assert result.status is RunStatus.FAILED
    assert "3600" in result.detail
    assert clock.slept == []


@pytest.mark.parametrize(
    ("status", "body", "category", "retryable"),
    [
        (502, "<html>Bad gateway</html>", "server_error", True),
        (503, "just a string", "overloaded", True),
        (529, error_body("Overloaded"), "overloaded", True),
        (500, [error_body("upstream failed", "server_error")], "server_error", True),
        (400, {"error": "a bare error string", "code": 400}, "invalid_request", False),
        (408, error_body("request timed out"), "timeout", True),
        (409, error_body("conflict"), "server_error", True),
        (403, error_body("not allowed"), "permission", False),
        (413, error_body("payload too big"), "request_too_large", False),
        (418, error_body("teapot"), "invalid_request", False),
        (422, {"detail": "field required"}, "invalid_request", False),
        (400, error_body("prompt is too long: 300000 tokens"), "context_length_exceeded", False),
        (400, error_body("Invalid schema for function 'f': ..."), "invalid_tool_schema", False),
        (404, error_body("File Not Found"), "endpoint_not_supported", False),
    ],
)
def test_error_envelopes_of_any_shape_are_categorized(
    status: int, body: object, category: str, retryable: bool
) -> None:
    """Wrapped, bare, string, array and HTML error bodies all map to a category and a decision."""
    error = fail(Reply(status, {"content-type": "application/json"}, body))
    assert (error.category, error.retryable, error.status) == (category, retryable, status)
    assert error.message  # never empty, even when the server said nothing useful
    assert isinstance(error, TransientModelError) is retryable


@pytest.mark.parametrize(
    ("message", "parameter", "compat", "hint"),
    [
        (
            "Unrecognized request argument supplied: stream_options",
            "stream_options",
            None,
            "'compatible'",
        ),
        (
            "Unsupported parameter: 'max_tokens' is not supported.",
            "max_tokens",
            "compatible",
            "'openai'",
        ),
        (
            "Unsupported parameter: 'temperature' is not supported.",
            "temperature",
            None,
            "ModelSettings.temperature",
        ),
        (
            "Unsupported parameter: 'max_completion_tokens'.",
            "max_completion_tokens",
            "compatible",
            "already avoids",
        ),
        (
            "Unknown parameter: 'tools[0].function.strict'.",
            "tools[0].function.strict",
            None,
            "OWNLOOP_COMPAT=compatible",
        ),
    ],
)
def test_an_unsupported_parameter_names_the_profile_that_avoids_it(
    message: str, parameter: str, compat: str | None, hint: str
) -> None:
    """The error names the rejected parameter and the profile that does not send it."""
    error = fail(json_reply(error_body(message), 400), compat=compat)
    assert (error.category, error.parameter) == ("unsupported_parameter", parameter)
    assert hint in error.message


def test_a_missing_responses_endpoint_names_the_base_url_path_then_the_chat_api() -> None:
    """A 404 from the Responses API: check the base URL's path (/v1), else try the chat API."""
    error = fail(json_reply({"code": 404, "message": "File Not Found"}, 404), OpenAIResponsesModel)
    assert error.category == "endpoint_not_supported"
    assert "check the base URL's path (http://127.0.0.1:" in error.message
    assert "under /v1" in error.message
    assert error.message.endswith("try OWNLOOP_API=chat")


def test_a_missing_chat_endpoint_names_the_base_url_path_and_not_the_chat_api() -> None:
    """A 404 while chat is already in use: the hint is the path, never OWNLOOP_API=chat."""
    error = fail(json_reply({"code": 404, "message": "File Not Found"}, 404), OpenAIChatModel)
    assert error.category == "endpoint_not_supported"
    assert "check the base URL's path" in error.message
    assert "OWNLOOP_API" not in error.message


def test_error_messages_never_contain_the_api_key() -> None:
    """A server echoing the key (or any bearer token) gets it scrubbed from the message."""
    body = error_body(f"Invalid key {KEY}; header was Bearer {KEY} and sk-other-1234567890")
    error = fail(json_reply(body, 401), api_key=KEY)
    assert error.category == "authentication"
    for text in (error.message, str(error), repr(error), str(error.describe())):
        assert KEY not in text
        assert "sk-other-1234567890" not in text


def test_a_request_id_header_is_kept_on_errors() -> None:
    """The provider's x-request-id travels on the error for support and audit."""
    error = fail(json_reply(error_body("boom"), 500, **{"x-request-id": "req_abc"}))
    assert error.request_id == "req_abc"


def test_a_refused_connection_is_a_transient_connection_error() -> None:
    """Nothing listening on the port is a retryable connection failure."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = fail(Reply(), base_url=f"http://127.0.0.1:{port}/v1")
    assert (error.category, error.retryable) == ("connection", True)


def test_a_slow_server_is_a_transient_timeout() -> None:
    """A server slower than the adapter's timeout is a retryable timeout."""
    error = fail(Reply(200, {"content-type": "application/json"}, {}, delay_s=1.0), timeout_s=0.1)
    assert (error.category, error.retryable) == ("timeout", True)


def test_a_stream_cut_mid_way_is_transient() -> None:
    """A connection dropped in the middle of a stream is retryable."""
    chunk = 'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    reply = Reply(200, {"content-type": "text/event-stream"}, events=[chunk], abort=True)
    (outcome,), _ = play(OpenAIChatModel, [reply], [ask("hi", stream=True)])
    assert isinstance(outcome, ProviderError)
    assert outcome.retryable
    assert outcome.category in {"connection", "stream_error"}


def test_a_success_status_with_a_body_that_is_not_json_is_retried() -> None:
    """A 200 whose body is not JSON is a transient invalid response."""
    error = fail(Reply(200, {"content-type": "application/json"}, b"<html>oops</html>"))
    assert (error.category, error.retryable) == ("invalid_response", True)


def test_a_success_status_carrying_an_error_raises_it() -> None:
    """A 200 whose body is an error envelope is an error, not an empty answer."""
    error = fail(json_reply(error_body("quota", "insufficient_quota")))
    assert (error.category, error.retryable, error.status) == ("quota_exhausted", False, 200)


def test_requests_are_refused_while_model_requests_are_switched_off() -> None:
    """With requests switched off (as in this suite), an adapter refuses before any HTTP call."""
    model = OpenAIChatModel("m", api_key=KEY, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="OWNLOOP_ALLOW_MODEL_REQUESTS"):
        asyncio.run(model.respond(ask("hi")))


def test_replies_larger_than_the_bound_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole body or a stream beyond the reply bound is a permanent invalid response."""
    monkeypatch.setattr("ownloop.models._transport.MAX_REPLY_BYTES", 1000)
    big = {"choices": [{"index": 0, "message": {"content": "x" * 2000}, "finish_reason": "stop"}]}
    events = [
        f'data: {{"choices": [{{"index": 0, "delta": {{"content": "{"y" * 200}"}}}}]}}\n\n'
    ] * 8
    stream = Reply(200, {"content-type": "text/event-stream"}, events=events)
    outcomes, _ = play(
        OpenAIChatModel, [json_reply(big), stream], [ask("hi"), ask("hi", stream=True)]
    )
    for error in outcomes:
        assert isinstance(error, ProviderError)
        assert (error.category, error.retryable) == ("invalid_response", False)
        assert "exceeds 1000 bytes" in error.message
