"""Which of a key's differing duplicate rows is the newest, resolved from history by content.

A snapshot lists its objects in the order they were added, but a rewrite (a compaction, an
upsert, a ``delete --where`` or a ``retain`` that carried rows into new objects) appends old
rows after newer objects it did not touch; so snapshot order is not row recency. The lake
records no per-row commit time, and needs none: a row's recency is the newest commit that
*net-added* it. A commit's net-added rows are ``rows(added objects) − rows(removed objects)``
as multisets (:func:`lake_core.rowsets.cancel`): rows a rewrite carried over cancel out, so a
layout-only commit net-adds nothing.

:func:`resolve_recency` walks a branch's commits newest → oldest. For each commit it reads only
the added objects whose key span meets the still-unresolved keys (:meth:`KeySet.meets`) and
the removed objects (from the parent's snapshot) that meet them, and of those only the rows
holding such a key. The first commit whose net-added rows include a live duplicate row of a
key decides that key: that row is kept (within one commit, the last in the order it added
them, as a load's "last in input order"), the key's other live rows are losers. The walk stops
when every key is decided, or at the oldest reachable commit; a commit, a parent snapshot or
an object that cannot be read (history vacated, cleaned up) also stops it. Keys left undecided
are the caller's to settle by snapshot order (``fallback``).

Invariant: a key is decided only by a row that is live *and* was net-added by a commit on the
branch's chain with no newer commit net-adding another of the key's live rows; so when history
is whole, the kept row is the row of the last commit that wrote one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import (
    CorruptObjectError,
    HistoryVacatedError,
    NotFoundError,
    ObjectNotFoundError,
    PurgedObjectError,
)
from lake_core.ingest.schema import conform_to
from lake_core.integrity import read_verified
from lake_core.keyset import KeySet
from lake_core.objects import ObjectMeta
from lake_core.rowsets import cancel, group_rows

if TYPE_CHECKING:
    from lake_core.pool import Pool

#: History that cannot be read: the walk stops there and the rest falls back.
_UNREADABLE = (
    NotFoundError,
    HistoryVacatedError,
    ObjectNotFoundError,
    PurgedObjectError,
    CorruptObjectError,
)
_INDEX = "__lakepool_index__"


@dataclass(frozen=True)
class Recency:
    """The outcome for a set of live duplicate rows: ``losers`` (rows to remove, a multiset,
    the live table's schema), keys decided from history, keys left to snapshot order, and
    what the walk read (commit records visited, data objects read)."""

    losers: pa.Table
    resolved: int = 0
    fallback: int = 0
    commits_read: int = 0
    objects_read: int = 0


def key_positions(table: pa.Table, keys: pa.Table, names: tuple[str, ...]) -> pa.Array[Any]:
    """Ascending positions of the rows of ``table`` whose key (``names``, never null in
    ``keys``) is one of ``keys``' rows. A key field ``table`` lacks is null: no match."""
    if table.num_rows == 0 or keys.num_rows == 0:
        return pa.array([], pa.int64())
    if any(n not in table.schema.names for n in names):
        return pa.array([], pa.int64())
    if len(names) == 1:
        column = table.column(names[0])
        try:
            found = pc.is_in(column, value_set=keys.column(names[0]).combine_chunks())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            pass  # a type Arrow cannot hash (structs, lists): DuckDB below
        else:
            return pa.array(np.flatnonzero(found.to_numpy(zero_copy_only=False)), pa.int64())
    import duckdb

    def q(n: str) -> str:
        return '"' + n.replace('"', '""') + '"'

    left = table.select(list(names)).append_column(
        _INDEX, pa.array(np.arange(table.num_rows, dtype=np.int64))
    )
    on = " AND ".join(f"t.{q(n)} = k.{q(n)}" for n in names)
    cols = ", ".join(q(n) for n in names)
    con = duckdb.connect()
    try:
        con.register("t", left)
        con.register("k", keys.select(list(names)))
        out = con.sql(
            f"SELECT t.{_INDEX} FROM t JOIN (SELECT DISTINCT {cols} FROM k) k ON {on} "
            f"ORDER BY t.{_INDEX}"
        ).to_arrow_table()
    finally:
        con.close()
    positions: pa.Array[Any] = out.column(0).combine_chunks()
    return positions


def rows_with_keys(table: pa.Table, keys: pa.Table, names: tuple[str, ...]) -> pa.Table:
    """The rows of ``table`` whose key is one of ``keys``' rows (:func:`key_positions`), in
    ``table``'s order."""
    return table.take(key_positions(table, keys, names))


def _read_keyed(
    pool: Pool,
    objects: list[ObjectMeta],
    keys: pa.Table,
    names: tuple[str, ...],
    schema: pa.Schema,
) -> pa.Table:
    """The rows of ``objects`` (in order) whose key is in ``keys``, conformed to ``schema``."""
    parts = []
    for o in objects:
        rows = read_verified(pool.store, pool.id, o, pool.name)
        parts.append(conform_to(rows_with_keys(rows, keys, names), schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _differing_keys(live: pa.Table, names: tuple[str, ...]) -> pa.Table:
    """The keys (``names`` columns) of ``live`` holding two or more distinct rows; rows are
    distinct as SQL's ``DISTINCT`` has it (nulls equal). One hash aggregation: identical
    duplicates, the common case, cost no per-row bookkeeping."""
    import duckdb

    def q(n: str) -> str:
        return '"' + n.replace('"', '""') + '"'

    cols = ", ".join(q(n) for n in names)
    con = duckdb.connect()
    try:
        con.register("live", live)
        out: pa.Table = con.sql(
            f"SELECT {cols} FROM (SELECT DISTINCT * FROM live) GROUP BY {cols} HAVING count(*) > 1"
        ).to_arrow_table()
    finally:
        con.close()
    return out


def resolve_recency(pool: Pool, tip: str | None, live: pa.Table, names: tuple[str, ...]) -> Recency:
    """Decide, for each key of ``live`` (the live rows of duplicate named keys, any order,
    conformed to the pool schema) whose rows differ, which row is the newest (see the module
    docstring). Keys whose rows are all identical need no decision and are not counted."""
    schema = live.schema
    if live.num_rows == 0:
        return Recency(live)
    open_keys = _differing_keys(live, names)
    if open_keys.num_rows == 0:
        return Recency(live.slice(0, 0))
    contested = rows_with_keys(live, open_keys, names)
    c_keys = group_rows([contested.select(list(names))])[0]
    c_values = group_rows([contested])[0]
    n_open = open_keys.num_rows
    key_of_value = np.full(int(c_values.max()) + 1, -1, dtype=np.int64)
    key_of_value[c_values] = c_keys
    winner = np.full(n_open, -1, dtype=np.int64)  # key id → winning value id, or -1
    decided_keys = 0
    commits = objects = 0
    pending = contested
    keyset = KeySet.of_columns([pending.column(n) for n in names])
    try:
        for commit in pool.log(tip) if tip is not None else ():
            commits += 1
            added = [o for o in commit.adds() if keyset.meets(o)]
            if not added:
                continue
            removed: list[ObjectMeta] = []
            if commit.deletes():
                before = pool.snapshot(commit.parent)
                removed = [
                    before.objects[i]
                    for i in commit.deletes()
                    if i in before.objects and keyset.meets(before.objects[i])
                ]
            objects += len(added) + len(removed)
            key_table = pending.select(list(names))
            _, plus = cancel(
                _read_keyed(pool, removed, key_table, names, schema),
                _read_keyed(pool, added, key_table, names, schema),
            )
            if plus.num_rows == 0:
                continue
            # One grouping over the net-added rows and the contested live rows: a net-added
            # row equal to a live row gets that row's value id.
            ids = group_rows([plus, contested])
            value_of_group = np.full(int(max(ids[0].max(), ids[1].max())) + 1, -1, dtype=np.int64)
            value_of_group[ids[1]] = c_values
            v = value_of_group[ids[0]]
            v = v[v >= 0]
            k = key_of_value[v]
            fresh = winner[k] < 0
            v, k = v[fresh], k[fresh]
            if len(k) == 0:
                continue
            # In add order the last row a commit added for a key wins: the first seen backwards.
            keys_back, first_back = np.unique(k[::-1], return_index=True)
            winner[keys_back] = v[::-1][first_back]
            decided_keys += len(keys_back)
            if decided_keys == n_open:
                break
            still = winner[c_keys] < 0
            pending = contested.filter(pa.array(still))
            keyset = KeySet.of_columns([pending.column(n) for n in names])
    except _UNREADABLE:
        pass  # history vacated or cleaned up: the keys still open fall back
    won = winner[c_keys]
    lose = (won >= 0) & (won != c_values)
    return Recency(
        contested.filter(pa.array(lose)),
        decided_keys,
        n_open - decided_keys,
        commits,
        objects,
    )


__all__ = ["Recency", "key_positions", "resolve_recency", "rows_with_keys"]
