"""Applying the context policy and the token and cost budgets before each model request."""

from __future__ import annotations

from collections.abc import Generator

from ownloop.budgets import check_before_model_attempt, check_cost, check_tokens
from ownloop.context import Compaction, plan_compaction
from ownloop.contracts import (
    ContextCompacted,
    Message,
    ModelFailed,
    ModelRequest,
    ModelRequested,
    ModelResponded,
    ModelResponse,
    SystemMessage,
    TokenUsage,
    UserMessage,
)
from ownloop.cost import Price, cost_of
from ownloop.exceptions import ConfigurationError, SendRefused
from ownloop.loop._finish import end_for_budget
from ownloop.loop._inputs import clean_response
from ownloop.loop.config import LoopConfig
from ownloop.loop.effects import Effect, Failure, Outcome, Summarize
from ownloop.loop.state import RunState
from ownloop.tokens import estimate_request_tokens, heuristic_tokens

__all__ = ["StepBudget", "charge", "prepare_context", "upcoming_cost"]

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
    if state.tool_tokens is None:
        state.tool_tokens = estimate_request_tokens((), state.tools, counter)
    upcoming = estimate_request_tokens(state.messages, (), counter) + state.tool_tokens
    end_for_budget(check_tokens(config.limits, state.usage, "before_model_call", upcoming))
    if config.limits.max_cost is not None and config.prices is not None:
        price = _price(config, config.versions.model)
        end_for_budget(check_cost(config.limits, state.usage, upcoming * price.input / 1_000_000))


def upcoming_cost(config: LoopConfig, tokens: int) -> float:
    """The estimated input cost of a request of ``tokens`` tokens (0 without prices)."""
    if config.prices is None:
        return 0.0
    return tokens * _price(config, config.versions.model).input / 1_000_000


class StepBudget:
    """The `SendBudget` of one model attempt: admits (and counts) a port's further requests.

    A further request (a ReAct re-ask) is a model attempt like any other: it needs an attempt
    left, and the tokens and money spent so far (the run's, plus the attempt's answered
    requests), plus the request's own estimate, must stay within their limits.

    Args:
        config: The run's configuration.
        state: The run's state.

    Attributes:
        counted: How many further requests were admitted (and counted as attempts).
    """

    def __init__(self, config: LoopConfig, state: RunState) -> None:
        self._config = config
        self._state = state
        self.counted = 0

    def admit(self, text: str, spent: TokenUsage, sent: int) -> None:
        """Count a further request as a model attempt, or raise `SendRefused`.

        Args:
            text: What the request sends.
            spent: The usage of the attempt's answered requests.
            sent: How many requests the attempt already sent.
        """
        config, state = self._config, self._state
        limits = config.limits
        counter = config.context.counter if config.context is not None else heuristic_tokens
        upcoming = counter(text)
        so_far = state.usage.model_copy(
            update={
                "input_tokens": state.usage.input_tokens + spent.input_tokens,
                "output_tokens": state.usage.output_tokens + spent.output_tokens,
                "cost": state.usage.cost + _spent_cost(config, spent),
            }
        )
        breach = (
            check_before_model_attempt(limits, state.usage, "before_reask")
            or check_tokens(limits, so_far, "before_reask", upcoming)
            or check_cost(limits, so_far, upcoming_cost(config, upcoming))
        )
        if breach is not None:
            raise SendRefused(breach.describe(), breach=breach, usage=spent, sent=sent)
        state.count(model_attempts=1)
        self.counted += 1


def _spent_cost(config: LoopConfig, usage: TokenUsage) -> float:
    if config.prices is None:
        return 0.0
    return cost_of(usage, _price(config, config.versions.model))


def charge(config: LoopConfig, state: RunState, response: ModelResponse) -> None:
    """Add a response's cost to the run's spend, when prices are known.

    Args:
        config: The run's configuration.
        state: The run's state.
        response: The response.
    """
    if config.prices is not None:
        state.count(cost=cost_of(response.usage, _price(config, response.model)))


def _price(config: LoopConfig, model: str | None) -> Price:
    """The price of ``model``, or of the agent's configured model when ``model`` is unpriced.

    The response was already paid for: an unlisted name reported by the provider must not lose
    the run. The agent checked at construction that its configured model has a price.
    """
    assert config.prices is not None
    try:
        return config.prices.price(model or config.versions.model)
    except ConfigurationError:
        return config.prices.price(config.versions.model)


MAX_LISTED_EVIDENCE_CHARS = 1_000
"""The most characters of evidence ids a compaction placeholder lists (the newest ones)."""


def _listed_evidence(ids: list[str]) -> str:
    """The newest evidence ids that fit `MAX_LISTED_EVIDENCE_CHARS`, and how many are left out."""
    listed: list[str] = []
    size = 0
    for evidence_id in reversed(ids):
        size += len(evidence_id) + 2
        if size > MAX_LISTED_EVIDENCE_CHARS:
            break
        listed.append(evidence_id)
    text = ", ".join(reversed(listed)) or "none"
    omitted = len(ids) - len(listed)
    return f"{text} (and {omitted} earlier)" if omitted else text


def _compact(
    config: LoopConfig, state: RunState, plan: Compaction
) -> Generator[Effect, Outcome, None]:
    summary = yield from _summary(config, state, plan) if config.has_summarizer else _none()
    earlier = state.compacted_turns  # a count: the trace held in memory may be a tail
    text = (
        f"[Context compacted by the runtime: {earlier + plan.dropped_turns} earlier turn(s) in "
        f"all ({plan.dropped_turns} now, {len(plan.dropped)} message(s)) were removed to keep "
        f"requests bounded. Evidence observed so far: {_listed_evidence(list(state.evidence))}.]"
    )
    if summary:
        text = f"{text}\nSummary of the removed turns:\n{summary}"
    counter = config.context.counter if config.context is not None else heuristic_tokens
    messages = plan.apply(UserMessage(content=text))
    after = estimate_request_tokens(messages, state.tools, counter)
    if after >= plan.before_tokens and summary:  # never larger: drop the summary first
        summary = None
        messages = plan.apply(UserMessage(content=text.split("\nSummary of the removed")[0]))
        after = estimate_request_tokens(messages, state.tools, counter)
    if after >= plan.before_tokens:
        return  # the placeholder would outweigh what it replaces: keep the conversation
    state.messages = messages
    state.count(compactions=1)
    state.compacted_turns += plan.dropped_turns
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
    counter = config.context.counter if config.context is not None else heuristic_tokens
    upcoming = estimate_request_tokens(request.messages, (), counter)
    if check_tokens(config.limits, state.usage, "before_model_call", upcoming) is not None:
        return None  # a summary would cross the token budget: the placeholder costs nothing
    if config.limits.max_cost is not None and config.prices is not None:
        price = _price(config, config.versions.model)
        if check_cost(config.limits, state.usage, upcoming * price.input / 1_000_000) is not None:
            return None
    state.count(model_attempts=1)
    state.trace.emit(
        ModelRequested,
        step=request.step,
        attempt=1,
        messages=len(request.messages),
        request_chars=len(SUMMARY_INSTRUCTIONS) + len(rendered),
        tools=0,
    )
    started = config.clock.monotonic()
    remaining = config.limits.deadline_s - (config.clock.monotonic() - state.started_at)
    outcome = yield Summarize(request, max(remaining, 0.0))
    if not isinstance(outcome, ModelResponse):
        failure = outcome.error if isinstance(outcome, Failure) else None
        state.trace.emit(
            ModelFailed,
            step=request.step,
            attempt=1,
            error={"type": type(failure).__name__, "message": "summary failed: placeholder used"},
            retryable=False,
        )
        return None
    outcome = clean_response(outcome)  # the summarizer is a model: its text enters the run here
    state.count(
        model_requests=1,
        input_tokens=outcome.usage.input_tokens,
        output_tokens=outcome.usage.output_tokens,
    )
    charge(config, state, outcome)
    state.trace.emit(
        ModelResponded,
        step=request.step,
        attempt=1,
        decision="final",
        usage=outcome.usage,
        model=outcome.model,
        provider_request_id=outcome.provider_request_id,
        duration_s=max(config.clock.monotonic() - started, 0.0),
    )
    cap = min(config.limits.max_observation_chars, budget)  # a summary is bounded like the rest
    return (outcome.final_output or "")[:cap] or None


def _render(message: Message) -> str:
    content = getattr(message, "content", None) or ""
    calls = getattr(message, "tool_calls", ())
    called = "; ".join(f"{call.name}({call.arguments})" for call in calls)
    return f"{message.role}: {content}{' calls: ' + called if called else ''}"
