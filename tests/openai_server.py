"""A local OpenAI-compatible HTTP server for tests, and the request-schema check.

`OpenAIServer` is a real HTTP/1.1 server on 127.0.0.1 (an ephemeral port) running in a thread. It
answers each POST with the next scripted `Reply` (status, headers, a whole body or server-sent
events written as separate chunks), or with a function of the request, and records every request.
`request_schema_errors` validates a request body against the OpenAI OpenAPI spec kept in
``tests/fixtures/openai/spec`` (a copy of the shared conformance corpus).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from ownloop.contracts import Message, ModelRequest, ModelSettings, ToolSpec, UserMessage
from ownloop.exceptions import ProviderError
from ownloop.models import allow_model_requests

CONFORMANCE = Path(__file__).resolve().parent / "fixtures" / "openai"
"""The conformance corpus, copied into the repository (see its PROVENANCE.md)."""


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        status: The HTTP status.
        headers: Response headers.
        body: A whole body (bytes, or JSON-ready data encoded for you).
        events: Server-sent event text, each piece written and flushed as its own chunk.
        delay_s: Seconds to wait before answering.
        abort: Drop the connection after the events, without ending the chunked body.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    events: list[str] | None = None
    delay_s: float = 0.0
    abort: bool = False


@dataclass
class Received:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def sse(*payloads: Any, done: bool = True) -> list[str]:
    """Frame JSON payloads as server-sent events (``data: ...`` blocks), optionally ``[DONE]``."""
    events = [f"data: {json.dumps(payload)}\n\n" for payload in payloads]
    return [*events, "data: [DONE]\n\n"] if done else events


def json_reply(body: Any, status: int = 200, **headers: str) -> Reply:
    """A JSON reply."""
    return Reply(status, {"content-type": "application/json", **headers}, body)


def stream_reply(events: Iterable[str], **headers: str) -> Reply:
    """A server-sent-events reply."""
    return Reply(200, {"content-type": "text/event-stream", **headers}, events=list(events))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection ends on its own
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every exchange.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        received = Received(
            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
        )
        reply = self.server.owner.answer(received)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.events is None:
            data = reply.body
            if not isinstance(data, bytes):
                data = json.dumps(data).encode() if not isinstance(data, str) else data.encode()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for piece in reply.events:
            chunk = piece.encode()
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        if reply.abort:
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: OpenAIServer


class OpenAIServer:
    """A loopback server that plays scripted replies, or answers with a function.

    Args:
        respond: Answers each request when given; otherwise replies are taken from the script
            (`add`), and a request with no reply left gets a 500 that fails the test loudly.

    Attributes:
        requests: Every request received, in order.
    """

    def __init__(self, respond: Callable[[Received], Reply] | None = None) -> None:
        self._respond = respond
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[Received] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL to give a client (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    @property
    def unplayed(self) -> int:
        """How many scripted replies are left."""
        return len(self._script)

    def answer(self, received: Received) -> Reply:
        """Record a request and return its reply."""
        with self._lock:
            self.requests.append(received)
            if self._respond is not None:
                return self._respond(received)
            if self._script:
                return self._script.popleft()
        return json_reply({"error": {"message": "fake server: no scripted reply left"}}, 500)

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@cache
def _validators() -> dict[str, Any]:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    spec_path = CONFORMANCE / "spec" / "openapi.yaml"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with spec_path.open(encoding="utf-8") as handle:
        spec = yaml.load(handle, Loader=loader)
    registry = Registry().with_resource(
        "urn:openai", Resource.from_contents(spec, default_specification=DRAFT202012)
    )

    def validator(name: str) -> Any:
        schema = {"$ref": f"urn:openai#/components/schemas/{name}"}
        return Draft202012Validator(schema, registry=registry)

    return {
        "/v1/chat/completions": validator("CreateChatCompletionRequest"),
        "/v1/responses": validator("CreateResponse"),
    }


def request_schema_errors(received: Received) -> list[str]:
    """Validate a received request body against the OpenAPI request schema of its path.

    Returns:
        The validation messages (empty when the body is valid).
    """
    validator = _validators().get(received.path)
    if validator is None:
        return [f"no request schema for path {received.path}"]
    errors = sorted(validator.iter_errors(received.body), key=lambda error: list(error.path))
    return [f"{list(error.path)}: {error.message[:300]}" for error in errors]


WEATHER = ToolSpec(
    name="weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
"""A strict tool for request-mapping tests."""


def ask(
    *messages: Message | str,
    tools: tuple[ToolSpec, ...] = (WEATHER,),
    step: int = 1,
    **settings: Any,
) -> ModelRequest:
    """Build a request: strings become user messages; keyword arguments are `ModelSettings`."""
    conversation = tuple(UserMessage(content=m) if isinstance(m, str) else m for m in messages)
    return ModelRequest(
        run_id="run-test",
        step=step,
        messages=conversation or (UserMessage(content="hi"),),
        tools=tools,
        settings=ModelSettings(**settings),
    )


def play(
    adapter: Any, replies: Iterable[Reply], requests: Iterable[ModelRequest], **options: Any
) -> tuple[list[Any], list[Received]]:
    """Send the requests in order, in one event loop, to a server playing the replies.

    Returns:
        Each request's outcome (a `ModelResponse` or the `ProviderError` raised) and every request
        the server received.
    """
    options.setdefault("api_key", "sk-test-0123456789")
    with OpenAIServer() as server, allow_model_requests(True):
        server.add(*replies)
        options.setdefault("base_url", server.url)

        async def run() -> list[Any]:
            outcomes: list[Any] = []
            async with adapter(options.pop("model", "test-model"), **options) as model:
                for request in requests:
                    try:
                        outcomes.append(await model.respond(request))
                    except ProviderError as error:
                        outcomes.append(error)
            return outcomes

        outcomes = asyncio.run(run())
    return outcomes, server.requests
