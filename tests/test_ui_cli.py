"""``ownloop ui``: serves the store on 127.0.0.1 and prints the one address that opens it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sse_starlette.sse import AppStatus

from ownloop.cli import main
from tests.ui_support import DATABASE_VARIABLE, pause_sqlite

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = re.compile(r"ownloop ui: open (http://127\.0\.0\.1:(\d+)/\?token=([\w-]+))")


def check_access(url: str) -> None:
    """The printed address opens the runs list; the same server refuses a request without it."""
    base = url.split("/?", 1)[0]
    with httpx.Client(follow_redirects=True, timeout=10) as http:
        assert http.get(f"{base}/").status_code == 403
        page = http.get(url)
        assert page.status_code == 200
        assert "run-1" in page.text
        assert http.get(f"{base}/approvals").status_code == 200  # the cookie carries the token


def test_the_command_serves_until_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: the URL is printed, access works with it only, Ctrl-C stops it cleanly."""
    # The SIGINT below reaches uvicorn's `Server.handle_exit`, which sse_starlette (the `mcp`
    # SDK's SSE) patches to set its process-wide `AppStatus.should_exit`; `ownloop ui` puts it
    # back when it stops, or every SSE response later served in this process would end at once
    # (the monkeypatch only keeps a failure here from spoiling later tests).
    monkeypatch.setattr(AppStatus, "should_exit", False)
    database = tmp_path / "runs.db"
    pause_sqlite(database, {"run-1": "refund o-1 500 thanks"})
    monkeypatch.setenv(DATABASE_VARIABLE, str(database))
    printed: list[str] = []
    failures: list[BaseException] = []

    def visit() -> None:
        try:
            deadline = time.monotonic() + 20
            while not printed and time.monotonic() < deadline:
                printed.extend(ADDRESS.findall(capsys.readouterr().out))
                time.sleep(0.05)
            check_access(printed[0][0])
        except BaseException as error:  # reported by the test below
            failures.append(error)
        finally:
            os.kill(os.getpid(), signal.SIGINT)

    visitor = threading.Thread(target=visit)
    visitor.start()
    status = main(["ui", "--port", "0", "--agent", "tests.ui_support:cli_agent"])
    visitor.join(10)
    assert status == 0
    assert not failures, failures
    assert AppStatus.should_exit is False


def test_the_command_line_in_its_own_process(tmp_path: Path) -> None:
    """As a user runs it: ``--db``, a free port, the address printed, SIGINT ends it with 0."""
    database = tmp_path / "runs.db"
    pause_sqlite(database, {"run-1": "refund o-1 500 thanks"})
    process = subprocess.Popen(
        [sys.executable, "-m", "ownloop.cli", "ui", "--db", str(database), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = ADDRESS.search(line)
        assert found, line
        check_access(found.group(1))
    finally:
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=20)
    assert process.returncode == 0, errors


def test_a_remote_address_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Listening beyond this machine prints a warning first (here the address cannot be bound)."""
    database = tmp_path / "runs.db"
    pause_sqlite(database, {"run-1": "refund o-1 500 thanks"})
    with pytest.raises(OSError):  # noqa: PT011 - the OS words it
        main(["ui", "--db", str(database), "--host", "192.0.2.1", "--port", "0"])
    assert "reachable from other machines" in capsys.readouterr().err


def test_without_a_store_or_the_extra_the_command_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing store and a missing ``ui`` extra are usage errors with the fix in the message."""
    assert main(["ui", "--db", str(tmp_path / "none.db")]) == 2
    assert "no run store at" in capsys.readouterr().err
    hidden: dict[str, Any] = {"ownloop.ui": None}
    monkeypatch.setitem(sys.modules, "ownloop.ui", hidden["ownloop.ui"])
    assert main(["ui", "--db", str(tmp_path / "none.db")]) == 2
    assert "pip install 'ownloop[ui]'" in capsys.readouterr().err
