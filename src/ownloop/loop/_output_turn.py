"""The loop's part of a typed answer: ask for it, find it, and re-ask when it is invalid.

The answer is asked for on every request (`output_request`); in ``tool`` mode it arrives as the
arguments of the final-result tool (`answer_in_calls`), which never passes the gateway: it runs
nothing. An invalid answer goes back to the model with what is wrong (`reject_output`); each
re-ask is a model call that draws from the run's shared budgets, and when they allow none the run
stops with `StopReason.INVALID_OUTPUT`, keeping the last raw answer. Nothing here does I/O.
"""

from __future__ import annotations

import json

from ownloop.budgets import check_before_model_attempt, check_before_model_call
from ownloop.contracts import ModelRequest, ModelResponse, OutputInvalid, RunStatus, StopReason
from ownloop.loop._finish import end
from ownloop.loop._observe import add_feedback, add_tool_observation
from ownloop.loop._output import OUTPUT_TOOL, InvalidOutput
from ownloop.loop.config import LoopConfig
from ownloop.loop.state import RunState

__all__ = ["answer_in_calls", "output_request", "reject_output"]

_RECEIVED = "Final answer received."
_NOT_RUN = "Not run: the final answer was given in the same turn."


def output_request(config: LoopConfig, request: ModelRequest) -> ModelRequest:
    """Add the typed answer's format (and, in ``tool`` mode, the final-result tool) to a request.

    Args:
        config: The run's configuration.
        request: The request as the loop assembled it.

    Returns:
        The request to send.
    """
    output = config.output
    if output is None:
        return request
    update: dict[str, object] = {"output": output.format}
    if output.mode == "tool":
        update["tools"] = (*request.tools, output.tool_spec())
    return request.model_copy(update=update)


def answer_in_calls(config: LoopConfig, state: RunState, response: ModelResponse) -> str | None:
    """Return the final-result tool's arguments as the answer, when the model called it.

    Every call of the turn is answered (the final-result call as received, any other as not
    run), so the conversation stays valid if the answer is re-asked.

    Args:
        config: The run's configuration.
        state: The run.
        response: The model's response.

    Returns:
        The answer text, or ``None`` when the response holds no final-result call.
    """
    if config.output is None or config.output.mode != "tool":
        return None
    calls = response.tool_calls
    chosen = next((call for call in calls if call.name == OUTPUT_TOOL), None)
    if chosen is None:
        return None
    for call in calls:
        add_tool_observation(
            state,
            call_id=call.id,
            name=call.name,
            content=_RECEIVED if call is chosen else _NOT_RUN,
            max_chars=config.limits.max_observation_chars,
            source="runtime",
        )
    arguments = chosen.arguments
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def reject_output(config: LoopConfig, state: RunState, invalid: InvalidOutput, answer: str) -> None:
    """Tell the model its answer was invalid, or stop the run when no re-ask is left.

    Args:
        config: The run's configuration.
        state: The run.
        invalid: What is wrong.
        answer: The raw answer (kept in the result as ``raw_output``).

    Raises:
        RunEnded: As ``stopped`` / ``invalid_output`` when the budgets allow no further model
            call.
    """
    state.count(invalid_outputs=1)
    state.trace.emit(
        OutputInvalid,
        problem=invalid.problem[:4096],
        answer_chars=len(answer),
        invalid_outputs=state.usage.invalid_outputs,
    )
    limits = config.limits
    breach = check_before_model_call(limits, state.usage) or check_before_model_attempt(
        limits, state.usage
    )
    if breach is not None:
        end(
            RunStatus.STOPPED,
            StopReason.INVALID_OUTPUT,
            f"the final answer was invalid {state.usage.invalid_outputs} time(s) and "
            f"{breach.describe()} leaves no re-ask; last problem: {invalid.problem}",
        )
    add_feedback(
        state, content=invalid.problem, max_chars=limits.max_observation_chars, source="output"
    )
