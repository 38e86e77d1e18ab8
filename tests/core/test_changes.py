"""Delete (objects and rows), revert and merge, on local disk and moto S3."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.changes import delete_objects, delete_where, merge, revert
from lake_core.errors import EmptyTransactionError, NotFoundError
from lake_core.loading import load
from tests.lakecheck import read_all


def _ts(pool, ref=None):  # type: ignore[no-untyped-def]
    return read_all(pool, ref)["ts"].to_pylist()


def test_delete_objects_and_time_travel(lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc")
    c1 = load(pool, [pa.table({"ts": [1, 2]})])
    load(pool, [pa.table({"ts": [3]})])
    d = delete_objects(pool, [c1.adds()[0].id])
    assert _ts(pool) == [3]
    assert _ts(pool, c1.id) == [1, 2]  # still reachable by time travel
    assert d.deletes() == [c1.adds()[0].id]
    with pytest.raises(NotFoundError, match="0ujtsYcgvSTl8PAuAdqWYSMnLOv"):
        delete_objects(pool, ["0ujtsYcgvSTl8PAuAdqWYSMnLOv"])


def test_delete_where_rewrites_only_matching_objects(lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc")
    a = load(pool, [pa.table({"ts": [1, 2, 3], "s": ["x", "y", None]})]).adds()[0]
    b = load(pool, [pa.table({"ts": [10, 11], "s": ["x", "z"]})]).adds()[0]
    c = load(pool, [pa.table({"ts": [20], "s": ["q"]})]).adds()[0]
    commit = delete_where(pool, "s = 'x' AND ts < 5")
    assert commit.deletes() == [a.id]  # b and c untouched: pruned or no match
    live = pool.snapshot(pool.tip()).objects
    assert b.id in live and c.id in live and a.id not in live
    rows = read_all(pool).to_pylist()
    assert rows == [
        {"ts": 2, "s": "y"},
        {"ts": 3, "s": None},
        {"ts": 10, "s": "x"},
        {"ts": 11, "s": "z"},
        {"ts": 20, "s": "q"},
    ]
    tip = pool.tip()
    with pytest.raises(EmptyTransactionError):
        delete_where(pool, "s = 'nothing'")
    assert pool.tip() == tip


def test_revert_and_revert_of_revert(lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc")
    load(pool, [pa.table({"ts": [1]})])
    c2 = load(pool, [pa.table({"ts": [2]})])
    r = revert(pool, c2.id)
    assert _ts(pool) == [1]
    rr = revert(pool, r.id)
    assert _ts(pool) == [1, 2]
    assert rr.adds()[0].id == c2.adds()[0].id
    tip = pool.tip()
    with pytest.raises(EmptyTransactionError):
        revert(pool, r.id)  # what r deleted is live again: nothing to undo
    assert pool.tip() == tip


def test_merge_branches(lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc")
    c1 = load(pool, [pa.table({"ts": [1]})])
    pool.create_branch("dev")
    load(pool, [pa.table({"ts": [5]})], "dev")
    delete_objects(pool, [c1.adds()[0].id], "dev")
    load(pool, [pa.table({"ts": [7]})], "main")
    m = merge(pool, "dev", "main")
    assert _ts(pool) == [5, 7]
    assert _ts(pool, "dev") == [5]
    assert m.message == "merged dev into main"
    with pytest.raises(EmptyTransactionError):
        merge(pool, "dev", "main")


def test_merge_of_the_same_delete_on_both_sides_is_not_a_conflict(lake: Lake) -> None:
    """Both branches deleted the same rows: the same change, kept once (git's rule)."""
    pool = lake.create_pool("p", "ts:asc")
    obj = load(pool, [pa.table({"ts": [1]})]).adds()[0].id
    load(pool, [pa.table({"ts": [2]})])
    pool.create_branch("dev")
    delete_objects(pool, [obj], "dev")
    delete_objects(pool, [obj], "main")
    tip = pool.tip()
    with pytest.raises(EmptyTransactionError):
        merge(pool, "dev", "main")
    assert pool.tip() == tip
    assert pool.read().column("ts").to_pylist() == [2]


def test_delete_where_plans_again_when_a_compaction_lands_first(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction that commits between the delete's plan and its commit removes the
    objects the delete rewrites: the delete removes what it wrote, plans again from the new
    tip and commits, deleting exactly the matching rows; nothing it wrote first is left."""
    import lake_core.changes as changes
    from lake_core.maintenance import compact

    pool = lake.create_pool("p", "id:asc")
    for w in range(4):
        load(pool, [pa.table({"id": list(range(w, 40, 4)), "w": [w] * 10})])
    plans = []
    real = changes._plan_delete

    def plan_then_compact(*args, **kwargs):  # type: ignore[no-untyped-def]
        planned = real(*args, **kwargs)
        plans.append(planned[0])
        if len(plans) == 1:  # another process's compaction lands before the delete commits
            assert compact(lake.pool("p")) is not None
        return planned

    monkeypatch.setattr(changes, "_plan_delete", plan_then_compact)
    before = {o.key for o in pool.store.list(f"pools/{pool.id}/data/")}
    c = delete_where(pool, "w = 2")
    assert len(plans) == 2 and set(plans[0]).isdisjoint(plans[1])
    rows = sorted(pool.read().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": i, "w": i % 4} for i in range(40) if i % 4 != 2]
    assert c.deletes() == plans[1]
    # What the first attempt wrote was removed; what is stored is the compaction's output,
    # what the delete wrote, and the objects of history.
    after = {o.key for o in pool.store.list(f"pools/{pool.id}/data/")}
    live = {pool.layout.data(o) for o in pool.snapshot(pool.tip()).objects}
    compacted = {pool.layout.data(o.id) for o in pool.snapshot(c.parent).objects.values()}
    assert after == before | live | compacted
