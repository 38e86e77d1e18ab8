"""Compaction's streaming k-way merge: exactly the rows and order of a full stable sort."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.integrity import read_verified
from lake_core.loading import load
from lake_core.maintenance import compact, fragmentation
from lake_core.merge import merge_sorted, read_ahead
from lake_core.poolkey import PoolKey


def _full_sort(tables: list[pa.Table], key: PoolKey) -> pa.Table:
    whole = pa.concat_tables(tables)
    return whole.take(key.sort_indices(whole))


def _sorted_source(rng: random.Random, key: PoolKey, src: int, n: int) -> pa.Table:
    a = [None if rng.random() < 0.15 else rng.randrange(6) for _ in range(n)]
    b = [None if rng.random() < 0.2 else rng.choice("xyz") for _ in range(n)]
    t = pa.table(
        {
            "a": pa.array(a, pa.int64()),
            "b": pa.array(b, pa.string()),
            "src": [src] * n,
            "pos": list(range(n)),
        }
    )
    return t.take(key.sort_indices(t))


def _pieces(t: pa.Table, rng: random.Random) -> list[pa.Table]:
    """``t`` cut into tables of uneven sizes, empty ones included."""
    out, at = [], 0
    while at < t.num_rows:
        step = rng.choice([0, 1, 3, 17, 40])
        out.append(t.slice(at, step))
        at += step
    return out


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_merge_sorted_is_the_stable_full_sort(order: str, seed: int) -> None:
    rng = random.Random(seed)
    key = PoolKey(("a", "b"), order)
    sources = [_sorted_source(rng, key, s, rng.randrange(0, 300)) for s in range(12)]
    merged = list(merge_sorted([iter(_pieces(t, rng)) for t in sources], key, sources[0].schema))
    got = pa.concat_tables(merged)
    assert got.to_pylist() == _full_sort(sources, key).to_pylist()
    # Through the read-ahead thread too, and with one thread advancing the sources.
    again = read_ahead(
        merge_sorted(
            [iter(_pieces(t, random.Random(seed))) for t in sources],
            key,
            sources[0].schema,
            threads=1,
        )
    )
    assert pa.concat_tables(list(again)).to_pylist() == got.to_pylist()


def test_merge_without_key_columns_keeps_source_order() -> None:
    key = PoolKey(("missing",), "asc")
    sources = [pa.table({"v": list(range(i * 10, i * 10 + 10))}) for i in range(3)]
    merged = pa.concat_tables(
        list(merge_sorted([iter([t]) for t in sources], key, sources[0].schema))
    )
    assert merged["v"].to_pylist() == list(range(30))


def test_read_ahead_raises_the_producers_error() -> None:
    def items():  # type: ignore[no-untyped-def]
        yield 1
        raise ValueError("boom")

    it = read_ahead(items())
    assert next(it) == 1
    with pytest.raises(ValueError, match="boom"):
        next(it)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_compaction_of_many_overlapping_sources_is_a_full_sort(tmp_path: Path, order: str) -> None:
    rng = random.Random(7)
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("m", f"k:{order}", target_size=24_000, seek_stride=4096)
    for s in range(30):
        n = rng.randrange(500, 2500)  # beyond a merge batch (1024 rows): many merge steps
        k = [None if rng.random() < 0.1 else rng.randrange(40) for _ in range(n)]
        load(pool, [pa.table({"k": pa.array(k, pa.int64()), "src": [s] * n, "pos": range(n)})])
    before = pool.snapshot(pool.tip("main")).objects
    ordered = list(before.values())  # snapshot order: equal keys come out oldest first
    expected = _full_sort(
        [read_verified(pool.store, pool.id, o, pool.name) for o in ordered], pool.config.key
    )

    result = compact(pool, object_ids=[o.id for o in ordered])

    assert result.objects_in == 30 and result.objects_out > 2
    assert pool.read().to_pylist() == expected.select(["k", "src", "pos"]).to_pylist()
    after = pool.snapshot(pool.tip("main")).objects
    assert set(after) == {o.id for o in result.commit.adds()}  # type: ignore[union-attr]
    # Each object is a contiguous slice of the full sort, and no key is in two objects.
    where = {(r["src"], r["pos"]): i for i, r in enumerate(expected.to_pylist())}
    slices = []
    for o in after.values():
        rows = read_verified(pool.store, pool.id, o, pool.name).to_pylist()
        start = where[(rows[0]["src"], rows[0]["pos"])]
        assert [where[(r["src"], r["pos"])] for r in rows] == list(range(start, start + len(rows)))
        assert o.count == len(rows)
        slices.append((start, {r["k"] for r in rows}))
    slices.sort(key=lambda s: s[0])
    for (_, keys), (_, later) in zip(slices, slices[1:], strict=False):
        assert not keys & later
    assert fragmentation(pool).overlapping_objects == 0
    assert compact(pool).commit is None
