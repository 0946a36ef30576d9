"""A registry served over MCP by the tests: a read and a write that records into a ledger file."""

from __future__ import annotations

import json
import os

from ownloop import ToolRegistry

LEDGER_VARIABLE = "OWNLOOP_TEST_MCP_LEDGER"

registry = ToolRegistry()


@registry.tool(effect="read")
def balance(account: str) -> dict[str, object]:
    """Read an account's balance.

    Args:
        account: The account id.
    """
    return {"account": account, "balance": 100}


@registry.tool(effect="write")
def transfer(account: str, amount: int) -> dict[str, object]:
    """Move money out of an account.

    Args:
        account: The account id.
        amount: How much.
    """
    with open(os.environ[LEDGER_VARIABLE], "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps({"account": account, "amount": amount}) + "\n")
    return {"transferred": amount}


def make_registry() -> ToolRegistry:
    """The same registry, from a factory."""
    return registry
