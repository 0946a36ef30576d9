"""Every provider failure, whatever its shape, as one `ProviderError`.

Servers wrap errors differently: ``{"error": {...}}``, a top-level ``{"object": "error"}``, integer
codes, a bare string, an array, or an error event inside a 200 stream. This module reads them all,
names a provider-neutral category, decides whether a retry may help, reads ``Retry-After`` hints
from headers or the message, and builds a message that never contains the API key. It performs no
I/O and never raises while classifying.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ownloop._text import clean_json, clean_text, strip_userinfo
from ownloop.exceptions import (
    PermanentModelError,
    ProviderError,
    ProviderErrorCategory,
    TransientModelError,
)
from ownloop.models._compat import CompatProfile, avoidance_hint, rejection_hint
from ownloop.models._retry_hints import hint_in_message, parse_retry_after

__all__ = ["ErrorEnvelope", "build_error", "envelope_from", "scrub"]

_MAX_MESSAGE = 600
_TRANSIENT: frozenset[ProviderErrorCategory] = frozenset(
    {"rate_limit", "server_error", "overloaded", "timeout", "connection"}
)
_KEY_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+[A-Za-z0-9._\-]{6,})")
_CONTEXT = re.compile(
    r"maximum context length|context length|context window|prompt is too long|too many tokens",
    re.IGNORECASE,
)
_UNSUPPORTED = re.compile(
    r"unsupported parameter|not supported|unrecognized request argument|unknown parameter|"
    r"unrecognized (?:field|parameter|argument)|extra (?:inputs|fields) are not permitted|"
    r"must be one of",
    re.IGNORECASE,
)
# A server-side schema validator rejecting the request body (FastAPI/Pydantic, as llama-cpp-python
# answers with HTTP 500): "7 validation errors:", "1 validation error for ...", "'loc': ('body'".
_VALIDATION = re.compile(r"\b\d+ validation errors?\b|'loc': \('body'")
_QUOTED_PARAMETER = re.compile(
    r"(?:parameter|argument)[^'\"`:]*[:]?\s*['\"`]?([A-Za-z_][\w.\[\]]*)"
)


def scrub(text: str, secrets: Sequence[str]) -> str:
    """Remove credentials from text that may be shown or traced.

    Args:
        text: Any text, for example a server's error message.
        secrets: Exact values to remove (the configured API key).

    Returns:
        The text with every secret and anything shaped like an API key or bearer token replaced,
        the ``user:password@`` part of every URL removed, and unpaired surrogates replaced.
    """
    text = strip_userinfo(clean_text(text))
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return _KEY_PATTERN.sub("[redacted]", text)


@dataclass(frozen=True, slots=True)
class ErrorEnvelope:
    """What a server said about an error, read from whatever envelope it used.

    Attributes:
        message: The human-readable message ("" when none).
        code: The error code as text (integer codes become digits).
        type: The error type, if any.
        param: The parameter the server objected to, if it named one.
        status: A status code embedded in the payload (in-stream errors carry one).
        detail: Extra text worth showing: an upstream message or a rejected generation.
    """

    message: str = ""
    code: str | None = None
    type: str | None = None
    param: str | None = None
    status: int | None = None
    detail: str | None = None


def envelope_from(payload: Any) -> ErrorEnvelope:
    """Read an error from any envelope: wrapped, top-level, a string, an array or JSON text.

    Args:
        payload: The decoded body (or raw text) of an error.

    Returns:
        The fields found; empty when nothing looks like an error.
    """
    payload = _first(_decoded(payload))
    inner = _first(payload.get("error")) if isinstance(payload, dict) else payload
    if isinstance(inner, str):
        code = payload.get("code") if isinstance(payload, dict) else None
        return ErrorEnvelope(message=inner.strip(), code=_text(code))
    source: Any = inner if isinstance(inner, dict) else payload
    if not isinstance(source, dict):
        return ErrorEnvelope()
    metadata = source.get("metadata")
    upstream = metadata.get("raw") if isinstance(metadata, dict) else None
    status = source.get("status_code")
    return ErrorEnvelope(
        message=_text(source.get("message")) or _text(source.get("detail")) or "",
        code=_text(source.get("code")),
        type=_text(source.get("type")),
        param=_text(source.get("param")),
        status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        detail=_text(upstream) or _text(source.get("failed_generation")),
    )


def _decoded(payload: Any) -> Any:
    """Decode a body into JSON-shaped data with encodable text (a server's bytes are untrusted)."""
    if not isinstance(payload, bytes | str):
        return clean_json(payload)
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
    try:
        return clean_json(json.loads(text))
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to read as JSON
        return clean_text(text)


def _first(value: Any) -> Any:
    while isinstance(value, list):
        value = value[0] if value else None
    return value


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | str):
        text = str(value).strip()
        return text or None
    return None


@dataclass(frozen=True, slots=True)
class _Facts:
    status: int | None
    code: str
    type: str
    message: str
    lowered: str


_RULES: tuple[tuple[Callable[[_Facts], bool], ProviderErrorCategory], ...] = (
    # The order matters: a 429 may be a quota or a request too large, a 404 a model.
    (
        lambda f: (
            "insufficient_quota" in {f.code, f.type} or "exceeded your current quota" in f.lowered
        ),
        "quota_exhausted",
    ),
    (
        lambda f: f.status == 413 or (f.status == 429 and "request too large" in f.lowered),
        "request_too_large",
    ),
    (lambda f: f.status == 429 or f.code in {"rate_limit_exceeded", "rate_limit"}, "rate_limit"),
    (
        lambda f: f.code == "context_length_exceeded" or _CONTEXT.search(f.message) is not None,
        "context_length_exceeded",
    ),
    (lambda f: f.code == "tool_use_failed", "tool_generation_failed"),
    (
        lambda f: (
            f.code in {"invalid_function_parameters", "invalid_json_schema"}
            or f.lowered.startswith("invalid schema for function")
        ),
        "invalid_tool_schema",
    ),
    (lambda f: f.code == "model_not_found", "model_not_found"),
    (lambda f: f.code == "invalid_api_key" or f.status == 401, "authentication"),
    (lambda f: f.status == 403, "permission"),
    (lambda f: f.status == 404 and "model" in f.lowered, "model_not_found"),
    (lambda f: f.status == 404, "endpoint_not_supported"),
)
_OTHER_STATUS: dict[int, ProviderErrorCategory] = {408: "timeout", 409: "server_error"}


def _categorize(status: int | None, envelope: ErrorEnvelope) -> ProviderErrorCategory:
    """Name the failure from the status, the code, the type and the message."""
    message = envelope.message
    facts = _Facts(
        status, (envelope.code or "").lower(), envelope.type or "", message, message.lower()
    )
    for applies, category in _RULES:
        if applies(facts):
            return category
    unsupported = facts.code == "unsupported_parameter" or (
        _UNSUPPORTED.search(message) is not None and not message.startswith("Unsupported value")
    )
    if unsupported:  # llama.cpp even answers 500 for a parameter it does not implement
        return "unsupported_parameter"
    if status is not None and status >= 500 and _VALIDATION.search(message):
        return "invalid_request"  # llama-cpp-python: a 500 that is its validation of our body
    if status is not None and status >= 500:
        return "overloaded" if status in {503, 529} or "overloaded" in message else "server_error"
    if status in _OTHER_STATUS:
        return _OTHER_STATUS[status]
    return "invalid_request" if status is None or 400 <= status < 500 else "unknown"


def _embedded_status(envelope: ErrorEnvelope) -> int | None:
    """The status an in-band error carries: ``status_code``, or an HTTP-like integer code."""
    if envelope.status is not None:
        return envelope.status
    code = envelope.code or ""
    return int(code) if code.isdigit() and 100 <= int(code) <= 599 else None


def _parameter(envelope: ErrorEnvelope, category: ProviderErrorCategory) -> str | None:
    if envelope.param:
        return envelope.param
    if category != "unsupported_parameter":
        return None
    match = _QUOTED_PARAMETER.search(envelope.message)
    return match.group(1) if match else None


def build_error(
    envelope: ErrorEnvelope,
    *,
    status: int | None,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
    profile: CompatProfile | None = None,
    secrets: Sequence[str] = (),
    in_stream: bool = False,
    endpoint: str | None = None,
    base_url: str | None = None,
) -> ProviderError:
    """Build the provider-neutral error for what a server said.

    Args:
        envelope: The error's fields.
        status: The HTTP status (200 for an error inside a stream).
        headers: The response headers, read for retry hints.
        request_id: The provider's request id, if known.
        profile: The profile the request was sent with, to name the one that avoids a
            rejected parameter.
        secrets: Values that must never appear in the message.
        in_stream: Whether the error arrived inside a successful (200) stream.
        endpoint: The API the request went to (``chat`` or ``responses``), if known, so a
            missing endpoint's hint fits it.
        base_url: The base URL the request went to (without credentials), if known.

    Returns:
        A `TransientModelError` when retrying may help, else a `PermanentModelError`.
    """
    effective = _embedded_status(envelope) if in_stream else None
    effective = effective or status
    category = _categorize(effective, envelope)
    if in_stream and category in {"invalid_request", "unknown"}:
        category = "stream_error"
    retryable = category in _TRANSIENT or (
        category == "stream_error" and (effective is None or effective >= 500 or effective == 200)
    )
    parameter = _parameter(envelope, category)
    retry_after = None
    if retryable:
        retry_after = parse_retry_after(headers or {})
        if retry_after is None:
            retry_after = hint_in_message(envelope.message)
    text = _describe(
        envelope,
        category=category,
        status=status,
        parameter=parameter,
        in_stream=in_stream,
        profile=profile,
        endpoint=endpoint,
        base_url=base_url,
    )
    context: dict[str, Any] = {
        "category": category,
        "retry_after": retry_after,
        "status": status,
        "request_id": request_id,
        "parameter": parameter,
    }
    error_type = TransientModelError if retryable else PermanentModelError
    return error_type(scrub(text, secrets), **context)


def _describe(
    envelope: ErrorEnvelope,
    *,
    category: ProviderErrorCategory,
    status: int | None,
    parameter: str | None,
    in_stream: bool,
    profile: CompatProfile | None,
    endpoint: str | None = None,
    base_url: str | None = None,
) -> str:
    said = envelope.message or f"the provider gave no message ({envelope.type or 'no type'})"
    if envelope.detail:
        said = f"{said}: {envelope.detail}"
    if len(said) > _MAX_MESSAGE:
        said = said[: _MAX_MESSAGE - 1] + "…"
    facts = [f"HTTP {status}" if status is not None else "no HTTP status"]
    if in_stream:
        facts.append("in the stream")
    if envelope.code:
        facts.append(f"code {envelope.code}")
    if parameter:
        facts.append(f"parameter {parameter}")
    text = f"{category}: {said} ({', '.join(facts)})"
    if category == "unsupported_parameter" and profile is not None:
        hint = avoidance_hint(parameter, profile)
        if hint:
            text += f"; {hint}"
    if category == "invalid_request" and status is not None and status >= 500:
        text += f"; {rejection_hint(profile)}" if profile is not None else ""
    if category == "endpoint_not_supported":
        text += f"; {_missing_endpoint_hint(endpoint, base_url)}"
    return text


def _missing_endpoint_hint(endpoint: str | None, base_url: str | None) -> str:
    """What to check when the server has no such endpoint: the path first, then the API."""
    where = f" ({base_url})" if base_url else ""
    hint = (
        f"check the base URL's path{where}: OpenAI-compatible servers usually serve the API "
        "under /v1, as in OPENAI_BASE_URL=http://127.0.0.1:8080/v1"
    )
    if endpoint == "chat":
        return hint
    return (
        f"{hint}; if the path is right, this server may not implement the Responses API: "
        "try OWNLOOP_API=chat"
    )
