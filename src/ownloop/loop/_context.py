"""Applying the context policy and the token and cost budgets before each model request."""

from __future__ import annotations

from collections.abc import Generator

from ownloop.budgets import check_cost, check_tokens
from ownloop.context import Compaction, plan_compaction
from ownloop.contracts import (
    ContextCompacted,
    Message,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    UserMessage,
)
from ownloop.cost import cost_of
from ownloop.loop._finish import end_for_budget
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Outcome, Summarize
from ownloop.loop.state import RunState
from ownloop.tokens import estimate_request_tokens, heuristic_tokens

__all__ = ["charge", "prepare_context"]

SUMMARY_INSTRUCTIONS = (
    "Summarize the following earlier steps of an agent run for the agent itself: the actions "
    "taken, the facts and identifiers observed, and what remains open. Be concise and factual; "
    "do not invent anything that is not in the text."
)


def prepare_context(config: LoopConfig, state: RunState) -> Generator[Effect, Outcome, None]:
    """Compact the conversation if needed, then refuse a request that would cross a budget.

    Args:
        config: The run's configuration.
        state: The run's state.

    Yields:
        `Summarize` when a summarizer condenses dropped turns.
    """
    counter = config.context.counter if config.context is not None else heuristic_tokens
    if config.context is not None:
        plan = plan_compaction(state.messages, state.tools, config.context)
        if plan is not None:
            yield from _compact(config, state, plan)
    upcoming = estimate_request_tokens(state.messages, state.tools, counter)
    end_for_budget(check_tokens(config.limits, state.usage, "before_model_call", upcoming))
    if config.limits.max_cost is not None and config.prices is not None:
        price = config.prices.price(config.versions.model)
        end_for_budget(check_cost(config.limits, state.usage, upcoming * price.input / 1_000_000))


def charge(config: LoopConfig, state: RunState, response: ModelResponse) -> None:
    """Add a response's cost to the run's spend, when prices are known.

    Args:
        config: The run's configuration.
        state: The run's state.
        response: The response.
    """
    if config.prices is not None:
        price = config.prices.price(response.model or config.versions.model)
        state.count(cost=cost_of(response.usage, price))


def _compact(
    config: LoopConfig, state: RunState, plan: Compaction
) -> Generator[Effect, Outcome, None]:
    summary = yield from _summary(config, state, plan) if config.has_summarizer else _none()
    known = ", ".join(state.evidence) or "none"
    text = (
        f"[Context compacted by the runtime: {plan.dropped_turns} earlier turn(s), "
        f"{len(plan.dropped)} message(s), were removed to keep requests bounded. "
        f"Evidence observed so far: {known}.]"
    )
    if summary:
        text = f"{text}\nSummary of the removed turns:\n{summary}"
    state.messages = plan.apply(UserMessage(content=text))
    counter = config.context.counter if config.context is not None else heuristic_tokens
    after = estimate_request_tokens(state.messages, state.tools, counter)
    state.count(compactions=1)
    state.trace.emit(
        ContextCompacted,
        before_tokens=plan.before_tokens,
        after_tokens=after,
        dropped_messages=len(plan.dropped),
        dropped_turns=plan.dropped_turns,
        summarized=bool(summary),
    )


def _none() -> Generator[Effect, Outcome, str | None]:
    return None
    yield  # pragma: no cover - makes this a generator


def _summary(
    config: LoopConfig, state: RunState, plan: Compaction
) -> Generator[Effect, Outcome, str | None]:
    if state.usage.model_attempts >= config.limits.max_model_attempts:
        return None  # no attempt left to spend on a summary: fall back to the placeholder
    budget = config.context.max_request_tokens * 2 if config.context is not None else 8_000
    rendered = "\n".join(_render(message) for message in plan.dropped)[:budget]
    request = ModelRequest(
        run_id=state.run_id,
        step=max(state.usage.steps, 1),
        messages=(SystemMessage(content=SUMMARY_INSTRUCTIONS), UserMessage(content=rendered)),
    )
    state.count(model_attempts=1)
    outcome = yield Summarize(request)
    if not isinstance(outcome, ModelResponse):
        return None
    state.count(
        model_requests=1,
        input_tokens=outcome.usage.input_tokens,
        output_tokens=outcome.usage.output_tokens,
    )
    charge(config, state, outcome)
    return (outcome.final_output or "")[: config.limits.max_observation_chars] or None


def _render(message: Message) -> str:
    content = getattr(message, "content", None) or ""
    calls = getattr(message, "tool_calls", ())
    called = "; ".join(f"{call.name}({call.arguments})" for call in calls)
    return f"{message.role}: {content}{' calls: ' + called if called else ''}"
