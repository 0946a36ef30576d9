"""``ownloop ablate``: the harness article's ablation matrix — remove one control, see what passes.

Prints the lab's eight rows (``--all``: every scenario under every profile) as an aligned table or
JSON lines, then which control blocks each failure that got through. ``--policy FILE`` derives the
profiles from your own JSON policy document instead of the lab's; a failure that passes under the
full profiles is reported as a regression and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ownloop.demo.ablation import CONTROLS, MATRIX, AblationRow, full_matrix, run_matrix
from ownloop.exceptions import ConfigurationError
from ownloop.tracing import format_trace

__all__ = ["format_table", "register", "run_ablate"]

_COLUMNS = (
    "scenario",
    "profile",
    "status",
    "stop_reason",
    "requests",
    "tools",
    "audits",
    "valid_config",
    "published",
    "failures",
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ablate`` command.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    ablate = commands.add_parser(
        "ablate", help="run the ablation matrix: which failure passes without each control"
    )
    ablate.add_argument("--json", action="store_true", help="print one JSON line per row")
    ablate.add_argument("--trace", action="store_true", help="include every row's trace")
    ablate.add_argument(
        "--all", action="store_true", help="every scenario under every profile (20 rows)"
    )
    ablate.add_argument(
        "--policy",
        metavar="FILE",
        help="a JSON policy document to use as the base instead of the lab's policy.json",
    )
    ablate.set_defaults(handler=run_ablate)


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "-"
    return str(value)


def format_table(rows: list[AblationRow]) -> str:
    """Render rows as an aligned text table with a header.

    Args:
        rows: The matrix rows.

    Returns:
        The table, one line per row.
    """
    cells = [list(_COLUMNS)] + [
        [_cell(row.as_dict()[column]) for column in _COLUMNS] for row in rows
    ]
    widths = [max(len(line[index]) for line in cells) for index in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _lessons(rows: list[AblationRow]) -> list[str]:
    """Say which control blocks each failure that got through, and flag full-policy failures."""
    lines = []
    for row in rows:
        control = CONTROLS.get(row.profile)
        for failure in row.failures:
            if control is None:
                lines.append(f"REGRESSION: {failure} passes in {row.scenario}/{row.profile}")
            else:
                lines.append(
                    f"{failure} passes in {row.scenario}/{row.profile}: it needs "
                    f"{control.key!r} — {control.why}"
                )
    if not _regressions(rows):
        lines.append("the full policy (essential, instrumented) blocks every failure")
    return lines


def _regressions(rows: list[AblationRow]) -> list[AblationRow]:
    return [row for row in rows if row.failures and row.profile not in CONTROLS]


def _base_policy(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot read policy file {path}: {error}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"policy file {path} must hold a JSON object")
    return data


def run_ablate(arguments: argparse.Namespace) -> int:
    """Run the matrix and print it as the parsed arguments say.

    Args:
        arguments: The parsed command line.

    Returns:
        0 when the full profiles blocked every failure, 1 otherwise.

    Raises:
        ConfigurationError: If ``--policy`` names a file that is not a valid policy document.
    """
    cases = full_matrix() if arguments.all else MATRIX
    rows = run_matrix(cases, base=_base_policy(arguments.policy))
    if arguments.json:
        for row in rows:
            print(json.dumps(row.as_dict(trace=arguments.trace)))
    else:
        print(format_table(rows))
        if arguments.trace:
            for row in rows:
                print(f"\n# {row.scenario} / {row.profile}")
                print(format_trace(row.result.trace))
        print()
        for line in _lessons(rows):
            print(line)
    return 1 if _regressions(rows) else 0
