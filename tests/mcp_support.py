"""Shared set-up of the MCP tests: the real servers' records, a temporary git repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ownloop.mcp import StdioServer

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))
NPM_CACHE = ROOT / ".cache" / "mcp-npm"


def time_server(**options: object) -> StdioServer:
    """The unmodified ``mcp-server-time`` from PyPI, run here (its hints trusted)."""
    options.setdefault("trust_annotations", True)
    return StdioServer(
        name=str(options.pop("name", "time")),
        command=sys.executable,
        args=("-m", "mcp_server_time", "--local-timezone", "Etc/UTC"),
        **options,  # type: ignore[arg-type]
    )


def git_server(repo: Path, **options: object) -> StdioServer:
    """The unmodified ``mcp-server-git`` from PyPI, confined to ``repo`` (its hints trusted)."""
    options.setdefault("trust_annotations", True)
    # The default 30 s is for a user's machine; the under-load gate starts this server (which
    # imports GitPython) beside two busy processes and the suite's workers.
    options.setdefault("startup_timeout_s", 120.0)
    return StdioServer(
        name="git",
        command=sys.executable,
        args=("-m", "mcp_server_git", "--repository", str(repo)),
        **options,  # type: ignore[arg-type]
    )


def fixture_server(ledger: Path, **options: object) -> StdioServer:
    """The test's own fixture server (for timeouts, crashes, list changes, keys; hints trusted)."""
    options.setdefault("trust_annotations", True)
    return StdioServer(
        name=str(options.pop("name", "fixture")),
        command=sys.executable,
        args=(FIXTURE, "--ledger", str(ledger)),
        **options,  # type: ignore[arg-type]
    )


def git(repo: Path, *arguments: str) -> str:
    """Run git in ``repo`` and return its output."""
    return subprocess.run(
        ["git", *arguments], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def make_repo(path: Path) -> Path:
    """A repository with one commit and one untracked file, ``new.txt``."""
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.invalid")
    (path / "README").write_text("hello\n", encoding="utf-8")
    git(path, "add", "README")
    git(path, "commit", "-qm", "initial")
    (path / "new.txt").write_text("new\n", encoding="utf-8")
    return path


def commit_count(repo: Path) -> int:
    """How many commits the current branch has."""
    return int(git(repo, "rev-list", "--count", "HEAD").strip())
