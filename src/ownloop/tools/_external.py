"""Tools defined outside Python: a JSON schema and an async handler instead of a function.

This is the extension point for tool sources that are not Python functions (an MCP server, a
remote catalogue): they describe each tool with a `ToolSpec` whose ``parameters`` the model sees,
the JSON schema the arguments must satisfy, and a coroutine that performs the call. An
`ExternalTool` goes into a `ToolRegistry` like any registered function (``registry.register``), so
the gateway validates, authorizes, asks approval, executes, retries and records receipts for it
exactly as for Python tools. Validation never raises for bad model input; the handler's exceptions
propagate unchanged for the runtime to classify.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from ownloop.contracts import JsonValue, ToolCall, ToolSpec
from ownloop.exceptions import ConfigurationError, ToolDefinitionError
from ownloop.identity import call_digest, decode, encode
from ownloop.tools._arguments import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    ArgumentProblem,
    bound,
    load_arguments,
    restore_defaults,
)
from ownloop.tools._context import ToolContext
from ownloop.tools._inflight import write_settled, write_started
from ownloop.tools._outcomes import ToolRejection
from ownloop.tools._reconcile import Reconcile
from ownloop.tools._tool import RegisteredTool, ValidatedCall, _sort_keys

__all__ = ["ArgumentCheck", "ExternalHandler", "ExternalTool"]

ExternalHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
"""Performs one call: ``(validated arguments, trusted context) -> result``."""

ArgumentCheck = Callable[[dict[str, Any]], str | None]
"""Checks parsed arguments against the tool's own schema: ``None`` when valid, else the problem."""


class ExternalTool(RegisteredTool):
    """A tool whose arguments are described by a JSON schema and whose call is a coroutine.

    Args:
        spec: What the model sees and the runtime enforces (name, schema, effect, limits).
        handler: Performs a call with validated arguments and the trusted context.
        check: Validates parsed arguments against the source's schema; returns the problem
            (written for the model) or ``None``.
        source_schema: The schema the source declared, used to restore optional semantics:
            a ``null`` sent for an optional field the source does not allow to be null is
            removed, so the source applies its own default.
        reconcile: For write tools, the authoritative lookup that settles an unknown effect.

    Raises:
        ToolDefinitionError: ``reconcile`` is given for a read tool, or is not callable.
    """

    __slots__ = ("_check", "_source_schema")

    def __init__(
        self,
        spec: ToolSpec,
        handler: ExternalHandler,
        *,
        check: ArgumentCheck,
        source_schema: dict[str, Any] | None = None,
        reconcile: Reconcile | None = None,
    ) -> None:
        if reconcile is not None and (spec.effect != "write" or not callable(reconcile)):
            raise ToolDefinitionError(
                f"cannot register {spec.name!r}: reconcile= takes a callable, "
                "and only for effect='write' tools"
            )
        # Deliberately not RegisteredTool.__init__: there is no Python signature to analyse.
        self.spec = spec
        self.function = handler
        self.is_async = True
        self.reconcile = reconcile
        self._check = check
        self._source_schema = source_schema if source_schema is not None else spec.parameters

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The top-level property names of the source's schema."""
        properties = self._source_schema.get("properties")
        return tuple(properties) if isinstance(properties, dict) else ()

    def validate(
        self, call: ToolCall, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ValidatedCall | ToolRejection:
        """Parse and check a proposed call's arguments; never raises for bad input.

        Args:
            call: The proposal.
            max_argument_bytes: The cap on the raw arguments' UTF-8 JSON text.

        Returns:
            The validated call, or a rejection explaining what to fix.
        """
        loaded = load_arguments(
            call.arguments,
            tool=self.name,
            parameters=self.parameter_names,
            max_bytes=max_argument_bytes,
        )
        if isinstance(loaded, ArgumentProblem):
            return self._reject(call, loaded.code, loaded.message)
        try:
            definitions = self._source_schema.get("$defs")
            restore_defaults(
                loaded, self._source_schema, definitions if isinstance(definitions, dict) else {}
            )
            problem = self._check(loaded)
        except RecursionError:
            problem = "they are nested too deeply"
        if problem is not None:
            message = bound(f"Invalid arguments for tool {self.name!r}: {problem}")
            return self._reject(call, "invalid_arguments", message)
        return self._validated_json(call, loaded)

    def restore(self, call: ToolCall, encoded: dict[str, Any], digest: str) -> ValidatedCall:
        """Rebuild a recorded call from its journaled canonical arguments (JSON, checked again).

        Args:
            call: The proposal as the model sent it.
            encoded: The journaled canonical arguments.
            digest: The journaled digest, which the call keeps.

        Returns:
            The call, with exactly the recorded arguments.

        Raises:
            ConfigurationError: The source's schema rejects the recorded arguments now.
        """
        arguments = decode(encoded)
        problem = self._check(arguments)
        if problem is not None:
            raise ConfigurationError(
                f"the recorded call {call.id!r} of tool {self.name!r} cannot run under the "
                f"tool's current schema ({problem})"
            )
        rebuilt = self._validated_json(call, arguments)
        return ValidatedCall(
            call=call,
            tool=self,
            arguments=rebuilt.arguments,
            canonical=rebuilt.canonical,
            digest=digest,
            encoded=dict(encoded),
        )

    def _validated_json(self, call: ToolCall, loaded: dict[str, Any]) -> ValidatedCall:
        encoded = cast("dict[str, Any]", encode(loaded))
        return ValidatedCall(
            call=call,
            tool=self,
            arguments=loaded,
            canonical=cast("dict[str, JsonValue]", _sort_keys(loaded)),
            digest=call_digest(self.name, encoded),
            encoded=encoded,
        )

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Perform the call through the handler (which owns its own timeouts).

        Args:
            arguments: ``ValidatedCall.arguments``.
            context: The trusted context.

        Returns:
            Whatever the handler returns (a `Receipt` is kept as the call's receipt).
        """
        await write_settled(context.idempotency_key)  # an earlier attempt of this write has ended
        end = write_started(context.idempotency_key)
        try:
            return await self.function(dict(arguments), context)
        finally:
            end()

    def __repr__(self) -> str:
        spec = self.spec
        return (
            f"ExternalTool(name={spec.name!r}, effect={spec.effect!r}, "
            f"parameters={list(self.parameter_names)!r}, strict={spec.strict})"
        )
