"""Rewrites never change stored values: the read path rounds int64 read as a pool's float64
(the type rules), but an object rewritten by delete --where, compaction or revert/merge by rows
must keep each surviving value exactly, or fail with nothing committed.

An int64 object in a float64 pool is ordinary: a branch loads integers, main loads floats into
the same column, and a merge by object id carries the branch's objects over as they are."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_core import Lake
from lake_core.errors import LossyRewriteError
from lake_core.pool import Pool

BIG = 2**53 + 1  # no float64 holds it: reading it as float64 rounds to 2**53


def _mixed_pool(lake: Lake) -> Pool:
    pool = lake.create_pool("p", "k:asc")
    pool.create_branch("dev")
    pool.load(pa.table({"k": [1, 2, 3], "x": [BIG, BIG + 2, 7]}), "dev")
    pool.load(pa.table({"k": [10], "x": [0.5]}), "main")
    pool.merge("dev", "main")  # by id: dev's int64 object is live on main as written
    assert pool.schema("main") == pa.schema([("k", pa.int64()), ("x", pa.float64())])
    return pool


def _stored(pool: Pool, ref: str = "main") -> list[tuple[int, object]]:
    """Every live row's (k, x) as stored in the object, not as the pool's schema reads it."""
    out = []
    for obj in pool.snapshot(pool.resolve(ref)).objects.values():
        t = pq.read_table(pa.BufferReader(pool.store.get(pool.layout.data(obj.id))))
        out += list(zip(t["k"].to_pylist(), t["x"].to_pylist(), strict=True))
    return sorted(out, key=lambda r: r[0])


def test_reads_round_but_the_stored_values_are_exact(lake: Lake) -> None:
    pool = _mixed_pool(lake)
    assert pool.read("main")["x"].to_pylist() == [2.0**53, 2.0**53 + 4, 7.0, 0.5]
    assert _stored(pool) == [(1, BIG), (2, BIG + 2), (3, 7), (10, 0.5)]


def test_delete_where_keeps_the_survivors_values_exactly(lake: Lake) -> None:
    pool = _mixed_pool(lake)
    pool.delete("k = 3", "main")  # rewrites the int64 object without row 3
    assert _stored(pool) == [(1, BIG), (2, BIG + 2), (10, 0.5)]


def test_compaction_never_rounds_stored_values(lake: Lake) -> None:
    pool = _mixed_pool(lake)
    tip = pool.tip("main")
    with pytest.raises(LossyRewriteError, match="'x'"):
        pool.compact("main", guard=lambda: None)
    assert pool.tip("main") == tip  # nothing committed
    assert _stored(pool) == [(1, BIG), (2, BIG + 2), (3, 7), (10, 0.5)]


def test_merge_by_rows_never_rounds_a_rewritten_objects_values(lake: Lake) -> None:
    pool = _mixed_pool(lake)
    pool.create_branch("fix")
    pool.delete("k = 1", "fix")  # the source removes row 1 of the int64 object ...
    pool.load(pa.table({"k": [2], "x": [1.5]}), "main")  # ... and main touched its key range
    tip = pool.tip("main")
    with pytest.raises(LossyRewriteError, match="'x'"):
        pool.merge("fix", "main")  # by rows: would rewrite the object with row 2 rounded
    assert pool.tip("main") == tip
    assert _stored(pool) == [(1, BIG), (2, BIG + 2), (2, 1.5), (3, 7), (10, 0.5)]
