"""Dedupe's recency from history: a rewrite that carried an old row after newer objects does
not make that row win; identical duplicates need no walk; vacated history falls back to
snapshot order (lake_core/recency.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa

from lake_core import Lake
from lake_core.dedupe import plan_dedupe
from lake_core.pool import Pool


def _rows(pool: Pool) -> list[tuple[Any, ...]]:
    t = pool.read()
    return sorted(zip(t["id"].to_pylist(), t["v"].to_pylist(), strict=True))


def _load(pool: Pool, ids: list[int], vs: list[str], **extra: Any) -> str:
    (obj,) = pool.load(pa.table({"id": pa.array(ids, pa.int64()), "v": vs, **extra})).adds()
    return str(obj.id)


def _order(pool: Pool) -> list[str]:
    return list(pool.snapshot(pool.tip()).objects)


def test_partition_compaction_keeps_the_newest_row(lake_uri: str) -> None:
    pool = Lake.init(lake_uri).create_pool("p", "id:asc", partition_by="g")
    pool.load(pa.table({"id": [1, 2], "g": ["x", "x"], "v": ["old", "a"]}))
    pool.load(pa.table({"id": [1], "g": ["y"], "v": ["new"]}))
    pool.load(pa.table({"id": [5], "g": ["x"], "v": ["other"]}))
    assert pool.compact().commit is not None  # partition x merged, appended after y's object
    result = pool.dedupe()
    assert result.rows_removed == 1
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (1, 0)
    assert _rows(pool) == [(1, "new"), (2, "a"), (5, "other")]
    # Walked: the compaction (nets nothing), the load of 5 (does not meet key 1: not read),
    # the load of "new" (decides). Read: the group's 2 live objects, the compaction's output
    # and the removed object holding key 1, and the load of "new".
    assert result.recency_commits_read == 3
    assert result.recency_objects_read == 2 + 2 + 1
    assert result.to_json()["resolved_from_history"] == 1


def test_compacting_named_objects_keeps_the_newest_row(lake_uri: str) -> None:
    pool = Lake.init(lake_uri).create_pool("p", "id:asc")
    a = _load(pool, [1, 3], ["old", "a"])
    _load(pool, [1], ["new"])
    c = _load(pool, [2], ["c"])
    for i in range(3):  # newer commits elsewhere in the key space: walked, never read
        _load(pool, [1000 + i], ["far"])
    assert pool.compact(object_ids=[a, c]).commit is not None
    assert _order(pool)[-1] not in (a, c)  # the merged object is the newest in the snapshot
    result = pool.dedupe()
    assert _rows(pool) == [(1, "new"), (2, "c"), (3, "a"), *[(1000 + i, "far") for i in range(3)]]
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (1, 0)
    # Walked: compaction, 3 far loads, the load of c, then the load of "new" decides. Read:
    # the 2 live objects of the group, the compaction's added and removed objects meeting
    # key 1 (its output, a) and the load of "new" — none of the far loads' objects, nor c.
    assert result.recency_commits_read == 6
    assert result.recency_objects_read == 2 + 2 + 1


def test_an_upsert_rewrite_carrying_an_old_duplicate_does_not_win(lake_uri: str) -> None:
    pool = Lake.init(lake_uri).create_pool("p", "id:asc")
    _load(pool, [1, 2], ["old", "x"])
    _load(pool, [1], ["new"])
    pool.upsert(pa.table({"id": pa.array([2], pa.int64()), "v": ["y"]}))  # rewrites 1..2
    assert pool.read().num_rows == 3
    result = pool.dedupe()
    assert _rows(pool) == [(1, "new"), (2, "y")]
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (1, 0)


def test_a_delete_where_rewrite_carrying_an_old_duplicate_does_not_win(lake_uri: str) -> None:
    pool = Lake.init(lake_uri).create_pool("p", "id:asc")
    _load(pool, [1, 2, 3], ["old", "x", "z"])
    _load(pool, [1], ["new"])
    pool.delete("id = 2")  # rewrites the first object, carrying (1, old) after (1, new)
    result = pool.dedupe()
    assert _rows(pool) == [(1, "new"), (3, "z")]
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (1, 0)


def test_copies_of_the_newest_row_leave_one(lake_uri: str) -> None:
    # Key 1 has "old" and "new" (compacted together) and two copies of "newest", loaded
    # last: the newest commit decides, and one copy of its row stays.
    pool = Lake.init(lake_uri).create_pool("p", "id:asc")
    _load(pool, [1, 2], ["old", "x"])
    _load(pool, [1, 9], ["new", "n"])
    pool.compact()
    pool.load(pa.table({"id": pa.array([1], pa.int64()), "v": ["newest"]}))
    pool.load(pa.table({"id": pa.array([1], pa.int64()), "v": ["newest"]}))
    result = pool.dedupe()
    assert _rows(pool) == [(1, "newest"), (2, "x"), (9, "n")]
    assert result.rows_removed == 3


def test_identical_duplicates_need_no_walk(lake_uri: str) -> None:
    pool = Lake.init(lake_uri).create_pool("p", "id:asc", partition_by="g")
    table = pa.table({"id": [1, 2, 3], "g": ["x", "y", "x"], "v": ["a", "b", "c"]})
    pool.load(table)
    pool.load(table)
    pool.compact()
    result = pool.dedupe()
    assert result.rows_removed == 3
    assert _rows(pool) == [(1, "a"), (2, "b"), (3, "c")]
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (0, 0)
    assert result.recency_commits_read == 0


def test_vacated_history_falls_back_to_snapshot_order(lake_uri: str) -> None:
    pool = Lake.init(lake_uri).create_pool("p", "id:asc", partition_by="g")
    pool.load(pa.table({"id": [1], "g": ["x"], "v": ["old"]}))
    pool.load(pa.table({"id": [1], "g": ["y"], "v": ["new"]}))
    pool.load(pa.table({"id": [5], "g": ["x"], "v": ["other"]}))
    assert pool.compact().commit is not None
    now = pool.clock.now()
    pool.vacate(now)  # only the compaction (the tip) stays: it nets nothing
    pool.cleanup(timedelta(0), now=now + timedelta(days=3))
    result = pool.dedupe()
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (0, 1)
    assert result.to_json()["resolved_from_snapshot_order"] == 1
    assert result.commit is not None
    assert result.commit.meta["dedupe"]["resolved_from_snapshot_order"] == 1
    # Today's rule: the last row in snapshot order (the compaction's output, holding "old").
    assert _rows(pool) == [(1, "old"), (5, "other")]


def test_a_two_field_key_in_two_groups(lake_uri: str) -> None:
    # Two disjoint key ranges, each with a compaction of named objects that carried the old
    # row after the newer one: keys of two fields (rows matched by a join on both), and each
    # group's rewrite removes only its own losers.
    pool = Lake.init(lake_uri).create_pool("p", "k,s:desc")

    def load(rows: list[tuple[int, str, str]]) -> str:
        ks, ss, vs = zip(*rows, strict=True)
        table = pa.table({"k": pa.array(ks, pa.int64()), "s": list(ss), "v": list(vs)})
        (obj,) = pool.load(table).adds()
        return str(obj.id)

    for base in (0, 100):
        a = load([(base + 1, "a", "old"), (base + 1, "b", "keep"), (base + 3, "c", "c")])
        load([(base + 1, "a", "new")])
        c = load([(base + 2, "b", "b")])
        assert pool.compact(object_ids=[a, c]).commit is not None
    assert len(plan_dedupe(pool.snapshot(pool.tip()), pool.config.key).groups) == 2
    result = pool.dedupe()
    assert result.objects_rewritten == 4 and result.rows_removed == 2
    assert (result.resolved_from_history, result.resolved_from_snapshot_order) == (2, 0)
    t = pool.read()
    got = sorted(zip(t["k"].to_pylist(), t["s"].to_pylist(), t["v"].to_pylist(), strict=True))
    assert got == sorted(
        row
        for base in (0, 100)
        for row in [
            (base + 1, "a", "new"),
            (base + 1, "b", "keep"),
            (base + 2, "b", "b"),
            (base + 3, "c", "c"),
        ]
    )
