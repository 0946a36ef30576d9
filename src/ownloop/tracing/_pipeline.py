"""The processor chain every trace event goes through before it is stored or sent anywhere.

A `TracePipeline` owns a structlog logger of its own (built here, never from or into structlog's
global configuration). Each event becomes an event dict, with the run id bound as context, and
runs through the processors in a fixed order: redact -> bound sizes -> render. The rendered dict
is validated back into the same typed event class; ``run_id``, ``seq``, ``at``, ``kind`` and
every field that can only hold numbers, booleans, times or enumerated values are never touched.
Redaction runs before the render step, so no sink can receive unredacted data.
"""

from __future__ import annotations

import functools
import types
from collections.abc import MutableMapping
from datetime import date, datetime, time, timedelta
from enum import Enum
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ownloop.contracts import EventBase
from ownloop.redaction import Redactor, bound_value, redact_marker

__all__ = ["TracePipeline", "free_fields"]

EventT = TypeVar("EventT", bound=EventBase)

_FIXED_TYPES = (bool, int, float, datetime, date, time, timedelta, type(None))
_BASE_FIELDS = frozenset(EventBase.model_fields) | {"kind"}


def _is_fixed(annotation: Any, seen: frozenset[type] = frozenset()) -> bool:
    """Whether a field of this type can only hold values that are never secrets."""
    origin = get_origin(annotation)
    if origin is Literal:
        return True
    if origin in (Union, types.UnionType):
        return all(_is_fixed(arm, seen) for arm in get_args(annotation))
    if origin is not None or not isinstance(annotation, type):
        return False  # anything unrecognised is redacted: fail closed
    if issubclass(annotation, Enum):
        return True
    if issubclass(annotation, BaseModel):
        return annotation not in seen and all(
            _is_fixed(field.annotation, seen | {annotation})
            for field in annotation.model_fields.values()
        )
    return issubclass(annotation, _FIXED_TYPES)


@functools.cache
def free_fields(event_type: type[EventBase]) -> tuple[str, ...]:
    """Return the fields of an event class that redaction and bounding apply to.

    Args:
        event_type: An event class.

    Returns:
        The names of the fields that can hold text, in declaration order.
    """
    return tuple(
        name
        for name, field in event_type.model_fields.items()
        if name not in _BASE_FIELDS and not _is_fixed(field.annotation)
    )


class _Render:
    """The wrapped logger at the end of the chain: hands the processed event dict back."""

    def trace(self, event_dict: dict[str, Any]) -> dict[str, Any]:
        return event_dict


@functools.cache
def _trace_logger_class() -> type[Any]:
    """The bound logger class, built on first use: structlog loads only when a run traces."""
    import structlog

    class _TraceLogger(structlog.BoundLoggerBase):
        """A bound logger with one method, following structlog's pattern for custom wrappers."""

        def trace(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
            # _process_event is the hook structlog documents for wrapper classes; passing the
            # payload as a dict spares two copies of it per event.
            args, kwargs = self._process_event("trace", kind, payload)
            processed: dict[str, Any] = self._logger.trace(*args, **kwargs)
            return processed

    return _TraceLogger


class TracePipeline:
    """Redact, bound and re-validate the events of one run, through a structlog processor chain.

    Args:
        run_id: The run, bound as the chain's context.
        redactor: The redaction rules and size bounds.
    """

    def __init__(self, run_id: str, redactor: Redactor) -> None:
        self.run_id = run_id
        self.redactor = redactor
        self._plans: dict[str, tuple[str, ...]] = {}  # by kind, for the processors
        self.processors = (self.redact, self.bound, self.render)
        self._logger = _trace_logger_class()(_Render(), self.processors, {"run_id": run_id})

    def process(self, event: EventT) -> EventT:
        """Run one event through the chain and return the event every sink may see.

        Args:
            event: The event as the loop built it.

        Returns:
            The same event when nothing was redacted or cut, else a validated copy.
        """
        event_type = type(event)
        plan = self._plans[event.kind] = free_fields(event_type)  # type: ignore[attr-defined]
        original = event.__dict__  # read only: the event is frozen
        payload = {name: value for name, value in original.items() if name != "run_id"}
        for name in plan:
            if isinstance(payload[name], BaseModel):
                payload[name] = payload[name].model_dump(mode="json")
        before = {name: payload[name] for name in plan}
        # run_id comes back from the logger's bound context
        processed = self._logger.trace(event.kind, payload)  # type: ignore[attr-defined]
        changed = {name: processed[name] for name in plan if processed[name] is not before[name]}
        if not changed:
            return event
        return _validate(event_type, {**original, **changed}, original)

    def redact(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """Processor: redact every free field of the event (secret keys, patterns, values).

        Args:
            logger: The wrapped logger (unused).
            method_name: The log method's name (unused).
            event_dict: The event dict.

        Returns:
            The same dict, its free fields redacted.
        """
        redact = self.redactor.redact
        for name in self._plans[event_dict["kind"]]:
            value = event_dict[name]
            if value is not None:
                event_dict[name] = redact(value)
        return event_dict

    def bound(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """Processor: cut every free field of the event to the redactor's bounds.

        Args:
            logger: The wrapped logger (unused).
            method_name: The log method's name (unused).
            event_dict: The event dict.

        Returns:
            The same dict, its free fields bounded.
        """
        bounds = self.redactor.bounds
        for name in self._plans[event_dict["kind"]]:
            value = event_dict[name]
            if value is not None:
                event_dict[name] = bound_value(value, bounds)
        return event_dict

    def render(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> tuple[tuple[MutableMapping[str, Any]], dict[str, Any]]:
        """Processor: the renderer; drops structlog's ``event`` key and hands the dict on.

        Args:
            logger: The wrapped logger (unused).
            method_name: The log method's name (unused).
            event_dict: The event dict.

        Returns:
            ``((event_dict,), {})`` for the wrapped logger.
        """
        event_dict.pop("event", None)
        return (event_dict,), {}

    def __repr__(self) -> str:
        names = ", ".join(processor.__name__ for processor in self.processors)
        return f"TracePipeline(run_id={self.run_id!r}, processors=[{names}], {self.redactor!r})"


def _validate(event_type: type[EventT], data: dict[str, Any], original: dict[str, Any]) -> EventT:
    """Validate the processed fields; a field a rule made invalid is replaced by one marker."""
    try:
        return event_type.model_validate(data)
    except ValidationError as error:
        # A user pattern can stretch a length-limited string past its limit: hide it whole.
        for name in {problem["loc"][0] for problem in error.errors()}:
            data[str(name)] = redact_marker(original.get(str(name)))
        return event_type.model_validate(data)
