"""The ablation lab's world: a configuration to fix, four tools, and the fixed proposal sequences.

The configuration must have ``timeout_ms`` from 100 to 5000 and ``max_retries`` from 0 to 2; it
starts with 8 retries. ``write_config`` accepts any integers (judging them is the check's job), and
``publish`` only flips a flag: it exists to test a refusal. A proposer plays a sequence, then stops
explicitly, as the lab's proposer runs out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.tools import ToolRegistry

__all__ = ["BAD", "GOOD", "SCENARIOS", "ConfigLab", "proposer"]

GOOD = {"timeout_ms": 2000, "max_retries": 2}
BAD = {"timeout_ms": 2000, "max_retries": 8}

SCENARIOS: dict[str, tuple[ModelResponse, ...]] = {
    "normal": (
        tool_call("write_config", "call-1", **GOOD),
        tool_call("check_config", "call-2"),
        final("finish"),
    ),
    "publish": (tool_call("publish", "call-1"),),
    "stale_check": (
        tool_call("write_config", "call-1", **GOOD),
        tool_call("check_config", "call-2"),
        tool_call("write_config", "call-3", **BAD),
        final("finish"),
    ),
    "loop": tuple(tool_call("read_config", f"call-{index}") for index in range(1, 9)),
}
"""The proposal sequences; a final answer plays the lab's ``finish``."""


@dataclass
class ConfigLab:
    """The lab's worker: a configuration to fix and a flag that ``publish`` sets.

    Attributes:
        config: The configuration (starts invalid).
        published: Whether ``publish`` ran.
    """

    config: dict[str, int] = field(default_factory=lambda: dict(BAD))
    published: bool = False

    def revision(self) -> str:
        """Return the digest of the configuration."""
        text = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def valid(self) -> bool:
        """Return whether the configuration meets the contract."""
        return 100 <= self.config["timeout_ms"] <= 5000 and 0 <= self.config["max_retries"] <= 2

    def registry(self) -> ToolRegistry:
        """Return the lab's four tools, bound to this lab."""
        registry = ToolRegistry()

        @registry.tool(effect="read")
        def read_config() -> dict[str, int]:
            """Read the configuration."""
            return dict(self.config)

        @registry.tool(effect="write")
        def write_config(timeout_ms: int, max_retries: int) -> dict[str, str]:
            """Replace the configuration (the check, not the write, judges the values).

            Args:
                timeout_ms: Milliseconds before an export times out.
                max_retries: How many times an export is retried.
            """
            self.config = {"timeout_ms": timeout_ms, "max_retries": max_retries}
            return {"revision": self.revision()}

        @registry.tool(effect="read")
        def check_config() -> dict[str, Any]:
            """Check the configuration against the contract."""
            return {"passed": self.valid(), "revision": self.revision()}

        @registry.tool(effect="write")
        def publish() -> dict[str, bool]:
            """Publish the configuration (here: set a flag)."""
            self.published = True
            return {"published": True}

        return registry


def proposer(proposals: Sequence[ModelResponse]) -> FunctionModel:
    """Play the proposals in order, then stop explicitly: the lab's exhausted proposer."""
    remaining = list(proposals)

    def respond(_request: ModelRequest) -> ModelResponse:
        if remaining:
            return remaining.pop(0)
        return ModelResponse(stop_reason="proposals_exhausted")

    return FunctionModel(respond, model_name="lab-proposer")
