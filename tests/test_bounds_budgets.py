"""Every request is a budgeted attempt: re-asks, replayed items, compaction, money, patterns."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from ownloop import Agent, ContextPolicy, Limits, ModelResponse, Price, PriceTable, ToolCall
from ownloop.contracts import ContextCompacted, TokenUsage
from ownloop.exceptions import ConfigurationError
from ownloop.models import ReActTextModel, allow_model_requests
from ownloop.patterns import plan_execute_sync
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tools import ToolRegistry

from .openai_server import OpenAIServer, json_reply

GOOD = "Thought: done\nFinal Answer: 42"


def completion(text: str, prompt: int = 10, completion_tokens: int = 10) -> Any:
    """A chat completion answering ``text`` with the given usage."""
    return json_reply(
        {
            "id": "c",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
            },
        }
    )


def react_run(limits: Limits, *replies: Any) -> tuple[Any, list[Any]]:
    """Run a ReAct agent against a loopback server playing ``replies``."""
    with OpenAIServer() as server, allow_model_requests(True):
        server.add(*replies)
        model = ReActTextModel("m", api_key="sk-test", base_url=server.url, max_format_retries=2)
        result = Agent(model, limits=limits).run_sync("What is six times seven?")
        return result, list(server.requests)


def test_a_re_ask_needs_a_model_attempt_left() -> None:
    """With one model attempt, a reply that does not parse is not re-asked: the run stops."""
    bad = completion("x" * 500_000, completion_tokens=125_000)
    limits = Limits(max_model_attempts=1, max_total_tokens=20_000)
    result, received = react_run(limits, bad, bad, completion(GOOD))
    assert (result.status, result.stop_reason) == ("stopped", "max_model_attempts")
    assert len(received) == 1
    assert result.usage.model_attempts == 1


def test_a_re_ask_must_fit_the_token_budget_with_what_the_step_used() -> None:
    """A re-ask after a reply that crossed the token budget is never sent."""
    bad = completion("not the format " * 10, completion_tokens=30_000)
    limits = Limits(max_model_attempts=10, max_total_tokens=20_000)
    result, received = react_run(limits, bad, completion(GOOD))
    assert (result.status, result.stop_reason) == ("stopped", "max_total_tokens")
    assert len(received) == 1
    assert result.usage.total_tokens == 30_010  # the crossing reply is counted, nothing after it
    assert result.usage.model_requests == 1


def test_a_re_ask_resends_a_bounded_copy_of_the_bad_reply() -> None:
    """A 300 K-character bad reply is resent cut to 16,000 characters, and the re-ask counts."""
    result, received = react_run(
        Limits(max_total_tokens=1_000_000), completion("y" * 300_000), completion(GOOD)
    )
    assert result.status == "completed", result.detail
    assert len(json.dumps(received[1].body)) < 20_000
    assert result.usage.model_attempts == 2
    assert result.usage.model_requests == 2


@pytest.mark.parametrize(
    "item",
    [
        {"type": "chat.reasoning_content", "text": "r" * 60_000},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "e" * 60_000},
        {"type": "react.reply", "text": "Thought: " + "t" * 60_000},
    ],
)
def test_replayed_provider_items_count_in_the_next_request_estimate(item: Any) -> None:
    """Reasoning, encrypted content and ReAct text sent back are estimated before sending."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def look() -> str:
        """Look."""
        return "seen"

    call = ToolCall(id="c1", name="look", arguments={})
    first = ModelResponse(tool_calls=(call,), provider_items=(item,))
    model = ScriptedModel([first, final("done")])
    result = Agent(model, registry, limits=Limits(max_total_tokens=5_000)).run_sync("go")
    assert (result.status, result.stop_reason) == ("stopped", "max_total_tokens")
    assert len(model.requests) == 1


def test_compaction_never_enlarges_a_request_whatever_the_evidence_ids() -> None:
    """Hundreds of long evidence ids do not make the placeholder outgrow what it replaces."""
    registry = ToolRegistry()
    served = Counter[str]()

    @registry.tool(effect="read")
    def fetch(n: int) -> list[dict[str, str]]:
        """Fetch records (more than an observation shows).

        Args:
            n: Which page.
        """
        served["fetch"] += 1
        return [{"id": f"{'E' * 100}-{n}-{k}"} for k in range(20)]

    steps = [tool_call("fetch", f"c{n}", n=n) for n in range(40)]
    model = ScriptedModel([*steps, final("done")])
    agent = Agent(
        model,
        registry,
        limits=Limits(max_steps=60, max_model_attempts=80, max_tool_calls=60, max_tool_attempts=60),
        context=ContextPolicy(max_request_tokens=600, keep_last_turns=1),
    )
    result = agent.run_sync("go")
    compactions = [e for e in result.trace if isinstance(e, ContextCompacted)]
    assert result.status == "completed", result.detail
    assert compactions
    assert all(event.after_tokens < event.before_tokens for event in compactions)
    assert max(len(r.messages[2].content or "") for r in model.requests[3:]) < 1_400


def test_crossing_max_cost_runs_none_of_the_crossing_responses_calls() -> None:
    """Like tokens: the response that crosses max_cost is counted, and none of its calls runs."""
    registry = ToolRegistry()
    ran = Counter[str]()

    @registry.tool(effect="read")
    def act(n: int) -> str:
        """Act.

        Args:
            n: Which.
        """
        ran["act"] += 1
        return "done"

    calls = tuple(ToolCall(id=f"c{n}", name="act", arguments={"n": n}) for n in range(5))
    costly = ModelResponse(tool_calls=calls, usage=TokenUsage(input_tokens=10, output_tokens=1_000))
    model = ScriptedModel([costly, final("done")], model_name="m")
    prices = PriceTable({"m": Price(input=0.0, output=1_000.0)})  # 1.0 for 1,000 output tokens
    limits = Limits(max_cost=0.5)
    result = Agent(model, registry, limits=limits, prices=prices).run_sync("go")
    assert (result.status, result.stop_reason) == ("stopped", "max_cost")
    assert ran["act"] == 0
    assert result.usage.cost == pytest.approx(1.0)


def test_plan_execute_checks_a_factorys_agent_against_the_shared_budget() -> None:
    """A factory that ignores the remaining budget is refused before its agent runs."""
    built: list[Agent] = []

    def factory(remaining: Limits) -> Agent:
        agent = Agent(ScriptedModel([final("r")]), limits=Limits(max_steps=10, max_tool_calls=8))
        built.append(agent)
        return agent

    planner = ScriptedModel([final(json.dumps({"subtasks": ["first step", "second step"]}))])
    total = Limits(max_steps=6, max_tool_calls=4, max_model_attempts=20, deadline_s=60)
    result = plan_execute_sync(planner, factory, "goal", limits=total)
    assert result.status == "stopped"
    assert result.stop_reason == "max_steps"
    assert [len(agent.model.requests) for agent in built] == [0]  # type: ignore[attr-defined]


def test_plan_execute_checks_the_reviewers_price_before_any_model_call() -> None:
    """A reviewer without a price fails with ConfigurationError before the planner is paid."""
    prices = PriceTable({"planner": Price(input=1.0, output=1.0)})
    planner = ScriptedModel(
        [final(json.dumps({"subtasks": ["a step", "b step"]}))], model_name="planner"
    )
    reviewer = ScriptedModel([], model_name="unpriced")
    executor = Agent(ScriptedModel([final("r")], model_name="planner"), prices=prices)
    limits = Limits(max_cost=1.0, deadline_s=60)
    with pytest.raises(ConfigurationError):
        plan_execute_sync(
            planner, executor, "goal", limits=limits, reviewer=reviewer, prices=prices
        )
    assert planner.requests == []
