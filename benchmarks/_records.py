"""What the checkpoint benchmarks share: a records tool pair and a throwaway PostgreSQL schema.

Imported by ``bench_checkpoint.py``, ``bench_fencing.py`` and ``bench_checkpoint_growth.py``,
which run as scripts (``python benchmarks/bench_x.py``), so this folder is on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from ownloop.store import PostgresRunStore
from ownloop.tools import ToolRegistry


def records_registry(
    describe: Callable[[str], dict[str, Any]] = lambda key: {},
) -> ToolRegistry:
    """Register ``lookup`` (a read) and ``record`` (a write) over one in-memory table.

    Args:
        describe: Extra fields a lookup returns for a key (they size the checkpointed trace).

    Returns:
        The registry.
    """
    registry = ToolRegistry()
    records: dict[str, int] = {}

    @registry.tool(effect="read")
    def lookup(key: str) -> dict[str, Any]:
        """Read a record.

        Args:
            key: The record.
        """
        return {"id": key, **describe(key), "value": records.get(key)}

    @registry.tool(effect="write")
    def record(key: str, value: int) -> dict[str, Any]:
        """Write a record.

        Args:
            key: The record.
            value: Its value.
        """
        records[key] = value
        return {"id": key, "stored": value}

    return registry


@contextlib.asynccontextmanager
async def throwaway_postgres(dsn: str) -> AsyncIterator[PostgresRunStore]:
    """A PostgreSQL store in a fresh schema, dropped (and the store closed) afterwards.

    Args:
        dsn: The server.

    Yields:
        The store.
    """
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    store = PostgresRunStore(dsn, schema=schema)
    try:
        yield store
    finally:
        connection = await store._connect()
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await store.close()
