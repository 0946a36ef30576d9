"""Budgets always hold: a property test over random limits and random model and tool behaviour.

For random `Limits` and a random model port (parallel tool calls, re-asks through the send
budget, replayed reasoning, transient failures with odd retry hints, random token usage and
prices) over random tools (fast, slow sync, hanging async, flaky, writes needing a slow
approver's approval), every run is checked
afterwards against the allowances documented in ``docs/concepts/budgets.md``.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ownloop import Agent, Limits, ModelResponse, Price, PriceTable, ToolCall
from ownloop.budgets import ask_send_budget
from ownloop.contracts import Approval, ApprovalRequest, ModelRequest, TokenUsage
from ownloop.exceptions import TransientModelError, TransientToolError
from ownloop.policy import allow_writes
from ownloop.tools import ToolRegistry

DEADLINE_SLACK_S = 1.5
"""The documented slack: a run returns within ``deadline_s`` plus this."""

MAX_PEAK_BYTES = 64 * 1024 * 1024
"""Far below any reply cap; replies here are small, so a larger peak means something leaked."""

TOOLS = ("fast", "slow", "hang", "flaky", "write")


def registry_for(rng: random.Random, release: threading.Event, ran: list[str]) -> ToolRegistry:
    """Tools that answer, crawl, hang, fail transiently or write, counting what really ran."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def fast(n: int) -> dict[str, str]:
        """Answer at once.

        Args:
            n: Which.
        """
        ran.append("fast")
        return {"id": f"F-{n}"}

    @registry.tool(effect="read")
    def slow(n: int) -> str:
        """Crawl (a sync handler the deadline abandons).

        Args:
            n: Which.
        """
        ran.append("slow")
        release.wait(rng.uniform(0.05, 3.0))
        return "late"

    @registry.tool(effect="read")
    async def hang(n: int) -> str:
        """Never answer (an async handler the deadline cancels).

        Args:
            n: Which.
        """
        ran.append("hang")
        await asyncio.Event().wait()
        return "never"  # pragma: no cover - the wait never ends

    @registry.tool(effect="read")
    def flaky(n: int) -> str:
        """Fail transiently with an odd retry hint.

        Args:
            n: Which.
        """
        ran.append("flaky")
        raise TransientToolError("busy", retry_after=rng.choice([None, float("nan"), 0.0, -1.0]))

    @registry.tool(effect="write", requires_approval=rng.random() < 0.5)
    def write(n: int) -> str:
        """Change something.

        Args:
            n: Which.
        """
        ran.append("write")
        return "written"

    return registry


class RandomPort:
    """A model port behaving at random, asking the send budget before each re-ask."""

    def __init__(self, rng: random.Random, per_request: list[int]) -> None:
        self.rng = rng
        self.per_request = per_request
        self.model_name = "random"

    def _usage(self) -> TokenUsage:
        usage = TokenUsage(
            input_tokens=self.rng.randint(0, 800), output_tokens=self.rng.randint(0, 800)
        )
        self.per_request.append(usage.total_tokens)
        return usage

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer with calls, a final answer or a failure; maybe re-ask first."""
        rng = self.rng
        if rng.random() < 0.15:
            raise TransientModelError(
                "overloaded", retry_after=rng.choice([None, float("nan"), 0.0])
            )
        spent = self._usage()
        reasks = rng.choice([0, 0, 1, 3])
        for sent in range(1, reasks + 1):
            ask_send_budget("x" * rng.randint(0, 8_000), spent, sent)
            more = self._usage()
            spent = TokenUsage(
                input_tokens=spent.input_tokens + more.input_tokens,
                output_tokens=spent.output_tokens + more.output_tokens,
            )
        reasoning = ({"type": "chat.reasoning_content", "text": "r" * rng.randint(0, 8_000)},)
        if rng.random() < 0.15:
            return ModelResponse(final_output="done", usage=spent, provider_requests=reasks + 1)
        calls = tuple(
            ToolCall(
                id=f"s{request.step}a{request.attempt}c{k}",
                name=rng.choice(TOOLS),
                arguments={"n": rng.randint(0, 3)},
            )
            for k in range(rng.randint(1, 4))
        )
        return ModelResponse(
            tool_calls=calls,
            usage=spent,
            provider_items=reasoning,
            provider_requests=reasks + 1,
        )


def approver_for(rng: random.Random, release: threading.Event) -> Any:
    """An approver that approves after a random wait, sometimes longer than any deadline."""

    def approve(request: ApprovalRequest) -> Approval:
        release.wait(rng.choice([0.0, 0.05, 3.0]))
        return Approval(request_id=request.id, approved=True, approver="property")

    return approve


limits_strategy = st.builds(
    Limits,
    max_steps=st.integers(1, 6),
    max_model_attempts=st.integers(1, 10),
    max_tool_calls=st.integers(0, 8),
    max_tool_attempts=st.integers(1, 10),
    max_total_tokens=st.sampled_from([500, 5_000, 20_000, 60_000, 200_000]),
    max_cost=st.sampled_from([None, 0.001, 0.01, 0.1]),
    deadline_s=st.floats(0.2, 0.7),
    max_retries_per_call=st.integers(0, 2),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(limits=limits_strategy, seed=st.integers(0, 2**32 - 1))
def test_every_budget_holds_within_its_documented_allowance(limits: Limits, seed: int) -> None:
    """No counter passes its limit beyond the allowance; the run returns in time, memory small."""
    rng = random.Random(seed)
    release = threading.Event()
    ran: list[str] = []
    per_request: list[int] = []
    price = Price(input=0.2, output=0.4)  # per million tokens
    agent = Agent(
        RandomPort(rng, per_request),
        registry_for(rng, release, ran),
        limits=limits,
        policy=allow_writes("write"),
        prices=PriceTable({}, default=price),
        approver=approver_for(rng, release),
    )
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = agent.run_sync("go")
        took = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        release.set()
    usage = result.usage
    event(f"ended {result.stop_reason.value}")
    event(f"{len(ran)} handler(s) ran")
    assert usage.steps <= limits.max_steps
    assert usage.model_attempts <= limits.max_model_attempts
    assert usage.tool_calls <= limits.max_tool_calls
    assert usage.tool_attempts <= limits.max_tool_attempts
    assert len(ran) <= usage.tool_attempts  # a handler runs only as a counted attempt
    largest = max(per_request, default=0)
    # The response (one request) that crosses the token budget is counted, nothing after it.
    assert usage.total_tokens <= limits.max_total_tokens + largest
    if limits.max_cost is not None:
        assert usage.cost <= limits.max_cost + largest * price.output / 1_000_000
    assert took <= limits.deadline_s + DEADLINE_SLACK_S
    assert peak < MAX_PEAK_BYTES
