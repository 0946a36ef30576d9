"""Quality gates as nox sessions: the same commands as ``.ci/run``, one isolated venv each.

Run ``nox`` for every gate, or ``nox -s tests`` for one. Each session installs the project with its
``dev`` extra, so the pinned tool versions in ``pyproject.toml`` are the ones that run.
"""

from __future__ import annotations

import nox

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "imports", "tests", "docs"]


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]")


@nox.session
def lint(session: nox.Session) -> None:
    """Lint with ruff and check that every file is formatted."""
    _install(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check the package with mypy in strict mode."""
    _install(session)
    session.run("mypy", "--strict", "src")


@nox.session
def imports(session: nox.Session) -> None:
    """Check with import-linter that imports point down the layers."""
    _install(session)
    session.run("lint-imports")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite with coverage; extra arguments go to pytest."""
    _install(session)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation-test the guarantee modules; each must kill at least the floor of its mutants.

    Extra arguments go to ``scripts/mutation`` (for example ``--base origin/main`` to test only
    the guarantee modules a branch changed, or one module's path). Not in the default sessions:
    it takes minutes.
    """
    _install(session)
    session.run("python", "scripts/mutation", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation, treating every warning as an error."""
    _install(session)
    # The variable silences Material's end-of-life banner, which says nothing about our docs.
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})
