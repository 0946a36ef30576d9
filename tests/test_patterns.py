"""plan_execute: a validated plan, bounded runs per subtask, reviews, one budget and one trace."""

from __future__ import annotations

import asyncio
import json

import pytest

from ownloop import (
    Actor,
    Agent,
    ConfigurationError,
    InputRejected,
    Limits,
    ModelResponse,
    Price,
    PriceTable,
    RunStatus,
    StopReason,
    TokenUsage,
)
from ownloop.contracts import ModelRequest
from ownloop.patterns import (
    Plan,
    PlanExecuteResult,
    Review,
    ReviewRequest,
    plan_execute,
    plan_execute_sync,
)
from ownloop.testing import FakeClock, FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import ToolContext, ToolRegistry

from .context_kit import run_markdown

GOAL = "Compare the populations of Hangzhou and Nanjing."
SUBTASKS = ["Look up Hangzhou's population", "Look up Nanjing's population", "Compute the gap"]
TOTAL = Limits(max_steps=30, max_model_attempts=60, max_total_tokens=100_000, deadline_s=600)
SMALL = Limits(max_steps=3, max_model_attempts=6, max_total_tokens=5_000, deadline_s=60)


def plan_json(subtasks=SUBTASKS, fence=False) -> str:
    """Return a plan as the planner writes it, optionally in a code fence."""
    text = json.dumps({"subtasks": list(subtasks)})
    return f"```json\n{text}\n```" if fence else text


def review(action: str, **fields) -> ModelResponse:
    """Return a reviewer's JSON answer."""
    return final(json.dumps({"action": action, **fields}))


def executor(*answers: str, limits: Limits = SMALL) -> Agent:
    """Return an executor agent answering each subtask in turn."""
    return Agent(ScriptedModel([final(answer) for answer in answers]), limits=limits)


def run(planner, execute, **options) -> PlanExecuteResult:
    """Run the pattern on the goal under the total budget unless told otherwise."""
    options.setdefault("limits", TOTAL)
    return plan_execute_sync(planner, execute, GOAL, run_id="pe", **options)


def test_a_plan_is_executed_step_by_step_until_the_review_finishes() -> None:
    """Plan, two subtasks with reviews, then the reviewer's answer: one result, runs in order."""
    planner = ScriptedModel(
        [
            final(plan_json(fence=True)),
            review("continue"),
            review("finish", answer="Hangzhou has 298 (10k) more people."),
        ]
    )
    result = run(planner, executor("1252 (10k)", "954 (10k)"))
    assert (result.status, result.stop_reason) == (RunStatus.COMPLETED, StopReason.FINAL_OUTPUT)
    assert result.output == "Hangzhou has 298 (10k) more people."
    assert result.detail == "the review after subtask 2 finished the goal"
    assert result.plans == (Plan(subtasks=tuple(SUBTASKS)),)
    assert [(r.phase, r.step, r.result.run_id) for r in result.runs] == [
        ("plan", 0, "pe-plan"),
        ("execute", 1, "pe-execute-1"),
        ("review", 1, "pe-review-1"),
        ("execute", 2, "pe-execute-2"),
        ("review", 2, "pe-review-2"),
    ]
    assert [r.subtask for r in result.steps] == SUBTASKS[:2]
    planner.assert_complete()


def test_one_trace_and_one_usage_for_the_whole_pattern() -> None:
    """The trace is every run's events in order, and usage adds up every run."""
    planner = ScriptedModel(
        [final(plan_json()), review("continue"), review("continue"), review("continue")]
    )
    result = run(planner, executor("a", "b", "c"))
    assert result.status is RunStatus.COMPLETED
    run_ids = [event.run_id for event in result.trace]
    assert run_ids == [event.run_id for r in result.runs for event in r.result.trace]
    assert (run_ids[0], run_ids[-1]) == ("pe-plan", "pe-review-3")
    assert [e.kind for e in result.trace].count("run_started") == len(result.runs) == 7
    assert result.usage.steps == sum(r.result.usage.steps for r in result.runs) == 7


def test_each_subtask_sees_the_goal_and_the_earlier_results() -> None:
    """An executor's task names the goal, the results before it and its own subtask."""
    model = ScriptedModel([final("1252"), final("954"), final("298")])
    planner = ScriptedModel(
        [final(plan_json()), review("continue"), review("continue"), review("continue")]
    )
    result = run(planner, Agent(model, limits=SMALL))
    assert result.output == "298"  # the plan ran to its end: the last result answers
    assert result.detail == "the plan ran to its end after 3 subtask(s)"
    task = model.requests[2].messages[-1].content
    assert task.startswith(f"Overall goal: {GOAL}")
    assert "1. Look up Hangzhou's population\n   result: 1252" in task
    assert "Your subtask (3 of 3): Compute the gap" in task


def test_an_invalid_plan_is_sent_back_once_to_be_rewritten_as_json() -> None:
    """Prose instead of JSON is rejected with a reason; the rewrite is accepted."""
    planner = ScriptedModel(
        [
            final("First look things up, then compute."),
            final(plan_json()),
            review("finish", answer="x"),
        ]
    )
    result = run(planner, executor("a"))
    assert result.status is RunStatus.COMPLETED
    plan_run = result.runs[0].result
    assert plan_run.usage.completion_rejections == 1
    feedback = plan_run.messages[-2].content
    assert "not a valid plan" in feedback
    assert "Answer again with the JSON only" in feedback


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ('{"subtasks": ["only one"]}', "at least 2 items"),
        (json.dumps({"subtasks": [f"step number {n}" for n in range(7)]}), "at most 6 are allowed"),
        ('{"subtasks": ["Same step", "same step"]}', "subtasks repeat"),
        ('{"subtasks": ["ok step", "  "]}', "at least 3 characters"),
        ('{"steps": ["a step", "b step"]}', "subtasks: Field required"),
        ("[1, 2]", "Input should be a valid string"),
    ],
)
def test_a_plan_that_stays_invalid_fails_clearly(bad: str, problem: str) -> None:
    """After the one rewrite, an invalid plan fails the pattern before any subtask runs."""
    planner = ScriptedModel([final(bad), final(bad)])
    execute = executor()
    result = run(planner, execute)
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.COMPLETION_REJECTED)
    assert result.detail.startswith("planning ended failed (completion_rejected)")
    assert problem in result.detail
    assert result.steps == ()
    assert result.plans == ()


def test_a_bare_json_list_is_a_plan() -> None:
    """The tutorial's format, a bare JSON array, is accepted too."""
    planner = ScriptedModel(
        [final(json.dumps(SUBTASKS[:2])), review("continue"), review("continue")]
    )
    assert run(planner, executor("a", "b")).plans == (Plan(subtasks=tuple(SUBTASKS[:2])),)


def test_a_review_may_revise_the_remaining_plan() -> None:
    """A revision replaces what remains; the plan history shows the whole revised plan."""
    planner = ScriptedModel(
        [
            final(plan_json()),
            review("revise", subtasks=["Look up Suzhou's population instead"]),
            review("finish", answer="Suzhou is bigger."),
        ]
    )
    result = run(planner, executor("1252", "1296"))
    assert result.output == "Suzhou is bigger."
    assert [r.subtask for r in result.steps] == [SUBTASKS[0], "Look up Suzhou's population instead"]
    assert result.plans[1].subtasks == (SUBTASKS[0], "Look up Suzhou's population instead")


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (review("revise", subtasks=[f"new step {n}" for n in range(6)]), "only 5 more may run"),
        (review("revise", subtasks=[SUBTASKS[0]]), "subtasks repeat"),
        (review("finish"), "carries an answer"),
        (review("continue", subtasks=["x step"]), "carries the new subtasks"),
        (final("looks good"), "not a valid review"),
    ],
)
def test_an_invalid_review_is_sent_back_then_fails(bad: ModelResponse, problem: str) -> None:
    """Reviews are checked like plans: one rewrite, then a clear failure."""
    planner = ScriptedModel([final(plan_json()), bad, bad])
    result = run(planner, executor("a"))
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.COMPLETION_REJECTED)
    assert result.detail.startswith("the review run of subtask 1 ended failed")
    assert problem in result.detail


def test_a_review_function_decides_without_a_model() -> None:
    """A reviewer callable (sync or async) sees the goal, results and what remains."""
    seen: list[ReviewRequest] = []

    async def reviewer(request: ReviewRequest) -> Review:
        seen.append(request)
        if len(request.done) == 2:
            return Review(action="finish", answer=f"gap from {request.done[1][1]}")
        return Review(action="continue")

    planner = ScriptedModel([final(plan_json())])
    result = run(planner, executor("1252", "954"), reviewer=reviewer)
    assert result.output == "gap from 954"
    assert [r.phase for r in result.runs] == ["plan", "execute", "execute"]
    assert seen[0] == ReviewRequest(GOAL, ((SUBTASKS[0], "1252"),), tuple(SUBTASKS[1:]), 5)


def test_a_review_function_that_plans_too_much_fails_the_pattern() -> None:
    """A reviewer callable's revision is held to the same allowance; beyond it the pattern fails."""

    def reviewer(request: ReviewRequest) -> Review:
        return Review(action="revise", subtasks=tuple(f"extra step {n}" for n in range(9)))

    result = run(ScriptedModel([final(plan_json())]), executor("a"), reviewer=reviewer)
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.COMPLETION_REJECTED)
    assert "only 5 more may run" in result.detail


def test_a_subtask_run_that_does_not_complete_ends_the_pattern_with_its_reason() -> None:
    """A stopped sub-run is not papered over: the pattern stops with the same reason."""
    registry = ToolRegistry()

    def search(query: str) -> str:
        """Search."""
        return "nothing"

    registry.add(search, effect="read")
    looping = FunctionModel(
        lambda request: tool_call("search", f"c{request.step}", query=str(request.step))
    )
    planner = ScriptedModel([final(plan_json())])
    result = run(planner, Agent(looping, registry, limits=SMALL))
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_STEPS)
    assert result.detail.startswith("the execute run of subtask 1 ended stopped (max_steps)")


def test_an_agent_executor_is_admitted_only_while_its_limits_fit() -> None:
    """A fixed Agent's limits are reserved; when they no longer fit, the pattern stops first."""
    planner = ScriptedModel([final(plan_json()), review("continue"), review("continue")])
    total = Limits(max_steps=7, max_model_attempts=60, max_total_tokens=100_000, deadline_s=600)
    result = run(planner, executor("a", "b"), limits=total)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_STEPS)
    assert len(result.steps) == 2  # 1 planning + 2 x (1 step + 1 review) = 5 used, 2 left < 3
    assert result.detail.startswith("subtask 3 could use max_steps=3 (its agent's limits) but 2")
    assert "pass a factory that builds it from the remaining budget" in result.detail
    assert result.usage.steps == 5 <= total.max_steps


def test_an_agent_executor_without_a_money_cap_does_not_fit_a_money_budget() -> None:
    """Under a shared max_cost, an executor with no max_cost of its own cannot be reserved."""
    prices = PriceTable({}, default=Price(input=0, output=0))
    planner = ScriptedModel([final(plan_json())])
    total = TOTAL.model_copy(update={"max_cost": 1.0})
    result = run(planner, executor("a"), limits=total, prices=prices)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_COST)
    assert "could use no limit" in result.detail


def test_a_factory_builds_each_executor_from_what_remains() -> None:
    """A factory receives the remaining budget: what the earlier runs used is gone."""
    given: list[Limits] = []
    spend = TokenUsage(input_tokens=1_000, output_tokens=200)

    def factory(remaining: Limits) -> Agent:
        given.append(remaining)
        answer = ModelResponse(final_output=f"r{len(given)}", usage=spend)
        return Agent(ScriptedModel([answer]), limits=remaining)

    clock = FakeClock(tick=1.0)
    planner = ScriptedModel(
        [final(plan_json()), review("continue"), review("continue"), review("continue")]
    )
    result = run(planner, factory, clock=clock)
    assert result.status is RunStatus.COMPLETED
    assert [limits.max_total_tokens for limits in given] == [100_000, 98_800, 97_600]
    assert [limits.max_steps for limits in given] == [29, 27, 25]
    assert given[0].deadline_s > given[1].deadline_s > given[2].deadline_s
    assert result.usage.total_tokens == 3 * spend.total_tokens


def test_the_shared_token_budget_stops_the_pattern_when_used_up() -> None:
    """Once the runs together used the token budget, nothing more starts."""

    def factory(remaining: Limits) -> Agent:
        answer = ModelResponse(final_output="r", usage=TokenUsage(input_tokens=600))
        return Agent(ScriptedModel([answer]), limits=remaining)

    planner = ScriptedModel([final(plan_json()), review("continue")])
    total = TOTAL.model_copy(update={"max_total_tokens": 600})
    result = run(planner, factory, limits=total)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOTAL_TOKENS)
    assert result.detail == (
        "the shared budget max_total_tokens is used up before the review of subtask 1: "
        "limit 600, used 600"
    )


def test_the_shared_deadline_stops_the_pattern() -> None:
    """Time runs on the pattern's clock; past the deadline no further run starts."""
    clock = FakeClock()

    def factory(remaining: Limits) -> Agent:
        clock.advance(100)
        return Agent(ScriptedModel([final("slow")]), limits=remaining, clock=clock)

    planner = ScriptedModel([final(plan_json()), review("continue")])
    total = TOTAL.model_copy(update={"deadline_s": 150})
    result = run(planner, factory, limits=total, clock=clock)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.DEADLINE)
    assert result.detail.startswith("the shared budget deadline_s is used up before the review of")
    assert len(result.steps) == 2


def test_every_run_acts_for_the_actor() -> None:
    """The actor reaches each subtask's tools, as trusted context."""
    seen: list[str | None] = []
    registry = ToolRegistry()

    def whoami(ctx: ToolContext) -> str:
        """Say who the run acts for."""
        seen.append(ctx.actor.id if ctx.actor else None)
        return "ok"

    registry.add(whoami, effect="read")
    model = ScriptedModel([tool_call("whoami"), final("done")])
    planner = ScriptedModel([final(plan_json(SUBTASKS[:2])), review("finish", answer="done")])
    result = run(planner, Agent(model, registry, limits=SMALL), actor=Actor(id="alice"))
    assert result.status is RunStatus.COMPLETED
    assert seen == ["alice"]
    assert result.runs[0].result.resume is None


def test_the_planner_is_asked_with_instructions_and_the_goal() -> None:
    """Planning is a tool-less run whose system message asks for 2 to max_subtasks subtasks."""
    requests: list[ModelRequest] = []

    def planner(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        return (
            final(plan_json(SUBTASKS[:2])) if len(requests) == 1 else review("finish", answer="x")
        )

    run(FunctionModel(planner), executor("a"), max_subtasks=4)
    system, task = requests[0].messages
    assert "Split the goal into 2 to 4 subtasks" in system.content
    assert task.content == f"Goal: {GOAL}\n\nWrite the plan."
    assert requests[0].tools == ()
    assert "You review progress" in requests[1].messages[0].content
    assert "A revision may plan at most 3 subtasks." in requests[1].messages[1].content


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_subtasks": 1}, ConfigurationError, "max_subtasks must be 2-20"),
        ({"max_rewrites": -1}, ConfigurationError, "max_rewrites"),
        ({"limits": TOTAL.model_copy(update={"max_cost": 1.0})}, ConfigurationError, "price table"),
        ({"run_id": "x" * 101}, ConfigurationError, "run_id must be 1-100"),
        ({"goal": "  "}, InputRejected, "the goal must have"),
    ],
)
def test_impossible_arguments_are_refused_before_any_model_call(options, error, message) -> None:
    """Bad configuration or an empty goal raise before planning."""
    planner = ScriptedModel([])
    options = {"limits": TOTAL, "run_id": "pe", **options}
    goal = options.pop("goal", GOAL)
    with pytest.raises(error, match=message):
        plan_execute_sync(planner, executor(), goal, **options)
    assert planner.requests == []


def test_the_sync_twin_refuses_to_run_inside_an_event_loop() -> None:
    """Inside a running loop, plan_execute must be awaited."""

    async def inside() -> None:
        with pytest.raises(ConfigurationError, match="inside a running event loop"):
            plan_execute_sync(ScriptedModel([]), executor(), GOAL, limits=TOTAL)
        result = await plan_execute(
            ScriptedModel([final(plan_json(SUBTASKS[:2])), review("finish", answer="ok")]),
            executor("a"),
            GOAL,
            limits=TOTAL,
        )
        assert result.output == "ok"
        assert len(result.id) == 16

    asyncio.run(inside())


def test_subtask_evidence_is_collected() -> None:
    """Items tools returned in subtask runs are the pattern's evidence."""
    registry = ToolRegistry()

    def population(city: str) -> dict[str, object]:
        """Get a city's population."""
        return {"id": f"pop-{city}", "value": 1}

    registry.add(population, effect="read")
    model = ScriptedModel([tool_call("population", city="hz"), final("1252")])
    planner = ScriptedModel([final(plan_json(SUBTASKS[:2])), review("finish", answer="done")])
    result = run(planner, Agent(model, registry, limits=SMALL))
    assert [item.id for item in result.evidence] == ["pop-hz"]


def test_the_shared_money_budget_stops_the_pattern_when_spent() -> None:
    """Costs of every run add up; once max_cost is spent, nothing more starts."""
    prices = PriceTable({}, default=Price(input=1_000.0, output=0.0))  # 0.001 per input token

    def factory(remaining: Limits) -> Agent:
        answer = ModelResponse(final_output="r", usage=TokenUsage(input_tokens=500))
        return Agent(ScriptedModel([answer]), limits=remaining, prices=prices)

    planner = ScriptedModel([final(plan_json())])
    total = TOTAL.model_copy(update={"max_cost": 0.5})
    result = run(planner, factory, limits=total, prices=prices)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_COST)
    assert result.usage.cost == pytest.approx(0.5)
    assert "max_cost is used up before the review of subtask 1" in result.detail


def test_a_spent_budget_admits_no_agent_executor() -> None:
    """When planning alone used the budget up, the executor is never reserved or run."""
    planner = ScriptedModel(
        [final(plan_json()).model_copy(update={"usage": TokenUsage(input_tokens=5_000)})]
    )
    total = TOTAL.model_copy(update={"max_total_tokens": 5_000})
    result = run(planner, executor(), limits=total)
    assert (result.status, result.stop_reason) == (RunStatus.STOPPED, StopReason.MAX_TOTAL_TOKENS)
    assert "used up before subtask 1" in result.detail


def test_the_patterns_page_runs_as_written(capsys) -> None:
    """Every code block of docs/concepts/patterns.md runs, and says what the page claims."""
    page = run_markdown("docs/concepts/patterns.md")
    assert page["chain_answer"] == "Hangzhou has 2.98 million more people than Nanjing, 31.2% more."
    assert [turns for turns, _ in page["loop_answers"]] == [4, 2, 2]
    assert page["loop_answers"][2][1] == "I have no population data for Lhasa."
    outcome = page["outcome"]
    assert (outcome.status, outcome.output) == ("completed", "Hangzhou: 2.98 million (31.2%) more.")
    assert [(run.phase, run.step) for run in outcome.runs] == [
        ("plan", 0),
        ("execute", 1),
        ("review", 1),
    ]
    printed = capsys.readouterr().out
    assert "the chain cannot take this path: 'Lhasa'" in printed
    assert "[('plan', 0, 1), ('execute', 1, 4), ('review', 1, 1)]" in printed
