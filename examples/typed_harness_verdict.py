"""The harness demo's verdict as a model: the agent reports a `Verdict`, checked against records.

The export worker starts with an invalid setting. The model fixes it, checks it and answers with a
`Verdict` under a strict schema. A completion validator receives the typed value and compares it
with the worker itself: a verdict claiming a setting the worker does not hold is rejected and sent
back, however confident it sounds. Runs offline::

    python examples/typed_harness_verdict.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel

from ownloop import Accept, Agent, Evidence, Reject, RunResult
from ownloop.demo.harness import HARNESS_LIMITS, HARNESS_TOOLS, ExportWorker
from ownloop.policy import allow_tools
from ownloop.testing import ScriptedModel, final, tool_call
from ownloop.validators import Verdict as CheckVerdict
from ownloop.validators import require_current_check


class Verdict(BaseModel):
    """What the agent concludes about the worker."""

    status: Literal["fixed", "not_fixed"]
    max_retries: int
    checked: bool


def matches_worker(worker: ExportWorker) -> Callable[[Verdict, Sequence[Evidence]], CheckVerdict]:
    """A validator: the verdict's setting must be the one the worker really holds."""

    def check(verdict: Verdict, evidence: Sequence[Evidence]) -> CheckVerdict:
        held = worker.config["max_retries"]
        if verdict.max_retries != held:
            return Reject(f"the worker holds max_retries={held}, not {verdict.max_retries}")
        return Accept()

    return check


def run(worker: ExportWorker) -> RunResult[Verdict]:
    """Fix, check and report, under the harness policy, budgets and completion checks."""
    model = ScriptedModel(
        [
            tool_call("write_config", "w1", max_retries=2),
            tool_call("check_config", "c1"),
            final('{"status": "fixed", "max_retries": 1, "checked": true}'),  # misreports
            final('{"status": "fixed", "max_retries": 2, "checked": true}'),
        ]
    )
    agent = Agent(
        model,
        worker.registry(),
        output_type=Verdict,
        limits=HARNESS_LIMITS,
        policy=allow_tools(*HARNESS_TOOLS),
        validators=[require_current_check("check_config"), matches_worker(worker)],
        revision=worker.revision,
    )
    return agent.run_sync("Fix the export worker's max_retries (0-2) and report a verdict.")


def main() -> int:
    """Print the verdict and how many answers were rejected on the way."""
    result = run(ExportWorker())
    print(result.status.value, result.stop_reason.value)
    print("verdict:", result.output)
    print("rejected answers:", result.usage.completion_rejections)
    return 0 if result.output is not None else 1


if __name__ == "__main__":
    sys.exit(main())
