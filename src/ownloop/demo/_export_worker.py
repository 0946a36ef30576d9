"""The harness demo's export worker: a trusted local fixture with faults injected on purpose.

It holds one setting, ``max_retries`` (an integer from 0 to 2, enforced by the ``write_config``
schema), and queues exports. It can fail transiently, record an export and then report its outcome
unknown, and its own lookup is deliberately not authoritative. Nothing here is a remote API
guarantee.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from ownloop.exceptions import TransientToolError, UnknownEffectError
from ownloop.tools import Reconciliation, StillUnknown, ToolContext, ToolRegistry

__all__ = ["HARNESS_TOOLS", "ExportWorker"]

HARNESS_TOOLS = ("read_config", "write_config", "check_config", "queue_export", "lookup_export")
"""Every tool of the worker; the harness policy allows exactly these."""

RetriesSetting = Annotated[int, Field(ge=0, le=2)]


@dataclass
class ExportWorker:
    """The trusted local export worker, with faults injected on purpose.

    Attributes:
        config: The worker's configuration (starts with an invalid ``max_retries`` of 8).
        transient_faults: How many upcoming tool executions fail transiently.
        uncertain: Whether ``queue_export`` records the export, then reports its outcome unknown.
        exports: Every export the worker really queued, in order.
        calls: Tool executions the worker saw, transient failures included.
        lookups: Reconciliation lookups the runtime asked for.
    """

    config: dict[str, int] = field(default_factory=lambda: {"max_retries": 8})
    transient_faults: int = 0
    uncertain: bool = False
    exports: list[str] = field(default_factory=list)
    calls: int = 0
    lookups: int = 0

    def revision(self) -> str:
        """Return the digest of the configuration: the state revision writes change."""
        text = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _enter(self) -> None:
        self.calls += 1
        if self.transient_faults:
            self.transient_faults -= 1
            raise TransientToolError("the worker is busy; try again")

    def find_export(self, operation_id: str) -> dict[str, Any]:
        """Look for an export the way the worker's listing can: incomplete on purpose.

        Args:
            operation_id: The export's id.

        Returns:
            ``found: False`` and ``authoritative: False``, even when the export exists.
        """
        return {"operation_id": operation_id, "found": False, "authoritative": False}

    def reconcile_export(self, arguments: dict[str, Any], ctx: ToolContext) -> Reconciliation:
        """Answer the runtime's question about an unknown export: the listing cannot tell.

        Args:
            arguments: The export's validated arguments.
            ctx: The call's context (same idempotency key as the export).

        Returns:
            `StillUnknown`: an empty, non-authoritative listing proves nothing.
        """
        self.lookups += 1
        seen = self.find_export(str(arguments["operation_id"]))
        return StillUnknown(f"lookup for {seen['operation_id']} is not authoritative")

    def registry(self) -> ToolRegistry:
        """Return the worker's five tools, bound to this worker."""
        registry = ToolRegistry()

        @registry.tool(effect="read")
        def read_config() -> dict[str, int]:
            """Read the worker's configuration."""
            self._enter()
            return dict(self.config)

        @registry.tool(effect="write")
        def write_config(max_retries: RetriesSetting) -> dict[str, int]:
            """Replace the worker's configuration.

            Args:
                max_retries: How many times the worker retries an export (an integer, 0-2).
            """
            self._enter()
            self.config = {"max_retries": max_retries}
            return dict(self.config)

        @registry.tool(effect="read")
        def check_config() -> dict[str, Any]:
            """Check the worker's configuration against the contract."""
            self._enter()
            return {"passed": 0 <= self.config["max_retries"] <= 2, "revision": self.revision()}

        @registry.tool(effect="write", requires_approval=True, reconcile=self.reconcile_export)
        def queue_export(operation_id: Annotated[str, Field(min_length=1, max_length=64)]) -> Any:
            """Queue an export of the checked configuration.

            Args:
                operation_id: The export's id, e.g. export-17.
            """
            self._enter()
            self.exports.append(operation_id)
            if self.uncertain:
                raise UnknownEffectError("the worker accepted the request but did not confirm it")
            return {"operation_id": operation_id, "queued": True}

        @registry.tool(effect="read")
        def lookup_export(operation_id: Annotated[str, Field(min_length=1, max_length=64)]) -> Any:
            """Look for an export in the worker's listing (which may be incomplete).

            Args:
                operation_id: The export's id.
            """
            self._enter()
            return self.find_export(operation_id)

        return registry
