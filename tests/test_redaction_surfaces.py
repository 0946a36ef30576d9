"""Every surface a person reads goes through the redactor: a table of surfaces and fields.

Each row names a surface (a UI page, a CLI command's output, an exception, a repr) and a field
that reaches it; the field holds an API key and a DSN with a password, and the surface's text must
hold neither. A new surface, or a new field on one, is a new row here.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import httpx
import pytest

from ownloop import Agent, Approval, Sensitive, ToolRegistry
from ownloop.cli import main
from ownloop.cli._output import RedactingLogFilter, agent_redactor, redact_logs_to_stderr
from ownloop.store import SqliteRunStore
from ownloop.testing import ScriptedModel
from ownloop.ui import cookie_name, create_app
from tests.ui_support import pause, refund_agent

API_KEY = "sk-proj-Canary0penAIkey1234567890abcdEF"
DSN = "postgresql://app:Canary-pa55word@db.internal:5432/app"
SECRET_PARTS = ("Canary0penAIkey", "Canary-pa55word")
PLANTED = f"key {API_KEY} dsn {DSN}"
TOKEN = "test-token-0123456789abcdef"
DB_VARIABLE = "OWNLOOP_TEST_SURFACES_DB"

# (surface, field): every field that reaches the surface holds PLANTED.
TABLE = [
    ("ui /approvals", "request arguments"),
    ("ui /approvals", "submitted decision reason"),
    ("ui /approvals", "submitted decision approver"),
    ("ui /runs/ID", "task"),
    ("ui /runs/ID", "request arguments"),
    ("ui /runs/ID", "submitted decision reason"),
    ("ui /runs/ID", "applied decision reason"),
    ("ui /runs/ID", "answer"),
    ("cli runs show", "task, arguments, submitted reason"),
    ("cli runs show --json", "task, arguments, submitted reason"),
    ("cli approve", "approver"),
    ("cli approve (error)", "earlier decision reason"),
    ("cli resume", "detail, answer, decided reason"),
    ("cli resume --json", "detail, answer, decided reason"),
    ("cli runs list --json", "every field"),
    ("mcp serve logs", "log message and traceback"),
    ("exception", "CLI error message"),
]


def surface_agent() -> Agent:
    """The refund agent on the store the test names (the `resume --agent` factory)."""
    return refund_agent(SqliteRunStore(os.environ[DB_VARIABLE]), [])


def assert_hidden(text: str, where: str) -> None:
    """No part of a planted secret is in the text."""
    for part in SECRET_PARTS:
        assert part not in text, f"{where} shows {part}"


def _paused(path: Path) -> tuple[str, str]:
    """A run paused on a refund whose note holds the secrets; returns its id and request id."""

    async def work() -> str:
        async with SqliteRunStore(path) as store:
            await pause(store, {"r-1": f"refund o-1 500 {PLANTED}"})
            stored = await store.get("r-1")
            assert stored is not None
            return stored.snapshot.approval_requests[0].id

    return "r-1", asyncio.run(work())


def _submit(path: Path, request_id: str) -> None:
    async def work() -> None:
        async with SqliteRunStore(path) as store:
            approval = Approval(
                request_id=request_id, approved=True, approver=f"bob {API_KEY}", reason=PLANTED
            )
            await store.submit_approval("r-1", approval)

    asyncio.run(work())


async def _page(path: Path, address: str) -> str:
    async with SqliteRunStore(path) as store:
        app = create_app(store, approver="alice", token=TOKEN)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app.asgi),
            base_url="http://127.0.0.1:8765",
            cookies={cookie_name(TOKEN): TOKEN},
        ) as http:
            response = await http.get(address)
            assert response.status_code == 200
            return response.text


def test_the_table_names_every_surface_once() -> None:
    """Each row is one (surface, field); the surfaces below are the ones the tests check."""
    assert len(set(TABLE)) == len(TABLE)
    assert {surface for surface, _ in TABLE} == {
        "ui /approvals",
        "ui /runs/ID",
        "cli runs show",
        "cli runs show --json",
        "cli approve",
        "cli approve (error)",
        "cli resume",
        "cli resume --json",
        "cli runs list --json",
        "mcp serve logs",
        "exception",
    }


def test_pages_hide_secrets_in_submitted_and_applied_decisions(tmp_path: Path) -> None:
    """The card, /approvals and /runs/ID redact a decision submitted but not yet applied."""
    path = tmp_path / "runs.db"
    _, request_id = _paused(path)
    _submit(path, request_id)
    approvals = asyncio.run(_page(path, "/approvals"))
    run = asyncio.run(_page(path, "/runs/r-1"))
    assert "[redacted:" in approvals
    assert "bob" in approvals  # the decision is shown, its secrets are not
    assert_hidden(approvals, "ui /approvals")
    assert_hidden(run, "ui /runs/ID")


def test_cli_commands_hide_secrets_in_every_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runs show`, `approve`, its error, `resume` and `runs list`, text and JSON, hide secrets."""
    path = tmp_path / "runs.db"
    run_id, request_id = _paused(path)
    db = ["--db", str(path)]
    commands: list[tuple[str, list[str], Callable[[int], bool]]] = [
        ("cli approve", ["approve", run_id, request_id, *db, "--reason", PLANTED,
                         "--approver", f"bob {API_KEY}"], lambda code: code == 0),
        ("cli approve (error)", ["approve", run_id, request_id, *db], lambda code: code == 2),
        ("cli runs show", ["runs", "show", run_id, *db], lambda code: code == 0),
        ("cli runs show --json", ["runs", "show", run_id, *db, "--json"], lambda code: code == 0),
        ("cli runs list --json", ["runs", "list", *db, "--json"], lambda code: code == 0),
    ]  # fmt: skip
    for surface, argv, expected in commands:
        assert expected(main(argv)), surface
        out, err = capsys.readouterr()
        assert_hidden(out + err, surface)
    monkeypatch.setenv(DB_VARIABLE, str(path))
    factory = ["--agent", "tests.test_redaction_surfaces:surface_agent"]
    assert main(["resume", run_id, *factory]) == 0
    out, err = capsys.readouterr()
    assert "decided:" in out
    assert "[redacted:" in out
    assert_hidden(out + err, "cli resume")
    again = tmp_path / "again.db"
    _, second = _paused(again)
    _submit(again, second)
    monkeypatch.setenv(DB_VARIABLE, str(again))
    assert main(["resume", run_id, *factory, "--json"]) == 0
    out, err = capsys.readouterr()
    assert '"approvals"' in out
    assert_hidden(out + err, "cli resume --json")


def test_applied_decisions_and_answers_stay_hidden_on_the_run_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the resume applied the decision, /runs/ID still hides its reason and the answer."""
    path = tmp_path / "runs.db"
    run_id, request_id = _paused(path)
    _submit(path, request_id)
    monkeypatch.setenv(DB_VARIABLE, str(path))
    assert main(["resume", run_id, "--agent", "tests.test_redaction_surfaces:surface_agent"]) == 0
    capsys.readouterr()
    page = asyncio.run(_page(path, f"/runs/{run_id}"))
    assert "Done:" in page
    assert_hidden(page, "ui /runs/ID (applied)")


def test_mcp_serve_logs_go_to_stderr_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """A log record of the server (message, arguments and traceback) is redacted before stderr."""
    handler = redact_logs_to_stderr()
    try:
        try:
            raise RuntimeError(f"cannot reach {DSN}")
        except RuntimeError:
            logging.getLogger("mcp.server.test").exception("tool failed with %s", API_KEY)
    finally:
        logging.getLogger().removeHandler(handler)
    err = capsys.readouterr().err
    assert "tool failed with [redacted:" in err
    assert "RuntimeError: cannot reach" in err
    assert_hidden(err, "mcp serve logs")


def test_the_log_filter_keeps_a_record_without_a_traceback_intact() -> None:
    """A record with no traceback or stack keeps its level and gets its message redacted."""
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "key %s", (API_KEY,), None)
    record.stack_info = f"stack {API_KEY}"
    assert RedactingLogFilter().filter(record)
    assert record.getMessage().startswith("key [redacted:")
    assert record.stack_info.startswith("stack [redacted:")
    assert record.levelno == logging.ERROR


def test_commands_with_an_agent_also_hide_its_sensitive_parameters() -> None:
    """The agent's `Sensitive()` parameter names are secret keys in what a command prints."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def unlock(vault_code: Annotated[str, Sensitive()]) -> str:
        """Unlock.

        Args:
            vault_code: The code.
        """
        return "open"

    rules = agent_redactor(Agent(ScriptedModel([]), registry))
    assert "hunter2" not in rules.redact_text("vault_code=hunter2")
    assert agent_redactor(None).redact_text(API_KEY) != API_KEY
