"""The generics are proven by mypy: `tests/typing/` is checked with ``--strict`` in the suite."""

from __future__ import annotations

from pathlib import Path

from mypy import api

TYPING = Path(__file__).resolve().parent / "typing"


def test_the_typing_module_passes_mypy_strict() -> None:
    """Agent[Deps, T], RunResult[T], RunStream[T], ToolContext[D] read as documented."""
    root = TYPING.parent.parent
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--config-file",
            str(root / "pyproject.toml"),
            str(TYPING / "typing_generics.py"),
        ]
    )
    assert status == 0, stdout + stderr
