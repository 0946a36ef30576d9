"""``ownloop runs``, ``ownloop approve`` and ``ownloop resume``: inspect and continue stored runs.

``runs list``, ``runs show`` and ``approve`` read the store named by ``--db PATH`` (a SQLite file,
``./ownloop.db`` by default) or ``--dsn`` (PostgreSQL), else ``OWNLOOP_DATABASE_URL`` (a PostgreSQL
URL or DSN, or a SQLite path). ``approve`` only submits a decision to the store; ``resume``
continues the run with the agent a factory returns (``--agent MODULE:FACTORY``, configured with the
same tools, policy and store; ``--db`` or ``--dsn`` resume from another store than the agent's own),
which applies the submitted decisions.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from ownloop.agent import Agent
from ownloop.cli import _listing, _retain, _threads
from ownloop.cli._output import CLI_REDACTOR, agent_redactor, say, say_json
from ownloop.contracts import Approval, RunResult, RunSnapshot, RunStatus
from ownloop.exceptions import ConfigurationError, RunNotFound
from ownloop.store import PostgresRunStore, RunStore, SqliteRunStore
from ownloop.store._rules import standing_decision
from ownloop.tracing import format_trace

__all__ = [
    "approve",
    "list_runs",
    "named_store",
    "open_store",
    "register",
    "resume",
    "show_run",
    "unlock_run",
    "withdraw_decision",
]

DATABASE_URL_VARIABLE = "OWNLOOP_DATABASE_URL"
DEFAULT_DATABASE = "ownloop.db"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``runs``, ``approve`` and ``resume`` commands.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    runs = commands.add_parser("runs", help="list and inspect stored runs")
    actions = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list runs, most recently updated first")
    listing.add_argument(
        "--state", choices=("running", "paused", "finished"), help="only runs in this state"
    )
    listing.add_argument(
        "--status",
        choices=[status.value for status in RunStatus],
        help="only finished runs with this status",
    )
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true", help="print JSON lines")
    _listing.add_filters(listing)
    _threads.add_thread_option(listing)
    listing.set_defaults(handler=list_runs)
    show = actions.add_parser("show", help="show a run: state, approvals, writes, answer")
    show.add_argument("run_id", metavar="RUN_ID", help="the run to show")
    show.add_argument("--json", action="store_true", help="print the stored records as JSON")
    show.add_argument("--trace", action="store_true", help="also print the readable trace")
    show.add_argument(
        "--raw",
        action="store_true",
        help="print the task, arguments and answer as stored (secrets are redacted by default)",
    )
    show.set_defaults(handler=show_run)
    decide = commands.add_parser("approve", help="approve (or deny) a paused run's request")
    decide.add_argument("run_id", metavar="RUN_ID", help="the paused run")
    decide.add_argument(
        "request_id", metavar="REQUEST_ID", help="the approval request it waits for (runs show)"
    )
    decide.add_argument("--deny", action="store_true", help="deny instead of approving")
    decide.add_argument("--reason", help="why, recorded in the audit trail")
    decide.add_argument("--approver", help="who decides (default: the current user)")
    decide.set_defaults(handler=approve)
    withdraw = actions.add_parser("withdraw", help="withdraw a stored decision before a resume")
    withdraw.add_argument("run_id", metavar="RUN_ID", help="the paused run")
    withdraw.add_argument(
        "request_id", metavar="REQUEST_ID", help="the approval request whose decision to withdraw"
    )
    withdraw.set_defaults(handler=withdraw_decision)
    unlock = actions.add_parser(
        "unlock", help="take a dead or stuck worker's lease away so the run can be resumed now"
    )
    unlock.add_argument("run_id", metavar="RUN_ID", help="the run whose worker is dead or stuck")
    unlock.set_defaults(handler=unlock_run)
    for parser in (listing, show, decide, withdraw, unlock):
        _store_options(parser)
    _retain.add_actions(actions, _store_options, _with_store)
    proceed = commands.add_parser("resume", help="continue a paused or interrupted run")
    proceed.add_argument("run_id", metavar="RUN_ID", help="the run to continue")
    proceed.add_argument(
        "--agent",
        required=True,
        metavar="MODULE:FACTORY",
        help="a callable returning the Agent (same tools, policy and store) to continue with",
    )
    proceed.add_argument("--json", action="store_true", help="print the whole RunResult as JSON")
    proceed.add_argument(
        "--accept-changes",
        action="store_true",
        help="continue even if the agent's limits, policy or tools differ from the recorded ones",
    )
    proceed.add_argument(
        "--take-over",
        action="store_true",
        help="take the run even though another worker's lease has not expired (it is dead)",
    )
    proceed.add_argument(
        "--db", metavar="PATH", help="resume from this SQLite store instead of the agent's own"
    )
    proceed.add_argument(
        "--dsn", help="resume from this PostgreSQL store instead of the agent's own"
    )
    proceed.set_defaults(handler=resume)


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help=f"SQLite store (default ./{DEFAULT_DATABASE})")
    parser.add_argument(
        "--dsn", help=f"PostgreSQL store (default: ${DATABASE_URL_VARIABLE} when --db is not given)"
    )


def open_store(arguments: argparse.Namespace) -> SqliteRunStore | PostgresRunStore:
    """Open the store the command line names; a SQLite file must already exist.

    Args:
        arguments: The parsed command line (``db`` and ``dsn``).

    Raises:
        ConfigurationError: If no SQLite store exists at the path.
    """
    dsn, path = named_store(arguments)
    if dsn:
        return PostgresRunStore(dsn)
    if not path.is_file():
        raise ConfigurationError(
            f"no run store at {path}: pass --db PATH or --dsn DSN (or set {DATABASE_URL_VARIABLE})"
        )
    return SqliteRunStore(path)


def named_store(arguments: argparse.Namespace) -> tuple[str | None, Path]:
    """The PostgreSQL DSN the command line names, or else the SQLite path it names.

    ``OWNLOOP_DATABASE_URL`` (read when neither ``--db`` nor ``--dsn`` is given) names
    PostgreSQL with a ``postgres://`` or ``postgresql://`` URL or a ``key=value`` DSN; a
    ``sqlite:///`` URL or any other value is a SQLite file's path (``email.db``).
    """
    if arguments.dsn:
        return arguments.dsn, Path(DEFAULT_DATABASE)
    if arguments.db is not None:
        return None, Path(arguments.db)
    value = os.environ.get(DATABASE_URL_VARIABLE, "").strip()
    if not value:
        return None, Path(DEFAULT_DATABASE)
    if value.startswith(("postgres://", "postgresql://")) or "=" in value:
        return value, Path(DEFAULT_DATABASE)
    return None, Path(value.removeprefix("sqlite:///") if value.startswith("sqlite:///") else value)


def _missing_sqlite_store(arguments: argparse.Namespace) -> Path | None:
    """The SQLite path the command line names, when it names SQLite and the file is absent."""
    dsn, path = named_store(arguments)
    if dsn:
        return None
    return None if path.is_file() else path


def list_runs(arguments: argparse.Namespace) -> int:
    """Print the stored runs as a table (or JSON lines).

    Args:
        arguments: The parsed command line.

    Returns:
        0, also when there is no store yet (no run was ever stored there).
    """
    missing = _missing_sqlite_store(arguments)
    if missing is not None:
        if not arguments.json:
            print(
                f"no runs: there is no run store at {missing} yet (an Agent with a store= "
                f"saves runs there; pass --db PATH or --dsn DSN for another store)"
            )
        return 0

    async def listing(store: RunStore) -> list[Any]:
        if arguments.thread is not None:
            return await _threads.thread_summaries(store, arguments.thread, arguments)
        return await store.list_runs(
            state=arguments.state,
            status=arguments.status,
            limit=arguments.limit,
            **_listing.filters(arguments),
        )

    lines = _with_store(arguments, listing)
    if arguments.json:
        for line in lines:
            say_json(line.model_dump(mode="json"), indent=None)
        return 0
    print(f"{'RUN_ID':<34} {'STATE':<9} {'STATUS':<11} {'STOP_REASON':<20} VERSION UPDATED")
    for line in lines:
        print(
            f"{line.run_id:<34} {line.state:<9} {line.status or '-':<11} "
            f"{line.stop_reason or '-':<20} {line.version:>7} {line.updated_at.isoformat()}"
        )
    more = None if arguments.thread else _listing.next_page(lines, arguments.limit)
    if more is not None:
        print(more)
    return 0


def show_run(arguments: argparse.Namespace) -> int:
    """Print one run: its state, requests, audit trail, writes and answer.

    What the run was given and produced (the task, arguments, answers, reasons) is passed through
    the built-in redaction rules unless ``--raw`` is given; the stored trace was redacted when it
    was recorded.

    Args:
        arguments: The parsed command line.

    Returns:
        0.

    Raises:
        RunNotFound: If the store has no such run.
    """

    async def gather(store: RunStore) -> tuple[Any, ...]:
        stored = await _get(store, arguments.run_id)
        journal = await store.journal(arguments.run_id)
        waiting = await store.submitted_approvals(arguments.run_id)
        return stored, journal, waiting

    (snapshot, version), journal, submitted = _with_store(arguments, gather)
    show = _Display(raw=bool(getattr(arguments, "raw", False)))
    if arguments.json:
        records = {
            "version": version,
            "snapshot": snapshot.model_dump(mode="json"),
            "journal": [entry.model_dump(mode="json") for entry in journal],
            "submitted_approvals": [item.model_dump(mode="json") for item in submitted],
        }
        print(json.dumps(show.value(records), indent=2))
        return 0
    _print_snapshot(snapshot, version, show)
    unapplied = [item for item in submitted if item not in snapshot.approvals]
    for approval in unapplied:
        print(show.text(f"submitted:   {_decision(approval)} (applied at the next resume)"))
    for entry in journal:
        receipt = entry.receipt
        ended = f"{receipt.status}/{receipt.effect}" if receipt else "no receipt: effect unknown"
        called = entry.intent.provider_call_id or entry.intent.call_id
        print(f"write:       {entry.intent.tool} ({called}) -> {ended}")
    if arguments.trace:
        print("trace:")
        print(format_trace(snapshot.trace))
    return 0


class _Display:
    """Redacts what `show_run` prints, unless the operator asked for the raw records."""

    def __init__(self, *, raw: bool) -> None:
        self.raw = raw
        self._redactor = CLI_REDACTOR

    def text(self, text: str) -> str:
        return text if self.raw else self._redactor.redact_text(text)

    def value(self, value: Any) -> Any:
        return value if self.raw else self._redactor.redact(value)


def _print_snapshot(snapshot: RunSnapshot, version: int, show: _Display) -> None:
    result = snapshot.result
    outcome = f" ({result.status.value} / {result.stop_reason.value})" if result else ""
    usage = snapshot.usage
    print(f"run:         {snapshot.run_id}")
    print(f"state:       {snapshot.state}{outcome}")
    print(f"version:     {version}, saved {snapshot.saved_at.isoformat()}")
    print(show.text(f"task:        {snapshot.task}"))
    if snapshot.conversation is not None:
        print(show.text(f"continues:   {_threads.describe(snapshot.conversation)}"))
    print(f"usage:       steps={usage.steps} tool_calls={usage.tool_calls}")
    for request in snapshot.approval_requests:
        arguments = json.dumps(show.value(request.arguments), sort_keys=True)
        line = f"waiting:     request {request.id}: {request.tool} {arguments} ({request.reason})"
        print(show.text(line))
    for approval in snapshot.approvals:
        print(show.text(f"decided:     {_decision(approval)}"))
    for operation in snapshot.pending:
        print(show.text(f"pending:     {operation.tool} ({operation.call_id}): {operation.reason}"))
    if result is not None and result.output is not None:
        print(show.text(f"answer:      {result.output}"))


def _decision(approval: Approval) -> str:
    verdict = "approved" if approval.approved else "denied"
    reason = f": {approval.reason}" if approval.reason else ""
    subject = approval.request_id or approval.digest
    return (
        f"{subject} {verdict} by {approval.approver} at {approval.decided_at.isoformat()}{reason}"
    )


def approve(arguments: argparse.Namespace) -> int:
    """Submit a decision on a request the paused run waits for.

    Args:
        arguments: The parsed command line.

    Returns:
        0.

    Raises:
        ConfigurationError: If the run is not waiting for that request, or it was decided already.
    """
    approval = Approval(
        request_id=arguments.request_id,
        approved=not arguments.deny,
        approver=arguments.approver or _current_user(),
        reason=arguments.reason,
    )

    async def submit(store: RunStore) -> None:
        snapshot, _ = await _get(store, arguments.run_id)
        waiting = {request.id for request in snapshot.approval_requests}
        if snapshot.state != "paused" or arguments.request_id not in waiting:
            raise ConfigurationError(
                f"run {arguments.run_id} is not waiting for request {arguments.request_id} "
                f"(state {snapshot.state}; waiting for: {', '.join(sorted(waiting)) or 'nothing'})"
            )
        # The stores' rule: a decision named by the request's id or by its digest decides it.
        submitted = await store.submitted_approvals(arguments.run_id)
        standing = standing_decision(snapshot, submitted, {arguments.request_id})
        if standing is not None:
            raise ConfigurationError(
                f"request {arguments.request_id} was already decided: {_decision(standing[0])}"
            )
        await store.submit_approval(arguments.run_id, approval)

    _with_store(arguments, submit)
    verdict = "approved" if approval.approved else "denied"
    say(
        f"{verdict} request {arguments.request_id} of run {arguments.run_id} as {approval.approver}"
    )
    print(f"continue it with: ownloop resume {arguments.run_id} --agent MODULE:FACTORY")
    return 0


def withdraw_decision(arguments: argparse.Namespace) -> int:
    """Delete the stored decisions on a request, so another one can be submitted.

    Args:
        arguments: The parsed command line.

    Returns:
        0 when a decision was withdrawn, 1 when none was stored.
    """
    removed: int = _with_store(
        arguments, lambda store: store.withdraw_approvals(arguments.run_id, arguments.request_id)
    )
    print(
        f"withdrew {removed} decision(s) on request {arguments.request_id} of run "
        f"{arguments.run_id}"
    )
    return 0 if removed else 1


def unlock_run(arguments: argparse.Namespace) -> int:
    """Take a run's lease from its holder and give it back, so any worker may resume it now.

    Safe whatever the holder still does: its lease is no longer current, so the store refuses its
    intents, receipts and checkpoints — it executes no further write.

    Args:
        arguments: The parsed command line.

    Returns:
        0.
    """

    async def take(store: RunStore) -> str | None:
        await _get(store, arguments.run_id)
        owner = f"ownloop-cli:{_current_user()}"[:128]
        lease = await store.acquire_lease(arguments.run_id, owner, 5.0, take_over=True)
        await store.release_lease(lease)
        return lease.taken_over_from

    held_by = _with_store(arguments, take)
    was = f"taken from {held_by}" if held_by else "it was not held"
    print(
        f"unlocked run {arguments.run_id} ({was}); resume it with: ownloop resume "
        f"{arguments.run_id} --agent MODULE:FACTORY"
    )
    return 0


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment (a bare container)
        return "cli"


def resume(arguments: argparse.Namespace) -> int:
    """Continue a stored run with the agent the factory returns, and print how it ended.

    Args:
        arguments: The parsed command line.

    Returns:
        0 when the run completed, 1 otherwise (paused again, unresolved, failed, stopped).

    Raises:
        ConfigurationError: If the factory cannot be loaded or returns no agent with a store, or
            ``--db`` names no existing store.
    """
    agent = _load_agent(arguments.agent)

    async def proceed() -> RunResult:
        try:
            if arguments.db is not None or arguments.dsn:
                chosen = open_store(arguments)  # the same tools and policy, another store
                await _close(agent.store)
                agent.store = chosen
            return await agent.resume(
                arguments.run_id,
                accept_changes=arguments.accept_changes,
                take_over=arguments.take_over,
            )
        finally:
            await _close(agent.store)

    result = asyncio.run(proceed())
    rules = agent_redactor(agent)
    if arguments.json:
        say_json(result.model_dump(mode="json"), rules)
    else:
        say(f"status:      {result.status.value} ({result.stop_reason.value})", rules)
        say(f"detail:      {result.detail}", rules)
        say(f"answer:      {result.output}", rules)
        for approval in result.approvals:
            say(f"decided:     {_decision(approval)}", rules)
        for request in result.approval_requests:
            say(f"waiting:     request {request.id}: {request.tool} ({request.reason})", rules)
    return 0 if result.status is RunStatus.COMPLETED else 1


async def _close(store: object) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        await close()


def _load_agent(spec: str) -> Agent:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"--agent must be MODULE:FACTORY, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: find the application's modules
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(f"cannot load the agent factory {spec}: {error}") from error
    agent = factory()
    if not isinstance(agent, Agent) or agent.store is None:
        raise ConfigurationError(
            f"{spec} must return an Agent configured with store=..., got {agent!r}"
        )
    return agent


async def _get(store: RunStore, run_id: str) -> tuple[RunSnapshot, int]:
    stored = await store.get(run_id)
    if stored is None:
        raise RunNotFound(f"no run {run_id!r} in {store!r}")
    return stored.snapshot, stored.version


def _with_store(arguments: argparse.Namespace, work: Any) -> Any:
    """Open the store, run ``work(store)`` on an event loop, and close the store."""

    async def run() -> Any:
        store = open_store(arguments)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())
