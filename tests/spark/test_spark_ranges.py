"""Key ranges for Spark ingest (``lake_spark.ranges``): pure Arrow, no Spark session.

The invariants the ingest relies on: a row's bucket is a function of its key, buckets follow
the pool's sort order (so objects written per bucket never overlap and equal keys never split),
boundaries are distinct, and splitting keeps the rows' order within a bucket.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lake_core.poolkey import PoolKey
from lake_spark.ranges import (
    WEIGHT,
    assign_buckets,
    choose_boundaries,
    sample_indices,
    split_by_bucket,
)

_A = st.one_of(st.none(), st.integers(-5, 5))
_B = st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 0.5, 2.0]), st.just(float("nan")))


def _table(rows: list[tuple[Any, Any]]) -> pa.Table:
    return pa.table(
        {
            "a": pa.array([r[0] for r in rows], pa.int64()),
            "b": pa.array([r[1] for r in rows], pa.float64()),
            "v": pa.array(range(len(rows)), pa.int64()),
        }
    )


def _key_of(row: dict[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple("nan" if isinstance(row[f], float) and math.isnan(row[f]) else row[f] for f in fields)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(_A, _B), min_size=1, max_size=300),
    order=st.sampled_from(["asc", "desc"]),
    fields=st.sampled_from([("a",), ("a", "b"), ("b", "a")]),
    buckets=st.integers(1, 9),
    sample=st.integers(1, 60),
)
def test_buckets_follow_the_pool_order_and_never_split_equal_keys(
    rows: list[tuple[Any, Any]], order: str, fields: tuple[str, ...], buckets: int, sample: int
) -> None:
    key = PoolKey(fields, order)
    table = _table(rows)
    picks = pa.array(sample_indices(table.num_rows, sample))
    samples = table.take(picks).append_column(
        WEIGHT, pa.array(np.full(len(picks), table.num_rows / len(picks)))
    )
    bounds = choose_boundaries(samples, key, buckets)
    assert bounds.num_rows <= buckets - 1
    listed = [_key_of(r, fields) for r in bounds.to_pylist()]
    assert len(set(listed)) == len(listed)  # distinct
    assert not any(None in k or "nan" in k for k in listed)  # complete keys only

    ids = assign_buckets(table, bounds, key)
    assert ids.min() >= 0 and ids.max() <= bounds.num_rows
    # Along the pool's order, buckets never go back: each bucket is one contiguous key range.
    order_ids = ids[key.sort_indices(table).to_numpy()]
    assert (np.diff(order_ids) >= 0).all()
    # Equal keys share a bucket.
    seen: dict[tuple[Any, ...], int] = {}
    for row, bucket in zip(table.to_pylist(), ids, strict=True):
        assert seen.setdefault(_key_of(row, fields), int(bucket)) == bucket

    parts = split_by_bucket(table, ids)
    assert [b for b, _ in parts] == sorted({int(i) for i in ids})
    for bucket, part in parts:
        values = part.column("v").to_pylist()
        assert values == sorted(values)  # rows keep their order within a bucket
        assert all(ids[v] == bucket for v in values)


def test_boundaries_split_about_evenly() -> None:
    key = PoolKey(("a",), "asc")
    table = pa.table({"a": pa.array(np.random.default_rng(7).integers(0, 10_000, 100_000))})
    picks = pa.array(sample_indices(table.num_rows, 4096))
    samples = table.take(picks).append_column(WEIGHT, pa.array(np.full(4096, 100_000 / 4096)))
    bounds = choose_boundaries(samples, key, 8)
    assert bounds.num_rows == 7
    sizes = np.bincount(assign_buckets(table, bounds, key))
    assert sizes.min() > 0.8 * 100_000 / 8 and sizes.max() < 1.2 * 100_000 / 8


def test_one_hot_key_gets_one_bucket_and_missing_keys_go_last() -> None:
    key = PoolKey(("a",), "desc")
    table = pa.table({"a": pa.array([5] * 900 + [1, 2, 3] * 30 + [None] * 10, pa.int64())})
    samples = table.append_column(WEIGHT, pa.array(np.ones(table.num_rows)))
    bounds = choose_boundaries(samples, key, 4)
    ids = assign_buckets(table, bounds, key)
    assert len(set(ids[:900].tolist())) == 1  # the run of 5s is never split
    assert set(ids[-10:].tolist()) == {bounds.num_rows}  # null keys: the last bucket
    assert choose_boundaries(samples, PoolKey(("nope",), "asc"), 4).num_rows == 0


@pytest.mark.parametrize("rows,count", [(0, 5), (3, 5), (10, 5), (1_000_000, 7)])
def test_sample_indices_are_sorted_distinct_and_in_range(rows: int, count: int) -> None:
    picks = sample_indices(rows, count)
    assert len(picks) == min(rows, count)
    assert (np.diff(picks) > 0).all() and (picks < max(rows, 1)).all()
