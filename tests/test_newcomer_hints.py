"""What a newcomer is told when something is off: the store, the usage line, the file, the extra."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.cli import main
from ownloop.store import SqliteRunStore
from tests.durable_worker import JOB_VARIABLE, Job, ledger_rows, make_agent

ROOT = Path(__file__).resolve().parents[1]


def _ownloop(
    *arguments: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the ``ownloop`` command in a subprocess, as a shell would."""
    return subprocess.run(
        [sys.executable, "-m", "ownloop.cli", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **env},
        check=False,
    )


@pytest.fixture
def paused(tmp_path: Path) -> Job:
    """A SQLite store holding a refund run paused for approval."""
    job = Job(
        run_id="refund-1",
        directory=str(tmp_path),
        database=str(tmp_path / "runs.db"),
        scenario="refund",
    )

    async def prepare() -> None:
        async with SqliteRunStore(job.database) as store:
            await make_agent(job, store).run("refund", run_id="refund-1")

    asyncio.run(prepare())
    return job


def _request(database: str) -> str:
    async def read() -> str:
        async with SqliteRunStore(database) as store:
            stored = await store.get("refund-1")
            assert stored is not None
            return stored.snapshot.approval_requests[0].id

    return asyncio.run(read())


def _state(database: str) -> str:
    async def read() -> str:
        async with SqliteRunStore(database) as store:
            stored = await store.get("refund-1")
            assert stored is not None
            return stored.snapshot.state

    return asyncio.run(read())


def test_resume_db_resumes_from_the_named_store_not_the_agents_own(
    paused: Job,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """'resume --db PATH' continues the run stored there, with the factory's tools and policy."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(paused.database, copy)
    monkeypatch.setenv(JOB_VARIABLE, json.dumps(paused.__dict__))
    request = _request(str(copy))
    assert main(["approve", "refund-1", request, "--db", str(copy), "--approver", "al"]) == 0
    capsys.readouterr()
    agent = "tests.durable_worker:cli_agent"
    assert main(["resume", "refund-1", "--agent", agent, "--db", str(copy)]) == 0
    assert "status:      completed (final_output)" in capsys.readouterr().out
    assert (_state(str(copy)), _state(paused.database)) == ("finished", "paused")
    assert [what for _, what in ledger_rows(paused.directory)] == ["refund:o-1:500"]


def test_resume_db_naming_no_store_is_a_usage_error(
    paused: Job,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """'resume --db' of a file that does not exist says so (exit 2) and creates nothing."""
    monkeypatch.setenv(JOB_VARIABLE, json.dumps(paused.__dict__))
    absent = tmp_path / "absent.db"
    assert (
        main(
            ["resume", "refund-1", "--agent", "tests.durable_worker:cli_agent", "--db", str(absent)]
        )
        == 2
    )
    assert f"no run store at {absent}" in capsys.readouterr().err
    assert not absent.exists()
    assert _state(paused.database) == "paused"


def test_a_resume_usage_error_prints_the_resume_usage_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An unknown option of 'resume' is answered with 'usage: ownloop resume', not the top level."""
    with pytest.raises(SystemExit) as exit_info:
        main(["resume", "run-1", "--agent", "m:f", "--bogus"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ownloop resume ")
    assert "unrecognized arguments: --bogus" in err
    with pytest.raises(SystemExit):
        main(["runs", "list", "--bogus"])
    assert capsys.readouterr().err.startswith("usage: ownloop runs list ")


def test_a_resume_usage_error_in_a_shell_names_resume_and_its_options() -> None:
    """From a shell, a wrong option of 'resume' shows resume's usage with --db (exit 2)."""
    done = _ownloop("resume", "run-1", "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: ownloop resume ")
    assert "--db PATH" in done.stderr


def _sqlite_file(path: Path) -> Path:
    connection = sqlite3.connect(path)
    connection.execute("create table t (x)")
    connection.commit()
    connection.close()
    return path


def test_trace_show_of_a_sqlite_store_names_the_command_that_shows_its_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'trace show email.db' says it is a SQLite database and names 'runs show --trace --db'."""
    store = _sqlite_file(tmp_path / "email.db")
    assert main(["trace", "show", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"{store} is a SQLite database (a run store?), not a JSONL trace" in err
    assert f"ownloop runs show RUN_ID --trace --db {store}" in err
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00binary")
    assert main(["trace", "diagnose", str(binary)]) == 2
    assert "is not a JSONL trace: it is not UTF-8 text" in capsys.readouterr().err


def test_trace_show_of_a_binary_file_in_a_shell_has_no_traceback(tmp_path: Path) -> None:
    """From a shell, 'trace show' of a SQLite file exits 2 with one line and no traceback."""
    store = _sqlite_file(tmp_path / "email.db")
    done = _ownloop("trace", "show", str(store))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"ownloop: {store} is a SQLite database")


@pytest.mark.parametrize("value", ["email.db", "sqlite:///email.db"])
def test_a_database_url_that_is_a_file_path_is_a_sqlite_store(
    value: str,
    paused: Job,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OWNLOOP_DATABASE_URL=email.db (or sqlite:///email.db) names a SQLite file, not PostgreSQL."""
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(paused.database, tmp_path / "email.db")
    monkeypatch.setenv("OWNLOOP_DATABASE_URL", value)
    assert main(["runs", "list", "--json"]) == 0
    assert [json.loads(line)["run_id"] for line in capsys.readouterr().out.splitlines()] == [
        "refund-1"
    ]
    assert main(["runs", "show", "refund-1"]) == 0
    assert "state:       paused" in capsys.readouterr().out


def test_a_database_url_naming_an_absent_file_says_there_is_no_store_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """OWNLOOP_DATABASE_URL=email.db before any run: 'no run store at email.db', never psycopg."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OWNLOOP_DATABASE_URL", "email.db")
    assert main(["runs", "list"]) == 0
    assert capsys.readouterr().out.startswith("no runs: there is no run store at email.db")
    assert main(["runs", "show", "run-1"]) == 2
    err = capsys.readouterr().err
    assert "no run store at email.db" in err
    assert "psycopg" not in err


def test_a_database_url_in_a_shell_is_read_as_a_sqlite_path(paused: Job, tmp_path: Path) -> None:
    """From a shell, OWNLOOP_DATABASE_URL=runs.db lists the runs stored in that file."""
    done = _ownloop("runs", "list", cwd=tmp_path, OWNLOOP_DATABASE_URL="runs.db")
    assert done.returncode == 0, done.stderr
    assert "refund-1" in done.stdout


def test_importing_ownloop_mcp_without_the_extra_names_the_install_command() -> None:
    """Without the mcp SDK, 'import ownloop.mcp' says: pip install 'ownloop[mcp]'."""
    code = "import sys; sys.modules['mcp'] = None; import ownloop.mcp"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ownloop.exceptions.ConfigurationError: ownloop.mcp needs the MCP SDK")
    assert "pip install 'ownloop[mcp]'" in last


def test_the_demo_script_says_where_the_ownloop_command_is(tmp_path: Path) -> None:
    """After ./scripts/demo, stderr names .venv/bin/ownloop and how to put it on PATH."""
    path = os.pathsep.join(
        part for part in os.environ.get("PATH", "").split(os.pathsep) if ".venv" not in part
    )
    done = subprocess.run(
        [str(ROOT / "scripts" / "demo"), "--max-steps", "6", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": path},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # the hint never lands in the JSON
    assert "the ownloop command is .venv/bin/ownloop" in done.stderr
    assert "source .venv/bin/activate" in done.stderr
