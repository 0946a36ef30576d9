"""Contracts of tools: the model's proposal, the tool's declaration and the execution receipt."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ownloop.contracts._base import Identifier, JsonValue, Record, ToolName

__all__ = [
    "CallIdentity",
    "Effect",
    "Evidence",
    "Receipt",
    "ReceiptEffect",
    "ReceiptStatus",
    "ToolCall",
    "ToolSpec",
]

Effect = Literal["read", "write"]
"""What a tool may do to the world: only look (``read``) or change something (``write``)."""

ReceiptStatus = Literal["ok", "transient", "unknown", "error"]
"""How an execution ended: done, worth retrying, outcome unknown, or failed."""

ReceiptEffect = Literal["none", "applied", "unknown"]
"""Whether the execution changed the world: not at all, yes, or nobody knows yet."""


class ToolCall(Record):
    """A model's proposal to call a tool; nothing in it is trusted or validated yet.

    Attributes:
        id: The call id the provider gave (or one the adapter made up when it gave none).
        name: The tool name as proposed; may name no tool at all.
        arguments: The raw arguments: usually a JSON string or an object, possibly anything.
    """

    id: Identifier
    name: str = Field(max_length=256)
    arguments: JsonValue = None


class ToolSpec(Record):
    """Everything a model and the runtime need to know about one tool.

    Attributes:
        name: The tool's name, as the model must call it.
        description: What the tool does, for the model.
        parameters: The JSON schema of the arguments (strict-mode compliant when ``strict``).
        strict: Whether the schema follows OpenAI strict mode.
        effect: ``read`` or ``write``.
        requires_approval: Whether every call needs an approval bound to its arguments.
        idempotent: Whether repeating a call with the same idempotency key is harmless.
        timeout_s: Seconds one attempt may take, if bounded.
        max_output_chars: The longest observation this tool may add, if bounded per tool.
        sensitive: Names of parameters whose values must never be traced.
        evidence: Whether the tool's output is a fact source: what it shows the model can be
            cited as evidence (``False`` for tools that echo the model's own words, like memory).
        parallel: Whether calls of this tool may run at the same time as other calls of the same
            turn: ``None`` (the default) lets reads overlap; ``False`` keeps a read on its own.
            Writes always run alone, in the order proposed, so ``True`` on a write is refused.
    """

    name: ToolName
    description: str = Field(default="", max_length=4096)
    parameters: dict[str, JsonValue]
    strict: bool = True
    effect: Effect = "read"
    requires_approval: bool = False
    idempotent: bool = False
    timeout_s: float | None = Field(default=None, gt=0)
    max_output_chars: int | None = Field(default=None, ge=1)
    sensitive: tuple[str, ...] = ()
    evidence: bool = True
    parallel: bool | None = None

    @model_validator(mode="after")
    def _writes_run_alone(self) -> ToolSpec:
        if self.parallel and self.effect == "write":
            raise ValueError(
                "a write tool cannot be parallel: writes run one at a time, in the order proposed"
            )
        return self

    @property
    def overlaps(self) -> bool:
        """Whether a call of this tool may run at the same time as its turn's other calls."""
        return self.effect == "read" and self.parallel is not False


class Receipt(Record):
    """The runtime's record of one tool execution.

    Attributes:
        call_id: The tool call this receipt answers.
        tool: The tool that ran.
        status: How the execution ended.
        effect: Whether it changed the world.
        revision: The state revision the execution saw or produced, when the app tracks one.
        data: The tool's result, JSON-ready.
        message: A short explanation for non-ok receipts.
    """

    call_id: Identifier
    tool: ToolName
    status: ReceiptStatus = "ok"
    effect: ReceiptEffect = "none"
    revision: str | None = Field(default=None, max_length=256)
    data: JsonValue = None
    message: str | None = Field(default=None, max_length=4096)


class Evidence(Record):
    """Something a tool really returned that a final answer may cite.

    Attributes:
        id: The identifier the tool gave the item (for example a document id).
        tool: The tool that returned it.
        call_ids: Every call that returned it, in order; duplicates are merged here (calls of
            the run named by ``from_run`` when that is set).
        title: A short label, if the item carried one.
        from_run: The earlier run of the conversation that observed it, when the run carried
            it over from its history (``agent.run(task, history=...)``); ``None`` for evidence
            a tool returned in this run. A validator tells the two apart by it.
    """

    id: Identifier
    tool: ToolName
    call_ids: tuple[Identifier, ...]
    title: str | None = Field(default=None, max_length=512)
    from_run: Identifier | None = None


class CallIdentity(Record):
    """A call's identity, fixed once when it is first validated, and journaled with it.

    Approval matching, resume, replay, reconcile lookups and take-over read it and never derive
    it again: a resumed call runs with these arguments, under this digest and key, whatever the
    hash seed, the process or the tool's current signature.

    Attributes:
        key: The call's journal key (``call#<n>``).
        call_id: The id the model gave the call.
        tool: The tool.
        arguments: The validated arguments (every default resolved) in the canonical encoding
            of ``ownloop.identity``, by parameter name.
        digest: The call's digest under ``digest_version``.
        idempotency_key: The key a write is attempted with (``None`` for other calls).
        digest_version: The canonical encoding's version (``0``: recorded from a run begun
            before identities were journaled, under the configuration that resumed it).
    """

    key: Identifier
    call_id: Identifier
    tool: ToolName
    arguments: dict[str, JsonValue]
    digest: str = Field(max_length=128)
    idempotency_key: Identifier | None = None
    digest_version: int = Field(default=1, ge=0)
