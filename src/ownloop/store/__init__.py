"""Durable runs: the `RunStore` port and its implementations.

`MemoryRunStore` keeps runs in the process (tests); `SqliteRunStore` keeps them in a file (the
default, no server); `PostgresRunStore` (extra ``ownloop[postgres]``) shares them between machines.
Importing this package never needs psycopg: `PostgresRunStore` imports it when it is constructed.
"""

from ownloop.contracts import RunStats
from ownloop.store._listing import run_cursor
from ownloop.store._memory import MemoryRunStore, check_schema, summarize
from ownloop.store._port import RunStore, StoredRun
from ownloop.store._postgres import PostgresRunStore
from ownloop.store._retention import PruneReport, Retention
from ownloop.store._sqlite import SqliteRunStore
from ownloop.store._threads import ThreadStore

__all__ = [
    "MemoryRunStore",
    "PostgresRunStore",
    "PruneReport",
    "Retention",
    "RunStats",
    "RunStore",
    "SqliteRunStore",
    "StoredRun",
    "ThreadStore",
    "check_schema",
    "run_cursor",
    "summarize",
]
