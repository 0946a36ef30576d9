"""The runtime: the `Agent` facade and the driver that performs the loop core's effects.

The core decides; this module does. It awaits the model port, runs tool handlers, sleeps on the
clock and feeds each outcome back to the core. `run` and `run_sync` share this one implementation.
"""

from __future__ import annotations

import asyncio
import hashlib
import platform
import uuid
from collections.abc import Iterable, Sequence
from importlib import metadata

from ownloop._version import __version__
from ownloop.clock import Clock, SystemClock
from ownloop.contracts import (
    MAX_ID_CHARS,
    Actor,
    Limits,
    Message,
    ModelResponse,
    ModelSettings,
    RunResult,
    SystemMessage,
    UserMessage,
    Versions,
)
from ownloop.exceptions import ConfigurationError, InputRejected
from ownloop.loop import (
    CallModel,
    Effect,
    Failure,
    InvokeTool,
    LoopConfig,
    LoopGenerator,
    Outcome,
    RunState,
    ToolReturn,
    run_loop,
)
from ownloop.models import AgentModel
from ownloop.retry import RetryPolicy
from ownloop.tools import ToolRegistry
from ownloop.tracing import TraceRecorder, TraceSink
from ownloop.validators import CheckFunction, CompletionValidator, as_validator

__all__ = ["Agent"]


def _sdk_version() -> str | None:
    try:
        return metadata.version("openai")
    except metadata.PackageNotFoundError:  # pragma: no cover - openai is a core dependency
        return None


class Agent:
    """A bounded, auditable agent: a model that proposes and a runtime that decides.

    Args:
        model: The model port (a provider adapter, or a scripted model in tests).
        tools: The tools the model may propose; none by default.
        limits: The run budgets; safe defaults when omitted.
        validators: Completion checks; every one must accept a final answer.
        clock: The clock for budgets, timestamps and backoff; the system clock by default.
        instructions: A system message sent first in every run.
        retry: The backoff policy for transient model and tool failures.
        settings: Sampling settings sent with every model request.
        stream: Ask the model adapter to stream responses (sets ``settings.stream``).
        trace_sinks: Callables receiving every trace event as it is recorded.

    Raises:
        ConfigurationError: If the model has no ``respond`` method or a validator is not callable.
    """

    def __init__(
        self,
        model: AgentModel,
        tools: ToolRegistry | None = None,
        *,
        limits: Limits | None = None,
        validators: Iterable[CheckFunction] = (),
        clock: Clock | None = None,
        instructions: str | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        stream: bool = False,
        trace_sinks: Sequence[TraceSink] = (),
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise ConfigurationError(
                f"model {model!r} is not a model port: it needs an async respond(request) method"
            )
        if tools is not None and not isinstance(tools, ToolRegistry):
            raise ConfigurationError(f"tools must be a ToolRegistry, got {type(tools).__name__}")
        self.model = model
        self.tools = tools if tools is not None else ToolRegistry()
        self.limits = limits if limits is not None else Limits()
        checks = [as_validator(check) for check in validators]
        validator: CompletionValidator | None = None
        for check in checks:
            validator = check if validator is None else validator & check
        self._config = LoopConfig(
            registry=self.tools,
            limits=self.limits,
            validator=validator,
            retry=retry if retry is not None else RetryPolicy(),
            clock=clock if clock is not None else SystemClock(),
            instructions=instructions,
            settings=(settings or ModelSettings()).model_copy(update={"stream": True})
            if stream
            else (settings or ModelSettings()),
            versions=self._versions(validator),
        )
        self._sinks = tuple(trace_sinks)

    def _versions(self, validator: CompletionValidator | None) -> Versions:
        policy = f"{self.limits.model_dump_json()}|{validator!r}|{self.tools.names()}"
        model_name = getattr(self.model, "model_name", None)
        return Versions(
            ownloop=__version__,
            python=platform.python_version(),
            sdk=_sdk_version(),
            model=model_name if isinstance(model_name, str) else type(self.model).__name__,
            policy_digest=hashlib.sha256(policy.encode()).hexdigest()[:16],
        )

    async def run(
        self, task: str, *, actor: Actor | None = None, run_id: str | None = None
    ) -> RunResult:
        """Run the task to a terminal state (or a pause) and return everything that happened.

        Args:
            task: What the agent should do.
            actor: The authenticated identity the run acts for.
            run_id: An id for the run; a random one by default.

        Returns:
            The result. Budget stops, model failures and rejections are results, not exceptions.

        Raises:
            InputRejected: If the task is empty or longer than ``limits.max_input_chars``, or the
                run id is not 1-128 characters.
            UnexpectedModelCall: If a scripted model ran out of steps (a test bug).
        """
        run_id = self._check_inputs(task, run_id)
        config = self._config
        state = RunState(
            run_id=run_id,
            task=task,
            actor=actor,
            started_at=config.clock.monotonic(),
            trace=TraceRecorder(run_id, config.clock, self._sinks),
            messages=self._opening_messages(task),
        )
        return await self._drive(run_loop(config, state))

    def run_sync(
        self, task: str, *, actor: Actor | None = None, run_id: str | None = None
    ) -> RunResult:
        """Run the task from synchronous code; the same as awaiting `run`.

        Args:
            task: What the agent should do.
            actor: The authenticated identity the run acts for.
            run_id: An id for the run; a random one by default.

        Returns:
            The result.

        Raises:
            ConfigurationError: If called while an event loop is running (await `run` instead).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(task, actor=actor, run_id=run_id))
        raise ConfigurationError(
            "run_sync() was called inside a running event loop; use 'await agent.run(...)'"
        )

    def _check_inputs(self, task: str, run_id: str | None) -> str:
        if not isinstance(task, str) or not task.strip():
            raise InputRejected("the task is empty: give the agent something to do")
        if len(task) > self.limits.max_input_chars:
            raise InputRejected(
                f"the task has {len(task)} characters, more than max_input_chars="
                f"{self.limits.max_input_chars}; shorten it or raise the limit"
            )
        if run_id is None:
            return uuid.uuid4().hex
        if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_ID_CHARS:
            raise InputRejected(f"run_id must be 1-{MAX_ID_CHARS} characters")
        return run_id

    def _opening_messages(self, task: str) -> list[Message]:
        messages: list[Message] = []
        if self._config.instructions:
            messages.append(SystemMessage(content=self._config.instructions))
        messages.append(UserMessage(content=task))
        return messages

    async def _drive(self, loop: LoopGenerator) -> RunResult:
        perform = self._perform
        try:
            effect = next(loop)
            while True:
                effect = loop.send(await perform(effect))
        except StopIteration as finished:
            result: RunResult = finished.value
            return result

    async def _perform(self, effect: Effect) -> Outcome:
        if isinstance(effect, CallModel):
            return await self._call_model(effect)
        if isinstance(effect, InvokeTool):
            try:
                return ToolReturn(
                    await effect.call.tool.invoke(effect.call.arguments, effect.context)
                )
            except Exception as error:
                return Failure(error)
        await self._config.clock.sleep(effect.seconds)
        return None

    async def _call_model(self, effect: CallModel) -> Outcome:
        try:
            async with asyncio.timeout(effect.timeout_s if effect.timeout_s > 0 else 0):
                response: object = await self.model.respond(effect.request)
        except Exception as error:
            return Failure(error)
        if not isinstance(response, ModelResponse):
            return Failure(
                TypeError(f"the model returned {type(response).__name__}, not a ModelResponse")
            )
        return response

    def __repr__(self) -> str:
        return (
            f"Agent(model={self.model!r}, tools={list(self.tools.names())}, "
            f"limits=Limits(max_steps={self.limits.max_steps}, ...))"
        )
