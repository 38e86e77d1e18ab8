"""``Pool`` is the one handle: every write, maintenance and inspection method, on local disk and
on moto S3, with the exact rows afterwards; bad calls change nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.errors import (
    CorruptDataObjectError,
    LockTimeoutError,
    NoRowsMatchedError,
    NotFoundError,
    UsageError,
)
from lake_core.pool import Pool

D = timedelta(days=1)


def rows(pool: Pool, ref: str | None = None) -> list[tuple[int, str]]:
    t = pool.read(ref)
    return list(zip(t["k"].to_pylist(), t["v"].to_pylist(), strict=True))


def heads(pool: Pool) -> dict[str, str | None]:
    return pool.branches()


def test_load_tables_files_and_inspect(lake: Lake, tmp_path: Path) -> None:
    pool = lake.create_pool("p", "k:asc")
    assert pool.schema() is None
    first = pool.load(pa.table({"k": [3, 1], "v": ["c", "a"]}), message="one table")
    assert first.message == "one table" and first.author == "tester"
    f = tmp_path / "in.ndjson"
    f.write_text('{"k": 2, "v": "b"}\n{"k": 5, "v": "e", "n": 1.5}\n')
    second = pool.load(f)  # a path is one source, not a sequence of characters
    third = pool.load([pa.table({"k": [4], "v": ["d"]}), pa.table({"k": [0], "v": ["z"]})])
    assert rows(pool) == [(0, "z"), (1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]
    schema = pool.schema()
    assert schema is not None and schema.names == ["k", "v", "n"]
    assert pool.schema(first.id) == pa.schema([("k", pa.int64()), ("v", pa.string())])
    assert pool.count().rows == 6
    assert pool.count("k >= 3").rows == 3
    assert pool.count("n > 1", ref=second.id).rows == 1
    d = pool.diff(first.id, third.id)
    assert (d.rows_added, d.rows_removed) == (4, 0)
    assert {o.id for o in d.added} == {o.id for c in (second, third) for o in c.adds()}
    verdicts = pool.verify()
    assert len(verdicts) == 3 and all(v.problem is None for v in verdicts)


def test_add_then_commit_staged(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    a = pool.add(pa.table({"k": [2], "v": ["b"]}))
    b = pool.add([pa.table({"k": [1], "v": ["a"]})])
    assert sorted(s.id for s in pool.staged()) == sorted([a.id, b.id])
    assert pool.read().num_rows == 0 and pool.tip() is None  # staged work is invisible
    commit = pool.commit_staged([a.id, b.id], message="both")
    assert commit.message == "both" and len(commit.adds()) == 2
    assert rows(pool) == [(1, "a"), (2, "b")]
    assert pool.staged() == []


def test_delete_by_rows_and_by_objects(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    a = pool.load(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}))
    b = pool.load(pa.table({"k": [4, 5], "v": ["d", "e"]}))
    c = pool.delete("k = 2 OR k = 5", message="two rows")
    assert c.message == "two rows" and (c.rows_added, c.rows_removed) == (3, 5)
    assert rows(pool) == [(1, "a"), (3, "c"), (4, "d")]
    before = heads(pool)
    with pytest.raises(NoRowsMatchedError):
        pool.delete("k = 99")
    with pytest.raises(UsageError):
        pool.delete()
    with pytest.raises(UsageError):
        pool.delete("k = 1", ids=[a.adds()[0].id])
    assert heads(pool) == before
    live = sorted(pool.snapshot(pool.tip()).objects)
    survivor = next(i for i in live if pool.snapshot(pool.tip()).objects[i].count == 1)
    pool.delete(ids=[survivor])
    assert rows(pool) == [(1, "a"), (3, "c")]
    assert b.adds()[0].id not in pool.snapshot(pool.tip()).objects


def test_merge_and_revert(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    pool.load(pa.table({"k": [1], "v": ["a"]}))
    pool.create_branch("dev")
    pool.load(pa.table({"k": [2], "v": ["b"]}), "dev")
    pool.delete("k = 1", "dev")
    merged = pool.merge("dev", message="take dev")
    assert merged.message == "take dev" and merged.extra["merge_source"] == pool.tip("dev")
    assert rows(pool) == [(2, "b")]
    reverted = pool.revert(merged.id)
    assert reverted.extra["reverts"] == merged.id
    assert rows(pool) == [(1, "a")]
    assert rows(pool, "dev") == [(2, "b")]
    with pytest.raises(UsageError):
        pool.merge("main", into="main")


def test_compact_under_the_maintenance_lock(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    for i in range(4):
        pool.load(pa.table({"k": [i, i + 10], "v": [f"x{i}", f"y{i}"]}))
    expected = rows(pool)
    assert pool.fragmentation().overlapping_objects == 4
    # Someone else holds the lock: the handle waits, then fails, and commits nothing.
    tip = pool.tip()
    with (
        lake.locks() as locks,
        locks.maintenance_lock(pool.id, timeout=0),
        pytest.raises(LockTimeoutError),
    ):
        pool.compact(lock_timeout=0)
    assert pool.tip() == tip
    result = pool.compact()
    assert result.commit is not None and (result.objects_in, result.objects_out) == (4, 1)
    assert rows(pool) == expected and len(pool.snapshot(pool.tip()).objects) == 1
    assert pool.compact().commit is None
    # A caller that holds the lock passes its check as the guard.
    pool.load(pa.table({"k": [5], "v": ["z"]}))
    with pool.maintenance_lock(timeout=0) as held:
        again = pool.compact(guard=held.check)
    assert again.commit is not None and rows(pool) == sorted([*expected, (5, "z")])


def test_compact_explicit_ids_conflict_with_a_delete(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    a = pool.load(pa.table({"k": [1], "v": ["a"]}))
    pool.load(pa.table({"k": [2], "v": ["b"]}))
    ids = sorted(pool.snapshot(pool.tip()).objects)
    pool.delete(ids=[a.adds()[0].id])
    with pytest.raises(NotFoundError, match="not live"):
        pool.compact(object_ids=ids)
    assert rows(pool) == [(2, "b")]


def test_retain_vacate_cleanup_purge(lake: Lake) -> None:
    pool = lake.create_pool("t", "ts:asc")
    now = datetime.now(UTC)
    old = pool.load(pa.table({"ts": pa.array([now - 100 * D], pa.timestamp("us", "UTC")),
                              "v": ["old"]}))
    pool.load(pa.table({"ts": pa.array([now - D], pa.timestamp("us", "UTC")), "v": ["new"]}))
    r = pool.retain(90 * D, now=now)
    assert r.commit is not None and (r.dropped, r.rows_removed) == (1, 1)
    assert pool.read()["v"].to_pylist() == ["new"]
    gone = pool.layout.data(old.adds()[0].id)
    v = pool.vacate(pool.clock.now())
    assert v.tails["main"] == pool.tip()
    dry = pool.cleanup(timedelta(0), dry_run=True, now=now + 3 * D)
    assert dry.tombstoned == 1 and pool.store.exists(gone)
    done = pool.cleanup(timedelta(0), now=now + 3 * D)
    assert done.tombstoned == 1 and done.objects == (old.adds()[0].id,)
    assert not pool.store.exists(gone)
    assert pool.read()["v"].to_pylist() == ["new"]
    extra = pool.load(pa.table({"ts": pa.array([now], pa.timestamp("us", "UTC")), "v": ["x"]}))
    p = pool.purge(extra.id)
    assert p.objects == tuple(o.id for o in extra.adds())
    assert not pool.store.exists(pool.layout.data(extra.adds()[0].id))


def test_partitions_drop_and_rewrite(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc", partition_by="g")
    pool.load(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"], "g": ["x", "y", "x"]}))
    assert [(i.value, i.rows) for i in pool.partitions()] == [("x", 2), ("y", 1)]
    c = pool.drop_partition("y")
    assert c.extra["kind"] == "partition-drop"
    assert rows(pool) == [(1, "a"), (3, "c")]
    pool.rewrite_partition("x", pa.table({"k": [9], "v": ["n"], "g": ["x"]}))
    assert rows(pool) == [(9, "n")]
    before = heads(pool)
    with pytest.raises(UsageError):
        pool.rewrite_partition("x", pa.table({"k": [8], "v": ["m"], "g": ["z"]}))
    assert heads(pool) == before and rows(pool) == [(9, "n")]


def test_verify_reports_a_corrupt_object(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    a = pool.load(pa.table({"k": [1], "v": ["a"]}))
    pool.load(pa.table({"k": [2], "v": ["b"]}))
    bad = a.adds()[0].id
    pool.store.delete(pool.layout.data(bad))
    with pytest.raises(CorruptDataObjectError) as e:
        pool.verify()
    assert bad in str(e.value)
    verdicts = {v.object_id: v.problem for v in pool.verify(check=False)}
    assert verdicts[bad] == "missing from the store" and len(verdicts) == 2


def test_a_pool_without_its_lake_locks_refuses_unguarded_maintenance(lake: Lake) -> None:
    opened = lake.create_pool("p", "k:asc")
    opened.load(pa.table({"k": [1], "v": ["a"]}))
    bare = Pool(opened.store, opened.config, opened.lake_config)
    with pytest.raises(UsageError):
        bare.compact()
    assert rows(bare) == [(1, "a")]
