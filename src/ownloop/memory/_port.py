"""The `MemoryStore` port, the scope every memory belongs to, and the bounds a store enforces.

A scope is derived from the authenticated `Actor` the application passes to a run: one tenant,
and either one actor in it (private, the default) or the whole tenant (shared). A store never
returns a memory from another scope, whatever the query says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ownloop._text import clean_text
from ownloop.contracts import Actor
from ownloop.exceptions import ConfigurationError, InputRejected

__all__ = ["Memory", "MemoryLimits", "MemoryScope", "MemoryStore", "Remembered", "Sharing"]

Sharing = Literal["actor", "tenant"]
"""Who shares memories: each actor keeps its own (``actor``) or a tenant's actors share them."""


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memories these are: a tenant, and an actor in it (``None``: the whole tenant).

    Args:
        tenant: The tenant, or ``None`` when the application has no tenants.
        actor: The actor, or ``None`` for memories shared by the whole tenant.

    Raises:
        ConfigurationError: If neither is given (no memory is global) or one is empty.
    """

    tenant: str | None
    actor: str | None

    def __post_init__(self) -> None:
        if self.tenant is None and self.actor is None:
            raise ConfigurationError("a memory scope names a tenant, an actor or both")
        if self.tenant == "" or self.actor == "":
            raise ConfigurationError("a memory scope's tenant and actor may not be empty")

    @classmethod
    def for_actor(cls, actor: Actor, *, sharing: Sharing = "actor") -> MemoryScope:
        """Derive the scope of an authenticated actor.

        Args:
            actor: The run's trusted actor.
            sharing: ``actor`` for the actor's private memories, ``tenant`` for its tenant's.

        Returns:
            The scope.

        Raises:
            ConfigurationError: If ``sharing`` is ``tenant`` and the actor has no tenant.
        """
        if sharing == "tenant":
            if actor.tenant is None:
                raise ConfigurationError(
                    f"actor {actor.id!r} has no tenant, so it has no tenant-shared memory"
                )
            return cls(tenant=actor.tenant, actor=None)
        return cls(tenant=actor.tenant, actor=actor.id)

    def __str__(self) -> str:
        return f"tenant={self.tenant or '-'} actor={self.actor or '(shared)'}"


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """The bounds a memory store enforces.

    Attributes:
        max_entry_chars: The longest memory; a longer one is refused (never silently cut).
        max_entries: Memories kept per scope.
        on_full: What happens when a scope is full: ``evict_oldest`` deletes the oldest memories
            to make room (and reports their ids), ``refuse`` refuses the new one.
        max_tags: Tags per memory.
        max_tag_chars: The longest tag.
        max_query_chars: The longest query; a longer one is cut.
        max_results: The most memories one recall returns.
    """

    max_entry_chars: int = 2_000
    max_entries: int = 1_000
    on_full: Literal["evict_oldest", "refuse"] = "evict_oldest"
    max_tags: int = 8
    max_tag_chars: int = 40
    max_query_chars: int = 500
    max_results: int = 10

    def __post_init__(self) -> None:
        numbers = (self.max_entry_chars, self.max_entries, self.max_tag_chars)
        if min(numbers) < 1 or min(self.max_query_chars, self.max_results) < 1:
            raise ConfigurationError("MemoryLimits sizes and counts must be at least 1")
        if self.max_tags < 0:
            raise ConfigurationError("MemoryLimits.max_tags must be >= 0")
        if self.on_full not in ("evict_oldest", "refuse"):
            raise ConfigurationError(f"on_full must be 'evict_oldest' or 'refuse': {self.on_full}")

    def check_text(self, text: str) -> str:
        """Return the text stripped, or refuse it when empty or too long.

        Args:
            text: A memory's text.

        Raises:
            InputRejected: If it is empty, longer than `max_entry_chars`, or holds text UTF-8
                cannot encode (an unpaired surrogate).
        """
        stripped = text.strip()
        if not stripped:
            raise InputRejected("a memory needs some text")
        if clean_text(stripped) is not stripped:
            raise InputRejected(
                "the memory holds text UTF-8 cannot encode (an unpaired surrogate); "
                "decode it properly before remembering it"
            )
        if len(stripped) > self.max_entry_chars:
            raise InputRejected(
                f"the memory has {len(stripped)} characters, more than max_entry_chars="
                f"{self.max_entry_chars}; remember a shorter, self-contained fact"
            )
        return stripped

    def check_tags(self, tags: Sequence[str]) -> tuple[str, ...]:
        """Return the tags stripped and deduplicated, or refuse them.

        Args:
            tags: A memory's tags.

        Raises:
            InputRejected: If there are too many, or one is empty, too long or not encodable.
        """
        kept = tuple(dict.fromkeys(tag.strip() for tag in tags))
        if len(kept) > self.max_tags:
            raise InputRejected(f"{len(kept)} tags, more than max_tags={self.max_tags}")
        for tag in kept:
            if not tag or len(tag) > self.max_tag_chars:
                raise InputRejected(f"each tag needs 1-{self.max_tag_chars} characters: {tag!r}")
            if clean_text(tag) is not tag:
                raise InputRejected(f"the tag {tag!r} holds an unpaired surrogate")
        return kept


class Memory(BaseModel):
    """One remembered fact.

    Attributes:
        id: The memory's id (``mem-`` and 16 hex digits); recall results cite it.
        text: The fact.
        tags: Keywords it can be found by.
        created_at: When it was remembered (UTC).
        score: How well it matched the query, higher is better (only in recall results).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(max_length=64)
    text: str
    tags: tuple[str, ...] = ()
    created_at: datetime
    score: float | None = None


class Remembered(BaseModel):
    """What `MemoryStore.remember` did.

    Attributes:
        memory: The memory stored (or found, for a repeated idempotency key).
        evicted: Ids of the oldest memories deleted to make room, when the scope was full.
        duplicate: Whether the idempotency key had been seen: nothing new was stored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: Memory
    evicted: tuple[str, ...] = ()
    duplicate: bool = False


@runtime_checkable
class MemoryStore(Protocol):
    """The long-term memory port: remember, recall and forget facts within one scope."""

    async def remember(
        self,
        text: str,
        tags: Sequence[str] = (),
        *,
        scope: MemoryScope,
        idempotency_key: str | None = None,
    ) -> Remembered:
        """Store a fact in a scope.

        Args:
            text: The fact.
            tags: Keywords to find it by.
            scope: Whose memory it is.
            idempotency_key: A key that makes a repeated call store nothing new.

        Returns:
            What was stored, and what was evicted to make room.

        Raises:
            InputRejected: If the text or tags break the store's bounds.
            StoreError: If the scope is full and the store refuses, or storage failed.
        """
        ...

    async def recall(self, query: str, k: int = 3, *, scope: MemoryScope) -> list[Memory]:
        """Return up to ``k`` memories of the scope that best match the query.

        Args:
            query: Keywords; without any, the newest memories are returned.
            k: How many at most (capped by the store's ``max_results``).
            scope: Whose memories to search.

        Returns:
            The best matches first (ties: the newest first).
        """
        ...

    async def forget(self, memory_id: str, *, scope: MemoryScope) -> bool:
        """Delete one memory of the scope.

        Args:
            memory_id: The memory's id.
            scope: Whose memory it is; a memory of another scope is never deleted.

        Returns:
            Whether a memory was deleted.
        """
        ...
