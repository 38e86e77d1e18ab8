"""LSM compaction: the policy (pure), the executor on both stores, and its races."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitConflictError, NotFoundError
from lake_core.loading import load
from lake_core.maintenance import compact, fragmentation, plan_compaction
from lake_core.objects import ObjectMeta
from lake_core.stats import ColumnMeta
from tests import processes
from tests.lakecheck import assert_objects_intact
from tests.workers import rows_for


def _o(i: str, lo: int, hi: int, size: int, part: str | None = None, nulls: int = 0) -> ObjectMeta:
    return ObjectMeta(i, [lo], [hi], 10, size, {"ts": ColumnMeta("int64", lo, hi, nulls)}, part)


def _ids(runs):  # type: ignore[no-untyped-def]
    return [sorted(o.id for o in r.objects) for r in runs]


def test_policy_overlaps_small_neighbours_partitions_and_nulls() -> None:
    objs = [
        _o("a", 0, 10, 50),
        _o("b", 5, 20, 50),  # overlap → one unit
        _o("c", 30, 40, 990),  # big, alone
        _o("d", 50, 60, 10),
        _o("e", 61, 70, 10),  # small neighbours → merged
        _o("f", 80, 90, 990),
        _o("g", 91, 95, 600),  # neighbours too big together
    ]
    assert _ids(plan_compaction(objs, ("ts",), 1000)) == [["a", "b"], ["d", "e"]]
    parted = [_o("a", 0, 10, 5, "p1"), _o("b", 5, 20, 5, "p2")]
    assert plan_compaction(parted, ("ts",), 1000) == []  # never across partitions
    nulls = [_o("a", 0, 10, 900, nulls=1), _o("b", 500, 600, 900, nulls=1)]
    assert _ids(plan_compaction(nulls, ("ts",), 1000)) == [["a", "b"]]  # null tails overlap


def _rows(pool):  # type: ignore[no-untyped-def]
    t = pool.read()
    return list(
        zip(
            t["ts"].to_pylist(),
            t["w"].to_pylist(),
            t["i"].to_pylist(),
            t["j"].to_pylist(),
            strict=True,
        )
    )


def test_compaction_keeps_rows_and_order_and_reaches_fixpoint(lake: Lake) -> None:
    pool = lake.create_pool("c", "ts:asc", target_size=40_000, seek_stride=4096)
    for i in range(12):  # overlapping loads: every load spans the whole key range
        load(
            pool,
            [
                pa.table(
                    {
                        "ts": [j * 12 + i for j in range(500)],
                        "w": [i] * 500,
                        "i": [0] * 500,
                        "j": list(range(500)),
                    }
                )
            ],
        )
    load(
        pool,
        [
            pa.table(
                {"ts": [None, None], "w": [99, 99], "i": [0, 0], "j": [0, 1]},
                schema=pa.schema(
                    [("ts", pa.int64()), ("w", pa.int64()), ("i", pa.int64()), ("j", pa.int64())]
                ),
            )
        ],
    )
    before = _rows(pool)
    frag = fragmentation(pool)
    assert frag.overlapping_objects == 12 and frag.pending_runs >= 1  # null-key object: no overlap
    result = compact(pool)
    assert result.commit is not None and result.objects_in == 12
    after = _rows(pool)
    assert after == before  # same rows, same order (null keys last)
    objs = sorted(pool.snapshot(pool.tip()).objects.values(), key=lambda o: o.min or [1 << 62])
    for a, b in zip(objs, objs[1:], strict=False):
        if a.min is not None and b.min is not None and a.columns["ts"].nulls == 0:
            assert a.max < b.min  # non-overlapping
    assert compact(pool).commit is None  # fixpoint
    frag = fragmentation(pool)
    assert frag.overlapping_objects == 0 and frag.pending_runs == 0
    assert frag.write_amplification > 1.0
    assert_objects_intact(pool)


def test_equal_keys_are_never_split(lake: Lake) -> None:
    pool = lake.create_pool("eq", "ts:asc", target_size=2_000, seek_stride=1024)
    for _ in range(3):
        load(pool, [pa.table({"ts": [7] * 3000 + [8] * 10, "v": list(range(3010))})])
    compact(pool)
    objs = list(pool.snapshot(pool.tip()).objects.values())
    holding_7 = [o for o in objs if o.min == [7] or o.max == [7]]
    assert len(holding_7) == 1 and holding_7[0].count >= 9000  # past the target, kept whole
    assert Counter(pool.read()["ts"].to_pylist()) == {7: 9000, 8: 30}


def test_explicit_ids_and_unknown_id(lake: Lake) -> None:
    pool = lake.create_pool("x", "ts:asc")
    a = load(pool, [pa.table({"ts": [1, 5]})]).adds()[0].id
    b = load(pool, [pa.table({"ts": [2, 6]})]).adds()[0].id
    load(pool, [pa.table({"ts": [3]})])
    r = compact(pool, object_ids=[a, b])
    assert r.objects_in == 2 and r.objects_out == 1
    assert pool.read()["ts"].to_pylist() == [1, 2, 3, 5, 6]
    with pytest.raises(NotFoundError, match=a):
        compact(pool, object_ids=[a, b])


def test_compaction_racing_a_delete_aborts_and_removes_its_objects(lake: Lake) -> None:
    """A delete of a source lands between compaction's writes and its commit (deterministic:
    it runs in the commit guard, the last step before the append). The compaction must fail,
    remove what it wrote, and leave exactly the rows the delete left."""
    pool = lake.create_pool("r", "ts:asc")
    victim = load(pool, [pa.table({"ts": [1, 3]})]).adds()[0].id
    load(pool, [pa.table({"ts": [2, 4]})])
    other = Lake.open(lake.config).pool("r")

    def delete_meanwhile() -> None:
        other.commit("main", [], [victim], message="concurrent delete")

    data_before = {i.key for i in lake.store.list(f"pools/{pool.id}/data/")}
    with pytest.raises(CommitConflictError, match=victim):
        compact(pool, guard=delete_meanwhile)
    assert pool.read()["ts"].to_pylist() == [2, 4]
    assert {i.key for i in lake.store.list(f"pools/{pool.id}/data/")} == data_before
    assert not lake.store.exists(pool.layout.data("x"))


@pytest.mark.slow
def test_loads_racing_compaction_keep_every_row_once(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("lr", "ts:asc", target_size=200_000)
    ctx = processes.context()
    out, stop = ctx.Queue(), ctx.Event()
    compactor = ctx.Process(target=_compact_loop, args=(lake_uri, None, "lr", stop, out))
    loaders = [ctx.Process(target=_load_n, args=(lake_uri, "lr", w, 15, out)) for w in range(3)]
    compactor.start()
    for p in loaders:
        p.start()
    for p in loaders:
        p.join(300)
        assert p.exitcode == 0
    stop.set()
    compactor.join(120)
    reports = [out.get(timeout=10) for _ in range(4)]
    made = next(r[1] for r in reports if r[0] == "compactor")
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("lr")
    compact(pool)  # one more, to be sure at least one compaction landed after the loads
    t = pool.read()
    got = Counter(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))
    want = Counter((w, i, j) for w in range(3) for i in range(15) for j in range(3))
    assert got == want
    assert len(made) + 1 >= 1
    assert_objects_intact(pool)


def _compact_loop(*args):  # type: ignore[no-untyped-def]
    from tests.workers_maintenance import compact_loop

    compact_loop(*args)


def _load_n(*args):  # type: ignore[no-untyped-def]
    from tests.workers_maintenance import load_n

    load_n(*args)


@pytest.mark.slow
def test_two_compactions_under_zookeeper_never_both_commit(
    lake: Lake, lake_uri: str, zookeeper: object
) -> None:
    pool = lake.create_pool("zk", "ts:asc")
    for i in range(6):
        load(pool, [rows_for(0, i)])
        load(pool, [rows_for(1, i)])
    before = Counter(
        map(tuple, pool.read().to_pylist() and [tuple(r.values()) for r in pool.read().to_pylist()])
    )
    ctx = processes.context()
    start, out = ctx.Barrier(2), ctx.Queue()
    from tests.workers_maintenance import compact_once_at_barrier

    hosts = zookeeper.hosts  # type: ignore[attr-defined]
    procs = [
        ctx.Process(target=compact_once_at_barrier, args=(lake_uri, hosts, "zk", start, out))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    results = [out.get(timeout=10) for _ in procs]
    # The second holder planned afresh after the first committed: nothing left to compact.
    assert sorted(r is None for r in results) == [False, True]
    fresh = Lake.open(LakeConfig(uri=lake_uri)).pool("zk")
    assert Counter(tuple(r.values()) for r in fresh.read().to_pylist()) == before
    assert len(fresh.snapshot(fresh.tip()).objects) == 1
