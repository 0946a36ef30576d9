"""Budgets as plain data: the limits a run must stay within and the counters it has used."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from ownloop.contracts._base import NonNegativeInt, Record
from ownloop.exceptions import ConfigurationError

__all__ = ["Limits", "Usage"]


class Limits(Record):
    """The budgets of one run. Every run has all of them; the defaults are safe, not generous.

    Constructing `Limits` with an impossible value raises `ConfigurationError` naming the field.

    Attributes:
        max_steps: Model turns in the run.
        max_model_attempts: Model calls in the run, retries included.
        max_tool_calls: Tool calls proposed and admitted to validation, rejected ones included.
        max_tool_attempts: Tool executions in the run, retries included.
        max_total_tokens: Input plus output tokens over the run.
        deadline_s: Wall-clock seconds for the whole run.
        max_repeats: Identical proposals in a row (same tool, same arguments) that stop the run;
            the proposal that reaches this count is not executed.
        max_observation_chars: The longest observation added to the conversation.
        max_output_chars: The longest final answer; longer ones are truncated with a marker.
        max_input_chars: The longest task accepted; longer tasks are refused before any model call.
        max_completion_rejections: Rejected final answers tolerated before the run stops.
        max_retries_per_call: Retries of one model or tool call, within the shared budgets.
        max_cost: Money for the run, in the unit of the agent's price table (``None``: no cap);
            the run stops before a request whose estimated cost would cross it, and after a
            response that crosses it (none of that response's tool calls runs).
        max_parallel_tools: Tool calls of one turn that may run at the same time. Consecutive
            calls of tools that may overlap (reads, unless declared ``parallel=False``) that need
            no approval run together, at most this many at once; writes always run alone, in the
            order proposed. ``1`` runs every call one after another.
    """

    max_steps: int = Field(default=10, ge=1, le=10_000)
    max_model_attempts: int = Field(default=20, ge=1, le=100_000)
    max_tool_calls: int = Field(default=20, ge=0, le=100_000)
    max_tool_attempts: int = Field(default=40, ge=0, le=100_000)
    max_total_tokens: int = Field(default=200_000, ge=1)
    deadline_s: float = Field(default=300.0, gt=0, le=30 * 24 * 3600)
    max_repeats: int = Field(default=3, ge=2)
    max_observation_chars: int = Field(default=8_000, ge=64)
    max_output_chars: int = Field(default=20_000, ge=64)
    max_input_chars: int = Field(default=20_000, ge=1)
    max_completion_rejections: int = Field(default=2, ge=0)
    max_retries_per_call: int = Field(default=3, ge=0, le=100)
    max_cost: float | None = Field(default=None, ge=0)
    max_parallel_tools: int = Field(default=8, ge=1, le=256)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
                for item in error.errors()
            )
            raise ConfigurationError(f"invalid Limits: {problems}") from None


class Usage(Record):
    """What a run has used so far; every budget check compares one of these with `Limits`.

    Attributes:
        steps: Model turns started.
        model_requests: Model calls that returned a response.
        model_attempts: Model calls started, retries included.
        tool_calls: Tool calls proposed and admitted to validation.
        tool_attempts: Tool executions started, retries included.
        input_tokens: Input tokens reported by the provider.
        output_tokens: Output tokens reported by the provider.
        completion_rejections: Final answers the validators rejected.
        invalid_outputs: Final answers that were not a valid value of the ``output_type``.
        cost: Money spent, in the unit of the agent's price table (0 without one).
        compactions: Times the context was compacted.
    """

    steps: NonNegativeInt = 0
    model_requests: NonNegativeInt = 0
    model_attempts: NonNegativeInt = 0
    tool_calls: NonNegativeInt = 0
    tool_attempts: NonNegativeInt = 0
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    completion_rejections: NonNegativeInt = 0
    invalid_outputs: NonNegativeInt = 0
    cost: float = Field(default=0.0, ge=0)
    compactions: NonNegativeInt = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, **increments: float) -> Usage:
        """Return a copy with the named counters increased.

        Args:
            **increments: Counter names and how much to add to each.

        Returns:
            The new counters; this record is unchanged.

        Raises:
            ValueError: If a name is not a counter or an amount is negative.
        """
        values = dict(self.__dict__)
        for name, amount in increments.items():
            if name not in values or amount < 0:
                raise ValueError(f"cannot add {amount!r} to usage counter {name!r}")
            values[name] += amount
        # Every counter was valid and only grows: skip re-validation on this hot path.
        return Usage.model_construct(**values)
