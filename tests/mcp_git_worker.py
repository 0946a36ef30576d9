"""A process that runs (or resumes) an agent whose writes go to the unmodified ``mcp-server-git``.

Usage: ``python -m tests.mcp_git_worker REPO DB RUN_ID run|resume``. The agent stages
``new.txt`` with ``git_add`` (allowed) and commits with ``git_commit`` (needs an approval), with a
SQLite store so another process can approve and resume, and a short lease so a killed worker's
run can be taken over.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from ownloop import Agent, RunResult
from ownloop.mcp import MCPToolset
from ownloop.policy import allow_writes, require_approval_for
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel, final, tool_call
from tests.mcp_support import git_server

LEASE_TTL_S = 5.0
"""Short, so the killed worker's test waits little; not shorter, because a lease the loop cannot
renew in time (every third of it) is lost, which is what a 1 s lease risked on a loaded CI
machine (the run failed there with a raised error)."""


def make_agent(repo: Path, tools: MCPToolset, store: SqliteRunStore, *, resuming: bool) -> Agent:
    """The agent: stage, then commit (the commit needs an approval)."""
    steps = [
        tool_call("git_add", "add-1", repo_path=str(repo), files=["new.txt"]),
        tool_call("git_commit", "commit-1", repo_path=str(repo), message="Add new.txt"),
        final("Committed."),
    ]
    return Agent(
        ScriptedModel(steps[2:] if resuming else steps),
        tools,
        policy=allow_writes("git_add", "git_commit") & require_approval_for("git_commit"),
        store=store,
        lease_ttl_s=LEASE_TTL_S,
    )


async def work(repo: Path, database: Path, run_id: str, mode: str) -> RunResult:
    """Run or resume ``run_id`` and return its result."""
    store = SqliteRunStore(database)
    try:
        async with MCPToolset(git_server(repo)) as tools:
            agent = make_agent(repo, tools, store, resuming=mode == "resume")
            if mode == "run":
                return await agent.run("Commit new.txt", run_id=run_id)
            return await agent.resume(run_id)
    finally:
        await store.close()


def main() -> None:
    """Run from the command line and print the outcome as JSON."""
    repo, database, run_id, mode = sys.argv[1:5]
    result = asyncio.run(work(Path(repo), Path(database), run_id, mode))
    print(json.dumps({"status": result.status.value, "stop_reason": result.stop_reason.value}))


if __name__ == "__main__":
    main()
