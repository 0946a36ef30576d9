"""The harness lab: take one control away at a time and see exactly which failure gets through.

The seed's deterministic tool-control lab and its executable harness, on ownloop (no model, no
network: scripted proposers play the model). First the ablation matrix: each scenario runs under
the full policy and under a profile with one control removed (permissions, evidence, budget);
with every control no row fails, and each ablation lets exactly its own failure through. Then the
five harness scenarios, each showing which part of the runtime decides (the schema, the retry
policy, the completion check, the write journal, the approval gate)::

    python examples/harness_lab.py      # the same as `ownloop ablate` and `ownloop demo harness`
"""

from __future__ import annotations

from ownloop.demo.ablation import CONTROLS, run_matrix
from ownloop.demo.harness import run_harness_scenarios


def main() -> None:
    """Print the ablation matrix, which control blocks each failure, and the five scenarios."""
    print(f"{'scenario':<12} {'profile':<20} {'stop_reason':<22} failures")
    for row in run_matrix():
        failures = ", ".join(row.failures) or "-"
        print(f"{row.scenario:<12} {row.profile:<20} {row.result.stop_reason.value:<22} {failures}")
    print()
    for profile, control in CONTROLS.items():
        print(f"{control.key} blocks {control.failure} (it gets through in {profile})")
    print()
    for summary in run_harness_scenarios():
        print(f"{summary['scenario']:<24} {summary['status']} ({summary['stop_reason']})")


if __name__ == "__main__":
    main()
