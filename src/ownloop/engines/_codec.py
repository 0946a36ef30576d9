"""Step outcomes as JSON values: what a durable step checkpoints, and how it becomes one again.

Steps never raise: a failure is encoded as data (type name, message and the fields the core reads)
and rebuilt as an equivalent exception on the way back, so the engine never serialises a Python
exception and a replay gives the core exactly what the first execution gave it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from ownloop._text import clean_json, clean_text, safe_str
from ownloop.budgets import BudgetBreach
from ownloop.contracts import Approval, ModelResponse, Receipt, StopReason, TokenUsage
from ownloop.exceptions import (
    PermanentModelError,
    ProviderError,
    ProviderErrorCategory,
    SendRefused,
    TransientModelError,
    TransientToolError,
    UnknownEffectError,
)
from ownloop.loop import Decided, Failure, Outcome, Revision, ToolResults, ToolReturn
from ownloop.tools import Confirmed, NotApplied, StillUnknown, to_jsonable

__all__ = ["StepError", "decode_error", "decode_outcome", "encode_error", "encode_outcome"]

Json = dict[str, Any]

_PROVIDER_FIELDS = ("category", "retryable", "retry_after", "status", "request_id", "parameter")


class StepError(Exception):
    """A failure rebuilt from a checkpoint whose exception type ownloop does not know.

    Args:
        type_name: The original exception's type name.
        message: Its message.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name

    def __str__(self) -> str:
        return f"{self.type_name}: {super().__str__()}"


def encode_error(error: BaseException) -> Json:
    """Describe an exception as JSON: its type, message and the fields the loop core reads."""
    if isinstance(error, StepError):
        return {"type": error.type_name, "message": Exception.__str__(error)}
    encoded: Json = {"type": type(error).__name__, "message": safe_str(error)}
    if isinstance(error, ProviderError):
        encoded["message"] = clean_text(error.message)
        encoded.update({name: getattr(error, name) for name in _PROVIDER_FIELDS})
    elif isinstance(error, TransientToolError):
        encoded["retry_after"] = error.retry_after
    elif isinstance(error, SendRefused):  # the core ends the run with the breach, not an error
        encoded["refused"] = {
            "breach": dataclasses.asdict(error.breach),
            "usage": error.usage.model_dump(mode="json"),
            "sent": error.sent,
        }
    return encoded


def decode_error(encoded: Json) -> BaseException:
    """Rebuild an equivalent exception from `encode_error`'s description."""
    kind, message = str(encoded.get("type")), str(encoded.get("message", ""))
    if kind in ("TransientModelError", "PermanentModelError", "ProviderError") or (
        "category" in encoded
    ):
        return _provider_error(kind, message, encoded)
    if kind == "TransientToolError":
        retry_after = encoded.get("retry_after")
        return TransientToolError(
            message, retry_after=None if retry_after is None else float(retry_after)
        )
    if kind == "SendRefused" and isinstance(encoded.get("refused"), dict):
        return _refused(message, cast(Json, encoded["refused"]))
    simple: dict[str, type[Exception]] = {
        "UnknownEffectError": UnknownEffectError,
        "TimeoutError": TimeoutError,
        "ConnectionError": ConnectionError,
    }
    if kind in simple:
        return simple[kind](message)
    return StepError(kind, message)


def _provider_error(kind: str, message: str, encoded: Json) -> ProviderError:
    """Rebuild a provider error of the encoded class, with the fields the core reads."""
    fields = {name: encoded.get(name) for name in _PROVIDER_FIELDS}
    category = cast(ProviderErrorCategory, fields.pop("category") or "unknown")
    retryable = bool(fields.pop("retryable"))
    if kind == "TransientModelError":
        return TransientModelError(message, category=category, **fields)
    if kind == "PermanentModelError":
        return PermanentModelError(message, category=category, **fields)
    return ProviderError(message, category=category, retryable=retryable, **fields)


def _refused(message: str, refused: Json) -> SendRefused:
    """Rebuild a budget's refusal of a re-ask: its breach, the answered usage, the count sent."""
    breach = dict(cast(Json, refused["breach"]))
    breach["stop_reason"] = StopReason(breach["stop_reason"])
    return SendRefused(
        message,
        breach=BudgetBreach(**breach),
        usage=TokenUsage.model_validate(refused["usage"]),
        sent=int(refused["sent"]),
    )


def encode_outcome(outcome: Outcome) -> Json:
    """Turn an outcome into the JSON value a step checkpoints, with only encodable text.

    A step's value is serialised by the engine (DBOS, Temporal) before the loop core sees it, so
    text UTF-8 cannot encode (an unpaired surrogate from a tool or a model) is replaced here,
    where it enters.
    """
    encoded: Json = clean_json(_encode_outcome(outcome))
    return encoded


def _encode_outcome(outcome: Outcome) -> Json:  # noqa: PLR0911 - one return per kind
    if outcome is None:
        return {"kind": "none"}
    if isinstance(outcome, ModelResponse):
        return {"kind": "model", "response": outcome.model_dump(mode="json")}
    if isinstance(outcome, Failure):
        return {"kind": "failure", "error": encode_error(outcome.error)}
    if isinstance(outcome, Revision):
        return {"kind": "revision", "value": outcome.value}
    if isinstance(outcome, Decided):
        approval = outcome.approval
        return {"kind": "decided", "approval": approval and approval.model_dump(mode="json")}
    if isinstance(outcome, ToolResults):  # a group of reads, checkpointed as one step
        return {
            "kind": "group",
            "outcomes": [_encode_outcome(member) for member in outcome.outcomes],
            "durations_s": list(outcome.durations_s),
        }
    value = outcome.value
    if isinstance(value, Receipt):
        return {"kind": "tool", "receipt": value.model_dump(mode="json")}
    if isinstance(value, Confirmed):
        return {"kind": "tool", "confirmed": to_jsonable(value.data)}
    if isinstance(value, NotApplied):
        return {"kind": "tool", "not_applied": True}
    if isinstance(value, StillUnknown):
        return {"kind": "tool", "still_unknown": value.reason}
    return {"kind": "tool", "value": to_jsonable(value)}


def decode_outcome(encoded: Json) -> Outcome:  # noqa: PLR0911 - one return per kind
    """Rebuild the outcome `encode_outcome` described."""
    kind = encoded["kind"]
    if kind == "none":
        return None
    if kind == "model":
        return ModelResponse.model_validate(encoded["response"])
    if kind == "failure":
        return Failure(decode_error(cast(Json, encoded["error"])))
    if kind == "revision":
        return Revision(encoded["value"])
    if kind == "decided":
        approval = encoded["approval"]
        return Decided(None if approval is None else Approval.model_validate(approval))
    if kind == "group":
        return _decode_group(encoded)
    if "receipt" in encoded:
        return ToolReturn(Receipt.model_validate(encoded["receipt"]))
    if "confirmed" in encoded:
        return ToolReturn(Confirmed(encoded["confirmed"]))
    if "not_applied" in encoded:
        return ToolReturn(NotApplied())
    if "still_unknown" in encoded:
        return ToolReturn(StillUnknown(str(encoded["still_unknown"])))
    return ToolReturn(encoded["value"])


def _decode_group(encoded: Json) -> ToolResults:
    outcomes: list[ToolReturn | Failure] = []
    for member in cast(list[Json], encoded["outcomes"]):
        decoded = decode_outcome(member)
        outcomes.append(decoded if isinstance(decoded, ToolReturn | Failure) else ToolReturn(None))
    durations = tuple(float(seconds) for seconds in cast(list[float], encoded["durations_s"]))
    return ToolResults(outcomes=tuple(outcomes), durations_s=durations)
