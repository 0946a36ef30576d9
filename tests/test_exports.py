"""The public surface: explicit, sorted, complete `__all__` lists and a leaf exceptions module."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType

import pytest

import ownloop
import ownloop.contracts
import ownloop.exceptions
import ownloop.mcp
import ownloop.memory
import ownloop.patterns
import ownloop.policy
import ownloop.store
import ownloop.tools
import ownloop.tracing
from ownloop import OwnloopError

FACADES = [
    ownloop,
    ownloop.contracts,
    ownloop.mcp,
    ownloop.memory,
    ownloop.patterns,
    ownloop.policy,
    ownloop.store,
    ownloop.tools,
    ownloop.tracing,
]


def _isort_key(name: str) -> tuple[int, str]:
    """Order of ruff's RUF022: CONSTANTS, then CamelCase classes, then everything else."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _public_names(module: ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }


@pytest.mark.parametrize("module", FACADES, ids=lambda module: module.__name__)
def test_all_is_sorted_without_duplicates(module: ModuleType) -> None:
    """`__all__` is sorted (constants, classes, then functions) and names nothing twice."""
    assert module.__all__ == sorted(module.__all__, key=_isort_key)
    assert len(set(module.__all__)) == len(module.__all__)


@pytest.mark.parametrize("module", FACADES, ids=lambda module: module.__name__)
def test_all_lists_every_public_name(module: ModuleType) -> None:
    """Every public name the module binds (submodules aside) is listed in `__all__`."""
    assert _public_names(module) - set(module.__all__) == set()


@pytest.mark.parametrize("module", FACADES, ids=lambda module: module.__name__)
def test_every_name_in_all_resolves(module: ModuleType) -> None:
    """Every name listed in `__all__` can be imported from the module."""
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_facade_reexports_the_same_contract_objects() -> None:
    """Names the facade shares with ownloop.contracts are the very same objects."""
    shared = set(ownloop.__all__) & set(ownloop.contracts.__all__)
    assert shared
    assert [n for n in shared if getattr(ownloop, n) is not getattr(ownloop.contracts, n)] == []


def test_facade_exports_every_exception() -> None:
    """Every exception class of ownloop.exceptions is importable from ownloop itself."""
    classes = {
        name
        for name, value in vars(ownloop.exceptions).items()
        if isinstance(value, type) and issubclass(value, BaseException) and name[0] != "_"
    }
    assert classes - set(ownloop.__all__) == set()


def test_every_exception_derives_from_the_root() -> None:
    """Every exception class defined in ownloop.exceptions derives from OwnloopError."""
    classes = [
        value
        for value in vars(ownloop.exceptions).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == ownloop.exceptions.__name__
    ]
    assert len(classes) > 1
    assert [cls.__name__ for cls in classes if not issubclass(cls, OwnloopError)] == []


def test_exceptions_module_imports_nothing_from_ownloop() -> None:
    """ownloop.exceptions imports no ownloop module, so every layer can raise from it."""
    source = Path(inspect.getfile(ownloop.exceptions)).read_text(encoding="utf-8")
    imported: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.append("." * node.level + (node.module or ""))
    assert imported  # the walk saw the module's imports
    assert [name for name in imported if name.startswith((".", "ownloop"))] == []


def test_the_typed_run_names_are_exported() -> None:
    """Typed answers and deps (DESIGN 9.3) are importable from ownloop and its contracts."""
    assert {"Agent", "OutputMode", "RunContext", "RunResult", "ToolContext"} <= set(ownloop.__all__)
    assert {"OutputFormat", "OutputInvalid", "OutputMode"} <= set(ownloop.contracts.__all__)
    assert ownloop.StopReason.INVALID_OUTPUT.value == "invalid_output"
