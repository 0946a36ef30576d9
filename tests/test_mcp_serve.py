"""ownloop's guarded tools served over MCP, called with the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from ownloop import Actor, ConfigurationError
from ownloop.cli import main
from ownloop.mcp import RegistryServer
from ownloop.policy import Policy
from ownloop.store import SqliteRunStore
from tests.mcp_served_tools import LEDGER_VARIABLE, registry
from tests.mcp_support import ROOT

POLICY = {"allowed_writes": ["transfer"], "approval_required": ["transfer"]}


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the served write appends to."""
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_VARIABLE, str(path))
    return path


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


async def _calls(server: RegistryServer, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async with Client(server.server()) as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


def _serve(database: Path, **options: Any) -> RegistryServer:
    return RegistryServer(registry, store=SqliteRunStore(database), **options)


def test_clients_see_only_the_tools_the_policy_allows(tmp_path: Path) -> None:
    """Writes the policy denies are not listed; the rest carry their effect as a hint."""

    async def names(server: RegistryServer) -> dict[str, bool | None]:
        async with Client(server.server()) as client:
            listed = (await client.list_tools()).tools
        return {t.name: t.annotations.read_only_hint if t.annotations else None for t in listed}

    assert asyncio.run(names(_serve(tmp_path / "a.db"))) == {"balance": True}
    guarded = _serve(tmp_path / "b.db", policy=Policy.from_document(POLICY))
    assert asyncio.run(names(guarded)) == {"balance": True, "transfer": False}


def test_a_read_is_served_and_stored_as_a_run(tmp_path: Path) -> None:
    """A read answers with structured content, and its run is in the store."""
    database = tmp_path / "runs.db"
    (result,) = asyncio.run(_calls(_serve(database), ("balance", {"account": "a1"})))
    assert not result.is_error
    assert result.structured_content == {"account": "a1", "balance": 100}
    assert main(["runs", "list", "--db", str(database)]) == 0


def test_invalid_arguments_and_denied_writes_are_errors(tmp_path: Path, ledger: Path) -> None:
    """Bad arguments are rejected without a run; a write the policy denies is unknown here."""
    bad, denied = asyncio.run(
        _calls(
            _serve(tmp_path / "runs.db"),
            ("balance", {"acount": "a1"}),
            ("transfer", {"account": "a1", "amount": 5}),
        )
    )
    assert bad.is_error
    assert bad.structured_content == {"status": "rejected", "code": "invalid_arguments"}
    assert denied.is_error
    assert denied.structured_content is not None
    assert denied.structured_content == {"status": "rejected", "code": "unknown_tool"}
    assert "Available tools: balance." in denied.content[0].text  # type: ignore[union-attr]
    assert _lines(ledger) == 0


def _pending(result: CallToolResult) -> tuple[str, str]:
    assert result.is_error
    facts = result.structured_content
    assert facts is not None
    assert facts["status"] == "approval_required"
    return str(facts["run_id"]), str(facts["request_id"])


def test_an_approved_call_runs_exactly_once(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pending until `ownloop approve`; then the same call runs once; a repeat needs a new one."""
    database = tmp_path / "runs.db"
    server = _serve(database, policy=Policy.from_document(POLICY))
    call = ("transfer", {"account": "a1", "amount": 5})
    first, again = asyncio.run(_calls(server, call, call))
    run_id, request_id = _pending(first)
    assert _pending(again) == (run_id, request_id)  # the same waiting run, not a second one
    assert _lines(ledger) == 0

    assert main(["approve", run_id, request_id, "--db", str(database)]) == 0
    other, approved, repeat = asyncio.run(
        _calls(server, ("transfer", {"account": "a1", "amount": 6}), call, call)
    )
    assert _pending(other)[0] != run_id  # different arguments: the approval does not apply
    assert not approved.is_error
    assert approved.structured_content == {"transferred": 5}
    assert _lines(ledger) == 1
    assert _pending(repeat)[0] not in (run_id, _pending(other)[0])
    assert _lines(ledger) == 1
    capsys.readouterr()


def test_a_denied_call_never_runs(tmp_path: Path, ledger: Path) -> None:
    """A request denied with `ownloop approve --deny` ends that call without running it."""
    database = tmp_path / "runs.db"
    server = _serve(database, policy=Policy.from_document(POLICY))
    call = ("transfer", {"account": "a1", "amount": 5})
    (first,) = asyncio.run(_calls(server, call))
    run_id, request_id = _pending(first)
    assert main(["approve", run_id, request_id, "--deny", "--db", str(database)]) == 0
    (denied,) = asyncio.run(_calls(server, call))
    assert denied.is_error
    assert denied.structured_content is not None
    assert denied.structured_content["stop_reason"] == "approval_denied"
    assert _lines(ledger) == 0


def test_the_actor_comes_from_the_server_configuration(tmp_path: Path, ledger: Path) -> None:
    """Role checks use the configured actor; a client has no way to claim another."""
    policy = Policy.from_document(
        {"allowed_writes": ["transfer"], "required_roles": {"transfer": "ops"}}
    )
    call = ("transfer", {"account": "a1", "amount": 5})
    clerk = _serve(tmp_path / "a.db", policy=policy, actor=Actor(id="clerk"))
    operator = _serve(tmp_path / "b.db", policy=policy, actor=Actor(id="op", roles=("ops",)))
    (refused,) = asyncio.run(_calls(clerk, call))
    (done,) = asyncio.run(_calls(operator, call))
    assert refused.is_error
    assert not done.is_error
    assert _lines(ledger) == 1


def test_a_registry_server_needs_a_registry(tmp_path: Path) -> None:
    """Anything but a registry is a configuration error."""
    with pytest.raises(ConfigurationError, match="ToolRegistry"):
        RegistryServer(object(), store=SqliteRunStore(tmp_path / "x.db"))  # type: ignore[arg-type]


def test_ownloop_mcp_serve_over_stdio(tmp_path: Path, ledger: Path) -> None:
    """The command serves a registry factory over stdio with a policy file and a store."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY), encoding="utf-8")
    database = tmp_path / "runs.db"
    parameters = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ownloop.cli",
            "mcp",
            "serve",
            "tests.mcp_served_tools:make_registry",
            "--db",
            str(database),
            "--policy",
            str(policy),
            "--actor",
            "ide",
        ],
        env={LEDGER_VARIABLE: str(ledger), "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )

    async def scenario() -> tuple[CallToolResult, CallToolResult]:
        async with Client(parameters, mode="legacy") as client:
            read = await client.call_tool("balance", {"account": "z"})
            write = await client.call_tool("transfer", {"account": "z", "amount": 1})
        return read, write

    read, write = asyncio.run(scenario())
    assert read.structured_content == {"account": "z", "balance": 100}
    _pending(write)
    assert _lines(ledger) == 0


def test_the_command_refuses_what_is_not_a_registry() -> None:
    """A target that is not MODULE:REGISTRY, or not a registry, exits with status 2."""
    assert main(["mcp", "serve", "no-colon"]) == 2
    assert main(["mcp", "serve", "tests.mcp_served_tools:LEDGER_VARIABLE"]) == 2
    assert main(["mcp", "serve", "tests.no_such_module:registry"]) == 2


def test_the_listing_describes_the_tools_this_actor_may_call(tmp_path: Path) -> None:
    """Listed tools carry the registry's descriptions; a role the actor has opens a write."""
    policy = Policy.from_document(
        {"allowed_writes": ["transfer"], "required_roles": {"transfer": "ops"}}
    )
    operator = _serve(tmp_path / "a.db", policy=policy, actor=Actor(id="op", roles=("ops",)))
    clerk = _serve(tmp_path / "b.db", policy=policy, actor=Actor(id="clerk"))
    described = {spec.name: spec.description for spec in registry.specs()}
    assert {tool.name: tool.description for tool in operator.tools()} == described
    assert [tool.name for tool in clerk.tools()] == ["balance"]
