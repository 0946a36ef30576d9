"""A trigger that refuses the whole-snapshot saves of releases before store schema 3.

Releases before store schema 4 do not check the store's schema version when they write (the
upgrade fence of ``_rules.check_store_schema`` is in the writer's own code). Of those, releases
of store schema 1 and 2 save a run by overwriting its row's ``snapshot`` column with the whole
snapshot and never touch ``layout``; on a row that a newer release already laid out as a state
record plus item rows (see ``_layout.py``), that save would leave the row and its items
disagreeing (a tool result lost, a write re-proposed). Every newer save of a laid-out row writes a
state record whose ``messages`` and ``trace`` are empty, and every whole snapshot of a run has its
task message and its ``run_started`` event, so a database trigger can tell them apart by content
alone: it aborts an update of ``snapshot`` that leaves a ``layout`` beside a non-empty
``messages`` or ``trace``, naming the upgrade, so the
old worker's save fails and writes nothing. Rows still without a layout hold whole snapshots that
an old writer may keep updating (they have no items to disagree with).

Releases of store schema 3 write the current layout, so they need no trigger; a later change of the
layout must install one for them in the same way. The stores install it on open, whatever their
version (it changes no table, so no schema version records it), like the listing indexes.
"""

from __future__ import annotations

__all__ = [
    "POSTGRES_LEGACY_FENCE",
    "POSTGRES_LEGACY_FENCE_PRESENT",
    "SQLITE_LEGACY_FENCE",
    "TRIGGER",
]

TRIGGER = "ownloop_refuse_whole_snapshots"
_MESSAGE = (
    "this ownloop release writes whole snapshots (store schema 2 or older), but a newer release "
    "upgraded this run store and laid this run out as item rows: the save was refused and wrote "
    "nothing. Stop this worker and restart it on the newer release (see Rolling upgrades in "
    "docs/concepts/durability.md)"
)

SQLITE_LEGACY_FENCE = (
    f"CREATE TRIGGER IF NOT EXISTS {TRIGGER} BEFORE UPDATE OF snapshot ON runs "
    "WHEN NEW.layout IS NOT NULL AND (json_array_length(NEW.snapshot, '$.messages') > 0 "
    "OR json_array_length(NEW.snapshot, '$.trace') > 0) "
    f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END"
)
"""The SQLite trigger (``json_array_length`` is built into SQLite 3.38 and later)."""

POSTGRES_LEGACY_FENCE = (
    "CREATE OR REPLACE FUNCTION {s}.ownloop_refuse_whole_snapshot() RETURNS trigger "
    "LANGUAGE plpgsql AS $fence$ BEGIN RAISE EXCEPTION USING ERRCODE = 'check_violation', "
    f"MESSAGE = 'run ' || NEW.run_id || ': {_MESSAGE}'; END $fence$",
    f"DROP TRIGGER IF EXISTS {TRIGGER} ON {{s}}.runs",
    f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE OF snapshot ON {{s}}.runs FOR EACH ROW "
    "WHEN (NEW.layout IS NOT NULL AND (json_array_length(NEW.snapshot -> 'messages') > 0 "
    "OR json_array_length(NEW.snapshot -> 'trace') > 0)) "
    "EXECUTE FUNCTION {s}.ownloop_refuse_whole_snapshot()",
)
"""The PostgreSQL function and trigger, in the store's schema ``{s}``."""

POSTGRES_LEGACY_FENCE_PRESENT = (
    "SELECT count(*) FROM pg_trigger t JOIN pg_class c ON t.tgrelid = c.oid "
    "JOIN pg_namespace n ON c.relnamespace = n.oid WHERE n.nspname = %s AND t.tgname = %s"
)
"""Whether the store's schema (the parameter) has the trigger: installing it locks ``runs``."""
