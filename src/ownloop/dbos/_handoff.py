"""Hand ownloop segments between DBOS executors without running any of them twice or stranding one.

DBOS admits one executor per pending workflow and recovers a pending workflow only under the
executor id it was claimed with. Two ownloop paths move segments between executors:

- a worker that shuts down hands the segments it could not finish back to the shared queue, so
  any live worker takes them (instead of leaving them pending under an executor id that may never
  launch again);
- ``ownloop workers recover`` moves a dead executor's segments to a private *lane* (a queue only
  that command listens to), so it runs exactly the segments it recovered and no fresh run.

Both are one guarded ``UPDATE`` of DBOS's ``workflow_status`` table: only rows still ``PENDING``
under the named executors (or ``ENQUEUED`` on a named lane) move, and they move to ``ENQUEUED``
with no owner, exactly as DBOS's own recovery re-enqueues a workflow. Two concurrent movers can
therefore never both move a row, and a segment that a live worker has claimed since is never
touched. DBOS's public API has no guarded move to another queue (``resume_workflow`` re-enqueues
whatever is not finished, a running workflow included), so this module uses the system
database's table as DBOS 3.x defines it, through a `dbos.DBOSClient`'s connection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient

__all__ = ["exclusively", "move_segments", "recovery_executor_id", "recovery_queue"]

_PENDING = "PENDING"
_ENQUEUED = "ENQUEUED"


def recovery_queue(queue: str, executor_id: str) -> str:
    """Return the private queue ``workers recover`` runs a dead executor's segments on."""
    return f"{queue}:recover:{executor_id}"


def recovery_executor_id(executor_id: str) -> str:
    """Return the executor id ``workers recover`` launches with for a dead executor.

    It is derived, not random: rerunning the same command after the rescuer itself died launches
    under the same id, so DBOS hands that command back the segments the dead rescuer held.
    """
    return f"{executor_id}:recover"


def move_segments(
    client: DBOSClient,
    *,
    workflow_name: str,
    application_version: str,
    executor_ids: Sequence[str],
    to_queue: str,
    lanes: Sequence[str] = (),
) -> list[str]:
    """Re-enqueue segments pending under ``executor_ids`` (or waiting on ``lanes``) on ``to_queue``.

    Args:
        client: A DBOS client on the system database.
        workflow_name: The workflow whose rows may move (ownloop's segment: never the host's own).
        application_version: Only rows of this version move (only its workers can run them).
        executor_ids: Executors whose ``PENDING`` rows move.
        lanes: Queues whose ``ENQUEUED`` rows move as well.
        to_queue: Where the rows are enqueued.

    Returns:
        The ids of the workflows moved.
    """
    sys_db: Any = client._sys_db  # the client's engine carries DBOS's schema translation
    status = sys_db.tables.workflow_status
    held = sa.and_(status.c.status == _PENDING, status.c.executor_id.in_(list(executor_ids)))
    waiting = sa.and_(status.c.status == _ENQUEUED, status.c.queue_name.in_(list(lanes)))
    statement = (
        status.update()
        .where(status.c.name == workflow_name)
        .where(status.c.application_version == application_version)
        .where(sa.or_(held, waiting))
        .values(
            status=_ENQUEUED,
            queue_name=to_queue,
            owner_xid=None,
            started_at_epoch_ms=None,
            updated_at=int(time.time() * 1000),
        )
        .returning(status.c.workflow_uuid)
    )
    with sys_db.engine.begin() as connection:
        return sorted(str(row[0]) for row in connection.execute(statement))


@contextmanager
def exclusively(client: DBOSClient, name: str) -> Iterator[bool]:
    """Hold a PostgreSQL advisory lock named ``name`` on the system database, if it is free.

    The lock belongs to one connection, so a holder that dies (even by SIGKILL) releases it.

    Args:
        client: A DBOS client on the system database.
        name: What the lock guards.

    Yields:
        Whether this caller holds the lock.
    """
    key = sa.func.hashtext(name)
    with client._sys_db.engine.connect() as connection:
        held = bool(connection.execute(sa.select(sa.func.pg_try_advisory_lock(key))).scalar())
        connection.commit()
        try:
            yield held
        finally:
            if held:  # the connection goes back to the pool: it must not keep the lock
                connection.execute(sa.select(sa.func.pg_advisory_unlock(key)))
                connection.commit()
