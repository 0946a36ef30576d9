"""MCP tools from the unmodified npm reference servers, run with node.

The servers are installed by ``scripts/setup_mcp.sh`` into ``.cache/mcp-npm``. Without node or
npm these tests skip; with them, a missing install is a failure that says how to fix it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ownloop import Agent, Approval, RunStatus, StopReason
from ownloop.mcp import MCPToolset, StdioServer
from ownloop.policy import allow_writes, require_approval_for
from ownloop.testing import ScriptedModel, final, tool_call
from tests.mcp_support import NPM_CACHE

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node/npm not found: the npm MCP server tests need them (scripts/setup_mcp.sh)",
)


def _entry(package: str) -> str:
    path = NPM_CACHE / "node_modules" / "@modelcontextprotocol" / package / "dist" / "index.js"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `source scripts/setup_mcp.sh && setup_mcp` first")
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[MCPToolset, Path]]:
    """server-filesystem confined to a fresh directory holding ``notes.txt``."""
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    server = StdioServer(
        name="fs",
        command="node",
        args=(_entry("server-filesystem"), str(root)),
        trust_annotations=True,
    )
    with MCPToolset(server) as tools:
        yield tools, root.resolve()


def test_filesystem_reads_run_and_writes_wait_for_approval(files: tuple[MCPToolset, Path]) -> None:
    """Reads run; write_file pauses; after approval the file is written once."""
    tools, root = files
    effects = {spec.name: spec.effect for spec in tools.specs()}
    assert (effects["read_text_file"], effects["write_file"]) == ("read", "write")
    target = str(root / "todo.txt")
    model = ScriptedModel(
        [
            tool_call("read_text_file", path=str(root / "notes.txt")),
            tool_call("write_file", path=target, content="buy milk\n"),
            final("written"),
        ]
    )
    policy = allow_writes("write_file") & require_approval_for("write_file")
    agent = Agent(model, tools, policy=policy)
    paused = agent.run_sync("copy the note")
    assert paused.status is RunStatus.PAUSED
    assert "remember the milk" in str(paused.receipts[0].data)
    assert not (root / "todo.txt").exists()
    (request,) = paused.approval_requests
    done = agent.resume_sync(
        paused, approvals=[Approval(request_id=request.id, approved=True, approver="me")]
    )
    assert done.status is RunStatus.COMPLETED
    assert (root / "todo.txt").read_text(encoding="utf-8") == "buy milk\n"
    assert [r.effect for r in done.receipts] == ["none", "applied"]


def test_filesystem_errors_become_error_receipts(files: tuple[MCPToolset, Path]) -> None:
    """Reading outside the allowed directory is an error receipt, and nothing else happens."""
    tools, _ = files
    model = ScriptedModel([tool_call("read_text_file", path="/etc/hostname"), final("no")])
    result = Agent(model, tools).run_sync("read outside")
    (receipt,) = result.receipts
    assert receipt.status == "error"
    assert "denied" in (receipt.message or "").lower()


def test_server_everything_tools_are_strict_and_callable() -> None:
    """Every tool of server-everything converts; echo and structured content come back."""
    server = StdioServer(
        name="everything",
        prefix="ev_",
        command="node",
        args=(_entry("server-everything"),),
        trust_annotations=True,
    )
    model = ScriptedModel(
        [tool_call("ev_echo", message="hi"), tool_call("ev_get-sum", a=2, b=3), final("ok")]
    )
    with MCPToolset(server) as tools:
        assert all(spec.strict for spec in tools.specs())
        writes = {spec.name for spec in tools.specs() if spec.effect == "write"}
        result = Agent(model, tools).run_sync("echo")
    assert "ev_echo" not in writes
    assert result.stop_reason is StopReason.FINAL_OUTPUT
    assert "hi" in str(result.receipts[0].data)
    assert "5" in str(result.receipts[1].data)
