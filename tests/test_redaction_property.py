"""Properties of redaction and bounds on arbitrary nested payloads (Hypothesis)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop.clock import FakeClock
from ownloop.contracts import ToolProposed
from ownloop.redaction import Bounds, Redactor, bound_value
from ownloop.tracing import TraceRecorder

SECRETS = [
    "sk-proj-Zq8f0Lr2Xw7Yt3Vb9Nm4Kc6Hd1Jg5Ps8",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJl",
    "AKIAZ7CANARYEXAMPLE2",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
]
ODD_KEYS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["password", "API-Key", "accessToken", "set_cookie", "", "…"]),
    st.integers(),
    st.none(),
    st.booleans(),
    st.tuples(st.integers(), st.text(max_size=3)),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=300),
    st.sampled_from(SECRETS),
    st.binary(max_size=8),
)
PAYLOADS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=12),
        st.tuples(inner, inner),
        st.dictionaries(ODD_KEYS, inner, max_size=12),
    ),
    max_leaves=60,
)
BOUNDS = st.builds(
    Bounds,
    max_string=st.integers(40, 200),
    max_items=st.integers(2, 10),
    max_depth=st.integers(1, 8),
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=200)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=8), st.dictionaries(st.text(max_size=10), inner, max_size=8)
    ),
    max_leaves=40,
)


def _within(value: Any, bounds: Bounds, depth: int = 0) -> bool:
    """Whether a value respects the bounds: strings, items, entries, keys and nesting."""
    if isinstance(value, str):
        return len(value) <= bounds.max_string
    if isinstance(value, list | tuple):  # tuples within bounds are kept as they are
        return (
            depth < bounds.max_depth
            and len(value) <= bounds.max_items
            and all(_within(item, bounds, depth + 1) for item in value)
        )
    if isinstance(value, dict):
        return (
            depth < bounds.max_depth
            and len(value) <= bounds.max_items
            and all(isinstance(key, str) and len(key) <= bounds.max_string for key in value)
            and all(_within(item, bounds, depth + 1) for item in value.values())
        )
    return value is None or isinstance(value, bool | int | float)


def _text(value: Any) -> str:
    return json.dumps(value, default=repr, ensure_ascii=False)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=PAYLOADS, bounds=BOUNDS)
def test_redact_then_bound_never_raises_and_stays_within_bounds(
    payload: Any, bounds: Bounds
) -> None:
    """Redacting then bounding any nested payload never raises and respects every bound."""
    redactor = Redactor(bounds=bounds)
    result = bound_value(redactor.redact(payload), bounds)
    assert _within(result, bounds)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=PAYLOADS, bounds=BOUNDS)
def test_bounding_is_idempotent(payload: Any, bounds: Bounds) -> None:
    """Bounding an already bounded payload changes nothing."""
    once = bound_value(payload, bounds)
    assert _text(bound_value(once, bounds)) == _text(once)


@settings(max_examples=120, deadline=None)
@given(
    payload=PAYLOADS,
    secret=st.sampled_from(SECRETS),
    prefix=st.text(max_size=40),
    place=st.sampled_from(["text", "key", "list"]),
)
def test_planted_secrets_never_survive_redaction(
    payload: Any, secret: str, prefix: str, place: str
) -> None:
    """A secret planted anywhere (inside text, under a secret key, in a list) is removed."""
    if place == "text":
        planted: Any = {"note": f"{prefix} {secret} tail", "payload": payload}
    elif place == "key":
        planted = {"x_api_key": {"value": secret, "other": payload}}
    else:
        planted = [payload, [secret]]
    assert secret not in repr(Redactor().redact(planted))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=JSON)
def test_recorded_events_are_valid_and_bounded_for_any_arguments(arguments: Any) -> None:
    """Any JSON arguments recorded through the pipeline give a valid, bounded event."""
    recorder = TraceRecorder("run-1", FakeClock())
    event = recorder.emit(ToolProposed, step=1, call_id="c1", tool="t", arguments=arguments)
    assert isinstance(event, ToolProposed)
    assert event.seq == 1
    assert _within(event.arguments, recorder.redactor.bounds)


def test_non_finite_floats_pass_through() -> None:
    """NaN and infinities are numbers: neither redacted nor changed."""
    result = bound_value(Redactor().redact([math.inf, -math.inf]))
    assert result == [math.inf, -math.inf]
