"""Shared by the UI tests: a refund agent whose write needs approval, paused runs, a live server.

The model is a `FunctionModel`: the first step proposes the refund the task describes
(``refund ORDER AMOUNT NOTE``), the next answers with the tool's observation, so one agent serves
every run, paused or resumed, in any process. Each executed refund is appended to a ledger list,
so a test counts real effects.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from ownloop import Agent, RunResult, ToolContext, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse, ToolMessage, UserMessage
from ownloop.policy import allow_writes
from ownloop.store import RunStore, SqliteRunStore
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.ui import UiApp, create_app, serve

SCRIPT = "<script>window.__pwned = 1; alert(1)</script>"
IMAGE = '<img src=x onerror="window.__pwned = 2">'


def refund_agent(
    store: RunStore, ledger: list[str], answer_gate: threading.Event | None = None
) -> Agent:
    """An agent that refunds what the task says, once a person approves the exact call.

    With ``answer_gate``, the model's answer after the refund waits until the gate is set (at
    most a minute), so a test sees the resume in progress for as long as it needs.
    """
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def refund(order_id: str, amount: int, note: str, ctx: ToolContext) -> dict[str, Any]:
        """Refund an order.

        Args:
            order_id: The order.
            amount: Cents.
            note: Shown to the customer.
            ctx: Injected by the runtime.
        """
        ledger.append(f"{order_id}:{amount}")
        return {"refunded": order_id, "note": note}

    async def respond(request: ModelRequest) -> ModelResponse:
        observed = [m for m in request.messages if isinstance(m, ToolMessage)]
        if observed:
            await _opened(answer_gate)
            return final(f"Done: {observed[-1].content}")
        task = next(m.content for m in request.messages if isinstance(m, UserMessage))
        _, order_id, amount, note = task.split(" ", 3)
        return tool_call("refund", "c1", order_id=order_id, amount=int(amount), note=note)

    return Agent(
        FunctionModel(respond, model_name="refunds"),
        registry,
        policy=allow_writes("refund"),
        store=store,
        lease_ttl_s=30,
    )


async def _opened(gate: threading.Event | None) -> None:
    """Wait, without blocking the loop, until ``gate`` is set (at most a minute)."""
    for _ in range(6000):
        if gate is None or gate.is_set():
            return
        await asyncio.sleep(0.01)


async def pause(store: RunStore, runs: dict[str, str]) -> dict[str, RunResult]:
    """Start each run (id -> task) until it pauses for approval."""
    ledger: list[str] = []
    agent = refund_agent(store, ledger)
    results = {run_id: await agent.run(task, run_id=run_id) for run_id, task in runs.items()}
    assert ledger == []
    return results


def pause_sqlite(path: Path, runs: dict[str, str]) -> dict[str, RunResult]:
    """Pause runs in a SQLite store at ``path``, in a thread (a browser driver may own this one)."""

    async def work() -> dict[str, RunResult]:
        async with SqliteRunStore(path) as store:
            return await pause(store, runs)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(work())).result()


class LiveServer:
    """`ownloop.ui` served by uvicorn on 127.0.0.1 (a free port) in a thread, over a SQLite file.

    Attributes:
        url: The address with the access token, as ``ownloop ui`` prints it.
        ledger: The refunds executed by resumes the app started.
        app: The app, once started.
    """

    def __init__(self, path: Path, approver: str, hold_answers: bool) -> None:
        self._path = path
        self._approver = approver
        self._answers = threading.Event()
        if not hold_answers:
            self._answers.set()
        self._ready = threading.Event()
        self._servers: list[uvicorn.Server] = []
        self.url = ""
        self.ledger: list[str] = []
        self.app: UiApp | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        async with SqliteRunStore(self._path) as store:
            agent = refund_agent(store, self.ledger, self._answers)
            self.app = create_app(store, approver=self._approver, resume=agent.resume, poll_s=0.1)

            def ready(url: str) -> None:
                self.url = url
                self._ready.set()

            await serve(self.app, on_ready=ready, server_holder=self._servers)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        assert self._ready.wait(20), "the UI server did not start"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._answers.set()
        self._servers[0].should_exit = True
        self._thread.join(20)

    def release_answers(self) -> None:
        """Let the model answer the resumes it holds (``hold_answers=True``)."""
        self._answers.set()

    @property
    def base(self) -> str:
        """The address without the token."""
        return self.url.split("/?", 1)[0]

    def address(self, path: str) -> str:
        """``path`` on the server, with the token."""
        return f"{self.base}{path}?token={self.url.split('token=', 1)[1]}"


@contextmanager
def live_server(
    path: Path, approver: str = "alice", hold_answers: bool = False
) -> Iterator[LiveServer]:
    """Serve the UI over the SQLite store at ``path`` until the block ends.

    With ``hold_answers``, a resumed run's final answer waits for `LiveServer.release_answers`.
    """
    with LiveServer(path, approver, hold_answers) as server:
        yield server


DATABASE_VARIABLE = "OWNLOOP_TEST_UI_DATABASE"


def cli_agent() -> Agent:
    """The factory ``ownloop ui --agent`` loads; the database is ``$OWNLOOP_TEST_UI_DATABASE``."""
    return refund_agent(SqliteRunStore(os.environ[DATABASE_VARIABLE]), [])
