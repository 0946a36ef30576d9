"""The statements of `PostgresRunStore`, each one atomic on its own autocommit connection.

``{s}`` is the store's schema; ``{held}`` / ``{guard}`` put the lease check (fencing) into the
same statement as the write it guards, or nothing when the write carries no lease. Every write
also holds `FENCE`, the upgrade fence: it matches nothing once the store's schema version is not
the one this ownloop writes (reading the schema table also takes the lock an upgrade waits for, so
no write of the old layout commits after an upgrade). No I/O here.
"""

from ownloop.store._schema import STORE_SCHEMA_VERSION

__all__ = [
    "ACQUIRE",
    "CURRENT",
    "FENCE",
    "HELD",
    "INSERT",
    "INTENT",
    "NO_LEASE",
    "RECEIPT",
    "RELEASE",
    "RENEW",
    "SAVE",
    "UPDATE",
    "guards",
]

FENCE = f"(SELECT max(version) FROM {{s}}.ownloop_schema) = {STORE_SCHEMA_VERSION}"  # noqa: S608 - a constant

HELD = (
    "held AS (SELECT 1 FROM {s}.leases WHERE run_id = %(run_id)s AND token = %(token)s "
    "AND expires_at > clock_timestamp() FOR SHARE)"
)
INSERT = (
    "INSERT INTO {s}.runs (run_id, version, state, status, stop_reason, updated_at, snapshot, "
    "actor, agent, layout) SELECT %(run_id)s, 1, %(state)s, %(status)s, %(stop_reason)s, "
    "%(updated_at)s, %(snapshot)s::json, %(actor)s, %(agent)s, %(layout)s::json "
    "WHERE {guard} ON CONFLICT (run_id) DO NOTHING "
    "RETURNING run_id"
)
UPDATE = (
    "UPDATE {s}.runs SET version = version + 1, state = %(state)s, status = %(status)s, "
    "stop_reason = %(stop_reason)s, updated_at = %(updated_at)s, snapshot = %(snapshot)s::json, "
    "actor = %(actor)s, agent = %(agent)s, layout = %(layout)s::json "
    "WHERE run_id = %(run_id)s AND version = %(expected)s AND {guard} RETURNING run_id"
)
# One statement, so one atomic unit even on a connection shared by coroutines: the item rows
# change only when the compare-and-set (and the lease check) matched — ``cut`` and ``put`` read
# ``saved``. They never touch the same row: ``put`` writes positions below a part's new length,
# ``cut`` deletes from it onwards (or every row, when the save writes all items).
SAVE = (
    "WITH {held}, saved AS ({write}), "
    "cut AS (DELETE FROM {s}.run_items AS item USING saved, "
    "unnest(%(cut_parts)s::text[], %(cut_from)s::integer[]) AS c(part, position) "
    "WHERE item.run_id = saved.run_id AND item.part = c.part AND item.position >= c.position), "
    "put AS (INSERT INTO {s}.run_items (run_id, part, position, item) "
    "SELECT saved.run_id, p.part, p.position, p.item::json FROM saved, "
    "unnest(%(put_parts)s::text[], %(put_positions)s::integer[], %(put_items)s::text[]) "
    "AS p(part, position, item) "
    "ON CONFLICT (run_id, part, position) DO UPDATE SET item = excluded.item) "
    "SELECT count(*) FROM saved"
)
ACQUIRE = (
    "WITH old AS (SELECT owner FROM {s}.leases WHERE run_id = %(run_id)s "  # noqa: S608 - constants
    "AND expires_at > clock_timestamp()) "
    "INSERT INTO {s}.leases AS held (run_id, owner, token, expires_at, host, pid) "
    "SELECT %(run_id)s, %(owner)s, %(token)s, clock_timestamp() + make_interval(secs => %(ttl)s), "
    f"%(host)s, %(pid)s WHERE {FENCE} "
    "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
    "expires_at = excluded.expires_at, host = excluded.host, pid = excluded.pid "
    "WHERE held.expires_at <= clock_timestamp() OR %(force)s OR held.token = %(replace)s "
    "RETURNING expires_at, (SELECT owner FROM old)"
)
INTENT = (
    "WITH {held} INSERT INTO {s}.journal AS entry (run_id, call_id, intent) "
    "SELECT %(run_id)s, %(call_id)s, %(intent)s::json WHERE {guard} "
    "ON CONFLICT (run_id, call_id) DO UPDATE SET intent = excluded.intent, receipt = NULL "
    "WHERE entry.receipt IS NULL OR entry.receipt->>'status' = 'unknown'"
)
RENEW = (
    "UPDATE {s}.leases SET expires_at = clock_timestamp() + make_interval(secs => %s) "  # noqa: S608 - constants
    "WHERE run_id = %s AND token = %s AND expires_at > clock_timestamp() "
    f"AND {FENCE} RETURNING expires_at"
)
RELEASE = f"DELETE FROM {{s}}.leases WHERE run_id = %s AND token = %s AND {FENCE}"  # noqa: S608 - constants
RECEIPT = (
    "WITH {held} UPDATE {s}.journal SET receipt = %(receipt)s::json "
    "WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND {guard}"
)
NO_LEASE = "nothing AS (SELECT 1)"
CURRENT = "WITH " + HELD + " SELECT EXISTS (SELECT 1 FROM held)"  # noqa: S608 - constants


def guards(leased: bool) -> tuple[str, str]:
    """Return the ``{held}`` and ``{guard}`` of a write: the fence, and the lease when given."""
    if leased:
        return HELD, f"{FENCE} AND EXISTS (SELECT 1 FROM held)"  # noqa: S608 - constants
    return NO_LEASE, FENCE
