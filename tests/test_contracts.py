"""The contracts: exact JSON round-trips, closed schemas, frozen records and enforced bounds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

import ownloop.contracts
from ownloop import ConfigurationError
from ownloop.contracts import (
    MAX_ID_CHARS,
    TOOL_NAME_PATTERN,
    Actor,
    Approval,
    ApprovalRequest,
    AssistantMessage,
    BudgetWarning,
    CallIdentity,
    Conversation,
    EventBase,
    Evidence,
    JournalEntry,
    Lease,
    Limits,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputFormat,
    PendingOperation,
    Receipt,
    ResumeState,
    RunResult,
    RunSnapshot,
    RunStats,
    RunStatus,
    RunSummary,
    StopReason,
    StreamEnded,
    StreamEvent,
    SystemMessage,
    TextDelta,
    TokenUsage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    ToolVersion,
    TraceEvent,
    Usage,
    UserMessage,
    Versions,
    WriteIntent,
)

AT = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
DIGEST = "sha256:" + "ab" * 32
EVENTS_ADAPTER: TypeAdapter[Any] = TypeAdapter(TraceEvent)
MESSAGE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Message)

# ------------------------------------------------------------------ representative records
# Every field of every sample is set explicitly and to a non-empty value, so a round-trip
# exercises each field's serialisation (test_samples_are_fully_populated keeps this true).

TOOL_CALL = ToolCall(
    id="call_1",
    name="search_documents",
    arguments={"query": "safe agents", "max_results": 3, "filters": [True, None, 1.5]},
)
TOOL_SPEC = ToolSpec(
    name="search_documents",
    description="Search the corpus.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    },
    strict=True,
    effect="write",
    requires_approval=True,
    idempotent=True,
    timeout_s=2.5,
    max_output_chars=500,
    sensitive=("query",),
    evidence=False,
    parallel=False,
)
RECEIPT = Receipt(
    call_id="call_1",
    tool="search_documents",
    status="unknown",
    effect="unknown",
    revision="rev-7",
    data={"hits": [{"id": "doc-1", "score": 0.5}]},
    message="timed out after the request was sent",
)
EVIDENCE = Evidence(
    id="doc-1",
    tool="search_documents",
    call_ids=("call_1", "call_2"),
    title="Evaluating agents",
    from_run="run-0",
)
ACTOR = Actor(id="user-42", tenant="acme", roles=("analyst", "approver"))
APPROVAL_REQUEST = ApprovalRequest(
    id="apr-1",
    call_id="call_3",
    tool="refund_order",
    arguments={"order_id": "o-9", "amount": 12.5},
    digest=DIGEST,
    revision="rev-7",
    actor=ACTOR,
    reason="refunds need a human",
    requested_at=AT,
)
APPROVAL = Approval(
    request_id="apr-1",
    digest=DIGEST,
    approved=True,
    approver="manager-7",
    reason="order checked",
    decided_at=AT,
)
PENDING = PendingOperation(
    call_id="call_3",
    tool="refund_order",
    arguments_digest=DIGEST,
    idempotency_key="idem-1",
    revision="rev-7",
    reason="the payment service timed out",
    created_at=AT,
    journal_key="call#3",
)
LIMITS = Limits(
    max_steps=8,
    max_model_attempts=12,
    max_tool_calls=6,
    max_tool_attempts=9,
    max_total_tokens=50_000,
    deadline_s=90.5,
    max_repeats=2,
    max_observation_chars=4_000,
    max_output_chars=10_000,
    max_input_chars=5_000,
    max_completion_rejections=1,
    max_retries_per_call=2,
    max_cost=1.5,
    max_parallel_tools=4,
)
USAGE = Usage(
    steps=3,
    model_requests=3,
    model_attempts=4,
    tool_calls=2,
    tool_attempts=3,
    input_tokens=1_200,
    output_tokens=300,
    completion_rejections=1,
    invalid_outputs=1,
    cost=0.25,
    compactions=1,
)
TOKEN_USAGE = TokenUsage(
    input_tokens=1_000, output_tokens=200, reasoning_tokens=50, cached_tokens=400, estimated=True
)
SETTINGS = ModelSettings(
    temperature=0.2,
    max_output_tokens=512,
    parallel_tool_calls=False,
    stream=True,
    tool_choice="auto",
)
SYSTEM_MESSAGE = SystemMessage(role="system", content="Cite what the tools return.")
USER_MESSAGE = UserMessage(role="user", content="How should a safe agent be evaluated?")
ASSISTANT_MESSAGE = AssistantMessage(
    role="assistant",
    content="Searching first.",
    tool_calls=(TOOL_CALL,),
    provider_items=({"type": "reasoning", "encrypted_content": "opaque"},),
)
TOOL_MESSAGE = ToolMessage(
    role="tool", call_id="call_1", name="search_documents", content='{"hits": []}'
)
OUTPUT_FORMAT = OutputFormat(
    name="Verdict",
    json_schema={
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
    },
    mode="tool",
    wrapped=True,
)
MODEL_REQUEST = ModelRequest(
    run_id="run-1",
    step=2,
    attempt=2,
    messages=(SYSTEM_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_MESSAGE),
    tools=(TOOL_SPEC,),
    settings=SETTINGS,
    output=OUTPUT_FORMAT,
)
MODEL_RESPONSE = ModelResponse(
    final_output="Evaluate on held-out tasks.",
    tool_calls=(TOOL_CALL,),
    stop_reason="INSUFFICIENT_EVIDENCE",
    usage=TOKEN_USAGE,
    model="gpt-test",
    provider_request_id="req_123",
    provider_items=({"type": "reasoning"},),
    time_to_first_token_s=0.25,
    provider_requests=2,
    notes=("tools_ignored: no tool_choice sent",),
)
TOOL_VERSION = ToolVersion(name="refund_order", effect="write", schema_digest="0123456789abcdef")
VERSIONS = Versions(
    ownloop="0.1.0",
    python="3.11.7",
    sdk="1.99.0",
    model="gpt-test",
    policy_digest=DIGEST,
    tools=(TOOL_VERSION,),
    output_type="Verdict:tool:0123456789abcdef",
)
EVENT_BASE = EventBase(run_id="run-1", seq=1, at=AT)

# One payload per trace event kind, in a plausible order; `seq` is added below.
EVENT_PAYLOADS: list[dict[str, Any]] = [
    {
        "kind": "run_started",
        "task_chars": 38,
        "actor_id": "user-42",
        "tools": ("search_documents",),
        "limits": LIMITS,
        "versions": VERSIONS,
    },
    {
        "kind": "model_requested",
        "step": 1,
        "attempt": 2,
        "messages": 2,
        "request_chars": 120,
        "tools": 1,
    },
    {
        "kind": "model_responded",
        "step": 1,
        "attempt": 2,
        "decision": "tool_calls",
        "tool_calls": ("search_documents",),
        "stop_reason": "INSUFFICIENT_EVIDENCE",
        "usage": TOKEN_USAGE,
        "model": "gpt-test",
        "provider_request_id": "req_123",
        "duration_s": 0.75,
        "time_to_first_token_s": 0.25,
        "provider_requests": 2,
        "notes": ["tools_ignored: no tool_choice sent"],
    },
    {
        "kind": "model_failed",
        "step": 1,
        "attempt": 1,
        "error": {"type": "TransientModelError", "category": "rate_limit", "status": 429},
        "retryable": True,
    },
    {
        "kind": "retry_scheduled",
        "target": "tool",
        "call_id": "call_1",
        "next_attempt": 2,
        "delay_s": 0.5,
        "reason": "transient receipt",
    },
    {
        "kind": "tool_proposed",
        "step": 1,
        "call_id": "call_1",
        "tool": "search_documents",
        "arguments": {"query": "safe agents"},
    },
    {
        "kind": "tool_rejected",
        "call_id": "call_2",
        "tool": "search_documents",
        "code": "invalid_arguments",
        "reason": "max_results must be at most 5",
    },
    {"kind": "tool_started", "call_id": "call_1", "tool": "search_documents", "attempt": 1},
    {
        "kind": "tool_finished",
        "call_id": "call_1",
        "tool": "search_documents",
        "attempt": 1,
        "status": "ok",
        "effect": "applied",
        "duration_s": 0.125,
        "message": "done",
    },
    {
        "kind": "observation_added",
        "call_id": "call_1",
        "source": "tool",
        "chars": 64,
        "original_chars": 9_000,
        "truncated": True,
    },
    {
        "kind": "completion_rejected",
        "validator": "citations",
        "reason": "cites doc-9, which no tool returned",
        "rejections": 1,
    },
    {"kind": "output_invalid", "problem": "not JSON", "answer_chars": 12, "invalid_outputs": 1},
    {"kind": "output_truncated", "original_chars": 30_000, "chars": 20_000},
    {
        "kind": "budget_exhausted",
        "budget": "max_tool_calls",
        "limit": 6.0,
        "observed": 6.0,
        "checkpoint": "before_tool_call",
    },
    {
        "kind": "run_finished",
        "status": RunStatus.STOPPED,
        "stop_reason": StopReason.MAX_TOOL_CALLS,
        "detail": "max_tool_calls: limit 6, observed 6",
        "usage": USAGE,
    },
]
EVENT_PAYLOADS += [
    {
        "kind": "tool_denied",
        "call_id": "call_3",
        "tool": "refund_order",
        "reason": "requires role 'manager'",
        "rule": "require_role('manager')",
    },
    {
        "kind": "approval_requested",
        "request_id": "apr-1",
        "call_id": "call_3",
        "tool": "refund_order",
        "digest": DIGEST,
        "revision": "rev-7",
        "reason": "refunds need a human",
    },
    {
        "kind": "approval_decided",
        "request_id": "apr-1",
        "call_id": "call_3",
        "approved": True,
        "approver": "manager-7",
        "reason": "order checked",
        "source": "supplied",
    },
    {"kind": "run_resumed", "approvals": 1, "elapsed_s": 4.5, "taken_over_from": "worker-0"},
    {"kind": "revision_audited", "call_id": "call_3", "tool": "refund_order", "revision": "rev-8"},
    {
        "kind": "effect_reconciled",
        "call_id": "call_3",
        "tool": "refund_order",
        "outcome": "confirmed",
    },
    {
        "kind": "context_compacted",
        "before_tokens": 9_000,
        "after_tokens": 2_000,
        "dropped_messages": 6,
        "dropped_turns": 3,
        "summarized": True,
    },
    {
        "kind": "sink_failed",
        "sink": "<function ship>",
        "error": "OSError: disk full",
        "failed_seq": 4,
    },
    {
        "kind": "configuration_changed",
        "recorded_digest": "0123456789abcdef",
        "digest": "fedcba9876543210",
        "changes": ["limits (max_steps)"],
    },
]

EVENTS = [
    EVENTS_ADAPTER.validate_python({"run_id": "run-1", "seq": seq, "at": AT, **payload})
    for seq, payload in enumerate(EVENT_PAYLOADS, start=1)
]

CONVERSATION = Conversation(
    continues="run-0",
    thread_id="thread-1",
    earlier_messages=4,
    earlier_evidence=1,
    earlier_usage=USAGE,
)
RUN_RESULT = RunResult(
    run_id="run-1",
    status=RunStatus.STOPPED,
    stop_reason=StopReason.MAX_TOOL_CALLS,
    detail="max_tool_calls: limit 6, observed 6",
    output="Partial answer.",
    raw_output="Partial answer.",
    usage=USAGE,
    limits=LIMITS,
    messages=(SYSTEM_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_MESSAGE),
    trace=tuple(EVENTS),
    evidence=(EVIDENCE,),
    receipts=(RECEIPT,),
    pending=(PENDING,),
    approval_requests=(APPROVAL_REQUEST,),
    approvals=(APPROVAL,),
    versions=VERSIONS,
    resume=None,
    conversation=CONVERSATION,
)
CALL_IDENTITY = CallIdentity(
    key="call#3",
    call_id="call_3",
    tool="refund_order",
    arguments={"order_id": "42", "tags": {"$set": ["a", "b"]}},
    digest=DIGEST,
    idempotency_key="idem-1",
    digest_version=1,
)
RESUME_STATE = ResumeState(
    schema_version=1,
    task="Refund order 42",
    actor=ACTOR,
    queue=(TOOL_CALL,),
    admitted_call_id="call_3",
    last_action="refund_order|{}",
    repeats=1,
    elapsed_s=4.5,
    approvals=(APPROVAL,),
    identities=(CALL_IDENTITY,),
)
PAUSED_RESULT = RUN_RESULT.model_copy(
    update={
        "status": RunStatus.PAUSED,
        "stop_reason": StopReason.APPROVAL_REQUIRED,
        "resume": RESUME_STATE,
    }
)

WRITE_INTENT = WriteIntent(
    run_id="run-1",
    call_id="call_3",
    tool="refund_order",
    idempotency_key="idem-1",
    arguments_digest=DIGEST,
    recorded_at=AT,
    provider_call_id="call_3",
    arguments={"order_id": "42", "tags": {"$set": ["a", "b"]}},
    digest_version=1,
    approval=APPROVAL,
)
JOURNAL_ENTRY = JournalEntry(intent=WRITE_INTENT, receipt=RECEIPT)
LEASE = Lease(
    run_id="run-1",
    owner="worker-1",
    token="tok-1",
    expires_at=AT,
    host="host-a",
    pid=4242,
    taken_over_from="worker-0",
)
RUN_SUMMARY = RunSummary(
    run_id="run-1",
    state="paused",
    status="paused",
    stop_reason="approval_required",
    version=3,
    updated_at=AT,
    actor="alice",
    agent="policy-digest",
)
RUN_STATS = RunStats(
    runs={"paused": 1, "finished": 2},
    statuses={"paused": 1, "completed": 2},
    stop_reasons={"approval_required": 1, "final_output": 2},
    oldest_paused_at=AT,
    unknown_effects=1,
    leased=1,
    usage={"steps": 4.0, "cost": 0.25},
)
RUN_SNAPSHOT = RunSnapshot(
    schema_version=2,
    run_id="run-1",
    state="paused",
    task="Refund order 42",
    actor=ACTOR,
    usage=USAGE,
    limits=LIMITS,
    messages=(SYSTEM_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_MESSAGE),
    trace=tuple(EVENTS),
    evidence=(EVIDENCE,),
    receipts=(RECEIPT,),
    pending=(PENDING,),
    approvals=(APPROVAL,),
    available_approvals=(APPROVAL,),
    approval_requests=(APPROVAL_REQUEST,),
    queue=(TOOL_CALL,),
    identities=(CALL_IDENTITY,),
    admitted_call_id="call_3",
    last_action="refund_order|{}",
    repeats=1,
    elapsed_s=4.5,
    versions=VERSIONS,
    result=PAUSED_RESULT,
    saved_at=AT,
    conversation=CONVERSATION,
)

STREAM_ADAPTER: TypeAdapter[Any] = TypeAdapter(StreamEvent)
TEXT_DELTA = TextDelta(kind="text_delta", run_id="run-1", step=2, text="Evaluate on ")
BUDGET_WARNING = BudgetWarning(
    kind="budget_warning",
    run_id="run-1",
    budget="max_tool_calls",
    name="tool calls",
    used=5,
    limit=6,
    ratio=0.8333,
)
STREAM_ENDED = StreamEnded(kind="stream_ended", run_id="run-1", result=PAUSED_RESULT)

SAMPLES: list[BaseModel] = [
    TOOL_CALL,
    TOOL_SPEC,
    RECEIPT,
    EVIDENCE,
    ACTOR,
    APPROVAL_REQUEST,
    APPROVAL,
    PENDING,
    LIMITS,
    USAGE,
    TOKEN_USAGE,
    SETTINGS,
    SYSTEM_MESSAGE,
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    TOOL_MESSAGE,
    OUTPUT_FORMAT,
    MODEL_REQUEST,
    MODEL_RESPONSE,
    TOOL_VERSION,
    VERSIONS,
    EVENT_BASE,
    *EVENTS,
    CALL_IDENTITY,
    RESUME_STATE,
    CONVERSATION,
    PAUSED_RESULT,
    WRITE_INTENT,
    JOURNAL_ENTRY,
    LEASE,
    RUN_SUMMARY,
    RUN_STATS,
    RUN_SNAPSHOT,
    TEXT_DELTA,
    BUDGET_WARNING,
    STREAM_ENDED,
]


def _name(sample: object) -> str:
    return type(sample).__name__


def _union_members(annotated: Any) -> set[type]:
    union = get_args(annotated)[0]
    return set(get_args(union))


def _is_empty(value: object) -> bool:
    return value is None or (isinstance(value, str | tuple | list | dict) and not value)


# ------------------------------------------------------------------ coverage of the samples


def test_every_exported_contract_has_a_sample() -> None:
    """The samples cover exactly the Pydantic classes ownloop.contracts exports."""
    exported = {
        value
        for name in ownloop.contracts.__all__
        if isinstance(value := getattr(ownloop.contracts, name), type)
        and issubclass(value, BaseModel)
    }
    assert {type(sample) for sample in SAMPLES} == exported


def test_every_trace_event_kind_has_a_sample() -> None:
    """The event samples cover every member of the TraceEvent union, one kind each."""
    assert [type(event) for event in EVENTS] == list(dict.fromkeys(map(type, EVENTS)))
    assert {type(event) for event in EVENTS} == _union_members(TraceEvent)


@pytest.mark.parametrize("sample", SAMPLES, ids=_name)
def test_samples_are_fully_populated(sample: BaseModel) -> None:
    """Each sample sets every field of its class explicitly, to a non-empty value."""
    assert sample.model_fields_set == set(type(sample).model_fields)
    assert [name for name in type(sample).model_fields if _is_empty(getattr(sample, name))] == []


# ------------------------------------------------------------------ JSON round-trips


@pytest.mark.parametrize("sample", SAMPLES, ids=_name)
def test_json_round_trip_is_exact(sample: BaseModel) -> None:
    """Dumping a contract to JSON and validating it back gives an equal record."""
    restored = type(sample).model_validate_json(sample.model_dump_json())
    assert restored == sample
    assert type(restored) is type(sample)


@pytest.mark.parametrize("event", EVENTS, ids=_name)
def test_trace_event_union_dispatches_on_kind(event: Any) -> None:
    """The TraceEvent union restores each event as the class its kind names."""
    assert event.kind == type(event).model_fields["kind"].default
    restored = EVENTS_ADAPTER.validate_json(event.model_dump_json())
    assert type(restored) is type(event)
    assert restored == event


@pytest.mark.parametrize(
    "event", [TEXT_DELTA, BUDGET_WARNING, STREAM_ENDED, *EVENTS[:2]], ids=_name
)
def test_stream_event_union_dispatches_on_kind(event: Any) -> None:
    """The StreamEvent union restores stream-only events and trace events by their kind."""
    restored = STREAM_ADAPTER.validate_json(event.model_dump_json())
    assert type(restored) is type(event)
    assert restored == event


def test_trace_event_union_rejects_an_unknown_kind() -> None:
    """An event whose kind names no event class is an error, not a guess."""
    with pytest.raises(ValidationError) as caught:
        EVENTS_ADAPTER.validate_python({"run_id": "run-1", "seq": 1, "at": AT, "kind": "nope"})
    assert caught.value.errors()[0]["type"] == "union_tag_invalid"


@pytest.mark.parametrize(
    "message", [SYSTEM_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_MESSAGE], ids=_name
)
def test_message_union_dispatches_on_role(message: BaseModel) -> None:
    """The Message union restores each message as the class its role names."""
    restored = MESSAGE_ADAPTER.validate_json(message.model_dump_json())
    assert type(restored) is type(message)
    assert restored == message


def test_message_union_covers_every_message_class() -> None:
    """Every message class is a member of the Message union."""
    assert _union_members(Message) == {SystemMessage, UserMessage, AssistantMessage, ToolMessage}


# ------------------------------------------------------------------ closed, frozen schemas


@pytest.mark.parametrize("sample", SAMPLES, ids=_name)
def test_unknown_fields_are_rejected(sample: BaseModel) -> None:
    """A field the contract does not declare is an error, never silently dropped."""
    payload = {**sample.model_dump(mode="json"), "unexpected": 1}
    if isinstance(sample, Limits):  # Limits reports every invalid input as misconfiguration
        with pytest.raises(ConfigurationError, match="unexpected"):
            Limits.model_validate(payload)
        return
    with pytest.raises(ValidationError) as caught:
        type(sample).model_validate(payload)
    assert [(error["type"], error["loc"]) for error in caught.value.errors()] == [
        ("extra_forbidden", ("unexpected",))
    ]


@pytest.mark.parametrize("sample", SAMPLES, ids=_name)
def test_records_cannot_be_mutated(sample: BaseModel) -> None:
    """Assigning to any field of a record raises, so what happened stays as recorded."""
    for name in type(sample).model_fields:
        with pytest.raises(ValidationError) as caught:
            setattr(sample, name, getattr(sample, name))
        assert caught.value.errors()[0]["type"] == "frozen_instance"


# ------------------------------------------------------------------ bounds

ID_FIELDS = {
    "ToolCall.id": lambda value: ToolCall(id=value, name="search_documents"),
    "Receipt.call_id": lambda value: Receipt(call_id=value, tool="search_documents"),
    "Actor.id": lambda value: Actor(id=value),
    "Actor.roles": lambda value: Actor(id="user-42", roles=(value,)),
    "Approval.request_id": lambda value: Approval(request_id=value, approved=False, approver="a"),
    "ModelRequest.run_id": lambda value: ModelRequest(run_id=value, step=1, messages=()),
    "ModelResponse.provider_request_id": lambda value: ModelResponse(provider_request_id=value),
    "EventBase.run_id": lambda value: EventBase(run_id=value, seq=1, at=AT),
    "RunResult.run_id": lambda value: RunResult(
        run_id=value,
        status=RunStatus.COMPLETED,
        stop_reason=StopReason.FINAL_OUTPUT,
        versions=VERSIONS,
    ),
}


def test_identifier_bound_is_128_characters() -> None:
    """The published identifier bound is 128 characters."""
    assert MAX_ID_CHARS == 128


@pytest.mark.parametrize("build", ID_FIELDS.values(), ids=ID_FIELDS.keys())
def test_identifiers_up_to_128_characters_are_accepted(build: Any) -> None:
    """An identifier of exactly 128 characters is valid."""
    record = build("i" * 128)
    assert type(record).model_validate_json(record.model_dump_json()) == record


@pytest.mark.parametrize("value", ["i" * 129, "i" * 10_000, ""], ids=["129", "10000", "empty"])
@pytest.mark.parametrize("build", ID_FIELDS.values(), ids=ID_FIELDS.keys())
def test_identifiers_out_of_bounds_are_rejected(build: Any, value: str) -> None:
    """An identifier longer than 128 characters, or empty, is rejected."""
    with pytest.raises(ValidationError):
        build(value)


TOOL_NAME_FIELDS = {
    "ToolSpec.name": lambda name: ToolSpec(name=name, parameters={}),
    "Receipt.tool": lambda name: Receipt(call_id="call_1", tool=name),
    "Evidence.tool": lambda name: Evidence(id="doc-1", tool=name, call_ids=("call_1",)),
    "ApprovalRequest.tool": lambda name: ApprovalRequest(
        id="apr-1", call_id="call_1", tool=name, arguments={}, digest=DIGEST
    ),
    "PendingOperation.tool": lambda name: PendingOperation(
        call_id="call_1", tool=name, arguments_digest=DIGEST, idempotency_key="k", reason="r"
    ),
}
VALID_TOOL_NAMES = ["a", "search_documents", "Refund-Order_2", "0", "x" * 64]
INVALID_TOOL_NAMES = [
    "",
    "x" * 65,
    "has space",
    "dotted.name",
    "slash/name",
    "ünïcode",
    "trailing_newline\n",
    "semi;colon",
]


def test_tool_name_pattern_is_the_documented_one() -> None:
    """Tool names follow the OpenAI function-name rule: 1-64 of letters, digits, _ and -."""
    assert TOOL_NAME_PATTERN == r"^[A-Za-z0-9_-]{1,64}$"


@pytest.mark.parametrize("name", VALID_TOOL_NAMES)
@pytest.mark.parametrize("build", TOOL_NAME_FIELDS.values(), ids=TOOL_NAME_FIELDS.keys())
def test_valid_tool_names_are_accepted(build: Any, name: str) -> None:
    """Every field that names a tool accepts names matching the pattern."""
    record = build(name)
    assert type(record).model_validate_json(record.model_dump_json()) == record


@pytest.mark.parametrize("name", INVALID_TOOL_NAMES, ids=repr)
@pytest.mark.parametrize("build", TOOL_NAME_FIELDS.values(), ids=TOOL_NAME_FIELDS.keys())
def test_invalid_tool_names_are_rejected(build: Any, name: str) -> None:
    """Every field that names a tool rejects names outside the pattern."""
    with pytest.raises(ValidationError):
        build(name)


def test_a_proposal_may_name_a_tool_that_cannot_exist() -> None:
    """A proposed call keeps an impossible tool name and raw arguments for the loop to judge."""
    call = ToolCall(id="call_1", name="rm -rf /; also.approve", arguments="{not json")
    assert ToolCall.model_validate_json(call.model_dump_json()) == call


# ------------------------------------------------------------------ Limits and Usage


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_steps", 0),
        ("max_steps", -1),
        ("max_steps", "many"),
        ("max_model_attempts", 0),
        ("max_tool_calls", -1),
        ("max_tool_attempts", -1),
        ("max_total_tokens", 0),
        ("deadline_s", 0),
        ("deadline_s", -1.5),
        ("max_repeats", 0),
        ("max_observation_chars", 0),
        ("max_output_chars", 0),
        ("max_input_chars", 0),
        ("max_completion_rejections", -1),
        ("max_retries_per_call", -1),
    ],
)
def test_impossible_limits_raise_configuration_error_naming_the_field(
    field: str, value: object
) -> None:
    """Limits with an impossible value raise ConfigurationError whose message names the field."""
    with pytest.raises(ConfigurationError, match=rf"\b{field}\b") as caught:
        Limits(**{field: value})
    assert not isinstance(caught.value, ValidationError)


def test_unknown_limit_raises_configuration_error_naming_it() -> None:
    """A misspelt limit is a configuration error naming the misspelling, not a silent default."""
    with pytest.raises(ConfigurationError, match=r"\bmax_stepz\b"):
        Limits(max_stepz=3)


def test_usage_add_returns_a_new_record_with_counters_increased() -> None:
    """Usage.add increases the named counters in a copy and leaves the original unchanged."""
    before = Usage(steps=1, input_tokens=10)
    after = before.add(steps=2, input_tokens=5, output_tokens=7)
    assert after == Usage(steps=3, input_tokens=15, output_tokens=7)
    assert before == Usage(steps=1, input_tokens=10)
    assert after.add() == after


def test_usage_add_accumulates_over_calls() -> None:
    """Successive Usage.add calls accumulate, and total_tokens sums input and output."""
    usage = Usage()
    for _ in range(3):
        usage = usage.add(model_attempts=1, input_tokens=100, output_tokens=20)
    assert usage.model_attempts == 3
    assert usage.total_tokens == 360


def test_token_usage_total_is_input_plus_output() -> None:
    """TokenUsage.total_tokens counts input and output tokens, not the sub-counts twice."""
    assert TOKEN_USAGE.total_tokens == 1_200
