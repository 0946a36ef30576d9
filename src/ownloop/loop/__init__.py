"""The loop core: the run as a state machine that yields effects and never performs them."""

from ownloop.loop._deadline import run_deadline, set_run_deadline
from ownloop.loop._delegate import Delegated
from ownloop.loop._snapshot import restore_state, snapshot_of
from ownloop.loop.config import LoopConfig
from ownloop.loop.core import LoopGenerator, run_loop
from ownloop.loop.effects import (
    AskApprover,
    CallModel,
    ConfirmLease,
    Decided,
    Effect,
    Failure,
    InvokeTool,
    InvokeTools,
    Outcome,
    Persist,
    ReadRevision,
    Reconcile,
    RecordIntent,
    RecordReceipt,
    Revision,
    Sleep,
    Summarize,
    ToolResults,
    ToolReturn,
)
from ownloop.loop.state import RunState, pending_key

__all__ = [
    "AskApprover",
    "CallModel",
    "ConfirmLease",
    "Decided",
    "Delegated",
    "Effect",
    "Failure",
    "InvokeTool",
    "InvokeTools",
    "LoopConfig",
    "LoopGenerator",
    "Outcome",
    "Persist",
    "ReadRevision",
    "Reconcile",
    "RecordIntent",
    "RecordReceipt",
    "Revision",
    "RunState",
    "Sleep",
    "Summarize",
    "ToolResults",
    "ToolReturn",
    "pending_key",
    "restore_state",
    "run_deadline",
    "run_loop",
    "set_run_deadline",
    "snapshot_of",
]
