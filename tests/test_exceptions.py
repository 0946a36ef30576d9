"""The exception tree: families, retryable flags and the context each exception carries."""

from __future__ import annotations

import json
import re

import pytest

import ownloop.exceptions
from ownloop import (
    ApprovalRequired,
    ConfigurationError,
    InputRejected,
    LoopSignal,
    ModelError,
    OwnloopError,
    PermanentModelError,
    ProviderError,
    RunError,
    ToolDefinitionError,
    TransientModelError,
    TransientToolError,
    UnexpectedModelCall,
    UnknownEffectError,
)


def _drawn_tree() -> dict[str, str | None]:
    """Parse the tree in the module docstring into {class name: drawn parent name}."""
    doc = ownloop.exceptions.__doc__ or ""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in doc.split("::", 1)[1].splitlines():
        match = re.match(r"    ([│├└─ ]*)([A-Z]\w+)", line)
        if match is None:
            continue
        depth = len(match.group(1)) // 4
        del stack[depth:]
        parents[match.group(2)] = stack[-1] if stack else None
        stack.append(match.group(2))
    return parents


def test_module_docstring_draws_the_real_tree() -> None:
    """The tree drawn in the exceptions docstring names every class under its real parent."""
    classes = {
        name: value
        for name, value in vars(ownloop.exceptions).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    drawn = _drawn_tree()
    assert set(drawn) == set(classes)
    for name, parent in drawn.items():
        expected = classes[name].__bases__[0].__name__
        assert parent == (None if name == "OwnloopError" else expected), name


@pytest.mark.parametrize(
    ("error", "family"),
    [
        (TransientToolError(), LoopSignal),
        (UnknownEffectError("write may have happened"), LoopSignal),
        (ApprovalRequired(), LoopSignal),
        (ToolDefinitionError("bad tool"), ConfigurationError),
        (InputRejected("empty task"), ConfigurationError),
        (TransientModelError(), ProviderError),
        (PermanentModelError(), ProviderError),
        (ProviderError("x"), ModelError),
        (UnexpectedModelCall("script ran out"), ModelError),
        (RunError("x"), OwnloopError),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else "",
)
def test_each_exception_belongs_to_its_family(error: OwnloopError, family: type) -> None:
    """Each exception can be caught by its family and by OwnloopError."""
    assert isinstance(error, family)
    assert isinstance(error, OwnloopError)


def test_families_do_not_overlap() -> None:
    """Signals, misuse, model failures and run failures are separate branches of the tree."""
    families = [LoopSignal, ConfigurationError, ModelError, RunError]
    for family in families:
        others = tuple(other for other in families if other is not family)
        assert not issubclass(family, others)


def test_provider_error_keeps_every_field() -> None:
    """ProviderError keeps its message, category, retry hint, status, request id and parameter."""
    error = ProviderError(
        "the model does not exist",
        category="model_not_found",
        retryable=False,
        retry_after=None,
        status=404,
        request_id="req_123",
        parameter="model",
    )
    assert str(error) == "the model does not exist"
    assert (error.message, error.category, error.retryable) == (
        "the model does not exist",
        "model_not_found",
        False,
    )
    assert (error.retry_after, error.status, error.request_id, error.parameter) == (
        None,
        404,
        "req_123",
        "model",
    )


def test_provider_error_defaults_to_unknown_and_not_retryable() -> None:
    """A bare ProviderError is an unknown, non-retryable failure with no optional context."""
    error = ProviderError("boom")
    assert error.describe() == {
        "type": "ProviderError",
        "message": "boom",
        "category": "unknown",
        "retryable": False,
        "retry_after": None,
        "status": None,
        "request_id": None,
        "parameter": None,
    }


def test_describe_is_json_ready_and_names_the_concrete_type() -> None:
    """describe() returns a JSON-serialisable mapping that names the concrete class."""
    error = TransientModelError(
        "slow down", category="rate_limit", retry_after=2.5, status=429, request_id="req_9"
    )
    described = error.describe()
    assert json.loads(json.dumps(described)) == described
    assert described == {
        "type": "TransientModelError",
        "message": "slow down",
        "category": "rate_limit",
        "retryable": True,
        "retry_after": 2.5,
        "status": 429,
        "request_id": "req_9",
        "parameter": None,
    }


def test_transient_model_error_is_retryable() -> None:
    """TransientModelError is retryable and defaults to a server error."""
    error = TransientModelError()
    assert error.retryable is True
    assert error.category == "server_error"


def test_permanent_model_error_is_not_retryable() -> None:
    """PermanentModelError is not retryable, defaults to an invalid request and keeps context."""
    error = PermanentModelError(
        "bad key", category="authentication", status=401, request_id="req_1", parameter="key"
    )
    assert error.retryable is False
    assert PermanentModelError().category == "invalid_request"
    assert (error.category, error.status, error.request_id, error.parameter) == (
        "authentication",
        401,
        "req_1",
        "key",
    )


def test_transient_tool_error_carries_retry_after() -> None:
    """TransientToolError carries the delay the tool asked for, or None when it did not say."""
    assert TransientToolError().retry_after is None
    error = TransientToolError("index rebuilding", retry_after=1.5)
    assert error.retry_after == 1.5
    assert str(error) == "index rebuilding"


def test_approval_required_carries_its_reason() -> None:
    """ApprovalRequired keeps the reason shown to the approver."""
    assert ApprovalRequired("refunds over 100 need a manager").reason == (
        "refunds over 100 need a manager"
    )
    assert ApprovalRequired().reason == "approval required"


def test_run_error_carries_run_context() -> None:
    """RunError carries the run id, step and usage counters needed to explain it."""
    error = RunError("store unavailable", run_id="run-1", step=3, usage={"steps": 3})
    assert str(error) == "store unavailable"
    assert (error.run_id, error.step, error.usage) == ("run-1", 3, {"steps": 3})


def test_run_error_context_defaults_are_empty_and_not_shared() -> None:
    """Without context a RunError has no run id or step and its own empty usage mapping."""
    first, second = RunError("a"), RunError("b")
    assert (first.run_id, first.step, first.usage) == (None, None, {})
    first.usage["steps"] = 1
    assert second.usage == {}
