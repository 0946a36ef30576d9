"""The ``ownloop runs``, ``approve`` and ``resume`` commands against stored runs."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ownloop.cli import main
from ownloop.store import PostgresRunStore, SqliteRunStore
from tests.durable_support import fresh_database
from tests.durable_worker import JOB_VARIABLE, Job, ledger_rows, make_agent


@pytest.fixture
def paused(tmp_path: Path) -> Job:
    """A SQLite store holding a completed export run and a refund run paused for approval."""
    job = Job(run_id="refund-1", directory=str(tmp_path), database=str(tmp_path / "runs.db"))

    async def prepare() -> None:
        async with SqliteRunStore(job.database) as store:
            await make_agent(job, store).run("export", run_id="export-1")
            refund = replace(job, scenario="refund")
            await make_agent(refund, store).run("refund", run_id="refund-1")

    asyncio.run(prepare())
    return replace(job, scenario="refund")


def _request(job: Job) -> str:
    async def read() -> str:
        async with SqliteRunStore(job.database) as store:
            stored = await store.get(job.run_id)
            assert stored is not None
            return stored.snapshot.approval_requests[0].id

    return asyncio.run(read())


def test_runs_list_prints_a_table_newest_first(
    paused: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table lists every run with state, status and version, newest first."""
    assert main(["runs", "list", "--db", paused.database]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUN_ID", "STATE", "STATUS", "STOP_REASON", "VERSION", "UPDATED"]
    assert [line.split()[:5] for line in lines[1:]] == [
        ["refund-1", "paused", "paused", "approval_required", "3"],
        ["export-1", "finished", "completed", "final_output", "6"],
    ]


def test_runs_list_filters_and_prints_json(paused: Job, capsys: pytest.CaptureFixture[str]) -> None:
    """--state, --status and --limit filter the listing; --json prints one object per line."""
    assert main(["runs", "list", "--db", paused.database, "--state", "finished", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["run_id"] == "export-1"
    assert main(["runs", "list", "--db", paused.database, "--status", "failed", "--json"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["runs", "list", "--db", paused.database, "--limit", "1", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_runs_show_prints_the_request_and_the_journal(
    paused: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    """Show names the request a paused run waits for; a finished run shows its writes."""
    request = _request(paused)
    assert main(["runs", "show", "refund-1", "--db", paused.database]) == 0
    out = capsys.readouterr().out
    assert "state:       paused (paused / approval_required)" in out
    assert f'waiting:     request {request}: refund {{"amount": 500, "order_id": "o-1"}}' in out
    assert main(["runs", "show", "export-1", "--db", paused.database, "--trace"]) == 0
    out = capsys.readouterr().out
    assert "write:       export (c2) -> ok/applied" in out
    assert "answer:      Exported q3." in out
    assert "run_finished" in out


def test_runs_show_json_holds_every_record(paused: Job, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the version, snapshot, journal and submitted approvals."""
    assert main(["runs", "show", "export-1", "--db", paused.database, "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert (records["version"], records["snapshot"]["state"]) == (6, "finished")
    assert [entry["intent"]["provider_call_id"] for entry in records["journal"]] == ["c2"]
    assert records["submitted_approvals"] == []


def test_unknown_run_and_missing_store_are_usage_errors(
    paused: Job, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown run id, or showing a run of a store file that does not exist, exits 2."""
    assert main(["runs", "show", "nope", "--db", paused.database]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["runs", "show", "nope", "--db", str(tmp_path / "absent.db")]) == 2
    assert "no run store at" in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


def test_runs_list_without_a_store_says_there_are_no_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """'runs list' where no store exists yet prints that there are no runs and exits 0."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OWNLOOP_DATABASE_URL", raising=False)
    assert main(["runs", "list"]) == 0
    assert capsys.readouterr().out.startswith("no runs: there is no run store at ownloop.db")
    assert main(["runs", "list", "--json", "--db", "elsewhere.db"]) == 0
    assert capsys.readouterr().out == ""
    assert list(tmp_path.iterdir()) == []


def test_runs_needs_an_action() -> None:
    """``ownloop runs`` alone is a usage error."""
    with pytest.raises(SystemExit) as exit_info:
        main(["runs"])
    assert exit_info.value.code == 2


def test_approve_refuses_a_request_the_run_is_not_waiting_for(
    paused: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo'd request id, or a run that is not paused, is refused and nothing is submitted."""
    request = _request(paused)
    assert main(["approve", "refund-1", "apr-typo", "--db", paused.database]) == 2
    assert f"waiting for: {request})" in capsys.readouterr().err
    assert main(["approve", "export-1", request, "--db", paused.database]) == 2
    assert "(state finished; waiting for: nothing)" in capsys.readouterr().err
    assert main(["runs", "show", "refund-1", "--db", paused.database]) == 0
    assert "submitted:" not in capsys.readouterr().out


def test_approve_submits_once_and_show_lists_it(
    paused: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decision is submitted with its approver and reason; a second one is refused."""
    request = _request(paused)
    arguments = ["approve", "refund-1", request, "--db", paused.database]
    assert main([*arguments, "--deny", "--reason", "over limit", "--approver", "bob"]) == 0
    assert f"denied request {request} of run refund-1 as bob" in capsys.readouterr().out
    assert main(arguments) == 2
    assert "was already decided" in capsys.readouterr().err
    assert main(["runs", "show", "refund-1", "--db", paused.database]) == 0
    assert f"submitted:   {request} denied by bob" in capsys.readouterr().out


def test_approve_defaults_the_approver_to_the_current_user(
    paused: Job, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --approver the decision is recorded under the login name."""
    monkeypatch.setattr("getpass.getuser", lambda: "carol")
    assert main(["approve", "refund-1", _request(paused), "--db", paused.database]) == 0
    assert "as carol" in capsys.readouterr().out


def test_approve_without_a_user_name_records_cli(
    paused: Job, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no login name exists (a bare container) the approver is 'cli'."""

    def missing() -> str:
        raise KeyError("uid not found")

    monkeypatch.setattr("getpass.getuser", missing)
    assert main(["approve", "refund-1", _request(paused), "--db", paused.database]) == 0
    assert "as cli" in capsys.readouterr().out


def test_resume_applies_the_submitted_approval(
    paused: Job, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resume loads the agent factory, applies the stored decision and completes (exit 0)."""
    monkeypatch.setenv(JOB_VARIABLE, json.dumps(paused.__dict__))
    request = _request(paused)
    assert main(["approve", "refund-1", request, "--db", paused.database, "--approver", "al"]) == 0
    capsys.readouterr()
    assert main(["resume", "refund-1", "--agent", "tests.durable_worker:cli_agent"]) == 0
    out = capsys.readouterr().out
    assert "status:      completed (final_output)" in out
    assert f"decided:     {request} approved by al" in out
    assert [what for _, what in ledger_rows(paused.directory)] == ["export:q3", "refund:o-1:500"]


def test_resume_without_a_decision_pauses_again(
    paused: Job, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming a run whose request is still undecided pauses it again (exit 1), as JSON too."""
    monkeypatch.setenv(JOB_VARIABLE, json.dumps(paused.__dict__))
    agent = "tests.durable_worker:cli_agent"
    assert main(["resume", "refund-1", "--agent", agent]) == 1
    assert f"waiting:     request {_request(paused)}" in capsys.readouterr().out
    assert main(["resume", "refund-1", "--agent", agent, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "paused"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-colon", "must be MODULE:FACTORY"),
        ("tests.absent_module:factory", "cannot load the agent factory"),
        ("tests.durable_worker:absent", "cannot load the agent factory"),
        ("tests.durable_support:fresh_schema", "must return an Agent configured with store="),
    ],
)
def test_resume_refuses_a_factory_it_cannot_use(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed spec, a missing module or attribute, or a non-agent result exit 2."""
    assert main(["resume", "run-1", "--agent", spec]) == 2
    assert message in capsys.readouterr().err


def test_postgres_store_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OWNLOOP_DATABASE_URL selects PostgreSQL when --db is not given; --dsn does too."""
    dsn = fresh_database()  # the CLI uses the default schema

    async def prepare() -> None:
        async with PostgresRunStore(dsn) as store:
            job = Job(run_id="pg-cli", directory=str(tmp_path), database=dsn, schema="ownloop")
            await make_agent(job, store).run("export", run_id="pg-cli-run")

    asyncio.run(prepare())
    monkeypatch.setenv("OWNLOOP_DATABASE_URL", dsn)
    assert main(["runs", "list", "--json"]) == 0
    assert "pg-cli-run" in capsys.readouterr().out
    monkeypatch.delenv("OWNLOOP_DATABASE_URL")
    assert main(["runs", "show", "pg-cli-run", "--dsn", dsn]) == 0
    assert "answer:      Exported q3." in capsys.readouterr().out


def test_withdraw_lets_another_decision_be_submitted(
    paused: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs withdraw deletes a stored decision (exit 1 when there is none); a new one is stored."""
    request = _request(paused)
    base = ["--db", paused.database]
    assert main(["approve", "refund-1", request, "--deny", "--approver", "bob", *base]) == 0
    assert main(["runs", "withdraw", "refund-1", request, *base]) == 0
    assert f"withdrew 1 decision(s) on request {request}" in capsys.readouterr().out
    assert main(["runs", "withdraw", "refund-1", request, *base]) == 1
    assert main(["approve", "refund-1", request, "--approver", "al", *base]) == 0
    assert main(["runs", "show", "refund-1", *base]) == 0
    assert "approved by al" in capsys.readouterr().out


def test_unlock_takes_a_stuck_workers_lease_and_resume_can_take_over(
    paused: Job, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs unlock frees a run a live worker still holds; resume --take-over does it in one go."""
    monkeypatch.setenv(JOB_VARIABLE, json.dumps(paused.__dict__))

    async def hold() -> None:
        async with SqliteRunStore(paused.database) as store:
            await store.acquire_lease("refund-1", "stuck-worker", 3600)

    agent = ["--agent", "tests.durable_worker:cli_agent"]
    asyncio.run(hold())
    assert main(["resume", "refund-1", *agent]) == 2
    assert "stuck-worker" in capsys.readouterr().err
    assert main(["runs", "unlock", "refund-1", "--db", paused.database]) == 0
    assert "unlocked run refund-1 (taken from stuck-worker)" in capsys.readouterr().out
    assert main(["resume", "refund-1", *agent]) == 1  # paused again: nothing decided yet
    assert main(["runs", "unlock", "refund-1", "--db", paused.database]) == 0
    assert "it was not held" in capsys.readouterr().out
    asyncio.run(hold())
    assert main(["resume", "refund-1", *agent, "--take-over"]) == 1


def test_approve_refuses_a_request_already_decided_by_digest(
    paused: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decision stored by digest decides the request: approving it by id is refused."""
    from ownloop import Approval

    async def decide_by_digest() -> str:
        async with SqliteRunStore(paused.database) as store:
            stored = await store.get("refund-1")
            assert stored is not None
            (request,) = stored.snapshot.approval_requests
            denial = Approval(digest=request.digest, approved=False, approver="bob")
            await store.submit_approval("refund-1", denial)
            return request.digest

    digest = asyncio.run(decide_by_digest())
    request = _request(paused)
    assert main(["approve", "refund-1", request, "--db", paused.database]) == 2
    assert f"request {request} was already decided: {digest} denied by bob" in (
        capsys.readouterr().err
    )
    assert main(["runs", "withdraw", "refund-1", request, "--db", paused.database]) == 0
    assert "withdrew 1 decision(s)" in capsys.readouterr().out
    assert main(["approve", "refund-1", request, "--db", paused.database]) == 0
