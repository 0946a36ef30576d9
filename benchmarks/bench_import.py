"""Start-up cost: ``import ownloop`` and two fast commands, as ratios to baselines in the same run.

Each figure is the wall time of a fresh interpreter (``python -c ...``), so it includes the
interpreter's own start-up; the ratios are what travel between machines:

- ``import json`` is the floor (an interpreter that imports one small standard module);
- ``import openai`` is the provider SDK ownloop used to load eagerly;
- ``import ownloop`` (the lazy facade), ``from ownloop import Agent`` (the runtime, which an
  application needs anyway), ``from ownloop.models import OpenAIChatModel`` (the runtime's adapter
  and the SDK), ``ownloop --version`` and ``ownloop trace show`` on the demo's trace are what a
  user starts.

The goal is ``import ownloop`` at most half of ``import openai``. Run:

    .venv/bin/python benchmarks/bench_import.py [--runs N]

It prints the median milliseconds of N runs of each (interleaved, so load drift hits all alike),
the ratios, and whether ``import ownloop`` loaded openai, as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _commands(trace: Path) -> dict[str, list[str]]:
    python = [sys.executable, "-c"]
    cli = "from ownloop.cli import main; raise SystemExit(main())"
    return {
        "import json": [*python, "import json"],
        "import openai": [*python, "import openai"],
        "import ownloop": [*python, "import ownloop"],
        "from ownloop import Agent": [*python, "from ownloop import Agent"],
        "ownloop + adapter": [*python, "from ownloop.models import OpenAIChatModel"],
        "ownloop --version": [sys.executable, "-c", cli, "--version"],
        "ownloop trace show": [sys.executable, "-c", cli, "trace", "show", str(trace)],
    }


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    """Time each command ``--runs`` times, interleaved, and print medians and ratios as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (default 15)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder, "trace.jsonl")
        cli = "from ownloop.cli import main; raise SystemExit(main())"
        subprocess.run(
            [sys.executable, "-c", cli, "demo", "--trace", str(trace)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        commands = _commands(trace)
        for command in commands.values():  # warm the file cache and the bytecode
            _time(command)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(options.runs):
            for name, command in commands.items():
                samples[name].append(_time(command))
    medians = {name: round(statistics.median(values), 1) for name, values in samples.items()}
    loads_openai = subprocess.run(
        [sys.executable, "-c", "import sys, ownloop; print('openai' in sys.modules)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    report = {
        "python": platform.python_version(),
        "runs": options.runs,
        "median_ms": medians,
        "ratio_to_import_json": {
            name: round(value / medians["import json"], 2) for name, value in medians.items()
        },
        "ratio_to_import_openai": {
            name: round(value / medians["import openai"], 2) for name, value in medians.items()
        },
        "import_ownloop_loads_openai": loads_openai == "True",
        "goal_import_ownloop_at_most_half_of_openai": medians["import ownloop"]
        <= 0.5 * medians["import openai"],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
