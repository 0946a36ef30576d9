"""How the SQL stores lay a snapshot out: a small state record plus append-only item rows.

A run's snapshot grows with the run only in four parts — its messages, trace, receipts and
evidence. The SQL stores keep each item of those parts in a row of its own (``run_items``: run,
part, position, item JSON) and the rest of the snapshot, with those parts left empty, as the state
record in the run's row, beside a `Layout` saying how many items each part has. A save then
serializes and writes only the items added (or changed) since the version this store instance
last wrote or read, in the same transaction as the compare-and-set of the state record, so a
checkpoint costs the same at step 200 as at step 5.

What a store instance knows it wrote is `KnownRuns`: per run, the version and the parts' items
(references to the snapshot's own objects, not copies). It is only ever a statement about a version
that exists, and a version's content never changes once committed (every save bumps it, and a run
is deleted only by a prune, which forgets it here, once it has finished — and run ids are not
reused), so it stays true whatever other
processes do: a save whose ``expected_version`` is not the known one writes every item again (and
fails the compare-and-set anyway if another writer saved meanwhile).
A part is compared item by item from the start, by identity first (the loop core hands the same
objects to every snapshot), so a rewritten prefix — context compaction replacing messages — is
found and rewritten from the first item that differs.

A save may also be handed a checkpoint's changes alone (``kept``, see `ChangeStore.save`): then a
part's items are the ones after the first ``kept[part]`` stored, written at those positions with
no comparison at all, so neither the loop core nor the store walks the run's earlier items; such a
part is not remembered as known whole.

The final snapshot's result repeats the run's parts (its trace, messages, ...): a part equal to the
snapshot's own is stored once and named in `Layout.result_shares` (given new items alone, a result
part that ends with them — a run holding only its latest trace events — is shared too, and the
stored result then holds the whole part).

Rows whose layout is ``NULL`` were written by store schema 2 or older: their state record is the
whole snapshot. They load as they are and move to this layout at their next save. No I/O here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, TypeAdapter, ValidationError

from ownloop.contracts import Evidence, Message, Receipt, RunSnapshot, TraceEvent
from ownloop.exceptions import StoreError
from ownloop.store._sql import SnapshotRow, load_snapshot, snapshot_row

__all__ = [
    "PARTS",
    "KnownRuns",
    "Layout",
    "SavePlan",
    "first_change",
    "plan_save",
    "rebuild",
]

Part = Literal["messages", "trace", "receipts", "evidence"]
"""A snapshot field stored one item per row."""

PARTS: tuple[Part, ...] = ("messages", "trace", "receipts", "evidence")
"""The parts, in the order their rows are written."""

Items = tuple[Any, ...]
"""The items of one part: the snapshot's own (already validated) records."""

_ADAPTERS: dict[Part, TypeAdapter[Any]] = {
    "messages": TypeAdapter(tuple[Message, ...]),
    "trace": TypeAdapter(tuple[TraceEvent, ...]),
    "receipts": TypeAdapter(tuple[Receipt, ...]),
    "evidence": TypeAdapter(tuple[Evidence, ...]),
}


class Layout(BaseModel):
    """How a run's snapshot is split between its state record and its item rows.

    Attributes:
        counts: How many item rows each part has (positions ``0 .. count - 1``).
        result_shares: The parts of the stored result that are the snapshot's own (stored once).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    counts: dict[Part, NonNegativeInt] = Field(default_factory=dict)
    result_shares: tuple[Part, ...] = ()


@dataclass(frozen=True, slots=True)
class SavePlan:
    """What one save writes.

    Attributes:
        row: The run's row, with the state record as its snapshot text.
        layout: The `Layout` as JSON.
        puts: Item rows to insert or overwrite: ``(part, position, item JSON)``.
        cuts: Item rows to delete: ``(part, first position deleted)`` — every later one too.
        parts: The parts saved whole, to remember once the save commits (a part of which only
            the new items were given is not known whole: the next save writes it whole unless
            it is given new items alone again).
    """

    row: SnapshotRow
    layout: str
    puts: list[tuple[str, int, str]]
    cuts: list[tuple[str, int]]
    parts: dict[Part, Items]


class KnownRuns:
    """What one store instance knows it wrote (or read) last, per run, for the latest runs.

    Args:
        capacity: How many runs to remember (the least recently saved are forgotten first).
    """

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._runs: OrderedDict[str, tuple[int, dict[Part, Items]]] = OrderedDict()

    def parts_at(self, run_id: str, version: int | None) -> dict[Part, Items] | None:
        """Return the parts stored at ``version`` of the run, if this instance knows them."""
        known = self._runs.get(run_id)
        if known is None or version is None or known[0] != version:
            return None
        return known[1]

    def remember(self, run_id: str, version: int, parts: dict[Part, Items]) -> None:
        """Record that ``version`` of the run holds exactly these parts in its item rows."""
        self._runs[run_id] = (version, parts)
        self._runs.move_to_end(run_id)
        while len(self._runs) > self._capacity:
            self._runs.popitem(last=False)

    def saved(self, run_id: str, version: int, plan: SavePlan) -> None:
        """Record a committed save; a finished run is forgotten (it is never saved again)."""
        if plan.row.state == "finished":
            self.forget(run_id)
        else:
            self.remember(run_id, version, plan.parts)

    def forget(self, run_id: str) -> None:
        """Drop what is known of a run (after a save whose outcome is unknown)."""
        self._runs.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._runs)


def first_change(before: Sequence[object], after: Sequence[object]) -> int:
    """Return the first position where ``after`` differs from ``before``.

    The common case — ``after`` extends ``before`` with the same objects — is one tuple comparison
    in C (identity first); only a changed part is walked item by item.

    Args:
        before: The items as stored.
        after: The items to store.

    Returns:
        ``len(before)`` when ``after`` starts with all of ``before``; otherwise the index of the
        first item that differs (or where one of them ends).
    """
    if len(after) >= len(before) and tuple(after[: len(before)]) == tuple(before):
        return len(before)
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old is not new and old != new:
            return index
    return min(len(before), len(after))


def plan_save(
    snapshot: RunSnapshot,
    known: Mapping[Part, Items] | None,
    kept: Mapping[str, int] | None = None,
) -> SavePlan:
    """Split a snapshot into its state record and the item rows a save must write.

    Args:
        snapshot: The snapshot to save.
        known: The parts stored at the version the save expects, as far as this store knows them
            (a part it does not know is written whole, and any other row of it deleted);
            ``None`` writes every item.
        kept: The parts the snapshot holds only the new items of: ``kept[part]`` items before
            them are stored already and stay (see `ChangeStore.save`).

    Returns:
        The plan.

    Raises:
        SchemaVersionError: If the snapshot's schema version is unknown.
    """
    parts: dict[Part, Items] = {part: tuple(getattr(snapshot, part)) for part in PARTS}
    offsets: dict[Part, int] = {part: (kept or {}).get(part, 0) for part in PARTS}
    result, shares = snapshot.result, cast("tuple[Part, ...]", ())
    if result is not None:
        shares = tuple(
            part for part in PARTS if _shared(getattr(result, part), parts[part], offsets[part])
        )
        result = result.model_copy(update=dict.fromkeys(shares, ()))
    state = snapshot.model_copy(update={**dict.fromkeys(PARTS, ()), "result": result})
    puts: list[tuple[str, int, str]] = []
    cuts: list[tuple[str, int]] = []
    whole: dict[Part, Items] = {}
    for part, items in parts.items():
        offset = offsets[part]
        if kept is not None and part in kept:  # only the new items: append them after the kept
            start = 0
            cuts.append((part, offset + len(items)))
        else:
            whole[part] = items
            before = known.get(part) if known is not None else None
            start = 0 if before is None else first_change(before, items)
            if before is None or len(before) > len(items):
                cuts.append((part, len(items)))
        puts.extend(
            (part, offset + index, items[index].model_dump_json())
            for index in range(start, len(items))
        )
    layout = Layout(
        counts={part: offsets[part] + len(items) for part, items in parts.items()},
        result_shares=shares,
    )
    return SavePlan(snapshot_row(state), layout.model_dump_json(), puts, cuts, whole)


def _shared(in_result: Sequence[object], items: Items, offset: int) -> bool:
    """Whether the result's part is the snapshot's part, or (given new items alone) its end.

    With ``offset`` items kept, the result of a run that holds only its latest trace events holds
    a tail of the whole part: it is shared when it ends with the snapshot's new items (and holds
    no more than the whole part), and the stored result then holds the whole part.
    """
    if not offset:
        return tuple(in_result) == items
    if not in_result or len(in_result) > offset + len(items):
        return False
    if len(in_result) >= len(items):
        return tuple(in_result[len(in_result) - len(items) :]) == items
    return tuple(in_result) == items[len(items) - len(in_result) :]


def rebuild(
    run_id: str,
    state: str | bytes,
    layout: str | bytes | None,
    rows: Iterable[tuple[str, int, str]],
) -> tuple[RunSnapshot, dict[Part, Items] | None]:
    """Rebuild a stored snapshot from its state record and item rows.

    Args:
        run_id: The run (named in errors).
        state: The state record's JSON (the whole snapshot when ``layout`` is ``None``).
        layout: The `Layout` JSON, or ``None`` for a row written by store schema 2 or older.
        rows: ``(part, position, item JSON)`` of the run's item rows, ordered by part and
            position.

    Returns:
        The snapshot, and its parts when they came from item rows (what a later save may skip).

    Raises:
        SchemaVersionError: If the snapshot is newer than this ownloop reads.
        StoreError: If the state record, the layout or an item is not valid, or items are missing.
    """
    snapshot = load_snapshot(run_id, state)
    if layout is None:
        return snapshot, None
    try:
        plan = Layout.model_validate_json(layout)
        texts: dict[str, list[str]] = {part: [] for part in PARTS}
        for part, position, text in rows:
            if position != len(texts[part]):
                raise StoreError(f"run {run_id} lacks its {part} item {len(texts[part])}")
            texts[part].append(text)
        parts = {
            part: _ADAPTERS[part].validate_json("[" + ",".join(texts[part]) + "]") for part in PARTS
        }
    except (ValidationError, KeyError) as error:  # an unknown part is a KeyError
        raise StoreError(f"the stored items of run {run_id} are not valid: {error}") from error
    for part in PARTS:
        if len(parts[part]) != plan.counts.get(part, 0):
            raise StoreError(
                f"run {run_id} has {len(parts[part])} stored {part} items, but its state record "
                f"names {plan.counts.get(part, 0)}: the store is damaged"
            )
    result = snapshot.result
    if result is not None and plan.result_shares:
        result = result.model_copy(update={part: parts[part] for part in plan.result_shares})
    update: dict[str, Any] = {part: parts[part] for part in PARTS}
    update["result"] = result
    return snapshot.model_copy(update=update), parts
