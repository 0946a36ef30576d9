"""Context compaction through the Agent: whole turns, pinned head, kept tail, placeholder."""

from __future__ import annotations

import importlib.util
import re

import pytest

from ownloop import Agent, ConfigurationError, ContextPolicy, Limits, RunStatus
from ownloop.context import plan_compaction, split_turns
from ownloop.contracts import (
    AssistantMessage,
    ContextCompacted,
    ModelRequested,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.tokens import estimate_request_tokens, heuristic_tokens
from ownloop.validators import Accept, Reject, citations_observed

from .context_kit import (
    INSTRUCTIONS,
    ROOT,
    TASK,
    assert_tool_pairs,
    head_is_kept,
    page_registry,
    paging_script,
    read,
    run_markdown,
    turns_of,
)

POLICY = ContextPolicy(max_request_tokens=1_500, keep_last_turns=2)
PLACEHOLDER = "[Context compacted by the runtime"


def _run(script, policy=POLICY, **options):
    model = ScriptedModel(script)
    agent = Agent(
        model,
        options.pop("registry", page_registry()),
        instructions=INSTRUCTIONS,
        context=policy,
        limits=Limits(max_steps=20),
        **options,
    )
    return agent.run_sync(TASK), model


def _placeholders(messages):
    return [m for m in messages if isinstance(m, UserMessage) and m.content.startswith(PLACEHOLDER)]


def test_defaults_compact_rarely_and_keep_the_last_turn() -> None:
    """ContextPolicy() caps requests at 8,000 estimated tokens and keeps the last turn."""
    policy = ContextPolicy()
    assert (policy.max_request_tokens, policy.keep_last_turns) == (8_000, 1)
    assert policy.counter is heuristic_tokens


@pytest.mark.parametrize(
    ("options", "message"),
    [({"max_request_tokens": 255}, "at least 256"), ({"keep_last_turns": 0}, "at least 1")],
)
def test_impossible_policies_are_configuration_errors(options, message) -> None:
    """A cap below 256 tokens or keeping no turn is refused when the policy is built."""
    with pytest.raises(ConfigurationError, match=message):
        ContextPolicy(**options)


def test_whole_turns_are_dropped_and_every_call_keeps_its_observation() -> None:
    """Turns with one or several calls are dropped whole: no request has an orphan or open call."""
    script = [read(1, 2), read(3), read(4, 5), read(6), read(7, 8), final("done [page-8]")]
    result, model = _run(script)
    assert result.status is RunStatus.COMPLETED
    assert result.usage.compactions >= 2
    for request in model.requests:
        assert_tool_pairs(request.messages)
    assert_tool_pairs(result.messages)


def test_system_message_and_task_are_pinned_in_every_request() -> None:
    """However much is compacted, each request starts with the instructions and the task."""
    result, model = _run(paging_script(7))
    assert result.usage.compactions > 0
    assert all(head_is_kept(request.messages) for request in model.requests)


def test_the_last_turns_are_kept_verbatim() -> None:
    """After a compaction the request still ends with the last keep_last_turns turns, intact."""
    _, model = _run(paging_script(7))
    compacted = [r for r in model.requests if _placeholders(r.messages)]
    assert compacted
    for request in compacted:
        turns = turns_of(request.messages)
        assert len(turns) == POLICY.keep_last_turns
        last_page = request.step - 1
        expected = [f"p{page}" for page in range(last_page - len(turns) + 1, last_page + 1)]
        assert [turn[0].tool_calls[0].id for turn in turns] == expected
        for turn in turns:
            observation = turn[1]
            assert isinstance(observation, ToolMessage)
            assert observation.content.startswith('{"id":"page-')


def test_placeholder_names_what_was_dropped_and_the_evidence_so_far() -> None:
    """The placeholder counts the turns and messages removed and lists every evidence id seen."""
    _, model = _run(paging_script(6))
    first = next(r for r in model.requests if _placeholders(r.messages))
    (placeholder,) = _placeholders(first.messages)
    assert first.messages.index(placeholder) == 2  # right after the instructions and the task
    assert "1 earlier turn(s) in all (1 now, 2 message(s)) were removed" in placeholder.content
    seen = [f"page-{page}" for page in range(1, first.step)]
    assert f"Evidence observed so far: {', '.join(seen)}." in placeholder.content
    last = model.requests[-1]
    assert len(_placeholders(last.messages)) == 1  # a new placeholder replaces the old one
    assert "page-1" in _placeholders(last.messages)[0].content
    result, _ = _run(paging_script(6))
    total = sum(event.dropped_turns for event in result.trace if event.kind == "context_compacted")
    assert f"{total} earlier turn(s) in all" in _placeholders(last.messages)[0].content


def test_compaction_events_record_sizes_and_counts() -> None:
    """Each context_compacted event has the estimated sizes before and after and what it removed."""
    result, model = _run(paging_script(7))
    events = [e for e in result.trace if isinstance(e, ContextCompacted)]
    assert len(events) == result.usage.compactions > 1
    requested = [e for e in result.trace if isinstance(e, ModelRequested)]
    for event in events:
        step = next(e.step for e in requested if e.seq > event.seq)
        sent, before = model.requests[step - 1], model.requests[step - 2]
        full = [*before.messages, *turns_of(sent.messages)[-1]]
        assert event.after_tokens == estimate_request_tokens(sent.messages, sent.tools)
        assert event.before_tokens == estimate_request_tokens(full, sent.tools)
        assert event.before_tokens > POLICY.max_request_tokens >= event.after_tokens
        assert event.dropped_turns == 1  # only the turn removed now, never the old placeholder
        assert event.summarized is False
    assert [e.dropped_messages for e in events] == [2] + [3] * (len(events) - 1)


def test_no_compaction_while_requests_fit() -> None:
    """Under the cap nothing is removed, no event is recorded and the history is whole."""
    result, model = _run(paging_script(4), ContextPolicy(max_request_tokens=100_000))
    assert result.usage.compactions == 0
    assert not [e for e in result.trace if isinstance(e, ContextCompacted)]
    assert len(turns_of(model.requests[-1].messages)) == 4


def test_fewer_turns_are_kept_when_they_alone_exceed_the_cap() -> None:
    """With pages bigger than the cap allows, only the newest turn is kept (never zero)."""
    policy = ContextPolicy(max_request_tokens=1_500, keep_last_turns=3)
    result, model = _run(paging_script(4), policy, registry=page_registry(chars=4_000))
    assert result.status is RunStatus.COMPLETED
    for request in model.requests[1:]:
        assert len(turns_of(request.messages)) == 1
        assert_tool_pairs(request.messages)


def test_rejected_answer_and_its_feedback_stay_together() -> None:
    """Runtime feedback is part of the turn it answers: never kept without the rejected answer."""
    answers = iter([Reject("cite a page"), Accept()])
    script = [read(1), read(2), final("no citation"), read(3), read(4), final("done [page-4]")]
    result, model = _run(script, validators=[lambda output, evidence: next(answers)])
    assert result.status is RunStatus.COMPLETED
    for request in model.requests:
        for index, message in enumerate(request.messages):
            if isinstance(message, UserMessage) and message.content.startswith("Your final"):
                assert isinstance(request.messages[index - 1], AssistantMessage)
                assert request.messages[index - 1].content == "no citation"


def test_evidence_survives_compaction_for_citation_checks() -> None:
    """A page dropped from the context is still evidence: citing it passes the citation check."""
    result, model = _run(
        paging_script(6, "page one said x [page-1]"), validators=[citations_observed()]
    )
    assert result.status is RunStatus.COMPLETED
    assert not any("page-1" in m.content for m in model.requests[-1].messages[3:] if m.content)


def test_plan_keeps_the_head_and_removes_only_whole_turns() -> None:
    """The pure planner pins system messages and the task, and drops turns in order."""
    call = ToolCall(id="c1", name="read_page", arguments={"page": 1})
    turn = [
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(call_id="c1", name="read_page", content="y" * 4_000),
    ]
    messages = [SystemMessage(content="s"), UserMessage(content="t"), *turn, *turn, *turn]
    head, turns = split_turns(messages)
    assert head == messages[:2]
    assert len(turns) == 3
    plan = plan_compaction(messages, (), ContextPolicy(max_request_tokens=1_500, keep_last_turns=2))
    assert plan is not None
    assert (plan.head, plan.dropped_turns, len(plan.dropped), len(plan.tail)) == (
        tuple(head),
        2,
        4,
        2,
    )
    assert plan.apply(UserMessage(content="p")) == [*head, UserMessage(content="p"), *turn]


def test_removing_only_an_old_placeholder_is_not_a_compaction() -> None:
    """When the one kept turn is already alone after a placeholder, nothing is planned."""
    call = ToolCall(id="c1", name="read_page", arguments={"page": 1})
    messages = [
        UserMessage(content="t"),
        UserMessage(content=f"{PLACEHOLDER}: 3 earlier turn(s)]"),
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(call_id="c1", name="read_page", content="y" * 8_000),
    ]
    assert plan_compaction(messages, (), ContextPolicy(max_request_tokens=300)) is None


def test_observations_are_bounded_per_tool_with_a_marker_and_the_full_size_traced() -> None:
    """A tool's max_output_chars cuts its observation with a marker; the trace has the full size."""
    registry = page_registry()
    registry.add(
        lambda: "z" * 5_000, effect="read", name="dump", description="Dump.", max_output_chars=500
    )
    model = ScriptedModel([tool_call("dump"), final("done")])
    result = Agent(model, registry).run_sync(TASK)
    observation = next(m for m in result.messages if isinstance(m, ToolMessage))
    assert len(observation.content) == 500
    assert observation.content.endswith("[truncated: 5000 chars, showing 500]")
    added = next(e for e in result.trace if e.kind == "observation_added")
    assert (added.original_chars, added.chars, added.truncated) == (5_000, 500, True)


def test_a_conversation_without_a_task_message_has_only_system_messages_pinned() -> None:
    """Pinned head: leading system messages, then the first user message if there is one."""
    messages = [SystemMessage(content="s"), AssistantMessage(content="hello")]
    head, turns = split_turns(messages)
    assert head == messages[:1]
    assert turns == [messages[1:]]


def test_the_context_page_runs_and_shows_what_it_prints(capsys) -> None:
    """docs/concepts/context.md runs as written; its before/after listing is the real output."""
    page = run_markdown("docs/concepts/context.md")
    printed = capsys.readouterr().out
    text = (ROOT / "docs/concepts/context.md").read_text(encoding="utf-8")
    listing = re.search(r"```text\n(   system: .*?)```", text, re.S)
    assert listing is not None
    assert listing.group(1) in printed
    (event,) = [e for e in page["result"].trace if isinstance(e, ContextCompacted)]
    assert (event.before_tokens, event.after_tokens, event.dropped_messages) == (1626, 639, 4)
    assert (event.dropped_turns, event.summarized) == (2, False)
    refused = page["refused"]
    assert refused.detail.endswith(
        "limit 500, observed 1004 = 0 tokens used + about 1004 estimated for the next request"
    )


def test_the_default_policy_meets_the_context_benchmark_target() -> None:
    """On the 12-turn, 8 KB benchmark the default sends at most 40% of naive, still correct."""
    spec = importlib.util.spec_from_file_location(
        "bench_context", ROOT / "benchmarks/bench_context.py"
    )
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    naive, naive_sent, _ = bench.run(None)
    compacted, sent, largest = bench.run(ContextPolicy())
    for result in (naive, compacted):
        assert (result.status, result.output) == (RunStatus.COMPLETED, bench.EXPECTED)
        assert result.usage.steps == 12
    assert sent <= 0.4 * naive_sent
    assert largest <= ContextPolicy().max_request_tokens
