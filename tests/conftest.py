"""Test-wide guards and reporting: no test reaches the network, and no test may ask a real model.

Loopback stays open, so tests can start and call local servers (preferred to mocking our code).
Skipped tests are summed up as one line per reason (``-ra`` would print one line per test).
In pytest-xdist workers the longest modules run first (``tests/module_costs.json``), so no long
module starts last and leaves one worker running it alone.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Read by the runtime: a real model adapter refuses to send requests while this is "0".
os.environ.setdefault("OWNLOOP_ALLOW_MODEL_REQUESTS", "0")


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths (str or bytes) never leave the machine
        return True
    host = str(address[0]).split("%", 1)[0]  # drop an IPv6 scope id such as "%lo"
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:  # a host name other than localhost would need DNS: not loopback
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


@pytest.fixture(autouse=True)
def _fresh_build_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    # The never-offered warning is said once per process; each test starts as a fresh process
    # would, so what it asserts does not depend on which tests ran before it in this process.
    monkeypatch.setattr("ownloop._agent_checks._warned", set())


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> Iterator[None]:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def _check(sock: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            # Close first: callers such as socket.create_connection only clean up after OSError,
            # and a leaked socket would surface later as an unrelated ResourceWarning.
            sock.close()
            raise RuntimeError(f"tests must not reach the network: {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        _check(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check(self, address)
        return real_connect_ex(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        yield


_COLLECTION: dict[str, float] = {}


def pytest_collectstart(collector: Any) -> None:
    """Say how collection progresses: importing the test modules takes a while on a busy machine."""
    if not isinstance(collector, pytest.Module):
        return
    # Every pytest-xdist worker collects every module, and a worker's terminal goes nowhere:
    # the first worker tells, on its stderr, which is the controller's.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker not in (None, "gw0"):
        return
    now = time.monotonic()
    started = _COLLECTION.setdefault("started", now)
    count = _COLLECTION["modules"] = _COLLECTION.get("modules", 0) + 1
    if count % 20 != 1:
        return
    line = f"collecting: module {count}, {collector.path.name} ({now - started:.0f}s)"
    plugins = collector.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    if worker is None:
        if reporter is not None:
            reporter.write_line(line)
        return
    capture = plugins.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        sys.stderr.write(f"[{worker}] {line}\n")


_COSTS = Path(__file__).with_name("module_costs.json")
_SPENT: dict[str, float] = {}
_TESTS: Counter[str] = Counter()


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In xdist workers, put the longest modules first: ``--dist loadfile`` hands them out in order.

    Each module keeps its own order. Costs are seconds recorded in ``tests/module_costs.json``; a
    module not in it counts as its number of tests times the mean cost of a recorded test. Every
    worker sorts the same collection the same way, as xdist requires.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ or not _COSTS.exists():
        return
    recorded: dict[str, dict[str, float]] = json.loads(_COSTS.read_text())["modules"]
    per_test = sum(m["seconds"] for m in recorded.values()) / max(
        1, sum(m["tests"] for m in recorded.values())
    )
    counts = Counter(_module(item.nodeid) for item in items)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_module(item.nodeid), index)

    def order(item: pytest.Item) -> tuple[float, int]:
        module = _module(item.nodeid)
        known = recorded.get(module)
        return (-(known["seconds"] if known else counts[module] * per_test), first[module])

    items.sort(key=order)  # stable: a module's tests keep their order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each module's time (set-up, call and teardown) for ``OWNLOOP_RECORD_COSTS``."""
    module = _module(report.nodeid)
    _SPENT[module] = _SPENT.get(module, 0.0) + report.duration
    _TESTS[module] += report.when == "call"


def pytest_sessionfinish() -> None:
    """Write ``tests/module_costs.json`` under ``OWNLOOP_RECORD_COSTS=1`` (in the controller)."""
    if os.environ.get("OWNLOOP_RECORD_COSTS") != "1" or "PYTEST_XDIST_WORKER" in os.environ:
        return
    modules = {
        module: {"seconds": round(seconds, 1), "tests": _TESTS[module]}
        for module, seconds in sorted(_SPENT.items(), key=lambda pair: (-pair[1], pair[0]))
    }
    about = "seconds per module (set-up, call, teardown): OWNLOOP_RECORD_COSTS=1 ./scripts/test"
    _COSTS.write_text(json.dumps({"about": about, "modules": modules}, indent=1) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print one line per distinct skip reason, with how many tests it skipped."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in reasons.items():
        terminalreporter.write_line(f"SKIPPED {count} test{'s' * (count != 1)}: {reason}")


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A Temporal dev server on 127.0.0.1 for this session (see ``tests/temporal_support.py``)."""
    from tests.temporal_support import dev_server

    with dev_server() as address:
        yield address
