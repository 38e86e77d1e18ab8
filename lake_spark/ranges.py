"""Key ranges: how the rows of a load are cut into buckets that Spark tasks write.

Pure Arrow and numpy, no I/O and no Spark, so the invariants below are unit-tested directly:

- A bucket is a contiguous range of the pool's sort order: bucket ``r`` holds the keys after
  boundary ``r - 1`` and up to boundary ``r`` (inclusive), in the pool's direction.
- Which bucket a row goes to depends on its key alone, so equal keys always share a bucket and
  a run of equal keys is never split across objects, whichever task read the row.
- Boundaries are distinct, free of nulls and NaN, and in pool order. Rows whose key has a null
  (or NaN) field sort after every boundary's key at that field, as they sort last in the pool.
- Boundaries come from weighted samples (every sampled row stands for ``weight`` rows) at
  evenly spaced quantiles, so buckets come out about the same size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.poolkey import PoolKey

WEIGHT = "__lake_sample_weight"


def sample_indices(rows: int, count: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``count`` evenly spaced row positions in ``0..rows-1`` (all rows when fewer)."""
    if rows <= count:
        return np.arange(rows, dtype=np.int64)
    return (np.arange(count, dtype=np.int64) * rows + rows // 2) // count


def _missing(column: pa.Array[Any]) -> pa.Array[Any]:
    """Null or NaN: the values that sort after every boundary."""
    if pa.types.is_null(column.type):
        return pa.array(np.ones(len(column), dtype=bool))
    missing: Any = pc.is_null(column, nan_is_null=pa.types.is_floating(column.type))
    return missing  # type: ignore[no-any-return]


def choose_boundaries(samples: pa.Table, key: PoolKey, buckets: int) -> pa.Table:
    """At most ``buckets - 1`` distinct boundary keys splitting ``samples`` (key fields plus
    :data:`WEIGHT`) into ranges of about equal weight. Empty when one bucket suffices or no
    sampled key is complete."""
    present = [f for f in key.fields if f in samples.schema.names]
    if len(present) < len(key.fields) or buckets <= 1 or samples.num_rows == 0:
        return pa.table({})
    valid: Any = None
    for f in key.fields:
        ok = pc.invert(_missing(samples.column(f).combine_chunks()))
        valid = ok if valid is None else pc.and_(valid, ok)
    total = float(pc.sum(samples.column(WEIGHT)).as_py() or 0.0)
    candidates = samples.filter(valid)
    if candidates.num_rows == 0 or total <= 0:
        return pa.table({})
    candidates = candidates.take(key.sort_indices(candidates))
    cumulative = np.cumsum(candidates.column(WEIGHT).to_numpy())
    keys = candidates.select(list(key.fields))
    picks: list[int] = []
    last: tuple[Any, ...] | None = None
    for j in range(1, buckets):
        i = int(np.searchsorted(cumulative, total * j / buckets, side="left"))
        if i >= candidates.num_rows:
            break
        value = tuple(keys.column(f)[i].as_py() for f in key.fields)
        if value != last:  # sorted, so equal keys are adjacent: keep the first pick of each
            picks.append(i)
            last = value
    return keys.take(np.asarray(picks, dtype=np.int64))


def _after(
    columns: list[pa.Array[Any]], bounds: list[pa.Array[Any]], descending: bool
) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row: does the row's key sort after its boundary key (given row by row)?"""
    result: Any = None
    for column, bound in reversed(list(zip(columns, bounds, strict=True))):
        missing = _missing(column)
        if pa.types.is_null(column.type):
            greater: Any = missing
            equal: Any = pa.array(np.zeros(len(column), dtype=bool))
        else:
            cmp = pc.less(column, bound) if descending else pc.greater(column, bound)
            greater = pc.or_(pc.fill_null(cmp, False), missing)
            equal = pc.fill_null(pc.equal(column, bound), False)
        result = greater if result is None else pc.or_(greater, pc.and_(equal, result))
    return np.asarray(result.to_numpy(zero_copy_only=False), dtype=bool)


def sorts_after(
    first: pa.Table, second: pa.Table, key: PoolKey
) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row: does ``first``'s key sort strictly after ``second``'s (row by row, same
    length) in the pool's order, nulls last?"""
    if first.num_rows == 0:
        return np.zeros(0, dtype=bool)
    columns = [c.combine_chunks() for c in key.key_columns(first)]
    bounds = [c.combine_chunks() for c in key.key_columns(second)]
    return _after(columns, bounds, key.descending)


def assign_buckets(
    table: pa.Table, bounds: pa.Table, key: PoolKey
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The bucket (``0..len(bounds)``) of every row of ``table``: a vectorized binary search
    of each row's key among the boundaries."""
    n, m = table.num_rows, bounds.num_rows
    if m == 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    columns = [c.combine_chunks() for c in key.key_columns(table)]
    bound_columns = [bounds.column(f).combine_chunks() for f in key.fields]
    lo = np.zeros(n, dtype=np.int64)
    hi = np.full(n, m, dtype=np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        probe = pa.array(np.minimum(mid, m - 1))
        after = _after(columns, [b.take(probe) for b in bound_columns], key.descending)
        lo = np.where(active & after, mid + 1, lo)
        hi = np.where(active & ~after, mid, hi)


def split_by_bucket(
    table: pa.Table, buckets: np.ndarray[Any, np.dtype[np.int64]]
) -> list[tuple[int, pa.Table]]:
    """``table``'s rows grouped by bucket, buckets ascending, row order kept within each."""
    if table.num_rows == 0:
        return []
    if buckets.size and (buckets == buckets[0]).all():
        return [(int(buckets[0]), table)]
    order = np.argsort(buckets, kind="stable")
    counts = np.bincount(buckets)
    taken = table.take(order)
    out = []
    start = 0
    for bucket, count in enumerate(counts):
        if count:
            out.append((bucket, taken.slice(start, int(count))))
            start += int(count)
    return out
