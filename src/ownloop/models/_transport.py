"""The HTTP side of the OpenAI adapters: one official `openai` client, errors mapped, no retries.

The `openai` async client is built with ``max_retries=0`` (ownloop's retry policy owns retrying
and counts every attempt) and explicit timeouts, and reused for every request of an adapter. Its
HTTP client is the SDK's own stack (`openai.DefaultAsyncHttpxClient`, on ``httpx2``): the SDK and
the adapter never mix two HTTP libraries, and every client shares one TLS context and the SDK's
pool limits. Its connection pool belongs to the event loop it was first used on: the client is
closed when that loop shuts down (as ``asyncio.run`` does) or by ``aclose()``, and a later loop
gets a fresh one, so ``run_sync`` may be called again and again. Replies are read raw (headers,
JSON body, or server-sent events) so that the adapters, not the SDK's models, decide how to read
quirky servers. Every request first asks `check_model_requests_allowed`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import httpx2
import openai

from ownloop._text import strip_userinfo
from ownloop.exceptions import PermanentModelError, ProviderError, TransientModelError
from ownloop.models._compat import CompatProfile
from ownloop.models._errors import build_error, envelope_from, scrub
from ownloop.models._port import check_model_requests_allowed
from ownloop.models._sse import ServerSentEvent, iter_events, split_lines

__all__ = ["MAX_REPLY_BYTES", "Connection", "Endpoint", "Reply", "Transport"]

Endpoint = Literal["chat", "responses"]

MAX_REPLY_BYTES = 32 * 1024 * 1024
"""The largest reply read, counted after decompression (a whole body, or a stream in total)."""

_LIMITS = openai.DEFAULT_CONNECTION_LIMITS
"""The SDK's own pool limits: 1,000 connections, 100 kept alive."""


@cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the trust store costs ~80 ms each time."""
    return httpx2.create_ssl_context()


@dataclass(frozen=True, slots=True)
class Connection:
    """Where and how to reach the server.

    Attributes:
        api_key: The API key (never shown in a message or ``repr``).
        base_url: The API base URL; the SDK's default (OpenAI) when ``None``.
        timeout_s: Seconds a request may wait for the server between bytes.
        connect_timeout_s: Seconds to establish a connection.
    """

    api_key: str
    base_url: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0

    @property
    def display_url(self) -> str | None:
        """The base URL without its ``user:password@`` part: the form every message shows."""
        return strip_userinfo(self.base_url) if self.base_url is not None else None

    def __repr__(self) -> str:
        return f"Connection(base_url={self.display_url!r}, timeout_s={self.timeout_s:g})"


def _http_client(connection: Connection) -> httpx2.AsyncClient:
    """An HTTP client on the SDK's own stack, with explicit timeouts, the limits and TLS context."""
    return openai.DefaultAsyncHttpxClient(
        timeout=openai.Timeout(connection.timeout_s, connect=connection.connect_timeout_s),
        limits=_LIMITS,
        verify=_tls_context(),
        follow_redirects=True,
    )


class Reply:
    """An open response: its headers, then either its JSON body or its events.

    Bodies are bounded: more than `MAX_REPLY_BYTES` (a whole body, or a stream's lines in total)
    is a permanent ``invalid_response``, so a misbehaving server cannot exhaust memory.

    Args:
        response: The SDK's streaming response.
    """

    def __init__(self, response: Any) -> None:
        self._response = response
        self.headers: Mapping[str, str] = response.headers
        self.request_id: str | None = response.headers.get("x-request-id") or None

    def _too_large(self) -> PermanentModelError:
        return PermanentModelError(
            f"invalid_response: the reply exceeds {MAX_REPLY_BYTES} bytes",
            category="invalid_response",
            request_id=self.request_id,
        )

    async def _bytes(self) -> AsyncGenerator[bytes, None]:
        """The body's bytes, decompressed in bounded pieces (a gzip bomb never expands whole)."""
        http = getattr(self._response, "http_response", None)
        encoding = http.headers.get("content-encoding", "").strip().lower() if http else ""
        if http is None or encoding not in {"", "identity", "gzip", "x-gzip"}:
            async for chunk in self._response.iter_bytes():
                yield chunk
            return
        if encoding in {"", "identity"}:
            async for chunk in http.aiter_raw():
                yield chunk
            return
        async for piece in _gunzip(http.aiter_raw()):
            yield piece

    async def json(self) -> Any:
        """Return the decoded JSON body.

        Raises:
            ProviderError: If the body is not JSON (a transient ``invalid_response``) or too large.
        """
        chunks: list[bytes] = []
        size = 0
        async for chunk in self._bytes():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise self._too_large()
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except ValueError:
            raise TransientModelError(
                "invalid_response: the server answered 2xx with a body that is not JSON",
                category="invalid_response",
                request_id=self.request_id,
            ) from None

    def events(self) -> AsyncGenerator[ServerSentEvent, None]:
        """Return the body's server-sent events (bytes bounded as they arrive, decompressed)."""
        return iter_events(split_lines(self._bytes(), MAX_REPLY_BYTES, self._too_large))


_PIECE = 64 * 1024


async def _gunzip(raw: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """Decompress gzip members in pieces of at most 64 KiB, whatever the compression ratio."""
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        async for chunk in raw:
            data = chunk
            while data:
                piece = decoder.decompress(data, _PIECE)
                if piece:
                    yield piece
                data = decoder.unconsumed_tail
                if decoder.eof and decoder.unused_data:  # another gzip member follows
                    data = decoder.unused_data
                    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
        tail = decoder.flush()
    except zlib.error:
        raise TransientModelError(
            "invalid_response: the server sent a gzip body that does not decompress",
            category="invalid_response",
        ) from None
    if tail:
        yield tail


def _transport_category(error: BaseException) -> Literal["timeout", "connection"] | None:
    """Classify an HTTP library error by its class names (httpx and httpx2 alike)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & {"TimeoutException", "APITimeoutError", "TimeoutError"}:
        return "timeout"
    if names & {"TransportError", "APIConnectionError", "ConnectionError"}:
        return "connection"
    return None


class Transport:
    """Sends request bodies with the official async client and maps every failure.

    Args:
        connection: Where and how to reach the server.
        adapter: The adapter's name, for the model-request switch and messages.
        profile: The compatibility profile, named in error hints.
        client: An `openai.AsyncOpenAI` (or Azure) client to use instead of building one; its
            retries are turned off, and closing it stays the caller's business.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        adapter: str,
        profile: CompatProfile,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self.connection = connection
        self.adapter = adapter
        self.profile = profile
        self._given = client.with_options(max_retries=0) if client is not None else None
        self._client: openai.AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keeper: AsyncGenerator[None, None] | None = None

    async def _get_client(self) -> openai.AsyncOpenAI:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self.connection.api_key,
                base_url=self.connection.base_url,
                max_retries=0,
                # The SDK takes the HTTP client's (explicit, non-default) timeouts.
                http_client=_http_client(self.connection),
            )
            self._loop = loop
            self._keeper = _close_at_shutdown(self._client)
            await anext(self._keeper)
        return self._client

    async def aclose(self) -> None:
        """Close the client this transport built, if any (a given client is left open)."""
        keeper, self._keeper, self._client, self._loop = self._keeper, None, None, None
        if keeper is not None:
            await keeper.aclose()

    def fail(
        self,
        payload: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
        in_stream: bool = True,
        endpoint: Endpoint | None = None,
    ) -> ProviderError:
        """Build the error for an error payload, with this transport's profile and secrets."""
        return build_error(
            envelope_from(payload),
            status=status,
            headers=headers,
            request_id=request_id,
            profile=self.profile,
            secrets=(self.connection.api_key,),
            in_stream=in_stream,
            endpoint=endpoint,
            base_url=self.connection.display_url,
        )

    @asynccontextmanager
    async def open(self, endpoint: Endpoint, body: dict[str, Any]) -> AsyncIterator[Reply]:
        """Send a body and yield the open reply; every failure becomes a `ProviderError`.

        Args:
            endpoint: ``chat`` (``/chat/completions``) or ``responses`` (``/responses``).
            body: The request body.

        Yields:
            The reply, open until the block ends.

        Raises:
            ConfigurationError: If model requests are switched off.
            ProviderError: On any HTTP, transport or stream failure.
        """
        check_model_requests_allowed(self.adapter)
        client = await self._get_client()
        resource: Any = client.chat.completions if endpoint == "chat" else client.responses
        # The body is wire-ready JSON already: sent as extra_body, it skips the SDK's per-call
        # walk over typed parameters (half the SDK's CPU time per request) and wins every key.
        arguments: dict[str, Any] = {"model": body["model"], "extra_body": body}
        if endpoint == "chat":
            arguments["messages"] = []  # required by the signature; the body's messages win
        if body.get("stream"):
            arguments["stream"] = True
        try:
            async with resource.with_streaming_response.create(**arguments) as response:
                yield Reply(response)
        except openai.APIStatusError as error:
            raise self._status_error(error, endpoint) from None
        except ProviderError:
            raise
        except Exception as error:
            category = _transport_category(error)
            if category is None:
                raise
            detail = scrub(str(error) or type(error).__name__, (self.connection.api_key,))
            where = self.connection.display_url or "OpenAI"
            raise TransientModelError(
                f"{category}: {detail} ({self.adapter} to {where})",
                category=category,
            ) from None

    def _status_error(self, error: openai.APIStatusError, endpoint: Endpoint) -> ProviderError:
        response = error.response
        try:
            content: Any = response.content
        except Exception:  # a body that could not be read: fall back to what the SDK kept
            content = error.body if error.body is not None else error.message
        return self.fail(
            content,
            status=error.status_code,
            headers=response.headers,
            request_id=error.request_id,
            in_stream=False,
            endpoint=endpoint,
        )


async def _close_at_shutdown(client: openai.AsyncOpenAI) -> AsyncGenerator[None, None]:
    """Keep a client until its event loop shuts down its async generators, then close it.

    ``asyncio.run`` closes every started async generator before closing the loop; holding the
    client's lifetime in one ties the connection pool to the loop that owns its sockets.
    """
    try:
        yield  # suspended here until the loop's shutdown (or aclose) ends the generator
    finally:
        await client.close()
