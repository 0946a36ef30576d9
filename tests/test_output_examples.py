"""The typed examples run offline and end with typed values (examples/typed_*.py)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from ownloop import RunStatus

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str) -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLES / name))


def test_the_population_comparison_returns_a_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    """The sign error is re-asked; the answer is a Comparison with the tools' numbers."""
    example = _load("typed_population.py")
    result = example["compare"](example["scripted"]())
    assert result.status is RunStatus.COMPLETED
    assert result.output == example["Comparison"](
        larger="Hangzhou", difference=2_980_000, percent=31.2
    )
    assert result.usage.invalid_outputs == 1
    assert example["main"]([]) == 0
    assert "Hangzhou is larger by 2,980,000 (31.2%)" in capsys.readouterr().out


def test_the_harness_verdict_is_checked_against_the_worker() -> None:
    """A verdict misreporting the worker's setting is rejected; the true one completes."""
    example = _load("typed_harness_verdict.py")
    worker = example["ExportWorker"]()
    result = example["run"](worker)
    assert result.status is RunStatus.COMPLETED, result.detail
    assert result.output == example["Verdict"](status="fixed", max_retries=2, checked=True)
    assert result.usage.completion_rejections == 1
    assert example["main"]() == 0
