"""Canaries: secrets planted in every input of a run never reach any trace sink."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from ownloop import (
    Accept,
    Agent,
    Evidence,
    PermanentModelError,
    Reject,
    RunResult,
    Sensitive,
    TransientModelError,
)
from ownloop.contracts import ModelResponse, ToolCall
from ownloop.models import OpenAIChatModel, allow_model_requests
from ownloop.testing import FakeClock, ScriptedModel, final
from ownloop.tools import ToolRegistry
from ownloop.tracing import ConsoleSink, JsonlSink, forward_to_logging, forward_to_structlog
from ownloop.tracing.otel import OtelSink

from .openai_server import OpenAIServer, json_reply

OPENAI_KEY = "sk-proj-Canary0penAIkey1234567890abcdEF"
LEGACY_KEY = "sk-Canary1234567890abcdefghij"
BEARER = "ya29.CanaryBearerToken-1234567890"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkiLCJyb2xlIjoiYWRtaW4ifQ.Q2FuYXJ5U2lnbmF0dXJl"
AWS_KEY = "AKIACANARY0EXAMPLE12"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjCanaryPrivateKeyBody"
URL_PASSWORD = "CanaryUrlPassw0rd"
PASSWORD = "hunter2-canary"
SENSITIVE = "4242-sensitive-canary"
CANARIES = [OPENAI_KEY, LEGACY_KEY, BEARER, JWT, AWS_KEY, PEM_BODY, URL_PASSWORD, PASSWORD]
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n{'A' * 900}\n-----END PRIVATE KEY-----"
EVERY_SECRET = (
    f"key={OPENAI_KEY} legacy {LEGACY_KEY} Authorization: Bearer {BEARER} jwt {JWT} "
    f"aws {AWS_KEY} db postgres://svc:{URL_PASSWORD}@db.internal/app password={PASSWORD}\n{PEM}"
)


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(effect="read", strict=False)  # free-form headers
    def fetch(
        url: str, headers: dict[str, str], note: str, pin: Annotated[str, Sensitive()]
    ) -> str:
        """Fetch a page, and return everything it saw (secrets included).

        Args:
            url: The address.
            headers: Request headers.
            note: Free text.
            pin: A PIN.
        """
        return f"{url} {headers} {note} {pin} {EVERY_SECRET}"

    @registry.tool(effect="read")
    def explode(note: str) -> str:
        """Fail, quoting its input.

        Args:
            note: Free text.
        """
        raise RuntimeError(f"upstream rejected {note}")

    @registry.tool(effect="read")
    def count(n: int) -> int:
        """Count.

        Args:
            n: A number.
        """
        return n

    return registry


def _call(call_id: str, name: str, arguments: dict[str, Any] | str) -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))


def _quote_the_answer(output: str, evidence: Sequence[Evidence]) -> Reject | Accept:
    if "draft" in output:
        return Reject(f"unsupported claim in: {output}")
    return Accept()


def _script() -> list[Any]:
    arguments = {
        "url": f"https://svc:{URL_PASSWORD}@api.internal/x?token={BEARER}",
        "headers": {
            "Authorization": f"Bearer {BEARER}",
            "X-Api-Key": OPENAI_KEY,
            "Cookie": {"password": PASSWORD},
        },
        "note": EVERY_SECRET,
        "pin": SENSITIVE,
    }
    return [
        TransientModelError(f"invalid key {OPENAI_KEY}, Authorization: Bearer {BEARER}"),
        _call("c1", "fetch", arguments),
        _call("c2", "fetch", json.dumps({**arguments, "url": "https://example.com"})),
        _call("c3", "explode", {"note": EVERY_SECRET}),
        _call("c4", "count", {"n": EVERY_SECRET}),
        _call("c5", "fetch", {"api_key": LEGACY_KEY}),
        final(f"draft answer {EVERY_SECRET}"),
        final(f"final answer {EVERY_SECRET}"),
    ]


class _Sinks:
    """Every kind of sink, each keeping what it received as text."""

    def __init__(self, tmp_path: Path) -> None:
        self.jsonl_path = tmp_path / "trace.jsonl"
        self.console = io.StringIO()
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.sinks = [
            JsonlSink(self.jsonl_path),
            ConsoleSink(self.console, color=True),
            OtelSink(provider, capture_content=True),
            forward_to_structlog(structlog.get_logger("canary")),
            forward_to_logging("ownloop.canary"),
        ]

    def texts(self, results: list[RunResult], logs: Any, caplog: Any) -> dict[str, str]:
        spans = [
            (span.name, span.attributes, span.events, span.status.description)
            for span in self.exporter.get_finished_spans()
        ]
        return {
            "RunResult.trace": "".join(
                event.model_dump_json() for result in results for event in result.trace
            ),
            "JsonlSink": self.jsonl_path.read_text(encoding="utf-8"),
            "ConsoleSink": self.console.getvalue(),
            "OtelSink": repr(spans),
            "structlog": repr(logs),
            "logging": caplog.text
            + repr([getattr(record, "ownloop_event", None) for record in caplog.records]),
        }


def _run_all(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> tuple[list[RunResult], dict[str, str]]:
    sinks = _Sinks(tmp_path)
    with capture_logs() as logs, caplog.at_level(logging.INFO, logger="ownloop.canary"):
        agent = Agent(
            ScriptedModel(_script()),
            _registry(),
            clock=FakeClock(),
            validators=[_quote_the_answer],
            trace_sinks=sinks.sinks,  # type: ignore[arg-type]
        )
        completed = agent.run_sync(f"Task with secrets: {EVERY_SECRET} pin {SENSITIVE}")
        failing = Agent(
            ScriptedModel([PermanentModelError(f"bad key {OPENAI_KEY} for {AWS_KEY}")]),
            clock=FakeClock(),
            trace_sinks=sinks.sinks,  # type: ignore[arg-type]
        )
        failed = failing.run_sync("second run")
    results = [completed, failed]
    return results, sinks.texts(results, logs, caplog)


def test_no_sink_receives_any_planted_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Secrets of every shape, planted everywhere, reach no sink: trace, file, console, spans."""
    results, texts = _run_all(tmp_path, caplog)
    assert results[0].status.value == "completed", results[0].detail
    assert results[1].status.value == "failed"
    for sink, text in texts.items():
        assert "[redacted:" in text, f"{sink} received nothing redacted: was it used?"
        leaked = [canary for canary in [*CANARIES, SENSITIVE] if canary in text]
        assert leaked == [], f"{sink} leaked {leaked}"


def test_the_trace_explains_the_run_without_its_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Redaction keeps the trace useful: kinds, tools, counters and reasons are still there."""
    results, _ = _run_all(tmp_path, caplog)
    kinds = [event.kind for event in results[0].trace]
    for kind in ("retry_scheduled", "tool_rejected", "completion_rejected", "tool_finished"):
        assert kind in kinds
    proposed = [event for event in results[0].trace if event.kind == "tool_proposed"]
    assert [event.tool for event in proposed] == ["fetch", "fetch", "explode", "count", "fetch"]


def test_messages_keep_the_raw_data_the_loop_needs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The conversation keeps what the model and tools exchanged; only the trace is redacted."""
    results, _ = _run_all(tmp_path, caplog)
    conversation = "".join(message.model_dump_json() for message in results[0].messages)
    assert OPENAI_KEY in conversation


def test_an_error_quoting_a_sensitive_value_is_redacted() -> None:
    """A tool error that quotes a Sensitive() argument's plain value does not leak it."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def login(user: str, pin: Annotated[str, Sensitive()]) -> str:
        """Log in.

        Args:
            user: The user.
            pin: Their PIN.
        """
        raise ValueError(f"wrong pin {pin} for {user}")

    model = ScriptedModel([_call("c1", "login", {"user": "bob", "pin": SENSITIVE}), final("ok")])
    result = Agent(model, registry, clock=FakeClock()).run_sync("log in")
    assert SENSITIVE not in "".join(event.model_dump_json() for event in result.trace)


def test_a_rejection_never_quotes_a_value_under_a_secret_key() -> None:
    """An invented argument named like a secret is not quoted back in the rejection reason."""
    model = ScriptedModel([_call("c1", "count", {"n": 1, "password": PASSWORD}), final("ok")])
    result = Agent(model, _registry(), clock=FakeClock()).run_sync("count")
    assert PASSWORD not in "".join(event.model_dump_json() for event in result.trace)


def test_a_providers_echo_of_the_api_key_reaches_no_sink(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 401 quoting the API key (any shape) fails the run; no sink, error or detail holds it."""
    key = "local-gateway-key-Canary-0123456789"  # no known shape: only the adapter knows it
    body = {"error": {"message": f"Incorrect API key provided: {key}.", "code": "invalid_api_key"}}
    sinks = _Sinks(tmp_path)
    with (
        OpenAIServer(lambda received: json_reply(body, 401)) as server,
        allow_model_requests(True),
        capture_logs() as logs,
        caplog.at_level(logging.INFO, logger="ownloop.canary"),
    ):
        model = OpenAIChatModel("canary-model", api_key=key, base_url=server.url)
        agent = Agent(model, clock=FakeClock(), trace_sinks=sinks.sinks)  # type: ignore[arg-type]
        result = agent.run_sync("q")
    assert result.status.value == "failed"
    assert key not in result.detail
    for sink, text in sinks.texts([result], logs, caplog).items():
        assert key not in text, f"{sink} leaked the API key"
