"""What the three OpenAI adapters share: configuration, the transport, and one exchange.

An exchange sends a body, reads the reply whole or as a stream (assembling deltas), measures the
time to the first streamed token, and hands the decoded payload to the adapter's parser. The
adapters differ only in how they build bodies and read payloads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import aclosing
from types import TracebackType
from typing import Any, Self

import openai

from ownloop.budgets import ask_send_budget
from ownloop.contracts import OutputMode, TokenUsage
from ownloop.exceptions import ProviderError, TransientModelError
from ownloop.models._chat_stream import ChatStreamAssembler
from ownloop.models._compat import CompatProfile
from ownloop.models._normalize import ParsedTurn
from ownloop.models._output_format import preferred_output_mode
from ownloop.models._responses_stream import ResponsesStreamAssembler
from ownloop.models._settings import read_settings
from ownloop.models._transport import Connection, Endpoint, Transport

__all__ = ["Fail", "OpenAIAdapter", "PayloadParser"]

Fail = Callable[[Any], ProviderError]
PayloadParser = Callable[[Any, Fail], ParsedTurn]


class OpenAIAdapter:
    """Base of the adapters over the official `openai` client.

    Every argument left out is read from the environment (``OPENAI_API_KEY``, ``OPENAI_MODEL``,
    ``OPENAI_BASE_URL``, ``OWNLOOP_COMPAT``); an explicit argument always wins.

    Args:
        model: The model name.
        api_key: The API key; a local server that needs none still needs a placeholder.
        base_url: The base URL of any OpenAI-compatible server.
        compat: A compatibility profile or its name (``openai`` by default).
        timeout_s: Seconds a request may wait for the server between bytes.
        connect_timeout_s: Seconds to establish a connection.
        client: An `openai.AsyncOpenAI` (or `openai.AsyncAzureOpenAI`) client to use instead of
            building one; its retries are turned off and closing it stays yours.

    Attributes:
        model_name: The model asked for, recorded in every run's versions.
        profile: The compatibility profile in use.

    Raises:
        ConfigurationError: If the key or the model is missing (the message names the variable)
            or the profile is unknown.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        compat: str | CompatProfile | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if client is not None and api_key is None and isinstance(client.api_key, str):
            api_key = client.api_key
        if client is not None and base_url is None:
            base_url = str(client.base_url)
        settings = read_settings(api_key=api_key, model=model, base_url=base_url, compat=compat)
        self.model_name = settings.model
        self.profile = settings.profile
        self._transport = Transport(
            Connection(settings.api_key, settings.base_url, timeout_s, connect_timeout_s),
            adapter=type(self).__name__,
            profile=settings.profile,
            client=client,
        )

    @property
    def output_mode(self) -> OutputMode:
        """How this adapter asks for a typed answer by default (``Agent(output_type=...)``).

        ``native`` (the server's JSON-schema output) unless the profile says the server has
        none (``response_format="none"``); then ``tool``, a final-result tool.
        """
        return preferred_output_mode(self.profile)

    @classmethod
    def from_env(cls, **overrides: Any) -> Self:
        """Build the adapter from the environment; keyword arguments override it.

        Args:
            **overrides: Any constructor argument (``model``, ``api_key``, ``compat``...).

        Returns:
            The adapter.
        """
        return cls(**overrides)

    async def aclose(self) -> None:
        """Close the HTTP client the adapter built (it is also closed with its event loop)."""
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        base_url = self._transport.connection.display_url
        return (
            f"{type(self).__name__}(model={self.model_name!r}, base_url={base_url!r}, "
            f"compat={self.profile.name!r})"
        )

    async def _exchange(
        self,
        endpoint: Endpoint,
        body: dict[str, Any],
        parse: PayloadParser,
        *,
        spent: TokenUsage | None = None,
        sent: int = 0,
    ) -> tuple[ParsedTurn, str | None, float | None]:
        """Send one body and parse the reply, streamed or whole.

        Every request after an attempt's first (``sent`` > 0) first asks the run's budget
        (`ask_send_budget`) with the text it would send, and is not sent when refused.

        Args:
            endpoint: The endpoint.
            body: The request body.
            parse: Reads the decoded payload.
            spent: The usage of the attempt's requests already answered.
            sent: How many requests the attempt already sent.

        Returns:
            The parsed turn, the provider's request id from the headers, and the seconds to the
            first streamed token (``None`` when not streamed).
        """
        if sent:
            sending = body.get("messages", body.get("input"))
            ask_send_budget(json.dumps(sending, ensure_ascii=False), spent or TokenUsage(), sent)
        started = time.perf_counter()
        transport = self._transport
        async with transport.open(endpoint, body) as reply:

            def fail(payload: Any) -> ProviderError:
                return transport.fail(payload, headers=reply.headers, request_id=reply.request_id)

            content_type = reply.headers.get("content-type", "")
            if not body.get("stream") or content_type.startswith("application/json"):
                payload = await reply.json()
                in_band_error = isinstance(payload, dict) and payload.get("error")
                if in_band_error and not payload.get("choices") and not payload.get("output"):
                    raise fail(payload)
                return parse(payload, fail), reply.request_id, None
            assembler: ChatStreamAssembler | ResponsesStreamAssembler
            if endpoint == "chat":
                assembler = ChatStreamAssembler(fail)
            else:
                assembler = ResponsesStreamAssembler(fail)
            async with aclosing(reply.events()) as events:
                async for event in events:
                    assembler.feed(event)
                    if assembler.finished:  # a server holding the connection open must not wait
                        break
            if not assembler.complete:
                raise TransientModelError(
                    "stream_error: the stream ended before the response was complete",
                    category="stream_error",
                    status=200,
                    request_id=reply.request_id,
                )
            first = assembler.first_token_at
            ttft = max(first - started, 0.0) if first is not None else None
            return parse(assembler.body(), fail), reply.request_id, ttft
