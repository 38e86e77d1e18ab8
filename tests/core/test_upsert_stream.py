"""Upserts rewriting partitions as a stream (lake_core/upsert_stream.py): many row groups,
several objects, overlapping objects, keys before, between and after the targets — the pool
must equal a row model afterwards, with every object sorted and its metadata exact."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_core import Lake
from lake_core.pool import Pool
from lake_core.upsert import plan_upsert, prepare


def _rows(n: int, rng: random.Random, tag: str, span: int) -> list[dict[str, Any]]:
    keys = rng.sample(range(span), n)
    return [{"a": k // 4, "b": k % 4, "v": f"{tag}{k}", "x": rng.random()} for k in keys]


def _check_objects(pool: Pool, desc: bool) -> None:
    """Every live object sorted by (a, b), its count and key bounds as recorded."""
    for obj in pool.snapshot(pool.tip()).objects.values():
        data = pool.store.get(pool.layout.data(obj.id))
        t = pq.read_table(pa.BufferReader(data))
        assert t.num_rows == obj.count
        keys = list(zip(t.column("a").to_pylist(), t.column("b").to_pylist(), strict=True))
        assert keys == sorted(keys, reverse=desc), obj.id
        assert obj.min is not None and obj.max is not None
        lo, hi = (keys[-1], keys[0]) if desc else (keys[0], keys[-1])
        assert (tuple(obj.min), tuple(obj.max)) == (lo, hi)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_streamed_upserts_equal_the_row_model(lake: Lake, order: str) -> None:
    rng = random.Random(7 if order == "asc" else 8)
    desc = order == "desc"
    # Small groups and objects: each upsert touches many groups of several objects.
    pool = lake.create_pool("p", f"a,b:{order}", seek_stride=2000, target_size=20_000)
    model: dict[tuple[int, int], list[dict[str, Any]]] = {}
    # Two loads over the same key space: overlapping objects (a non-unique pool keeps both).
    for tag in ("l1", "l2"):
        rows = _rows(1500, rng, tag, 4000)
        pool.load(pa.Table.from_pylist(rows))
        for r in rows:
            model.setdefault((r["a"], r["b"]), []).append(r)
    for step in range(4):
        # Updates of live keys and new keys before, inside and after the stored range.
        live = rng.sample(sorted(model), 150)
        batch = [{"a": a, "b": b, "v": f"u{step}", "x": 0.5} for a, b in live]
        batch += _rows(150, rng, f"n{step}", 6000)
        batch += [{"a": -1 - step, "b": 0, "v": "low", "x": 1.0}]
        rng.shuffle(batch)
        table = pa.Table.from_pylist(batch)
        if step == 0:
            snapshot = pool.snapshot(pool.tip())
            plan = plan_upsert(pool, snapshot, prepare(pool, [table], snapshot.schema))
            assert plan.merges and not plan.tables  # the streamed path is the one tested
        result = pool.upsert([table])
        keys = {(r["a"], r["b"]) for r in batch}
        fresh = keys - set(model)
        replaced = sum(len(model[k]) for k in keys & set(model))
        for r in batch:
            model[(r["a"], r["b"])] = [r]
        assert (result.inserted, result.updated) == (len(fresh), replaced)
        got = pool.read().to_pylist()
        expect = [r for rs in model.values() for r in rs]
        assert sorted(got, key=lambda r: (r["a"], r["b"], r["v"])) == sorted(
            expect, key=lambda r: (r["a"], r["b"], r["v"])
        )
        _check_objects(pool, desc)


@pytest.mark.parametrize("shape", ["many-objects", "partitioned-with-copies"])
def test_the_plan_is_the_same_whatever_threads_plan_the_targets(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """Targets are opened, joined and planned on several threads at once, and folded in
    target order: one thread or eight, the plan is the same (and so are the objects written).
    ``partitioned-with-copies``: objects of many row groups in three partitions, and few
    incoming keys, so most groups are copied as they are (``Copy``) and a few rewritten."""
    import lake_core.upsert as upsert

    rng = random.Random(11)
    if shape == "many-objects":
        pool = lake.create_pool("p", "a,b:asc", seek_stride=2000, target_size=20_000)
        for tag in ("l1", "l2", "l3"):
            pool.load(pa.Table.from_pylist(_rows(1500, rng, tag, 4000)))
        batch = pa.Table.from_pylist(_rows(400, rng, "u", 5000))
    else:
        pool = lake.create_pool(
            "q", "a,b:asc", seek_stride=2000, target_size=400_000, partition_by="d"
        )
        stored = []
        for tag in ("l1", "l2"):
            rows = [{**r, "d": f"d{r['a'] % 3}"} for r in _rows(30_000, rng, tag, 200_000)]
            pool.load(pa.Table.from_pylist(rows))
            stored += rows
        # Updates of a few stored keys (their objects are rewritten, most of their groups
        # copied) and a few new keys.
        updates = [{**r, "v": "updated"} for r in rng.sample(stored, 12)]
        fresh = [{**r, "d": f"d{r['a'] % 3}"} for r in _rows(6, rng, "n", 200_000)]
        batch = pa.Table.from_pylist(updates + fresh)
    snapshot = pool.snapshot(pool.tip())
    assert len(snapshot.objects) > 4
    incoming = prepare(pool, [batch], snapshot.schema)

    def planned(threads: int) -> Any:
        monkeypatch.setattr(upsert, "_plan_threads", lambda pool, objects: threads)
        plan = plan_upsert(pool, snapshot, incoming)
        return (
            [o.id for o in plan.deletes],
            (plan.inserted, plan.updated, plan.deleted),
            [
                (c.source.id, c.first, c.stop, c.count, c.min, c.max, sorted(c.columns.items()))
                for c in plan.copies
            ],
            [
                (
                    m.partition,
                    [(r.groups, r.keep.tolist(), r.keys.to_pylist()) for r in m.rewrites],
                    m.incoming.num_rows,
                )
                for m in plan.merges
            ],
        )

    one = planned(1)
    assert one[0] and one[3]  # several targets, rewritten groups: the case that matters
    if shape == "partitioned-with-copies":
        assert len(one[2]) > 3 and len({m[0] for m in one[3]}) > 1  # copies, partitions
    for _ in range(3):
        assert planned(8) == one
