"""Durable runs: the `RunStore` port and its implementations.

`MemoryRunStore` keeps runs in the process (tests); `SqliteRunStore` keeps them in a file (the
default, no server); `PostgresRunStore` (extra ``ownloop[postgres]``) shares them between machines.
"""

from ownloop.store._memory import MemoryRunStore, check_schema, summarize
from ownloop.store._port import RunStore, StoredRun

__all__ = ["MemoryRunStore", "RunStore", "StoredRun", "check_schema", "summarize"]
