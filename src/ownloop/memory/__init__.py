"""Long-term memory: facts an agent keeps across runs, scoped to one tenant and actor.

Short-term memory is the run's conversation (bounded by `ownloop.context`); long-term memory
outlives runs. A `MemoryStore` is the port (``remember``, ``recall``, ``forget``);
`SqliteMemoryStore` keeps memories in a SQLite file with full-text search (FTS5) when this
Python's SQLite has it, and keyword matching otherwise. `register_memory_tools` adds ``remember``
and ``recall`` tools to a registry; their scope comes from the run's trusted actor, never from
the model's arguments. This package imports only the standard library, Pydantic,
`ownloop.contracts`, `ownloop.exceptions` and `ownloop.tools`; it never touches a run's state.
"""

from ownloop.memory._port import (
    Memory,
    MemoryLimits,
    MemoryScope,
    MemoryStore,
    Remembered,
    Sharing,
)
from ownloop.memory._search import fts5_available
from ownloop.memory._sqlite import SqliteMemoryStore
from ownloop.memory._tools import register_memory_tools

__all__ = [
    "Memory",
    "MemoryLimits",
    "MemoryScope",
    "MemoryStore",
    "Remembered",
    "Sharing",
    "SqliteMemoryStore",
    "fts5_available",
    "register_memory_tools",
]
