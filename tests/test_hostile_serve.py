"""`ownloop mcp serve` against hostile clients: replays, reused keys, cancels, floods of pending."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import BaseModel, SecretStr

from ownloop import Approval, ToolContext, ToolRegistry
from ownloop.cli import main
from ownloop.mcp import IDEMPOTENCY_META_KEY, RegistryServer, served_call_key
from ownloop.policy import Policy, allow_writes
from ownloop.store import MemoryRunStore, SqliteRunStore
from tests.mcp_hostile import piped_stdio


class Bank:
    """A registry whose write records every execution and the idempotency key it was given."""

    def __init__(self) -> None:
        self.transfers: list[tuple[dict[str, Any], str | None]] = []
        self.release = threading.Event()
        self.release.set()
        self.registry = ToolRegistry()

        @self.registry.tool(effect="read")
        def balance(account: str) -> dict[str, object]:
            """Read a balance.

            Args:
                account: The account id.
            """
            return {"account": account, "balance": 100}

        @self.registry.tool(effect="write")
        def transfer(account: str, amount: int, context: ToolContext) -> dict[str, object]:
            """Move money.

            Args:
                account: The account id.
                amount: How much.
                context: The call's context.
            """
            self.transfers.append(({"account": account, "amount": amount}, context.idempotency_key))
            if not self.release.wait(30):
                raise TimeoutError("the test never released the transfer")
            return {"transferred": amount}

        @self.registry.tool(effect="write")
        def wire(amount: int) -> dict[str, object]:
            """Wire money (its effect is always lost).

            Args:
                amount: How much.
            """
            self.transfers.append(({"wire": amount}, None))
            raise OSError("the connection dropped after the wire was sent")


async def _until_a_transfer_starts(bank: Bank) -> None:
    for _ in range(3000):
        if bank.transfers:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the transfer never started")


async def _bounded(repeat: Awaitable[Any]) -> Any:
    """A repeat that must come back while its write is held (after ``repeat_wait_s``, 0.05 s).

    Bounded at 5 s, so a repeat that waits for the write fails in seconds, not at the write's 30.
    """
    return await asyncio.wait_for(repeat, 5)


def _server(tmp_path: Path, bank: Bank, policy: Policy | None = None) -> RegistryServer:
    return RegistryServer(
        bank.registry,
        store=SqliteRunStore(tmp_path / "runs.db"),
        policy=policy or allow_writes("transfer", "wire"),
    )


def test_a_replayed_request_and_a_repeated_key_execute_once() -> None:
    """The same request id in a session, or the same _meta key, is one execution."""
    assert served_call_key({IDEMPOTENCY_META_KEY: "k"}, "s", 1) == "key:k"
    assert served_call_key({IDEMPOTENCY_META_KEY: ""}, "s", 1) == "request:s:1"
    assert served_call_key({IDEMPOTENCY_META_KEY: "x" * 257}, "s", "a") == 'request:s:"a"'
    assert served_call_key({IDEMPOTENCY_META_KEY: "x" * 256}, "s", "a") == "key:" + "x" * 256
    assert served_call_key(None, "s", 2) != served_call_key(None, "t", 2)


def test_replays_never_run_a_write_twice(tmp_path: Path) -> None:
    """Three replays of one request, then two calls with one key: two transfers, stable keys."""
    bank = Bank()
    server = _server(tmp_path, bank)
    arguments = {"account": "a1", "amount": 5}

    async def scenario() -> list[Any]:
        replayed = served_call_key(None, "session-1", 7)
        answers = [await server.call("transfer", arguments, key=replayed) for _ in range(3)]
        async with Client(server.server()) as client:
            meta = {IDEMPOTENCY_META_KEY: "client-key-1"}
            answers += [await client.call_tool("transfer", arguments, meta=meta) for _ in "ab"]
        return answers

    answers = asyncio.run(scenario())
    assert [answer.is_error for answer in answers] == [False] * 5
    assert {json.dumps(answer.structured_content) for answer in answers} == {'{"transferred": 5}'}
    assert len(bank.transfers) == 2
    first_key = bank.transfers[1][1]
    again = _server(tmp_path, bank)  # a restarted server answers the same key from the store

    async def repeat() -> Any:
        async with Client(again.server()) as client:
            meta = {IDEMPOTENCY_META_KEY: "client-key-1"}
            return await client.call_tool("transfer", arguments, meta=meta)

    assert not asyncio.run(repeat()).is_error
    assert len(bank.transfers) == 2
    assert first_key is not None


def test_a_key_reused_for_another_call_is_refused(tmp_path: Path) -> None:
    """An idempotency key names one call: the same key with other arguments is rejected."""
    bank = Bank()
    server = _server(tmp_path, bank)

    async def scenario() -> list[Any]:
        key = served_call_key({IDEMPOTENCY_META_KEY: "k"}, "s", 1)
        first = await server.call("transfer", {"account": "a1", "amount": 5}, key=key)
        other = await server.call("transfer", {"account": "a1", "amount": 500}, key=key)
        return [first, other]

    first, other = asyncio.run(scenario())
    assert not first.is_error
    assert other.is_error
    assert other.structured_content["code"] == "key_reused"  # type: ignore[index]
    assert other.content[0].text == (  # type: ignore[union-attr]
        "This idempotency key was used for a different call; use a new key."
    )
    assert other.structured_content == {
        "status": "rejected",
        "code": "key_reused",
        "run_id": asyncio.run(server.store.list_runs(limit=10))[0].run_id,
    }
    assert len(bank.transfers) == 1


def test_a_cancelled_write_finishes_and_its_repeat_is_answered_from_the_run(tmp_path: Path) -> None:
    """A client cancelling mid-write does not stop it; the repeat waits for it, never reruns."""
    bank = Bank()
    bank.release.clear()
    server = _server(tmp_path, bank)
    arguments = {"account": "a1", "amount": 5}
    key = served_call_key({IDEMPOTENCY_META_KEY: "k-cancel"}, "s", 1)

    async def scenario() -> Any:
        first = asyncio.ensure_future(server.call("transfer", arguments, key=key))
        await _until_a_transfer_starts(bank)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        repeat = asyncio.ensure_future(server.call("transfer", arguments, key=key))
        await asyncio.sleep(0.05)
        bank.release.set()
        return await repeat

    answer = asyncio.run(scenario())
    assert answer.structured_content == {"transferred": 5}
    assert len(bank.transfers) == 1


def test_an_unknown_write_is_answered_again_never_repeated(tmp_path: Path) -> None:
    """The identical repeat of a write whose effect is unknown is not executed again."""
    bank = Bank()
    server = _server(tmp_path, bank)

    async def scenario() -> list[Any]:
        return [await server.call("wire", {"amount": 9}) for _ in range(2)]

    first, second = asyncio.run(scenario())
    assert first.is_error
    assert second.is_error
    assert "Do not repeat it" in second.content[0].text  # type: ignore[union-attr]
    assert len(bank.transfers) == 1


def test_an_approval_is_found_by_the_call_however_many_others_wait() -> None:
    """The approved call resumes by its identity with more than 1,000 other calls pending."""
    bank = Bank()
    document = {"allowed_writes": ["transfer"], "approval_required": ["transfer"]}
    store = MemoryRunStore()
    server = RegistryServer(bank.registry, store=store, policy=Policy.from_document(document))

    async def ask(amount: int) -> Any:
        return await server.call("transfer", {"account": "a1", "amount": amount})

    async def scenario() -> tuple[Any, Any, int]:
        facts = (await ask(5)).structured_content
        assert facts is not None
        assert facts["status"] == "approval_required"
        approval = Approval(request_id=facts["request_id"], approved=True, approver="ops")
        await store.submit_approval(facts["run_id"], approval)
        for amount in range(100, 1101):  # 1,001 others, each paused for its own approval
            await ask(amount)
        paused = (await store.run_stats()).runs["paused"]  # the approved call's run among them
        return facts, await ask(5), paused

    facts, approved, paused = asyncio.run(scenario())
    assert paused == 1002
    assert approved.structured_content == {"transferred": 5}
    assert bank.transfers == [({"account": "a1", "amount": 5}, bank.transfers[0][1])]
    again = asyncio.run(ask(5))
    assert again.structured_content["status"] == "approval_required"  # type: ignore[index]
    assert again.structured_content["run_id"] != facts["run_id"]  # type: ignore[index]


def test_an_approval_given_with_the_cli_resumes_the_call(tmp_path: Path) -> None:
    """`ownloop approve` on the stored run, then the same call: performed once."""
    bank = Bank()
    document = {"allowed_writes": ["transfer"], "approval_required": ["transfer"]}
    server = _server(tmp_path, bank, Policy.from_document(document))
    database = tmp_path / "runs.db"

    async def ask(amount: int) -> Any:
        return await server.call("transfer", {"account": "a1", "amount": amount})

    facts = asyncio.run(ask(5)).structured_content
    assert facts is not None
    assert main(["approve", facts["run_id"], facts["request_id"], "--db", str(database)]) == 0
    assert asyncio.run(ask(5)).structured_content == {"transferred": 5}
    assert len(bank.transfers) == 1


def _deployed(bank: Bank) -> ToolRegistry:
    """The bank's writes after a deploy: each gained a parameter with a default."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def transfer(account: str, amount: int, memo: str = "") -> dict[str, object]:
        """Move money.

        Args:
            account: The account id.
            amount: How much.
            memo: A note.
        """
        bank.transfers.append(({"account": account, "amount": amount, "memo": memo}, None))
        return {"transferred": amount, "memo": memo}

    @registry.tool(effect="write")
    def wire(amount: int, memo: str = "") -> dict[str, object]:
        """Wire money.

        Args:
            amount: How much.
            memo: A note.
        """
        bank.transfers.append(({"wire": amount}, None))
        return {"wired": amount}

    return registry


def test_a_repeat_after_a_deploy_is_answered_from_the_store(tmp_path: Path) -> None:
    """A changed schema (a new default) does not make a recorded call new: it never reruns."""
    bank = Bank()
    before = _server(tmp_path, bank)
    key = served_call_key({IDEMPOTENCY_META_KEY: "k-deploy"}, "s", 1)
    arguments = {"account": "a1", "amount": 5}

    async def first() -> list[Any]:
        return [
            await before.call("transfer", arguments, key=key),
            await before.call("wire", {"amount": 9}),  # its effect is unknown
        ]

    done, unknown = asyncio.run(first())
    assert done.structured_content == {"transferred": 5}
    assert unknown.structured_content["receipt_status"] == "unknown"  # type: ignore[index]
    after = RegistryServer(
        _deployed(bank),
        store=SqliteRunStore(tmp_path / "runs.db"),
        policy=allow_writes("transfer", "wire"),
    )

    async def repeats() -> list[Any]:
        return [
            await after.call("transfer", arguments, key=key),
            await after.call("wire", {"amount": 9}),
            await after.call("transfer", {**arguments, "memo": "x"}, key=key),
            await after.call("wire", {"amount": 10}),
        ]

    keyed, wired, reused, fresh = asyncio.run(repeats())
    assert keyed.structured_content == {"transferred": 5}
    assert "Do not repeat it" in wired.content[0].text  # type: ignore[union-attr]
    assert reused.structured_content["code"] == "key_reused"  # type: ignore[index]
    assert fresh.structured_content == {"wired": 10}
    assert [call for call, _ in bank.transfers] == [arguments, {"wire": 9}, {"wire": 10}]


def test_an_invalid_call_gets_no_run_and_its_repeat_is_judged_again(tmp_path: Path) -> None:
    """A rejected call stores nothing; the same request fixed by a deploy then runs once."""
    bank = Bank()
    server = _server(tmp_path, bank)
    key = served_call_key(None, "s", 4)

    async def scenario() -> list[Any]:
        bad = await server.call("transfer", {"account": "a1", "amount": "many"}, key=key)
        stored = await server.store.list_runs(limit=10)
        again = await server.call("transfer", {"account": "a1", "amount": 5}, key=key)
        return [bad, stored, again, await server.call("transfer", {"account": "a1"}, key=key)]

    bad, stored, again, other = asyncio.run(scenario())
    assert bad.structured_content["status"] == "rejected"  # type: ignore[index]
    assert bad.structured_content["code"] == "invalid_arguments"  # type: ignore[index]
    assert stored == []
    assert again.structured_content == {"transferred": 5}
    assert other.structured_content["code"] == "key_reused"  # type: ignore[index]
    assert len(bank.transfers) == 1


_SEEDED_CALL = """
import asyncio, pathlib, sys
from ownloop import ToolRegistry
from ownloop.mcp import IDEMPOTENCY_META_KEY, RegistryServer, served_call_key
from ownloop.policy import allow_writes
from ownloop.store import SqliteRunStore


def serve(database, ran):
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def label(labels: frozenset[str]) -> str:
        \"\"\"Label a thing.

        Args:
            labels: The labels.
        \"\"\"
        with pathlib.Path(ran).open("a") as log:
            log.write("ran\\n")
        return "labelled"

    server = RegistryServer(registry, store=SqliteRunStore(database), policy=allow_writes("label"))
    key = served_call_key({IDEMPOTENCY_META_KEY: "k-seed"}, "s", 1)
    labels = [f"label-{i}" for i in range(12)]
    answer = asyncio.run(server.call("label", {"labels": labels}, key=key))
    return f"{answer.is_error} {answer.content[0].text}"


if __name__ == "__main__":
    print(serve(sys.argv[1], sys.argv[2]))
"""


def test_a_repeat_under_another_hash_seed_is_answered_from_the_store(tmp_path: Path) -> None:
    """A set-valued argument served here, repeated by a server under hash seed 2: one run."""
    database, ran = tmp_path / "runs.db", tmp_path / "ran.log"
    program: dict[str, Any] = {"__name__": "seeded"}
    exec(_SEEDED_CALL, program)  # the child's program, run here first
    assert program["serve"](str(database), str(ran)) == "False labelled"
    child = subprocess.run(
        [sys.executable, "-c", _SEEDED_CALL, str(database), str(ran)],
        env={**os.environ, "PYTHONHASHSEED": "2"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert child.stdout.strip() == "False labelled"
    assert ran.read_text() == "ran\n"


@pytest.mark.parametrize("keyed", [True, False])
def test_a_repeat_waits_bounded_and_another_process_never_reruns(
    tmp_path: Path, keyed: bool
) -> None:
    """A repeat of a write in flight here waits at most repeat_wait_s; elsewhere it is unknown."""
    bank = Bank()
    bank.release.clear()
    server = _server(tmp_path, bank)
    server.repeat_wait_s = 0.05
    elsewhere = _server(tmp_path, bank)
    arguments = {"account": "a1", "amount": 5}
    key = served_call_key({IDEMPOTENCY_META_KEY: "k-slow"}, "s", 1) if keyed else None

    async def scenario() -> list[Any]:
        first = asyncio.ensure_future(server.call("transfer", arguments, key=key))
        try:
            await _until_a_transfer_starts(bank)
            waited = await _bounded(server.call("transfer", arguments, key=key))
            other = await elsewhere.call("transfer", arguments, key=key)
        finally:
            bank.release.set()
        return [waited, other, await first]

    waited, other, first = asyncio.run(scenario())
    assert waited.content[0].text == (  # type: ignore[union-attr]
        "This call is still being performed; ask again later."
    )
    (run,) = asyncio.run(server.store.list_runs(limit=10))
    assert other.structured_content == {"status": "unknown", "run_id": run.run_id}
    assert other.content[0].text == (  # type: ignore[union-attr]
        f"This call was started before (run {run.run_id}) and did not finish here: its outcome "
        "is unknown. It will not be performed again."
    )
    assert first.structured_content == {"transferred": 5}
    assert len(bank.transfers) == 1


def test_calls_without_a_key_are_numbered_and_each_runs(tmp_path: Path) -> None:
    """Identical reads without a key are separate calls: runs 1..n, the latest found by id."""
    bank = Bank()
    server = _server(tmp_path, bank)

    async def scenario() -> list[str]:
        for _ in range(6):
            answer = await server.call("balance", {"account": "a1"})
            assert answer.structured_content == {"account": "a1", "balance": 100}
        return sorted(run.run_id for run in await server.store.list_runs(limit=100))

    run_ids = asyncio.run(scenario())
    assert len(run_ids) == 6
    assert sorted(int(run_id.rsplit("-", 1)[1]) for run_id in run_ids) == [1, 2, 3, 4, 5, 6]
    assert len({run_id.rsplit("-", 1)[0] for run_id in run_ids}) == 1


class Login(BaseModel):
    """Credentials nested in an argument."""

    user: str
    token: SecretStr


@dataclasses.dataclass
class Badge:
    """A badge whose code is a secret."""

    code: SecretStr


def test_a_served_secret_reaches_the_tool_and_no_trace_receipt_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SecretStr arguments, top-level and nested, arrive real; trace, receipt, answer hide them."""
    pin, token = "zq81-unguessable-4417", "tk-77-also-unguessable-0912"
    code, spare = "bd-31-unguessable-5581", "sp-48-unguessable-2270"
    received: list[tuple[str, ...]] = []
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def unlock(
        door: str, pin: SecretStr, login: Login, badge: Badge, spares: list[Login]
    ) -> dict[str, object]:
        """Unlock a door.

        Args:
            door: Which door.
            pin: Its code.
            login: Who unlocks it.
            badge: The badge shown.
            spares: Other people's credentials.
        """
        secrets = (pin, login.token, badge.code, *(spare.token for spare in spares))
        received.append(tuple(secret.get_secret_value() for secret in secrets))
        return {"door": door, "pin": pin}

    server = RegistryServer(
        registry, store=SqliteRunStore(tmp_path / "runs.db"), policy=allow_writes("unlock")
    )
    arguments = {
        "door": "front",
        "pin": pin,
        "login": {"user": "ann", "token": token},
        "badge": {"code": code},
        "spares": [{"user": "bo", "token": spare}],
    }

    async def scenario() -> tuple[list[Any], Any]:
        caplog.set_level(logging.DEBUG)
        async with Client(server.server()) as client:
            meta = {IDEMPOTENCY_META_KEY: "k-secret"}
            answers = [await client.call_tool("unlock", arguments, meta=meta) for _ in "ab"]
        (run,) = await server.store.list_runs(limit=10)
        stored = await server.store.get(run.run_id)
        return answers, stored

    answers, stored = asyncio.run(scenario())
    assert received == [(pin, token, code, spare)]  # the real values, once
    assert [answer.structured_content for answer in answers] == [
        {"door": "front", "pin": "**********"}
    ] * 2
    assert stored is not None
    result = stored.snapshot.result
    assert result is not None
    proposed = [event for event in result.trace if event.kind == "tool_proposed"]
    assert len(proposed) == 1
    seen = json.dumps(
        {
            "trace": [event.model_dump(mode="json") for event in result.trace],
            "receipts": [receipt.model_dump(mode="json") for receipt in result.receipts],
            "answers": [answer.model_dump(mode="json") for answer in answers],
            "log": caplog.text,
        }
    )
    for secret in (pin, token, code, spare):
        assert secret not in seen
    assert "ann" in seen  # the rest of the arguments is still traced


def test_the_same_request_id_in_two_sessions_is_two_calls(tmp_path: Path) -> None:
    """Request ids are per session: two clients' first requests both execute."""
    bank = Bank()
    server = _server(tmp_path, bank)
    arguments = {"account": "a1", "amount": 5}

    async def one_session() -> Any:
        async with Client(server.server()) as client:
            return await client.call_tool("transfer", arguments)

    async def scenario() -> list[Any]:
        return [await one_session(), await one_session()]

    answers = asyncio.run(scenario())
    assert [answer.structured_content for answer in answers] == [{"transferred": 5}] * 2
    assert len(bank.transfers) == 2
    assert bank.transfers[0][1] != bank.transfers[1][1]  # each its own idempotency key


def test_each_request_of_a_session_is_its_own_call(tmp_path: Path) -> None:
    """In one session, different requests are different calls, even identical ones."""
    bank = Bank()
    server = _server(tmp_path, bank)

    async def scenario() -> list[Any]:
        async with Client(server.server()) as client:
            return [
                await client.call_tool("transfer", {"account": "a1", "amount": amount})
                for amount in (5, 7, 7)
            ]

    answers = asyncio.run(scenario())
    assert [answer.structured_content for answer in answers] == [
        {"transferred": 5},
        {"transferred": 7},
        {"transferred": 7},
    ]
    assert len(bank.transfers) == 3


def test_the_latest_requests_are_remembered_for_replays(tmp_path: Path) -> None:
    """With room for two, the replays of the two latest requests are answered from their runs."""
    bank = Bank()
    server = RegistryServer(
        bank.registry,
        store=SqliteRunStore(tmp_path / "runs.db"),
        policy=allow_writes("transfer"),
        remembered_requests=2,
    )

    async def send(request: int) -> Any:
        arguments = {"account": "a1", "amount": request}
        return await server.call("transfer", arguments, key=served_call_key(None, "s", request))

    async def scenario() -> list[Any]:
        first = [await send(request) for request in (1, 2, 3)]
        return [*first, await send(3), await send(2)]

    answers = asyncio.run(scenario())
    assert [answer.structured_content for answer in answers] == [
        {"transferred": amount} for amount in (1, 2, 3, 3, 2)
    ]
    assert [call["amount"] for call, _ in bank.transfers] == [1, 2, 3]


def test_a_resumed_call_is_awaited_whole_and_its_repeat_waits_bounded(tmp_path: Path) -> None:
    """The call that resumes an approved run gets its answer; a repeat meanwhile waits bounded."""
    bank = Bank()
    document = {"allowed_writes": ["transfer"], "approval_required": ["transfer"]}
    server = _server(tmp_path, bank, Policy.from_document(document))
    server.repeat_wait_s = 0.05
    arguments = {"account": "a1", "amount": 5}
    key = served_call_key({IDEMPOTENCY_META_KEY: "k-resume"}, "s", 1)

    async def scenario() -> list[Any]:
        facts = (await server.call("transfer", arguments, key=key)).structured_content
        assert facts is not None
        approval = Approval(request_id=facts["request_id"], approved=True, approver="ops")
        await server.store.submit_approval(facts["run_id"], approval)
        bank.release.clear()
        resumed = asyncio.ensure_future(server.call("transfer", arguments, key=key))
        try:
            await _until_a_transfer_starts(bank)
            repeat = await _bounded(server.call("transfer", arguments, key=key))
        finally:
            bank.release.set()
        return [repeat, await resumed]

    repeat, resumed = asyncio.run(scenario())
    assert repeat.content[0].text == (  # type: ignore[union-attr]
        "This call is still being performed; ask again later."
    )
    assert resumed.structured_content == {"transferred": 5}
    assert len(bank.transfers) == 1


def test_serving_over_stdio_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_stdio speaks JSON-RPC over stdin and stdout: initialize, list, call, end at EOF."""
    bank = Bank()
    server = _server(tmp_path, bank)
    with piped_stdio(server.run_stdio, monkeypatch) as client:
        assert client.initialize()["serverInfo"]["name"] == "ownloop"
        client.send({"id": 2, "method": "tools/list"})
        listed = {tool["name"] for tool in client.reply(2)["result"]["tools"]}
        assert listed == {"balance", "transfer", "wire"}
        call = {"name": "transfer", "arguments": {"account": "a1", "amount": 5}}
        client.send({"id": 3, "method": "tools/call", "params": call})
        assert client.reply(3)["result"]["structuredContent"] == {"transferred": 5}
    assert len(bank.transfers) == 1
