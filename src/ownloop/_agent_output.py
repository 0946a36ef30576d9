"""The `Agent` facade's side of typed answers: which mode to ask in, and typed results.

The mode is the strongest mechanism the model adapter offers (an adapter says so with an
``output_mode`` attribute: the OpenAI adapters by compatibility profile, the text ReAct adapter
``prompted``), unless the application chose one. A result is typed once, at the facade: the loop
core carries the value as it is, and a result loaded from a store (whose output is JSON) is
validated back into the type.
"""

from __future__ import annotations

from typing import Any, get_args

from ownloop.contracts import OutputMode, RunResult
from ownloop.exceptions import ConfigurationError
from ownloop.loop._output import OUTPUT_TOOL, OutputSpec, build_output
from ownloop.tools import ToolRegistry

__all__ = ["output_spec", "typed_result"]

_MODES: tuple[str, ...] = get_args(OutputMode)


def output_spec(
    model: object, output_type: Any, output_mode: OutputMode | None, registry: ToolRegistry
) -> OutputSpec | None:
    """Build an agent's output spec, or ``None`` for text answers.

    Args:
        model: The model port (asked for its preferred ``output_mode``).
        output_type: The declared type; ``None`` or ``str`` mean text.
        output_mode: The mode the application chose, if any.
        registry: The agent's tools (the final-result tool's name must be free).

    Returns:
        The spec, or ``None``.

    Raises:
        ConfigurationError: If a mode is given without a type, the type has no strict schema,
            or a registered tool is named like the final-result tool in ``tool`` mode.
    """
    if output_type is None or output_type is str:
        if output_mode is not None:
            raise ConfigurationError("output_mode needs an output_type (the answer is text)")
        return None
    preferred = getattr(model, "output_mode", None)
    mode = output_mode or (preferred if preferred in _MODES else "prompted")
    spec = build_output(output_type, mode)
    if spec.mode == "tool" and OUTPUT_TOOL in registry.names():
        raise ConfigurationError(
            f"a tool named {OUTPUT_TOOL!r} is registered, and output_mode='tool' offers the "
            "final-result tool under that name: rename the tool or choose another output_mode"
        )
    return spec


def typed_result(result: RunResult[Any], spec: OutputSpec | None) -> RunResult[Any]:
    """Return the result as ``RunResult[T]`` of the spec's type (a stored output validated again).

    Args:
        result: The result as the loop (or a store) produced it.
        spec: The agent's output spec; ``None`` returns the result unchanged.

    Returns:
        The typed result.

    Raises:
        ConfigurationError: If a stored output is not a valid value of the type (the run was
            recorded with another ``output_type``).
    """
    if spec is None:
        return result
    output = result.output
    if output is not None:
        try:
            output = spec.adapter.validate_python(output)
        except ValueError as error:
            raise ConfigurationError(
                f"run {result.run_id}'s output is not a valid {spec.format.name}: {error}"
            ) from None
    fields = {name: getattr(result, name) for name in type(result).model_fields}
    fields["output"] = output
    typed = RunResult[spec.output_type]  # type: ignore[name-defined]
    constructed: RunResult[Any] = typed.model_construct(**fields)
    return constructed
