"""What the durable engines share: the journal rules, the step clock, step outputs and segments.

`ownloop.dbos` and `ownloop.temporal` run the same loop core as workflow code and perform its
effects as the engine's recorded steps through an `EngineDriver`; how a step's outcome is encoded,
how a write refuses to run twice and how a segment starts or resumes live here, once.
"""

from __future__ import annotations

from ownloop.engines._codec import (
    StepError,
    decode_error,
    decode_outcome,
    encode_error,
    encode_outcome,
)
from ownloop.engines._driver import (
    STEP_KINDS,
    EngineDriver,
    Json,
    StepClock,
    nothing,
    reading,
    timed,
)
from ownloop.engines._segment import build_agent, load_resume, run_segment, start_record, summary

__all__ = [
    "STEP_KINDS",
    "EngineDriver",
    "Json",
    "StepClock",
    "StepError",
    "build_agent",
    "decode_error",
    "decode_outcome",
    "encode_error",
    "encode_outcome",
    "load_resume",
    "nothing",
    "reading",
    "run_segment",
    "start_record",
    "summary",
    "timed",
]
