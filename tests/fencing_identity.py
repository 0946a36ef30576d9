"""The identity state machine: generated argument types, fresh interpreters, deploys, decisions.

Each example is one run of a write tool whose argument has a drawn type (sets, frozensets of large
ints, a nested model, a factory default, a secret, floats including ``-0.0``, datetimes with
offsets, large ints, text in NFC or NFD), with or without ``requires_approval``, that the model
proposes once or twice with the same arguments. On SQLite and PostgreSQL every segment runs in a
fresh interpreter (`tests.identity_model_worker`) under a random ``PYTHONHASHSEED``; on the memory
store, which lives in one process, every segment runs in this one (a fresh `Agent`, which takes the
dead segment's run over). A segment may die right after the effect or after its receipt; a
deploy step changes the tool's signature (later resumes accept the change); decisions are
submitted to the store by request id or by digest, and repeated.

Invariants, checked against the ledger of real effects and the write journal after every step:
no idempotency key executes twice, each call executes at most once, an approval-gated write never
executes without its own decision (one decision admits one call), every journaled write records
its arguments, and at the end every run is finished or paused on a request a decision can resume.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ownloop import Approval
from ownloop.store import MemoryRunStore, PostgresRunStore, RunStore, SqliteRunStore
from tests.durable_support import fresh_schema, postgres_dsn
from tests.identity_model_worker import ledger, segment

ROOT = Path(__file__).resolve().parent.parent
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_ARGUMENTS: dict[str, st.SearchStrategy[Any]] = {
    "set": st.lists(_TEXT, max_size=6),
    "frozenset": st.lists(st.integers(min_value=-(2**80), max_value=2**80), max_size=5),
    "model": st.fixed_dictionaries({"street": _TEXT, "tags": st.lists(_TEXT, max_size=4)}),
    "factory": st.none(),
    "secret": _TEXT,
    "float": st.floats(allow_nan=False, allow_infinity=False) | st.just(-0.0),
    "datetime": st.datetimes(timezones=st.timezones(), allow_imaginary=False).map(
        lambda moment: moment.isoformat()
    ),
    "bigint": st.integers(min_value=2**64, max_value=2**200) | st.integers(max_value=-(2**70)),
    "text": st.sampled_from(["café", "Å", "ñandú", "ﬁ"]).flatmap(
        lambda word: st.sampled_from([unicodedata.normalize(f, word) for f in ("NFC", "NFD")])
    ),
}


def spawn(module: str, job: dict[str, Any], seed: int) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module JOB_JSON`` in a fresh interpreter under ``PYTHONHASHSEED=seed``."""
    return subprocess.run(
        [sys.executable, "-m", module, json.dumps(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


class IdentityMachine(RuleBasedStateMachine):
    """One run of one generated write tool on one store (``backend``), segment by segment."""

    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory(prefix="ownloop-identity-")
        base = Path(self.directory.name)
        self.loop = asyncio.new_event_loop()
        self.memory = MemoryRunStore()
        where: dict[str, Any] = {"db": str(base / "runs.db")}
        if self.backend == "postgres":
            where = {"dsn": postgres_dsn(), "schema": fresh_schema()}
        elif self.backend == "memory":
            where = {"in_process": True}
        self.job: dict[str, Any] = {
            **where,
            "ledger": str(base / "ledger.jsonl"),
            "run_id": "identity-run",
            "version": 1,
        }
        self.finished = False
        self.outcomes: list[dict[str, Any]] = []
        self.segments = 0

    @initialize(
        kind=st.sampled_from(sorted(_ARGUMENTS)),
        data=st.data(),
        approval=st.booleans(),
        calls=st.sampled_from([["c1"], ["c1", "c2"], ["c1", "c1"]]),
    )
    def plan(self, kind: str, data: st.DataObject, approval: bool, calls: list[str]) -> None:
        """Draw the tool's argument type, the model's arguments and whether approval is needed."""
        value = data.draw(_ARGUMENTS[kind], label="x")
        arguments = {} if kind == "factory" else {"x": value}
        self.job.update(kind=kind, approval=approval, calls=calls, arguments=arguments)

    def _store(self) -> RunStore:
        if self.backend == "memory":
            return self.memory
        if self.backend == "postgres":
            return PostgresRunStore(self.job["dsn"], schema=self.job["schema"])
        return SqliteRunStore(self.job["db"])

    async def _close(self, store: RunStore) -> None:
        if store is not self.memory:
            await store.close()

    def _segment(self, seed: int, crash: str | None) -> dict[str, Any]:
        job = {**self.job, "crash": crash, "accept": self.job["version"] == 2}
        self.segments += 1
        if self.backend == "memory":
            outcome = self.loop.run_until_complete(segment(job, self.memory))
            assert "error" not in outcome, outcome
            self.finished = outcome.get("status", "paused") != "paused"
            return outcome
        done = spawn("tests.identity_model_worker", job, seed)
        if done.returncode in (17, 18):
            return {"crashed": done.returncode}
        assert done.returncode == 0, done.stderr[-2000:]
        outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        assert "error" not in outcome, outcome
        self.finished = outcome["status"] != "paused"
        return outcome

    @precondition(lambda self: not self.finished)
    @rule(
        seed=st.integers(min_value=0, max_value=2**32 - 1),
        crash=st.sampled_from([None, None, "after_apply", "after_receipt"]),
    )
    def segment(self, seed: int, crash: str | None) -> None:
        """Run or resume the run in a fresh interpreter, which may die mid-write."""
        self.outcomes.append(self._segment(seed, crash))

    @precondition(lambda self: not self.finished and self.job["version"] == 1)
    @rule()
    def deploy(self) -> None:
        """A new release of the tool adds an optional parameter; later resumes accept it."""
        self.job["version"] = 2

    @precondition(lambda self: not self.finished)
    @rule(by=st.sampled_from(["id", "digest"]), approved=st.booleans(), times=st.integers(1, 2))
    def decide(self, by: str, approved: bool, times: int) -> None:
        """Submit a decision for the waiting request to the store, by id or digest, maybe twice."""
        self.loop.run_until_complete(self._decide(by, approved, times))

    async def _decide(self, by: str, approved: bool, times: int) -> None:
        store = self._store()
        try:
            stored = await store.get(self.job["run_id"])
            if stored is None or not stored.snapshot.approval_requests:
                return
            request = stored.snapshot.approval_requests[0]
            named = {"request_id": request.id} if by == "id" else {"digest": request.digest}
            decision = Approval(approved=approved, approver="alice", **named)
            for _ in range(times):
                try:
                    await store.submit_approval(self.job["run_id"], decision)
                except Exception:
                    continue
        finally:
            await self._close(store)

    @rule()
    def look(self) -> None:
        """Do nothing but check the invariants again (a finished run has no other step)."""

    async def _journal(self) -> list[Any]:
        store = self._store()
        try:
            return await store.journal(self.job["run_id"])
        finally:
            await self._close(store)

    @invariant()
    def each_write_ran_at_most_once_and_only_with_its_decision(self) -> None:
        """No key or call ran twice; a gated write ran only with a decision the journal holds."""
        if "kind" not in self.job:
            return
        rows = ledger(Path(self.job["ledger"]))
        keys = [row["key"] for row in rows]
        assert len(keys) == len(set(keys)), f"a write ran twice: {rows}"
        assert len(rows) <= len(self.job["calls"]), rows
        journal = self.loop.run_until_complete(self._journal())
        journaled = {entry.intent.idempotency_key: entry.intent for entry in journal}
        for row in rows:
            intent = journaled.get(row["key"])
            assert intent is not None, f"an effect without an intent: {row}"
            assert intent.arguments is not None
            if self.job["approval"]:
                assert intent.approval is not None, intent
                assert intent.approval.approved, intent
        decisions = [e.intent.approval for e in journal if e.intent.approval is not None]
        assert len(decisions) == len({(d.request_id, d.digest, d.decided_at) for d in decisions})

    def teardown(self) -> None:
        """Approve and resume until the run ends: it must finish, or wait on a request."""
        try:
            if "kind" in self.job:
                for round_ in range(6):
                    if self.finished:
                        break
                    self.loop.run_until_complete(self._decide("id", True, 1))
                    self.outcomes.append(self._segment(round_, None))
                assert self.finished, f"the run never ended: {self.outcomes}"
                self.each_write_ran_at_most_once_and_only_with_its_decision()
        finally:
            self.loop.close()
            self.directory.cleanup()
