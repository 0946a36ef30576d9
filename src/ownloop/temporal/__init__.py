"""Run agents on Temporal: each run is a Temporal workflow, each effect a recorded local activity.

Install with ``pip install 'ownloop[temporal]'``. The run loop is workflow code and every model
call, tool call, checkpoint and journal record is a local activity with an explicit timeout and no
Temporal retry of the work; ownloop's write journal stays the guarantee that a write never runs
twice. A paused run waits for an ``approve`` signal without holding a worker slot. See
``docs/scale-out.md``.
"""

from __future__ import annotations

from ownloop.exceptions import ConfigurationError

try:
    import temporalio as _temporalio  # noqa: F401 - only to give a clear error without the extra
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "ownloop.temporal needs the Temporal SDK: pip install 'ownloop[temporal]'"
    ) from error

from ownloop.temporal._driver import STEP_ACTIVITY, TemporalDriver, ownloop_step
from ownloop.temporal._runner import (
    STEP_LAYOUT,
    VERSION,
    TemporalRunner,
    VersionRefused,
    sandbox,
    workflow_id,
)
from ownloop.temporal._workflow import APPROVE_SIGNAL, WORKFLOW_NAME, OwnloopRun

__all__ = [
    "APPROVE_SIGNAL",
    "STEP_ACTIVITY",
    "STEP_LAYOUT",
    "VERSION",
    "WORKFLOW_NAME",
    "OwnloopRun",
    "TemporalDriver",
    "TemporalRunner",
    "VersionRefused",
    "ownloop_step",
    "sandbox",
    "workflow_id",
]
