"""Multisets of rows: the row-level algebra that lets history operations see through layout.

Compaction moves rows between objects without changing them, so "the rows a commit removed"
must be found again by content, not by object id. Two tables with the same schema are compared
as *multisets*: a row that occurs twice on the left and once on the right pairs once. Rows are
equal when every column is equal, nulls equal to nulls and NaN to NaN (SQL's ``IS NOT
DISTINCT FROM``).

The pairing runs in DuckDB (embedded, Arrow in, no copy of the data back out): each side is
numbered within its groups of identical rows (``row_number() OVER (PARTITION BY every
column)``), and the k-th copy on the left pairs with the k-th copy on the right by a hash join
on every column and that number. Only row *positions* come back, so the caller filters its own
Arrow tables and no value ever round-trips through another type system.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LEFT = "__lakepool_left_row__"
_RIGHT = "__lakepool_right_row__"
_COPY = "__lakepool_copy__"


@dataclass(frozen=True)
class Pairing:
    """Positions of paired rows: ``left[i]`` equals ``right[i]``; each position at most once."""

    left: np.ndarray
    right: np.ndarray

    def left_mask(self, n: int) -> pa.Array[Any]:
        """Boolean mask over the left table, true where the row paired."""
        mask = np.zeros(n, dtype=bool)
        mask[self.left] = True
        return pa.array(mask)

    def right_mask(self, n: int) -> pa.Array[Any]:
        mask = np.zeros(n, dtype=bool)
        mask[self.right] = True
        return pa.array(mask)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def pair_rows(left: pa.Table, right: pa.Table) -> Pairing:
    """Pair equal rows of ``left`` and ``right`` (same column names and types) as multisets."""
    if left.num_rows == 0 or right.num_rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Pairing(empty, empty)
    if left.schema.names != right.schema.names:
        raise ValueError("pair_rows needs tables with the same columns")
    import duckdb

    cols = [_quote(n) for n in left.schema.names]
    parts = ", ".join(cols)
    lt = left.append_column(_LEFT, pa.array(np.arange(left.num_rows, dtype=np.int64)))
    rt = right.append_column(_RIGHT, pa.array(np.arange(right.num_rows, dtype=np.int64)))
    on = " AND ".join(f"l.{c} IS NOT DISTINCT FROM r.{c}" for c in cols)
    sql = f"""
        WITH l AS (SELECT *, row_number() OVER (PARTITION BY {parts} ORDER BY {_LEFT}) AS {_COPY}
                   FROM lt),
             r AS (SELECT *, row_number() OVER (PARTITION BY {parts} ORDER BY {_RIGHT}) AS {_COPY}
                   FROM rt)
        SELECT l.{_LEFT}, r.{_RIGHT} FROM l JOIN r ON {on} AND l.{_COPY} = r.{_COPY}
    """
    con = duckdb.connect()
    try:
        con.register("lt", lt)
        con.register("rt", rt)
        out = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    return Pairing(
        out.column(0).to_numpy().astype(np.int64), out.column(1).to_numpy().astype(np.int64)
    )


def except_all(left: pa.Table, right: pa.Table) -> pa.Table:
    """Rows of ``left`` not paired with a row of ``right`` (SQL ``EXCEPT ALL``), in
    ``left``'s order."""
    pairing = pair_rows(left, right)
    if len(pairing.left) == 0:
        return left
    return left.filter(pc.invert(pairing.left_mask(left.num_rows)))


def cancel(removed: pa.Table, added: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The net change of replacing ``removed`` rows by ``added`` rows: (rows really removed,
    rows really added); rows present on both sides cancel out (a rewrite keeps them)."""
    pairing = pair_rows(removed, added)
    if len(pairing.left) == 0:
        return removed, added
    return (
        removed.filter(pc.invert(pairing.left_mask(removed.num_rows))),
        added.filter(pc.invert(pairing.right_mask(added.num_rows))),
    )


_TABLE = "__lakepool_table__"
_GROUP = "__lakepool_group__"


def group_rows(tables: list[pa.Table]) -> list[np.ndarray]:
    """For each table (same columns and types), the id of each row's value: equal rows get
    the same id across all tables, different rows different ids (ids are dense from 0)."""
    sizes = [t.num_rows for t in tables]
    out = [np.zeros(n, dtype=np.int64) for n in sizes]
    if sum(sizes) == 0:
        return out
    import duckdb

    names = tables[0].schema.names
    parts = []
    for i, t in enumerate(tables):
        if t.schema.names != names:
            raise ValueError("group_rows needs tables with the same columns")
        parts.append(
            t.append_column(_TABLE, pa.array(np.full(t.num_rows, i, dtype=np.int64))).append_column(
                _LEFT, pa.array(np.arange(t.num_rows, dtype=np.int64))
            )
        )
    cols = ", ".join(_quote(n) for n in names)
    con = duckdb.connect()
    try:
        con.register("rows_in", pa.concat_tables(parts))
        res = con.sql(
            f"SELECT {_TABLE}, {_LEFT}, dense_rank() OVER (ORDER BY {cols}) - 1 AS {_GROUP} "
            "FROM rows_in"
        ).to_arrow_table()
    finally:
        con.close()
    which = res.column(0).to_numpy()
    pos = res.column(1).to_numpy()
    group = res.column(2).to_numpy().astype(np.int64)
    for i in range(len(tables)):
        sel = which == i
        out[i][pos[sel]] = group[sel]
    return out
