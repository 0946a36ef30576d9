"""Turn a tool function's signature into a Pydantic model of its arguments.

The model is the single source of truth for a tool's arguments: its JSON schema becomes the tool's
schema and it validates what the model proposes. Each parameter becomes a field under a private
name with the parameter's name as alias, so no parameter name can clash with Pydantic's own
attributes. `ToolContext` parameters are left out (the runtime injects them). Everything a function
cannot express (missing annotations, ``*args``, positional-only parameters, unknown types) is a
`ToolDefinitionError` naming the function and the parameter, raised at registration.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ownloop.exceptions import ToolDefinitionError
from ownloop.tools._context import Sensitive, ToolContext
from ownloop.tools._secrets import secret_names

__all__ = [
    "ArgumentsModel",
    "FunctionShape",
    "Parameter",
    "analyse_function",
    "build_arguments_model",
    "definition_error",
    "function_label",
]

_EMPTY = inspect.Parameter.empty
_ARGUMENTS_CONFIG = ConfigDict(extra="forbid", validate_by_alias=True, validate_by_name=False)


@dataclass(frozen=True, slots=True)
class Parameter:
    """One argument parameter of a tool function (context parameters are not among them).

    Attributes:
        name: The parameter's name; also its property name in the schema.
        field: The private field name of the parameter in the arguments model.
        annotation: The resolved annotation, ``Annotated`` metadata included.
        default: The Python default, or ``inspect.Parameter.empty`` when required.
        sensitive: Whether the annotation carries `Sensitive()`.
        secrets: The names, at any depth of the annotation, whose values are pydantic secrets
            (`SecretStr`...); the parameter's own name when it is one.
    """

    name: str
    field: str
    annotation: Any
    default: Any
    sensitive: bool
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FunctionShape:
    """What registration needs to know about a function's signature.

    Attributes:
        label: How error messages name the function.
        parameters: The argument parameters, in signature order.
        context_names: The parameters that receive the `ToolContext`.
        is_async: Whether calling the function returns a coroutine.
    """

    label: str
    parameters: tuple[Parameter, ...]
    context_names: tuple[str, ...]
    is_async: bool


@dataclass(frozen=True, slots=True)
class ArgumentsModel:
    """The arguments model of a tool and the raw Pydantic JSON schema it generates.

    Attributes:
        model: Validates the arguments (fields aliased by parameter name).
        schema: ``model.model_json_schema(by_alias=True)``, before any strict-mode rewriting.
    """

    model: type[BaseModel]
    schema: dict[str, Any]


def function_label(function: Callable[..., Any]) -> str:
    """Return how error messages name ``function`` (its qualified name when it has one)."""
    return str(getattr(function, "__qualname__", None) or repr(function))


def definition_error(label: str, parameter: str | None, problem: str) -> ToolDefinitionError:
    """Build the `ToolDefinitionError` for a function (and parameter) that cannot be a tool.

    Args:
        label: The function, as `function_label` names it.
        parameter: The offending parameter, if the problem is about one.
        problem: What is wrong and, where possible, how to fix it.
    """
    where = f"parameter {parameter!r} " if parameter else ""
    return ToolDefinitionError(f"cannot register {label!r} as a tool: {where}{problem}")


def analyse_function(function: Callable[..., Any]) -> FunctionShape:
    """Inspect ``function``'s signature: argument parameters, context parameters, async-ness.

    Raises:
        ToolDefinitionError: ``function`` is not callable, a parameter has no annotation or one
            that cannot be resolved, or is positional-only, ``*args`` or ``**kwargs``.
    """
    label = function_label(function)
    if not callable(function):
        raise definition_error(label, None, "is not callable")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as error:
        raise definition_error(label, None, f"has no readable signature ({error})") from error
    parameters: list[Parameter] = []
    context_names: list[str] = []
    for raw in signature.parameters.values():
        _check_kind(label, raw)
        annotation = _resolve_annotation(function, label, raw)
        if _is_context(annotation):
            context_names.append(raw.name)
            continue
        parameters.append(
            Parameter(
                name=raw.name,
                field=f"p{len(parameters)}",
                annotation=annotation,
                default=raw.default,
                sensitive=_is_sensitive(annotation),
                secrets=secret_names(raw.name, annotation),
            )
        )
    return FunctionShape(label, tuple(parameters), tuple(context_names), _is_async(function))


def build_arguments_model(shape: FunctionShape, descriptions: Mapping[str, str]) -> ArgumentsModel:
    """Build the Pydantic model of ``shape``'s arguments and generate its JSON schema.

    Args:
        shape: The analysed function.
        descriptions: Per-parameter descriptions (from the docstring); a description given in
            an ``Annotated[..., Field(description=...)]`` takes precedence.

    Raises:
        ToolDefinitionError: A parameter's type has no JSON schema or cannot be validated.
    """
    fields: dict[str, Any] = {}
    for parameter in shape.parameters:
        annotation, default = parameter.annotation, parameter.default
        if isinstance(default, FieldInfo):  # ``x: int = Field(3, ge=1)``
            annotation, default = Annotated[annotation, default], PydanticUndefined
        elif default is _EMPTY:
            default = PydanticUndefined
        description = None if _has_description(annotation) else descriptions.get(parameter.name)
        if description is None:  # an explicit None would erase a description set in Annotated
            field = Field(default, alias=parameter.name)
        else:
            field = Field(default, alias=parameter.name, description=description)
        fields[parameter.field] = (annotation, field)
    try:
        model = create_model("Arguments", __config__=_ARGUMENTS_CONFIG, **fields)
        schema = model.model_json_schema(by_alias=True)
    except Exception as error:  # Pydantic raises several kinds for types it cannot handle
        raise _locate_type_error(shape, fields, error) from error
    return ArgumentsModel(model=model, schema=schema)


def _check_kind(label: str, parameter: inspect.Parameter) -> None:
    kind = parameter.kind
    if kind is inspect.Parameter.VAR_POSITIONAL:
        raise definition_error(label, parameter.name, "is *args; a tool takes named parameters")
    if kind is inspect.Parameter.VAR_KEYWORD:
        raise definition_error(label, parameter.name, "is **kwargs; a tool takes named parameters")
    if kind is inspect.Parameter.POSITIONAL_ONLY:
        raise definition_error(
            label, parameter.name, "is positional-only; arguments are passed by name"
        )
    if parameter.annotation is _EMPTY:
        raise definition_error(label, parameter.name, "has no type annotation")


def _resolve_annotation(
    function: Callable[..., Any], label: str, parameter: inspect.Parameter
) -> Any:
    """Evaluate a (possibly string) annotation in the function's module namespace."""
    holder = types.SimpleNamespace(
        __annotations__={parameter.name: parameter.annotation},
        __globals__=_globals_of(function),
    )
    try:
        return typing.get_type_hints(holder, include_extras=True)[parameter.name]
    except Exception as error:  # NameError, SyntaxError, TypeError from user annotations
        raise definition_error(
            label,
            parameter.name,
            f"has an annotation that cannot be resolved ({error}); "
            "define the types it names at module level",
        ) from error


def _globals_of(function: Callable[..., Any]) -> dict[str, Any]:
    target: Any = inspect.unwrap(function)
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = type(target).__call__  # a callable object: its class's method
    namespace = getattr(target, "__globals__", None)
    return namespace if isinstance(namespace, dict) else {}


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__
    )


def _strip_annotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_context(annotation: Any) -> bool:
    annotation = _strip_annotated(annotation)
    if _context_class(annotation):
        return True
    if get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return len(members) == 1 and _context_class(members[0])
    return False


def _context_class(annotation: Any) -> bool:
    """Whether ``annotation`` is `ToolContext`, bare or with its deps type (`ToolContext[D]`)."""
    return annotation is ToolContext or get_origin(annotation) is ToolContext


def _metadata(annotation: Any) -> tuple[Any, ...]:
    return get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()


def _is_sensitive(annotation: Any) -> bool:
    return any(isinstance(item, Sensitive) for item in _metadata(annotation))


def _has_description(annotation: Any) -> bool:
    return any(isinstance(item, FieldInfo) and item.description for item in _metadata(annotation))


def _locate_type_error(
    shape: FunctionShape, fields: dict[str, Any], error: Exception
) -> ToolDefinitionError:
    """Name the first parameter that Pydantic cannot model or describe on its own."""
    for parameter in shape.parameters:
        try:
            probe = create_model("Probe", **{parameter.field: fields[parameter.field]})
            probe.model_json_schema()
        except Exception as problem:  # as above: report whatever Pydantic raised
            first_line = str(problem).strip().splitlines()[0]
            return definition_error(
                shape.label, parameter.name, f"cannot be modelled or described ({first_line})"
            )
    return definition_error(shape.label, None, f"has arguments Pydantic cannot model ({error})")
