"""What the runtime hands a tool besides its arguments, and the marker for secret parameters.

`ToolContext` is trusted data about the call (run, attempt, actor, deadline); it is injected by the
runtime and never appears in a tool's schema, so a model can neither see nor forge it. `Sensitive`
only marks a parameter; it changes neither the schema nor validation. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic

from typing_extensions import TypeVar

from ownloop.clock import Clock
from ownloop.contracts import Actor, Approval, Limits, Message, Usage
from ownloop.policy import Policy

__all__ = ["CallerRun", "RunContext", "Sensitive", "ToolContext"]

DepsT = TypeVar("DepsT", default=None)


@dataclass(frozen=True, slots=True)
class RunContext(Generic[DepsT]):
    """What an ``instructions`` function is told about the run it writes the instructions for.

    Attributes:
        run_id: The run.
        task: The run's task.
        actor: The authenticated identity the run acts for, if the application passed one.
        deps: The application's objects for this run (``Agent(deps_type=...)``), or ``None``.
    """

    run_id: str
    """The run."""

    task: str
    """The run's task."""

    actor: Actor | None = None
    """The authenticated identity the run acts for, if the application passed one."""

    deps: DepsT = None  # type: ignore[assignment]
    """The application's objects for this run (``Agent(deps_type=...)``), or ``None``."""


@dataclass(frozen=True, slots=True)
class CallerRun:
    """What an agent tool (``Agent.as_tool``) inherits from the run calling it: trusted, not shown.

    Attributes:
        limits: The calling run's budgets.
        usage: What the calling run had used when the call started (this attempt included).
        elapsed_s: Seconds the calling run had run when the call started.
        policy: The calling run's policy: a delegated agent's is intersected with it.
        key: The call's journal key in the calling run (decided once, journaled).
        approvals: Decisions the calling run holds that no call of its own has consumed.
        share: How many agent tools of one turn run together and split what is left.
        sinks: The calling run's trace sinks: the child's events reach them too (one trace).
        messages: The calling run's conversation when the call started (a handoff's child
            continues it).
    """

    limits: Limits
    usage: Usage
    elapsed_s: float
    policy: Policy
    key: str
    approvals: tuple[Approval, ...] = ()
    share: int = 1
    sinks: tuple[Callable[[Any], None], ...] = ()
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[DepsT]):
    """Trusted facts about one tool call, injected into any parameter annotated `ToolContext`.

    Declare a parameter ``ctx: ToolContext`` (any name) and the runtime passes the context
    there; the parameter never appears in the schema the model sees. Annotate it
    ``ToolContext[Deps]`` and ``ctx.deps`` is the run's ``deps``, typed ``Deps``.

    Attributes:
        run_id: The run the call belongs to.
        call_id: The tool call id (the provider's, or one the adapter made up).
        tool: The name of the tool being called.
        attempt: Which attempt this is, starting at 1; a retry of a transient failure counts up.
        actor: The authenticated identity the run acts for, if the application passed one.
        idempotency_key: The key a write must send to its backend so a repeat is harmless.
        deadline: When the run's time is up (timezone-aware, UTC), if it has a deadline.
        revision: The state revision the call runs against, when the application tracks one.
        deps: The application's objects for this run (``agent.run(task, deps=...)``): live
            objects, never in the schema, the trace or a checkpoint; ``None`` without them.
        caller: The calling run's budgets, policy and call key, given to agent tools only.
        clock: The run's clock, which `seconds_left` reads by default (the one `deadline` was
            computed with, so a `FakeClock` run counts down in fake time); ``None`` reads the
            wall clock.
    """

    run_id: str
    """The run the call belongs to."""

    call_id: str
    """The tool call id (the provider's, or one the adapter made up)."""

    tool: str
    """The name of the tool being called."""

    attempt: int = 1
    """Which attempt this is, starting at 1."""

    actor: Actor | None = None
    """The authenticated identity the run acts for, if the application passed one."""

    idempotency_key: str | None = None
    """The key a write must send to its backend so that a repeated attempt is harmless."""

    deadline: datetime | None = None
    """When the run's time is up (timezone-aware, UTC), if the run has a deadline."""

    revision: str | None = None
    """The state revision the call runs against, when the application tracks one."""

    deps: DepsT = None  # type: ignore[assignment]
    """The application's objects for this run, or ``None`` without them."""

    caller: CallerRun | None = None
    """The calling run's budgets, policy and call key, given to agent tools only."""

    clock: Clock | None = field(default=None, repr=False, compare=False)
    """The run's clock, which `seconds_left` reads by default; ``None`` reads the wall clock."""

    def seconds_left(self, now: datetime | None = None) -> float | None:
        """Return the seconds until `deadline` (never negative), or ``None`` without a deadline.

        Args:
            now: The current time; defaults to the run's clock (`clock`), else the wall
                clock, in UTC.
        """
        if self.deadline is None:
            return None
        if now is not None:
            current = now
        elif self.clock is not None:
            current = self.clock.now()
        else:
            current = datetime.now(UTC)
        return max(0.0, (self.deadline - current).total_seconds())


@dataclass(frozen=True, slots=True)
class Sensitive:
    """Marks a parameter whose value must never be traced: ``Annotated[str, Sensitive()]``.

    The parameter's name is recorded in `ToolSpec.sensitive`; the schema and validation are
    unchanged. Only top-level parameters are recorded.
    """
