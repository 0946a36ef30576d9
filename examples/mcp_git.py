"""An agent whose git writes go through ownloop's gateway: the commit waits for an approval.

Runs the unmodified ``mcp-server-git`` (``pip install 'ownloop[mcp]' mcp-server-git``) on a
temporary repository, with a scripted model so no API key is needed::

    python examples/mcp_git.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ownloop import Agent, Approval
from ownloop.mcp import MCPToolset, StdioServer
from ownloop.policy import allow_writes, require_approval_for
from ownloop.testing import ScriptedModel, final, tool_call


def git(repo: Path, *arguments: str) -> str:
    """Run git in ``repo``."""
    executable = shutil.which("git") or "git"
    done = subprocess.run(  # noqa: S603 - our own fixed git command lines
        [executable, *arguments], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout


def main() -> None:
    """Stage a file (an allowed write), then commit it (a write that needs an approval)."""
    with tempfile.TemporaryDirectory() as directory:
        repo = Path(directory)
        git(repo, "init", "-q")
        git(repo, "config", "user.name", "Example")
        git(repo, "config", "user.email", "example@example.invalid")
        (repo / "notes.md").write_text("# Release notes\n", encoding="utf-8")
        server = StdioServer(
            name="git",
            command=sys.executable,
            args=("-m", "mcp_server_git", "--repository", directory),
            # Take only the tools this agent uses: the server's other writes (reset, checkout,
            # branch...) would be registered, never offered, and named in a warning.
            tools=("git_status", "git_add", "git_commit"),
            trust_annotations=True,  # a reference server we chose: its read-only hints count
        )
        model = ScriptedModel(
            [
                tool_call("git_status", repo_path=directory),
                tool_call("git_add", repo_path=directory, files=["notes.md"]),
                tool_call("git_commit", repo_path=directory, message="Add release notes"),
                final("Committed the release notes."),
            ]
        )
        policy = allow_writes("git_add", "git_commit") & require_approval_for("git_commit")
        with MCPToolset(server) as tools:
            print("tools:", ", ".join(f"{s.name} ({s.effect})" for s in tools.specs()))
            agent = Agent(model, tools, policy=policy)
            paused = agent.run_sync("Commit the release notes")
            (request,) = paused.approval_requests
            print(f"paused: {paused.stop_reason.value}: {request.tool} {request.arguments}")
            print("commits so far:", git(repo, "log", "--oneline", "--all").count("\n"))
            decision = Approval(request_id=request.id, approved=True, approver="reviewer")
            done = agent.resume_sync(paused, approvals=[decision])
        print(f"finished: {done.status.value}: {done.output}")
        print("commits now:", git(repo, "log", "--oneline").strip())


if __name__ == "__main__":
    main()
