"""Tools: declare Python functions as tools with strict schemas, validate calls, invoke them.

This package turns typed, documented functions into tools a model can propose, checks every
proposal against the tool's schema without ever raising for bad model input, and calls the
function with a trusted `ToolContext`. It does not authorize, approve, retry or trace: the runtime
does, using what this package returns. It also ships `calculate`, an arithmetic tool that never
calls ``eval``. It imports only Pydantic, the standard library, `ownloop.contracts`,
`ownloop.identity` (the canonical encoding of a call's arguments) and `ownloop.exceptions`.
"""

from ownloop.tools._arguments import DEFAULT_MAX_ARGUMENT_BYTES
from ownloop.tools._calculator import calculate
from ownloop.tools._context import CallerRun, RunContext, Sensitive, ToolContext
from ownloop.tools._external import ArgumentCheck, ExternalHandler, ExternalTool
from ownloop.tools._inflight import write_settled, write_started
from ownloop.tools._outcomes import RejectionCode, ToolRejection
from ownloop.tools._reconcile import (
    Confirmed,
    NotApplied,
    Reconcile,
    Reconciliation,
    StillUnknown,
)
from ownloop.tools._registry import ToolRegistry
from ownloop.tools._schema import STRICT_KEYWORDS
from ownloop.tools._serialize import render_observation, to_jsonable
from ownloop.tools._threads import call_in_thread, start_in_thread
from ownloop.tools._tool import RegisteredTool, ValidatedCall

__all__ = [
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "STRICT_KEYWORDS",
    "ArgumentCheck",
    "CallerRun",
    "Confirmed",
    "ExternalHandler",
    "ExternalTool",
    "NotApplied",
    "Reconcile",
    "Reconciliation",
    "RegisteredTool",
    "RejectionCode",
    "RunContext",
    "Sensitive",
    "StillUnknown",
    "ToolContext",
    "ToolRegistry",
    "ToolRejection",
    "ValidatedCall",
    "calculate",
    "call_in_thread",
    "render_observation",
    "start_in_thread",
    "to_jsonable",
    "write_settled",
    "write_started",
]
