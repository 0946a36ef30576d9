"""The loop core: the run as a state machine that yields effects and never performs them."""

from ownloop.loop.config import LoopConfig
from ownloop.loop.core import LoopGenerator, run_loop
from ownloop.loop.effects import (
    AskApprover,
    CallModel,
    Decided,
    Effect,
    Failure,
    InvokeTool,
    Outcome,
    ReadRevision,
    Reconcile,
    Revision,
    Sleep,
    ToolReturn,
)
from ownloop.loop.state import RunState

__all__ = [
    "AskApprover",
    "CallModel",
    "Decided",
    "Effect",
    "Failure",
    "InvokeTool",
    "LoopConfig",
    "LoopGenerator",
    "Outcome",
    "ReadRevision",
    "Reconcile",
    "Revision",
    "RunState",
    "Sleep",
    "ToolReturn",
    "run_loop",
]
