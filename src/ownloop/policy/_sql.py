"""Decide whether SQL text is provably read-only, by parsing it (sqlglot, extra ``ownloop[sql]``).

Keyword lists cannot win this (``SELECT ... INTO``, ``COPY ... TO PROGRAM``, ``CALL``, ``DO``,
``setval()``, a data-modifying ``WITH``). The text is parsed, and only one shape is read-only: a
single ``SELECT`` (a ``WITH`` query, a set operation such as ``UNION``, or a parenthesised query)
with no writing clause or statement anywhere inside it (``INTO``, ``FOR UPDATE``/``SHARE`` locks,
``INSERT``/``UPDATE``/``DELETE``/``MERGE`` in a CTE, any DDL or command) and no call to a function
in `SIDE_EFFECT_FUNCTIONS`. Everything else counts as a write, text that does not parse included.

What it cannot know: a user-defined function or view that writes when it is read. The rule is a
second line of defence behind a read-only database account or transaction, never a replacement.
"""

from __future__ import annotations

from typing import Any

from ownloop.exceptions import ConfigurationError

__all__ = ["SIDE_EFFECT_FUNCTIONS", "load_sqlglot", "sql_write_reason"]

SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        # PostgreSQL: sequences, large objects, server control, settings, locks, notifications,
        # remote and dynamic SQL, server files
        "setval", "nextval", "lo_import", "lo_export", "lo_unlink", "lo_create", "lo_creat",
        "lo_from_bytea", "lo_put", "lo_truncate", "lo_open", "lowrite", "pg_terminate_backend",
        "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_promote",
        "pg_switch_wal", "pg_create_restore_point", "pg_backup_start", "pg_backup_stop",
        "pg_start_backup", "pg_stop_backup", "set_config", "pg_advisory_lock",
        "pg_advisory_lock_shared", "pg_advisory_xact_lock", "pg_advisory_xact_lock_shared",
        "pg_try_advisory_lock", "pg_try_advisory_lock_shared", "pg_try_advisory_xact_lock",
        "pg_try_advisory_xact_lock_shared", "pg_advisory_unlock", "pg_advisory_unlock_all",
        "pg_notify", "dblink", "dblink_exec", "dblink_send_query", "dblink_connect",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml",
        "pg_file_write", "pg_file_rename", "pg_file_unlink", "pg_file_sync", "pg_read_file",
        "pg_read_binary_file", "pg_create_logical_replication_slot",
        "pg_create_physical_replication_slot", "pg_drop_replication_slot",
        "pg_replication_origin_create", "pg_replication_origin_drop", "txid_current",
        "pg_current_xact_id", "pg_import_system_collations", "pg_stat_reset",
        # MySQL / MariaDB
        "get_lock", "release_lock", "release_all_locks", "load_file", "sys_exec", "sys_eval",
        # SQLite
        "load_extension", "writefile", "readfile", "edit",
        # SQL Server
        "xp_cmdshell", "sp_executesql", "openrowset", "opendatasource", "openquery",
    }
)  # fmt: skip
"""Functions whose call makes a ``SELECT`` a write (or an escape to one): compared by name,
case-insensitively, whatever schema qualifies them."""

_WRITING_NODES = (
    "DML", "DDL", "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter",
    "TruncateTable", "Into", "Lock", "Command", "Copy", "Set", "Transaction", "Commit",
    "Rollback", "Pragma", "Use", "Grant", "Revoke", "Attach", "Detach", "LoadData", "Kill",
    "Execute", "Declare", "Analyze", "Cache", "Uncache", "Refresh",
)  # fmt: skip
_READ_ROOTS = ("Select", "SetOperation", "Subquery")


def sql_write_reason(text: str, dialect: str | None = None) -> str | None:
    """Return why ``text`` is not provably read-only SQL, or ``None`` when it is.

    Args:
        text: The SQL.
        dialect: A sqlglot dialect name (``"postgres"``, ``"mysql"``, ``"sqlite"``...); the
            generic dialect when ``None``.

    Raises:
        ConfigurationError: If sqlglot (``pip install 'ownloop[sql]'``) is not installed.
    """
    sqlglot, exp = load_sqlglot()
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except Exception:  # sqlglot's ParseError, TokenError, or a dialect error: not provable
        return "it does not parse as SQL, so it is not provably read-only"
    for statement in statements:
        if isinstance(statement, _classes(exp, _WRITING_NODES)):
            return f"it contains the statement {_statement_name(statement)}"
        if not isinstance(statement, _classes(exp, _READ_ROOTS)):
            return "it contains a statement that is not a SELECT"
    if len(statements) != 1:
        return f"it holds {len(statements)} statements; only a single SELECT is allowed"
    return _inner_reason(statements[0], exp)


def _inner_reason(statement: Any, exp: Any) -> str | None:
    writing = _classes(exp, _WRITING_NODES)
    for node in statement.walk():
        if isinstance(node, writing):
            return f"it contains {_statement_name(node)}"
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name.rsplit(".", 1)[-1] in SIDE_EFFECT_FUNCTIONS:
                return f"it calls {name}(), which has side effects"
    return None


def _statement_name(node: Any) -> str:
    name = type(node).__name__
    if name == "Command":
        return str(node.this).upper()
    return {"Into": "SELECT ... INTO", "Lock": "a FOR UPDATE/SHARE lock"}.get(name, name.upper())


def _classes(exp: Any, names: tuple[str, ...]) -> tuple[type[Any], ...]:
    return tuple(getattr(exp, name) for name in names if hasattr(exp, name))


def load_sqlglot() -> tuple[Any, Any]:
    """Import sqlglot and its expression module.

    Raises:
        ConfigurationError: If sqlglot (``pip install 'ownloop[sql]'``) is not installed.
    """
    try:
        import sqlglot
        from sqlglot import exp
    except ImportError:  # pragma: no cover - the dev extra installs it
        raise ConfigurationError(
            "refuse_sql_writes parses SQL with sqlglot: pip install 'ownloop[sql]'"
        ) from None
    return sqlglot, exp
