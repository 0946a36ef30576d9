"""The loop core: the run as a state machine that yields effects and never performs them."""

from ownloop.loop.config import LoopConfig
from ownloop.loop.core import LoopGenerator, run_loop
from ownloop.loop.effects import CallModel, Effect, Failure, InvokeTool, Outcome, Sleep, ToolReturn
from ownloop.loop.state import RunState

__all__ = [
    "CallModel",
    "Effect",
    "Failure",
    "InvokeTool",
    "LoopConfig",
    "LoopGenerator",
    "Outcome",
    "RunState",
    "Sleep",
    "ToolReturn",
    "run_loop",
]
