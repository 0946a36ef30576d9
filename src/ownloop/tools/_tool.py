"""One registered tool: its spec, its function, argument validation and invocation.

`build_tool` is where a function becomes a tool (signature, docstring, schema, spec); every problem
is a `ToolDefinitionError` at that moment, never at call time. `RegisteredTool.validate` never
raises for bad model input, and `RegisteredTool.invoke` lets the function's exceptions propagate
unchanged: classifying them (transient, unknown effect, error) is the runtime's job.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ownloop.contracts import TOOL_NAME_PATTERN, Effect, JsonValue, Receipt, ToolCall, ToolSpec
from ownloop.exceptions import ConfigurationError
from ownloop.identity import (
    DIGEST_VERSION,
    call_digest,
    canonical_text,
    decode,
    encode,
    unsupported_type,
)
from ownloop.tools._arguments import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    ArgumentProblem,
    describe_validation_error,
    load_arguments,
    restore_defaults,
)
from ownloop.tools._context import ToolContext
from ownloop.tools._docstrings import parse_docstring
from ownloop.tools._inflight import write_settled, write_started
from ownloop.tools._outcomes import RejectionCode, ToolRejection
from ownloop.tools._reconcile import Reconcile
from ownloop.tools._schema import plain_schema, strict_schema
from ownloop.tools._serialize import to_jsonable
from ownloop.tools._signature import (
    ArgumentsModel,
    FunctionShape,
    analyse_function,
    build_arguments_model,
    definition_error,
)
from ownloop.tools._threads import start_in_thread

__all__ = ["RegisteredTool", "ValidatedCall", "build_tool", "legacy_digest"]

_NAME = re.compile(TOOL_NAME_PATTERN)


@dataclass(frozen=True, slots=True, eq=False)
class ValidatedCall:
    """A proposed call whose tool exists and whose arguments passed validation.

    Attributes:
        call: The proposal as the model sent it.
        tool: The registered tool it calls.
        arguments: Python values ready to pass to the function, defaults restored.
        canonical: The arguments as the policy and approvers see them: JSON, keys sorted at
            every level, secret values masked (never used for identity).
        digest: The call's identity digest: `ownloop.identity.call_digest` of the tool and
            ``encoded``; for a restored call, the journaled digest.
        encoded: The arguments in the canonical encoding of `ownloop.identity` (secrets by
            their real value): what a call's identity is computed from and journaled as.
        digest_version: The encoding ``digest`` was taken under: `DIGEST_VERSION`, or ``0`` for
            a call recorded by a release before the canonical encoding (its legacy digest).
    """

    call: ToolCall
    tool: RegisteredTool
    arguments: dict[str, Any]
    canonical: dict[str, JsonValue]
    digest: str
    encoded: dict[str, Any]
    digest_version: int = DIGEST_VERSION

    @property
    def legacy_digest(self) -> str:
        """The digest releases before the canonical encoding computed, to match their records."""
        return legacy_digest(self.tool.spec.name, self.canonical)

    def __repr__(self) -> str:
        # Arguments may hold secrets (see ToolSpec.sensitive): the repr shows only identifiers.
        return (
            f"ValidatedCall(tool={self.tool.spec.name!r}, call_id={self.call.id!r}, "
            f"digest={self.digest[:12]!r})"
        )


class RegisteredTool:
    """A function registered as a tool, with the spec the model sees.

    Attributes:
        spec: The tool's declaration (name, description, schema, effect, limits).
        function: The original function, unchanged.
        is_async: Whether the function is a coroutine function.
        reconcile: The authoritative lookup that settles an unknown effect, for write tools.
        delegates: Whether the tool runs an agent (``Agent.as_tool``).
    """

    __slots__ = ("_arguments", "_shape", "function", "is_async", "reconcile", "spec")

    delegates: ClassVar[bool] = False
    """Whether the tool runs an agent (``Agent.as_tool``): its child run is its journal."""

    def __init__(
        self,
        spec: ToolSpec,
        function: Callable[..., Any],
        *,
        shape: FunctionShape,
        arguments: ArgumentsModel,
        reconcile: Reconcile | None = None,
    ) -> None:
        self.spec = spec
        self.reconcile = reconcile
        self.function = function
        self.is_async = shape.is_async
        self._shape = shape
        self._arguments = arguments

    @property
    def name(self) -> str:
        """The tool's name (``spec.name``)."""
        return self.spec.name

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The names of the parameters the model fills in (context parameters excluded)."""
        return tuple(parameter.name for parameter in self._shape.parameters)

    def validate(
        self, call: ToolCall, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ValidatedCall | ToolRejection:
        """Validate a proposed call's arguments against this tool; never raises for bad input.

        Args:
            call: The proposal (its name is not checked here; the registry does that).
            max_argument_bytes: The cap on the raw arguments' UTF-8 JSON text.

        Returns:
            The validated call, with defaults restored, or a rejection explaining what to fix.
        """
        loaded = load_arguments(
            call.arguments,
            tool=self.name,
            parameters=self.parameter_names,
            max_bytes=max_argument_bytes,
        )
        if isinstance(loaded, ArgumentProblem):
            return self._reject(call, loaded.code, loaded.message)
        schema = self._arguments.schema
        try:
            restore_defaults(loaded, schema, schema.get("$defs", {}))
            instance = self._arguments.model.model_validate(
                loaded, extra="forbid" if self.spec.strict else None
            )
        except ValidationError as error:
            message = describe_validation_error(
                error,
                tool=self.name,
                parameters=self.parameter_names,
                sensitive=self.spec.sensitive,
            )
            return self._reject(call, "invalid_arguments", message)
        try:
            return self._validated(call, instance)
        except ConfigurationError as error:  # a default or factory made an unencodable value
            return self._reject(call, "invalid_arguments", f"{self.name!r}: {error}")

    def restore(self, call: ToolCall, encoded: dict[str, Any], digest: str) -> ValidatedCall:
        """Rebuild a recorded call from its canonical arguments, keeping its recorded digest.

        No default or factory runs again for a recorded parameter: every one is in ``encoded``.
        A parameter added since (with a default) takes its default; the call's identity stays
        the recorded one.

        Args:
            call: The proposal as the model sent it.
            encoded: The journaled canonical arguments.
            digest: The journaled digest.

        Returns:
            The call, with exactly the recorded arguments.

        Raises:
            ConfigurationError: The current signature rejects the recorded arguments, or would
                change one of them.
        """
        try:
            instance = self._arguments.model.model_validate(
                decode(encoded), by_alias=True, by_name=True
            )
            rebuilt = self._validated(call, instance)
        except (ValidationError, ConfigurationError) as error:
            raise self._changed(call, str(error)) from error
        changed = sorted(
            name
            for name, value in encoded.items()  # compared as text: 5 and 5.0 are two values
            if canonical_text(rebuilt.encoded.get(name)) != canonical_text(value)
        )
        if changed:
            raise self._changed(call, f"parameters {', '.join(changed)} would change")
        return ValidatedCall(
            call=call,
            tool=self,
            arguments=rebuilt.arguments,
            canonical=rebuilt.canonical,
            digest=digest,
            encoded=dict(encoded),
        )

    def _validated(self, call: ToolCall, instance: BaseModel) -> ValidatedCall:
        arguments = {p.name: getattr(instance, p.field) for p in self._shape.parameters}
        encoded = {name: encode(value) for name, value in arguments.items()}
        return ValidatedCall(
            call=call,
            tool=self,
            arguments=arguments,
            canonical=_canonical(instance, arguments),
            digest=call_digest(self.name, encoded),
            encoded=encoded,
        )

    def _changed(self, call: ToolCall, problem: str) -> ConfigurationError:
        return ConfigurationError(
            f"the recorded call {call.id!r} of tool {self.name!r} cannot run under the tool's "
            f"current signature ({problem}): resume it with the release that recorded it"
        )

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Call the function with validated arguments, injecting ``context``.

        An async function is awaited under ``asyncio.wait_for`` (a timeout cancels it). A sync
        function runs in a daemon thread (`start_in_thread`), so that a timeout, or
        the run's deadline, stops the wait at once: the thread cannot be stopped, so it is
        abandoned — it keeps running in the background and nothing waits for it, not even
        ``asyncio.run`` at shutdown. A write (a context with an idempotency key) first waits for
        any attempt of the same key still running in this process, abandoned ones included
        (see `ownloop.tools._inflight`), so one write never runs twice at once.

        Args:
            arguments: ``ValidatedCall.arguments``.
            context: The trusted context, passed to every `ToolContext` parameter.

        Returns:
            What the function returned (a returned `Receipt` with its data passed through
            `to_jsonable`); an error `Receipt` when a sync function returned a coroutine (a
            forgotten ``await``), which is closed without running.

        Raises:
            TimeoutError: The call took longer than ``spec.timeout_s``.
        """
        kwargs = dict(arguments)
        kwargs.update(dict.fromkeys(self._shape.context_names, context))
        timeout = self.spec.timeout_s
        await write_settled(context.idempotency_key)  # an earlier attempt of this write has ended
        end = write_started(context.idempotency_key)
        if self.is_async:
            try:
                result = await asyncio.wait_for(self.function(**kwargs), timeout)
            finally:
                end()  # the coroutine has unwound, even when cancelled
        else:  # the attempt ends when its thread returns, which may be after we stop waiting
            running = start_in_thread(_ending(self.function, end), **kwargs)
            result = await asyncio.wait_for(running, timeout)
        if inspect.iscoroutine(result):
            return self._forgotten_await(result, context)
        if isinstance(result, Receipt):  # its data is the handler's: make it storable
            return result.model_copy(update={"data": to_jsonable(result.data)})
        return result

    def _forgotten_await(self, coroutine: Any, context: ToolContext) -> Receipt:
        """Close a coroutine the handler returned instead of awaiting, and say so in a receipt.

        Its body never ran, so nothing was applied: an error, not an unknown effect.
        """
        coroutine.close()
        name = getattr(coroutine, "__qualname__", "a coroutine")
        return Receipt(
            call_id=context.call_id,
            tool=self.name,
            status="error",
            effect="none",
            message=(
                f"the handler of {self.name!r} returned a coroutine ({name}) instead of a result: "
                "declare the function `async def` (or await inside it); the coroutine was closed "
                "without running"
            ),
        )

    def _reject(self, call: ToolCall, code: RejectionCode, message: str) -> ToolRejection:
        """Turn a problem into the rejection the model is told."""
        return ToolRejection(call_id=call.id, tool=call.name, code=code, message=message)

    def __repr__(self) -> str:
        spec = self.spec
        return (
            f"RegisteredTool(name={spec.name!r}, effect={spec.effect!r}, "
            f"parameters={list(self.parameter_names)!r}, is_async={self.is_async}, "
            f"strict={spec.strict})"
        )


def _ending(function: Callable[..., Any], end: Callable[[], None]) -> Callable[..., Any]:
    """Wrap a sync handler so that ``end()`` runs in its thread once it returns or raises."""

    def run(**kwargs: Any) -> Any:
        try:
            return function(**kwargs)
        finally:
            end()

    return run


def build_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "write",
    requires_approval: bool = False,
    timeout_s: float | None = None,
    max_output_chars: int | None = None,
    idempotent: bool = False,
    strict: bool = True,
    reconcile: Reconcile | None = None,
    evidence: bool = True,
    parallel: bool | None = None,
) -> RegisteredTool:
    """Turn ``function`` into a `RegisteredTool`; the options are those of `ToolRegistry.tool`.

    Raises:
        ToolDefinitionError: The name, the signature, a type or an option cannot make a tool.
    """
    shape = analyse_function(function)
    tool_name = name if name is not None else getattr(function, "__name__", None)
    if not isinstance(tool_name, str) or not _NAME.fullmatch(tool_name):
        raise definition_error(
            shape.label,
            None,
            f"the name {tool_name!r} does not match {TOOL_NAME_PATTERN}; pass name=...",
        )
    _check_defaults(shape)
    docstring = parse_docstring(inspect.getdoc(function))
    arguments = build_arguments_model(shape, docstring.params)
    _check_types(shape)
    schema = (
        strict_schema(arguments.schema, shape.label) if strict else plain_schema(arguments.schema)
    )
    try:
        spec = ToolSpec(
            name=tool_name,
            description=docstring.summary if description is None else description,
            parameters=schema,
            strict=strict,
            effect=effect,
            requires_approval=requires_approval,
            idempotent=idempotent,
            timeout_s=timeout_s,
            max_output_chars=max_output_chars,
            sensitive=_sensitive_names(shape),
            evidence=evidence,
            parallel=parallel,
        )
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}"
            for detail in error.errors(include_url=False)
        )
        raise definition_error(shape.label, None, f"has invalid options ({problems})") from error
    if reconcile is not None and (effect != "write" or not callable(reconcile)):
        raise definition_error(
            shape.label, None, "reconcile= takes a callable, and only for effect='write' tools"
        )
    return RegisteredTool(spec, function, shape=shape, arguments=arguments, reconcile=reconcile)


def _sensitive_names(shape: FunctionShape) -> tuple[str, ...]:
    """The names whose values are never traced: `Sensitive()` parameters and pydantic secrets."""
    names = [p.name for p in shape.parameters if p.sensitive]
    names += [name for p in shape.parameters for name in p.secrets]
    return tuple(dict.fromkeys(names))


def _check_types(shape: FunctionShape) -> None:
    """Refuse a parameter whose type has no canonical encoding (a call's identity needs one)."""
    for parameter in shape.parameters:
        problem = unsupported_type(parameter.annotation)
        if problem is not None:
            raise definition_error(
                shape.label,
                parameter.name,
                f"has type {problem}, which has no canonical encoding (a call's identity "
                "is digested from it; see ownloop.identity for the supported types)",
            )


def _check_defaults(shape: FunctionShape) -> None:
    """Refuse a default with no canonical encoding (a factory's values are checked per call)."""
    for parameter in shape.parameters:
        default = parameter.default
        if isinstance(default, FieldInfo):  # ``x: int = Field(3)``: its default, if any
            default = default.default
        if default is inspect.Parameter.empty or default is PydanticUndefined:
            continue
        try:
            encode(default)
        except ConfigurationError as error:
            problem = f"has a default: {error}"
            raise definition_error(shape.label, parameter.name, problem) from error


def _canonical(instance: BaseModel, arguments: dict[str, Any]) -> dict[str, JsonValue]:
    """Dump validated arguments as JSON with every object's keys sorted."""
    try:
        dumped: Any = instance.model_dump(mode="json", by_alias=True, warnings=False)
    except Exception:  # a default Pydantic cannot serialise: fall back to the lenient converter
        dumped = to_jsonable(arguments)
    return cast("dict[str, JsonValue]", _sort_keys(dumped))


def _sort_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sort_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sort_keys(item) for item in value]
    return value


def legacy_digest(tool: str, canonical: dict[str, JsonValue]) -> str:
    """The digest of a call as releases before `ownloop.identity` computed it.

    It masks secrets and follows hash order in sets, so it is never an identity any more; it only
    recognises records those releases wrote.
    """
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{tool}:{text}".encode("utf-8", "surrogatepass")).hexdigest()
