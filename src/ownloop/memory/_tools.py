"""The ready-made ``remember`` and ``recall`` tools, scoped by the run's trusted actor.

The scope is derived from `ToolContext.actor` — the identity the application passed to the run —
and never from arguments: the tools' schemas have no tenant or actor parameter, so a model cannot
even ask for another scope. A run without an actor gets an error observation, not someone else's
memories. Expected refusals (no actor, a fact too long, a full scope) come back as ``error``
receipts, which the loop shows the model; the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from ownloop.contracts import Receipt
from ownloop.exceptions import ConfigurationError, OwnloopError
from ownloop.memory._port import Memory, MemoryScope, MemoryStore, Sharing
from ownloop.tools import RegisteredTool, ToolContext, ToolRegistry

__all__ = ["register_memory_tools"]

MAX_RECALL = 10
"""The most memories one ``recall`` call may ask for (a store may return fewer)."""

RecallCount = Annotated[int, Field(ge=1, le=MAX_RECALL)]


def _refusal(ctx: ToolContext, message: str) -> Receipt:
    return Receipt(call_id=ctx.call_id, tool=ctx.tool, status="error", message=message[:4096])


def _scope(ctx: ToolContext, sharing: Sharing) -> MemoryScope | Receipt:
    if ctx.actor is None:
        return _refusal(
            ctx,
            "memory is not available in this run: it acts for no authenticated actor "
            "(the application must pass actor=... to the run)",
        )
    try:
        return MemoryScope.for_actor(ctx.actor, sharing=sharing)
    except OwnloopError as error:
        return _refusal(ctx, str(error))


def _shown(memory: Memory) -> dict[str, Any]:
    """What the model sees of a memory: no scope, no score (scores reflect the whole file)."""
    return {
        "id": memory.id,
        "text": memory.text,
        "tags": list(memory.tags),
        "remembered_at": memory.created_at.isoformat(timespec="seconds"),
    }


def _remember_tool(store: MemoryStore, sharing: Sharing) -> Callable[..., Any]:
    async def remember(text: str, tags: list[str], ctx: ToolContext) -> Receipt | dict[str, Any]:
        """Remember a durable fact about the user or the work, for later runs.

        Args:
            text: One self-contained fact, in a sentence or two.
            tags: A few keywords to find the fact by (may be empty).
            ctx: The call's trusted context (injected by the runtime; never in the schema).
        """
        scope = _scope(ctx, sharing)
        if isinstance(scope, Receipt):
            return scope
        try:
            stored = await store.remember(
                text, tags, scope=scope, idempotency_key=ctx.idempotency_key
            )
        except OwnloopError as error:
            return _refusal(ctx, str(error))
        return {"id": stored.memory.id, "stored": True, "evicted": list(stored.evicted)}

    return remember


def _recall_tool(store: MemoryStore, sharing: Sharing) -> Callable[..., Any]:
    async def recall(query: str, k: RecallCount, ctx: ToolContext) -> Receipt | dict[str, Any]:
        """Recall remembered facts that match a query, best matches first.

        Args:
            query: Keywords describing what to recall.
            k: How many memories at most (1-10).
            ctx: The call's trusted context (injected by the runtime; never in the schema).
        """
        scope = _scope(ctx, sharing)
        if isinstance(scope, Receipt):
            return scope
        try:
            found = await store.recall(query, k, scope=scope)
        except OwnloopError as error:
            return _refusal(ctx, str(error))
        return {"memories": [_shown(memory) for memory in found]}

    return recall


def register_memory_tools(
    registry: ToolRegistry,
    store: MemoryStore,
    *,
    sharing: Sharing = "actor",
    remember_name: str = "remember",
    recall_name: str = "recall",
    recall_evidence: bool = False,
) -> tuple[RegisteredTool, RegisteredTool]:
    """Add ``remember`` (a write) and ``recall`` (a read) tools backed by ``store``.

    ``remember`` is a write tool, so the default policy denies it until the application allows
    it (``allow_writes("remember")``); it is idempotent (a retried call stores nothing twice).

    Args:
        registry: Where to register the tools.
        store: The memory store.
        sharing: ``actor``: each actor remembers and recalls only its own memories (the
            default); ``tenant``: an actor's tenant shares them (actors without a tenant get an
            error observation).
        remember_name: The name of the remembering tool.
        recall_name: The name of the recalling tool.
        recall_evidence: Whether recalled memories are evidence an answer may cite. Memory is
            not a fact source by default: it holds what models wrote. ``remember``'s output
            (the new memory's id) never is.

    Returns:
        The two registered tools.

    Raises:
        ConfigurationError: If ``sharing`` is unknown.
        ToolDefinitionError: If a tool of either name is already registered.
    """
    if sharing not in ("actor", "tenant"):
        raise ConfigurationError(f"sharing must be 'actor' or 'tenant', not {sharing!r}")
    return (
        registry.add(
            _remember_tool(store, sharing),
            name=remember_name,
            effect="write",
            idempotent=True,
            evidence=False,
        ),
        registry.add(
            _recall_tool(store, sharing), name=recall_name, effect="read", evidence=recall_evidence
        ),
    )
