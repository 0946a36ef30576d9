"""What the SQL stores share: how records become rows, how rows become records, and refusals.

Both `SqliteRunStore` and `PostgresRunStore` keep snapshots, intents, receipts and approvals as
Pydantic JSON (never pickle) and check a snapshot's schema version on the way in and on the way
out. This module holds that shared mapping; it does no I/O.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from ownloop.contracts import SNAPSHOT_SCHEMA_VERSION, RunSnapshot
from ownloop.exceptions import SchemaVersionError, StaleCheckpoint, StoreError
from ownloop.store._memory import check_schema
from ownloop.store._rules import lease_held, lease_lost, receipt_exists
from ownloop.store._schema import STORE_SCHEMA_VERSION

__all__ = [
    "SnapshotRow",
    "lease_held",
    "lease_lost",
    "load_record",
    "load_snapshot",
    "newer_store_schema",
    "receipt_exists",
    "snapshot_row",
    "stale",
]

RecordT = TypeVar("RecordT", bound=BaseModel)


class SnapshotRow(NamedTuple):
    """The columns of a ``runs`` row, except its version and layout.

    ``actor`` and ``agent`` repeat two fields of the state record as columns of their own, so a
    listing reads them from its index (store schema 6) rather than from the record.
    """

    run_id: str
    state: str
    status: str | None
    stop_reason: str | None
    updated_at: datetime
    snapshot: str
    actor: str | None
    agent: str | None


def snapshot_row(snapshot: RunSnapshot) -> SnapshotRow:
    """Return the row of a snapshot, refusing a schema version this ownloop does not know.

    Args:
        snapshot: The snapshot.

    Raises:
        SchemaVersionError: If its schema version is unknown.
    """
    check_schema(snapshot)
    result = snapshot.result
    return SnapshotRow(
        run_id=snapshot.run_id,
        state=snapshot.state,
        status=result.status.value if result is not None else None,
        stop_reason=result.stop_reason.value if result is not None else None,
        updated_at=snapshot.saved_at.astimezone(UTC),
        snapshot=snapshot.model_dump_json(),
        actor=snapshot.actor.id if snapshot.actor is not None else None,
        agent=snapshot.versions.policy_digest,
    )


def load_snapshot(run_id: str, text: str | bytes) -> RunSnapshot:
    """Parse a stored snapshot, failing fast on a schema version newer than this ownloop reads.

    Args:
        run_id: The run (named in errors).
        text: The stored JSON.

    Raises:
        SchemaVersionError: If the snapshot is newer than this ownloop reads.
        StoreError: If it is not a valid snapshot.
    """
    try:
        snapshot = RunSnapshot.model_validate_json(text)
    except ValidationError as error:
        # A newer format may not validate at all: say so rather than "invalid snapshot".
        version = _schema_version_of(text)
        if version is not None and version > SNAPSHOT_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"run {run_id} has snapshot schema version {version}; this ownloop reads "
                f"versions 1 to {SNAPSHOT_SCHEMA_VERSION} (upgrade ownloop to resume it)"
            ) from error
        raise StoreError(f"the stored snapshot of run {run_id} is not valid: {error}") from error
    check_schema(snapshot)
    return snapshot


def _schema_version_of(text: str | bytes) -> int | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    version = data.get("schema_version") if isinstance(data, dict) else None
    return version if isinstance(version, int) else None


def load_record(kind: type[RecordT], run_id: str, text: str | bytes) -> RecordT:
    """Parse a stored intent, receipt or approval.

    Args:
        kind: The record class.
        run_id: The run (named in errors).
        text: The stored JSON.

    Raises:
        StoreError: If it is not a valid record of that kind.
    """
    try:
        return kind.model_validate_json(text)
    except ValidationError as error:
        raise StoreError(
            f"a stored {kind.__name__} of run {run_id} is not valid: {error}"
        ) from error


def stale(run_id: str, found: int | None, expected: int | None) -> StaleCheckpoint:
    """Return the error of a save whose expected version is not the stored one."""
    if found is None:
        state = "is not stored"
    elif expected is None:
        state = f"already exists (version {found})"
    else:
        state = f"is at version {found}, not {expected}"
    return StaleCheckpoint(f"run {run_id} {state}: another writer saved it first")


def newer_store_schema(where: str, found: int) -> SchemaVersionError:
    """Return the error of a database laid out by a newer ownloop."""
    return SchemaVersionError(
        f"the run store at {where} has store schema version {found}; this ownloop knows versions "
        f"1 to {STORE_SCHEMA_VERSION} (upgrade ownloop to use it)"
    )
