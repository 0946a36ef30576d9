"""Events of the application stream: the trace as it happens, plus what only a live view needs.

`Agent.run_stream` yields every trace event of the run (already redacted and bounded) and, between
them, three kinds the stored trace does not hold: text deltas of a streamed reply, a warning when a
budget is nearly spent, and a last event carrying the whole `RunResult`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ownloop.contracts._base import Identifier, Record
from ownloop.contracts.events import TraceEvent
from ownloop.contracts.results import RunResult

__all__ = ["BudgetWarning", "StreamEnded", "StreamEvent", "TextDelta"]


class TextDelta(Record):
    """A piece of the model's reply, as a streaming adapter received it (redacted).

    Attributes:
        run_id: The run.
        step: The model step the reply belongs to.
        text: The new text; the pieces of one step, joined, are the reply so far.
    """

    kind: Literal["text_delta"] = "text_delta"
    run_id: Identifier
    step: int = Field(ge=1)
    text: str


class BudgetWarning(Record):
    """A budget passed the warning threshold (once per budget and run).

    Attributes:
        run_id: The run.
        budget: The `Limits` field (``max_steps``, ``max_total_tokens``, ``deadline_s``…).
        name: A readable name.
        used: What the run has used.
        limit: The limit.
        ratio: ``used / limit``.
    """

    kind: Literal["budget_warning"] = "budget_warning"
    run_id: Identifier
    budget: str
    name: str
    used: float
    limit: float
    ratio: float


class StreamEnded(Record):
    """The last event of a stream: the run's result (completed, paused, stopped…).

    Attributes:
        run_id: The run.
        result: The result, exactly as `Agent.run` returns it.
    """

    kind: Literal["stream_ended"] = "stream_ended"
    run_id: Identifier
    result: RunResult


StreamEvent = Annotated[
    TraceEvent | TextDelta | BudgetWarning | StreamEnded, Field(discriminator="kind")
]
"""Any event of `Agent.run_stream`, discriminated by ``kind``."""
