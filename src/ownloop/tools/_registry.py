"""The tool registry: where an application declares its tools and the runtime looks them up.

Registration is where mistakes surface: a function that cannot become a strict tool raises
`ToolDefinitionError` at import time of the application, not in the middle of a run. Validation
never raises for bad model input; it returns a `ToolRejection` the runtime shows to the model.
The registry neither authorizes nor executes calls: that is the runtime's gateway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar, overload

from ownloop.contracts import Effect, ToolCall, ToolSpec
from ownloop.exceptions import ConfigurationError
from ownloop.tools._arguments import DEFAULT_MAX_ARGUMENT_BYTES, bound, echo
from ownloop.tools._outcomes import ToolRejection
from ownloop.tools._reconcile import Reconcile
from ownloop.tools._signature import definition_error, function_label
from ownloop.tools._tool import RegisteredTool, ValidatedCall, build_tool

__all__ = ["ToolRegistry"]

F = TypeVar("F", bound=Callable[..., Any])


class ToolRegistry:
    """The tools an agent may call, in registration order.

    Args:
        max_argument_bytes: The cap on one call's raw arguments (UTF-8 JSON text); larger
            arguments are rejected with ``arguments_too_large``. Defaults to 64 KiB.

    Raises:
        ConfigurationError: ``max_argument_bytes`` is not a positive integer.
    """

    def __init__(self, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES) -> None:
        if isinstance(max_argument_bytes, bool) or not isinstance(max_argument_bytes, int):
            raise ConfigurationError("max_argument_bytes must be an integer")
        if max_argument_bytes < 1:
            raise ConfigurationError(f"max_argument_bytes must be >= 1, got {max_argument_bytes}")
        self.max_argument_bytes = max_argument_bytes
        self._tools: dict[str, RegisteredTool] = {}

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(
        self,
        function: None = None,
        /,
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
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        function: F | None = None,
        /,
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
    ) -> F | Callable[[F], F]:
        """Register a function as a tool; use bare (``@registry.tool``) or with options.

        The function is returned unchanged, so it stays callable and testable on its own.

        Args:
            function: The function, when used bare.
            name: The tool's name; defaults to the function's ``__name__``. Must match
                ``^[A-Za-z0-9_-]{1,64}$`` and be unique in the registry.
            description: What the tool does; defaults to the docstring's first paragraph.
            effect: ``"read"`` (only looks) or ``"write"`` (changes something).
            requires_approval: Whether every call needs an approval bound to its arguments.
            timeout_s: Seconds one attempt may take; ``None`` leaves it unbounded.
            max_output_chars: The longest observation this tool may add, if bounded per tool.
            idempotent: Whether repeating a call with the same idempotency key is harmless.
            strict: Generate an OpenAI strict-mode schema (the default); ``False`` keeps
                Pydantic's plain schema for constructs strict mode cannot express.
            reconcile: For write tools, the authoritative lookup that settles an unknown effect
                (see `Confirmed`, `NotApplied`, `StillUnknown`).
            evidence: Whether the tool's output is a fact source the answer may cite
                (``False`` for tools that return the model's own words, like memory).
            parallel: Whether calls may run at the same time as the turn's other calls
                (bounded by `Limits.max_parallel_tools`): ``None`` lets reads overlap,
                ``False`` keeps a read on its own (a rate-limited API, a handler that is not
                thread-safe). Writes always run alone, in the order proposed.

        Raises:
            ToolDefinitionError: The function cannot become a tool with these options.
        """
        options: dict[str, Any] = {
            "name": name,
            "description": description,
            "effect": effect,
            "requires_approval": requires_approval,
            "timeout_s": timeout_s,
            "max_output_chars": max_output_chars,
            "idempotent": idempotent,
            "strict": strict,
            "reconcile": reconcile,
            "evidence": evidence,
            "parallel": parallel,
        }

        def register(target: F) -> F:
            self.add(target, **options)
            return target

        return register if function is None else register(function)

    def add(self, function: Callable[..., Any], **options: Any) -> RegisteredTool:
        """Register ``function`` without a decorator; ``options`` are those of `tool`.

        Returns:
            The registered tool.

        Raises:
            ToolDefinitionError: The function cannot become a tool, or the name is taken.
        """
        registered = build_tool(function, **options)
        if registered.name in self._tools:
            raise definition_error(
                function_label(function),
                None,
                f"a tool named {registered.name!r} is already registered; pass name=...",
            )
        self._tools[registered.name] = registered
        return registered

    def register(self, tool: RegisteredTool, *, replace: bool = False) -> RegisteredTool:
        """Add an already-built tool, such as an `ExternalTool` from a tool source.

        Args:
            tool: The tool.
            replace: Replace a tool of the same name instead of refusing it.

        Returns:
            The tool.

        Raises:
            ToolDefinitionError: The name is taken and ``replace`` is false.
            ConfigurationError: ``tool`` is not a `RegisteredTool`.
        """
        if not isinstance(tool, RegisteredTool):
            raise ConfigurationError(f"expected a RegisteredTool, got {type(tool).__name__}")
        if tool.name in self._tools and not replace:
            raise definition_error(
                repr(tool), None, f"a tool named {tool.name!r} is already registered"
            )
        self._tools[tool.name] = tool
        return tool

    def remove(self, name: str) -> RegisteredTool | None:
        """Remove the tool called ``name`` (a source withdrew it); return it, or ``None``."""
        return self._tools.pop(name, None)

    def specs(self) -> list[ToolSpec]:
        """Return every tool's spec, in registration order."""
        return [registered.spec for registered in self._tools.values()]

    def get(self, name: str) -> RegisteredTool | None:
        """Return the tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        """Return the tool names, in registration order."""
        return tuple(self._tools)

    def validate(self, call: ToolCall) -> ValidatedCall | ToolRejection:
        """Check a proposed call: the tool exists and its arguments are valid; never raises.

        Args:
            call: The model's proposal, untrusted.

        Returns:
            A `ValidatedCall` ready to authorize and execute, or a `ToolRejection` whose
            message tells the model what to fix.
        """
        registered = self._tools.get(call.name)
        if registered is None:
            available = ", ".join(self._tools) or "(none)"
            message = f"Unknown tool {echo(call.name)}. Available tools: {available}."
            return ToolRejection(
                call_id=call.id, tool=call.name, code="unknown_tool", message=bound(message)
            )
        return registered.validate(call, max_argument_bytes=self.max_argument_bytes)

    def restore(self, call: ToolCall, arguments: dict[str, Any], digest: str) -> ValidatedCall:
        """Rebuild a recorded call from its journaled canonical arguments; nothing is recomputed.

        Args:
            call: The proposal as the model sent it.
            arguments: The journaled arguments (`ownloop.contracts.CallIdentity.arguments`).
            digest: The journaled digest, which the rebuilt call keeps.

        Returns:
            The call, executing with exactly the journaled arguments.

        Raises:
            ConfigurationError: The tool is gone, or its current signature cannot hold the
                journaled arguments unchanged.
        """
        registered = self._tools.get(call.name)
        if registered is None:
            raise ConfigurationError(
                f"the recorded call {call.id!r} names tool {call.name!r}, which is not "
                "registered any more: register it to resume the run"
            )
        return registered.restore(call, arguments, digest)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry(tools={list(self._tools)!r})"
