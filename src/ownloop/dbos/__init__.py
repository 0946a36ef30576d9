"""Run agents beyond one machine: ownloop runs as DBOS Transact workflows on PostgreSQL.

Install with ``pip install 'ownloop[dbos]'``. The run loop is the workflow and every model call,
tool call, checkpoint and journal record is a step; ownloop's write journal stays the guarantee
that a write never runs twice (DBOS steps are at-least-once). See ``docs/scale-out.md``.
"""

from __future__ import annotations

from ownloop.exceptions import ConfigurationError

try:
    import dbos as _dbos  # noqa: F401 - only to give a clear error when the extra is missing
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError("ownloop.dbos needs DBOS: pip install 'ownloop[dbos]'") from error

from ownloop.dbos._handoff import recovery_executor_id, recovery_queue
from ownloop.dbos._recover import recover_executor
from ownloop.dbos._runner import (
    APPLICATION_VERSION,
    WORKFLOW_NAME,
    DbosDriver,
    DbosRunner,
    StepClock,
    segment_id,
    worker_config,
)
from ownloop.engines import StepError

__all__ = [
    "APPLICATION_VERSION",
    "WORKFLOW_NAME",
    "DbosDriver",
    "DbosRunner",
    "StepClock",
    "StepError",
    "recover_executor",
    "recovery_executor_id",
    "recovery_queue",
    "segment_id",
    "worker_config",
]
