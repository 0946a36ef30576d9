"""The table layouts of the SQL stores, one migration per store schema version.

Both dialects sit side by side so a layout change is made (and reviewed) for both at once. A store
records the versions it applied in its ``ownloop_schema`` table and refuses a database whose
version is newer than `STORE_SCHEMA_VERSION`. Append migrations; never edit a released one.

From store schema 4 on, every write transaction of a store reads the store's schema version and
writes nothing when it is no longer the one the process opened (the upgrade fence, see
``_rules.check_store_schema``): a release that upgrades the store stops every worker of the
previous release at its next write. An upgrade takes the schema table's lock first, so it waits
for writes in flight and no write of the old layout commits after it.
"""

from __future__ import annotations

__all__ = [
    "POSTGRES_MIGRATIONS",
    "POSTGRES_SCHEMA_NOW",
    "SQLITE_MIGRATIONS",
    "SQLITE_SCHEMA_NOW",
    "STORE_SCHEMA_VERSION",
]

STORE_SCHEMA_VERSION = 6
"""The table layout the SQL stores create and read."""

# Store schema 6's listing indexes: each holds every column a listing line shows, so a page reads
# its index alone, never the run rows and their state records (see _listing.py). Frozen with it.
_LISTED = ("state", "status", "stop_reason", "version", "actor", "agent")
_LISTING_KEYS = {
    "runs_by_recency": None,
    "runs_by_state_recency": "state",
    "runs_by_status_recency": "status",
    "runs_by_actor_recency": "actor",
    "runs_by_agent_recency": "agent",
}


def _covered(key: str | None) -> str:
    return ", ".join(column for column in _LISTED if column != key)


def _keyed(key: str | None) -> str:
    return f"{key}, updated_at DESC, run_id DESC" if key else "updated_at DESC, run_id DESC"


_RUN_FIELD = r"""CREATE OR REPLACE FUNCTION {s}.run_field(doc json, VARIADIC path text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN doc #>> path;
EXCEPTION WHEN untranslatable_character THEN
    BEGIN  -- a NUL escape elsewhere in the document: read it without them
        RETURN replace(doc::text, '\u0000', '')::json #>> path;
    EXCEPTION WHEN OTHERS THEN
        RETURN NULL;
    END;
END $$"""
r"""PostgreSQL's reading of a field of a stored record (the backfill below, and `run_stats`).

``json`` operators refuse a document holding a NUL escape (``\u0000``, which a task may hold):
this one reads around it, so one odd row never fails an upgrade or a summary.
"""

SQLITE_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # store schema 1
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, version INTEGER NOT NULL, state TEXT NOT NULL,
            status TEXT, stop_reason TEXT, updated_at TEXT NOT NULL, snapshot TEXT NOT NULL)""",
        "CREATE INDEX runs_by_update ON runs (updated_at DESC)",
        """CREATE TABLE leases (
            run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, token TEXT NOT NULL,
            expires_at REAL NOT NULL)""",
        """CREATE TABLE journal (
            run_id TEXT NOT NULL, call_id TEXT NOT NULL, intent TEXT NOT NULL, receipt TEXT,
            PRIMARY KEY (run_id, call_id))""",
        """CREATE TABLE approvals (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, approval TEXT NOT NULL,
            PRIMARY KEY (run_id, seq))""",
    ),
    (  # store schema 2: a lease records its holder's process, so a dead holder is taken over
        "ALTER TABLE leases ADD COLUMN host TEXT",
        "ALTER TABLE leases ADD COLUMN pid INTEGER",
    ),
    (  # store schema 3: a snapshot's growing parts are item rows, appended as the run goes
        # (see _layout.py); a run row without a layout still holds its whole snapshot.
        "ALTER TABLE runs ADD COLUMN layout TEXT",
        """CREATE TABLE run_items (
            run_id TEXT NOT NULL, part TEXT NOT NULL, position INTEGER NOT NULL,
            item TEXT NOT NULL, PRIMARY KEY (run_id, part, position)) WITHOUT ROWID""",
    ),
    # store schema 4: no table changes. From this version on every write checks the store's
    # schema version (the upgrade fence), so the next upgrade stops this release's writers.
    (),
    (  # store schema 5: threads, the runs of one conversation in order (see _threads.py)
        """CREATE TABLE threads (
            thread_id TEXT NOT NULL, position INTEGER NOT NULL, run_id TEXT NOT NULL UNIQUE,
            added_at TEXT NOT NULL, PRIMARY KEY (thread_id, position))""",
    ),
    (  # store schema 6: a run's actor and agent as columns; listing indexes that cover a page
        # (they replace the expression indexes a store of schema 5 created where it opened).
        "ALTER TABLE runs ADD COLUMN actor TEXT",
        "ALTER TABLE runs ADD COLUMN agent TEXT",
        "UPDATE runs SET "
        "actor = iif(json_valid(snapshot), json_extract(snapshot, '$.actor.id'), NULL), "
        "agent = iif(json_valid(snapshot), json_extract(snapshot, '$.versions.policy_digest'), "
        "NULL)",
        *(f"DROP INDEX IF EXISTS {name}" for name in _LISTING_KEYS),
        *(
            f"CREATE INDEX {name} ON runs ({_keyed(key)}, {_covered(key)})"
            for name, key in _LISTING_KEYS.items()
        ),
    ),
)
POSTGRES_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # store schema 1; {s} is the store's schema
        """CREATE TABLE {s}.runs (
            run_id text PRIMARY KEY, version integer NOT NULL, state text NOT NULL,
            status text, stop_reason text, updated_at timestamptz NOT NULL,
            snapshot json NOT NULL)""",
        "CREATE INDEX runs_by_update ON {s}.runs (updated_at DESC)",
        """CREATE TABLE {s}.leases (
            run_id text PRIMARY KEY, owner text NOT NULL, token text NOT NULL,
            expires_at timestamptz NOT NULL)""",
        """CREATE TABLE {s}.journal (
            seq bigint GENERATED ALWAYS AS IDENTITY, run_id text NOT NULL,
            call_id text NOT NULL, intent json NOT NULL, receipt json,
            PRIMARY KEY (run_id, call_id))""",
        """CREATE TABLE {s}.approvals (
            seq bigint GENERATED ALWAYS AS IDENTITY, run_id text NOT NULL,
            approval json NOT NULL, PRIMARY KEY (run_id, seq))""",
    ),
    (  # store schema 2
        "ALTER TABLE {s}.leases ADD COLUMN host text",
        "ALTER TABLE {s}.leases ADD COLUMN pid integer",
    ),
    (  # store schema 3
        "ALTER TABLE {s}.runs ADD COLUMN layout json",
        """CREATE TABLE {s}.run_items (
            run_id text NOT NULL, part text NOT NULL, position integer NOT NULL,
            item json NOT NULL, PRIMARY KEY (run_id, part, position))""",
    ),
    (),  # store schema 4: the upgrade fence (no table changes)
    (  # store schema 5: threads
        """CREATE TABLE {s}.threads (
            thread_id text NOT NULL, position integer NOT NULL, run_id text NOT NULL UNIQUE,
            added_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (thread_id, position))""",
    ),
    (  # store schema 6: actor and agent columns, covering listing indexes (see the SQLite one)
        _RUN_FIELD,
        "ALTER TABLE {s}.runs ADD COLUMN actor text, ADD COLUMN agent text",
        "UPDATE {s}.runs SET actor = {s}.run_field(snapshot, 'actor', 'id'), "
        "agent = {s}.run_field(snapshot, 'versions', 'policy_digest')",
        *(f"DROP INDEX IF EXISTS {{s}}.{name}" for name in _LISTING_KEYS),
        *(
            f"CREATE INDEX {name} ON {{s}}.runs ({_keyed(key)}) INCLUDE ({_covered(key)})"
            for name, key in _LISTING_KEYS.items()
        ),
    ),
)

SQLITE_SCHEMA_NOW = "SELECT COALESCE(MAX(version), 0) FROM ownloop_schema"
"""The store's schema version now (0 for a database no store has laid out yet)."""
POSTGRES_SCHEMA_NOW = "SELECT COALESCE(MAX(version), 0) FROM {s}.ownloop_schema"
"""The same, in the store's schema ``{s}``."""
