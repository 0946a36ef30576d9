"""Streams that cannot exhaust memory or drop a good reply, against real loopback servers."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from tenacity import wait_none

from ownloop import Agent, Limits
from ownloop.exceptions import PermanentModelError, ProviderError, TransientToolError
from ownloop.models import OpenAIChatModel, OpenAIResponsesModel, allow_model_requests
from ownloop.models._transport import MAX_REPLY_BYTES
from ownloop.retry import RetryPolicy
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry

from .openai_server import ask
from .raw_http import RawServer, chunk, chunked_head, send_all


def respond(adapter: type, url: str, **options: Any) -> Any:
    """One streamed request's outcome (a response or the provider error)."""

    async def run() -> Any:
        async with adapter("m", api_key="sk-test", base_url=url, **options) as model:
            try:
                return await model.respond(ask("q", stream=True))
            except ProviderError as error:
                return error

    with allow_model_requests(True):
        return asyncio.run(run())


def chat_events(text: str) -> bytes:
    """A complete chat stream carrying ``text``, written without escaping non-ASCII."""
    first = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    last = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    payloads = (json.dumps(first, ensure_ascii=False), json.dumps(last, ensure_ascii=False))
    return "".join(f"data: {p}\r\n\r\n" for p in payloads).encode() + b"data: [DONE]\n\n"


def test_raw_unicode_line_separators_inside_json_do_not_split_an_event() -> None:
    """U+2028, U+2029 and U+0085 sent raw inside a JSON string leave the reply whole."""
    text = "one\u2028two\u2029three\x85four\x1cfive"

    def write(sock: socket.socket) -> None:
        send_all(sock, [chunked_head(), chunk(chat_events(text)), b"0\r\n\r\n"])

    with RawServer(write) as server:
        outcome = respond(OpenAIChatModel, server.url)
    assert outcome.final_output == text


def hold_open(payload: bytes) -> Any:
    """A writer that sends ``payload`` as one chunk and then keeps the connection open."""

    def write(sock: socket.socket) -> None:
        send_all(sock, [chunked_head(), chunk(payload)])
        server_stop.wait(30)

    server_stop: Any = None

    def bind(server: RawServer) -> None:
        nonlocal server_stop
        server_stop = server.stop

    write.bind = bind  # type: ignore[attr-defined]
    return write


def test_chat_stream_ends_at_done_while_the_server_holds_the_connection() -> None:
    """[DONE] ends the read: a server that never closes does not make the run wait."""
    writer = hold_open(chat_events("complete"))
    with RawServer(writer) as server:
        writer.bind(server)
        started = time.perf_counter()
        outcome = respond(OpenAIChatModel, server.url, timeout_s=20)
        elapsed = time.perf_counter() - started
    assert outcome.final_output == "complete"
    assert elapsed < 5


def test_responses_stream_ends_at_the_completed_event_while_the_connection_stays_open() -> None:
    """``response.completed`` ends the read even when no ``[DONE]`` or close follows."""
    final = {
        "type": "response.completed",
        "response": {
            "id": "r",
            "model": "m",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}],
                }
            ],
        },
    }
    writer = hold_open(f"event: response.completed\ndata: {json.dumps(final)}\n\n".encode())
    with RawServer(writer) as server:
        writer.bind(server)
        started = time.perf_counter()
        outcome = respond(OpenAIResponsesModel, server.url, timeout_s=20)
        elapsed = time.perf_counter() - started
    assert outcome.final_output == "done"
    assert elapsed < 5


def endless_line(pieces: int, size: int = 1 << 20) -> Iterator[bytes]:
    """``data: aaaa...`` with no newline, as chunks of ``size`` bytes."""
    yield chunked_head()
    yield chunk(b"data: ")
    block = chunk(b"a" * size)
    for _ in range(pieces):
        yield block


def test_one_endless_sse_line_stops_at_the_reply_cap_with_bounded_memory() -> None:
    """A line that never ends is cut at MAX_REPLY_BYTES as it arrives; memory stays bounded."""
    pieces = 5 * MAX_REPLY_BYTES // (1 << 20)  # unbounded, this would peak past 160 MiB

    def write(sock: socket.socket) -> None:
        send_all(sock, endless_line(pieces))

    with RawServer(write) as server:
        tracemalloc.start()
        try:
            outcome = respond(OpenAIChatModel, server.url)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert isinstance(outcome, PermanentModelError)
    assert outcome.category == "invalid_response"
    assert peak < 2.5 * MAX_REPLY_BYTES


def test_a_gzip_bomb_stream_is_cut_at_the_cap_after_decompression() -> None:
    """A small gzip body expanding far past the cap stops at the cap, never expanding whole."""
    encoder = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    body = bytearray(encoder.compress(b"data: "))
    block = b"a" * (1 << 20)
    for _ in range(4 * MAX_REPLY_BYTES // len(block)):  # 128 MiB of text, four times the cap
        body += encoder.compress(block)
    body += encoder.flush()
    compressed = bytes(body)

    def write(sock: socket.socket) -> None:
        pieces = [compressed[i : i + 65536] for i in range(0, len(compressed), 65536)]
        send_all(sock, [chunked_head(content_encoding="gzip"), *map(chunk, pieces), b"0\r\n\r\n"])

    with RawServer(write) as server:
        tracemalloc.start()
        try:
            outcome = respond(OpenAIChatModel, server.url)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert isinstance(outcome, PermanentModelError)
    assert outcome.category == "invalid_response"
    assert peak < 2.5 * MAX_REPLY_BYTES


def test_a_gzip_stream_within_the_cap_is_read_whole() -> None:
    """A gzip-encoded stream (in several members) decodes and completes."""
    events = chat_events("zipped")
    members = zlib.compress(events[:40], wbits=zlib.MAX_WBITS | 16)
    members += zlib.compress(events[40:], wbits=zlib.MAX_WBITS | 16)

    def write(sock: socket.socket) -> None:
        send_all(sock, [chunked_head(content_encoding="gzip"), chunk(members), b"0\r\n\r\n"])

    with RawServer(write) as server:
        outcome = respond(OpenAIChatModel, server.url)
    assert outcome.final_output == "zipped"


def test_a_body_that_is_not_gzip_is_a_typed_error() -> None:
    """A reply claiming gzip that does not decompress is a typed ``invalid_response``."""

    def write(sock: socket.socket) -> None:
        send_all(sock, [chunked_head(content_encoding="gzip"), chunk(b"not gzip"), b"0\r\n\r\n"])

    with RawServer(write) as server:
        outcome = respond(OpenAIChatModel, server.url)
    assert isinstance(outcome, ProviderError)
    assert outcome.category == "invalid_response"


@pytest.mark.parametrize("hint", [float("nan"), "soon", -3.0])
def test_a_nan_or_unusable_tool_retry_after_is_treated_as_absent(hint: Any) -> None:
    """A tool's NaN (or non-numeric) retry_after is no hint: the run retries and completes."""
    registry = ToolRegistry()
    attempts: list[int] = []

    @registry.tool(effect="read")
    def flaky() -> str:
        """Fail once, then answer."""
        attempts.append(1)
        if len(attempts) == 1:
            raise TransientToolError("busy", retry_after=hint)
        return "ok"

    model = ScriptedModel([tool_call("flaky"), final("done")])
    agent = Agent(
        model, registry, limits=Limits(deadline_s=30), retry=RetryPolicy(wait=wait_none())
    )
    result = agent.run_sync("go")
    assert result.status == "completed", result.detail
    assert len(attempts) == 2


def whole(content_encoding: str, body: bytes) -> Any:
    """A writer sending one whole (content-length) reply with the given encoding."""

    def write(sock: socket.socket) -> None:
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            f"content-encoding: {content_encoding}\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        )
        send_all(sock, [head.encode(), body])

    return write


def test_a_gzip_body_read_to_its_end_is_decoded_whole() -> None:
    """A gzip stream without ``[DONE]`` is read to its end and flushed."""
    events = chat_events("flushed").replace(b"data: [DONE]\n\n", b"")
    with RawServer(whole("gzip", zlib.compress(events, wbits=zlib.MAX_WBITS | 16))) as server:
        outcome = respond(OpenAIChatModel, server.url)
    assert outcome.final_output == "flushed"


def test_an_encoding_ownloop_does_not_decode_itself_is_left_to_httpx() -> None:
    """A deflate body is decoded by the HTTP client, still counted before line splitting."""
    with RawServer(whole("deflate", zlib.compress(chat_events("deflated")))) as server:
        outcome = respond(OpenAIChatModel, server.url)
    assert outcome.final_output == "deflated"
