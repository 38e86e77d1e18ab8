"""Partitions (create, list, drop, rewrite, never straddled) and vacate, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.errors import HistoryVacatedError, NotFoundError, UsageError
from lake_core.loading import load
from lake_core.maintenance import (
    compact,
    drop_partition,
    list_partitions,
    rewrite_partition,
    vacate,
)
from lake_core.partitions import PartitionSpec


def ts(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 1, day, hour, tzinfo=UTC)


def _table(days_hours: list[tuple[int, int]], tag: str) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array([ts(d, h) for d, h in days_hours], pa.timestamp("us", tz="UTC")),
            "tag": [tag] * len(days_hours),
        }
    )


def test_partition_specs() -> None:
    assert str(PartitionSpec.parse("day(ts)")) == "day(ts)"
    assert PartitionSpec.parse("MONTH( ts )").transform == "month"
    assert PartitionSpec.parse("region").transform == "identity"
    for bad in ["week(ts)", "day(ts", "a b", ""]:
        with pytest.raises(UsageError):
            PartitionSpec.parse(bad)


def test_objects_never_straddle_partitions_and_drop_is_metadata_only(lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc", partition_by="day(ts)")
    load(pool, [_table([(5, 1), (5, 23), (6, 0), (7, 12)], "a")])
    load(pool, [_table([(5, 2), (6, 5)], "b")])
    snap = pool.snapshot(pool.tip())
    for o in snap.objects.values():
        lo, hi = o.decoded_bound(("ts",), "min"), o.decoded_bound(("ts",), "max")
        assert lo and hi and lo[0].strftime("%Y-%m-%d") == hi[0].strftime("%Y-%m-%d") == o.partition
    parts = {p.value: (p.objects, p.rows) for p in list_partitions(pool)}
    assert parts == {"2026-01-05": (2, 3), "2026-01-06": (2, 2), "2026-01-07": (1, 1)}
    # Compaction merges within a partition only.
    compact(pool)
    parts = {p.value: (p.objects, p.rows) for p in list_partitions(pool)}
    assert parts == {"2026-01-05": (1, 3), "2026-01-06": (1, 2), "2026-01-07": (1, 1)}
    data_before = {i.key for i in lake.store.list(f"pools/{pool.id}/data/")}
    drop_partition(pool, "2026-01-06")
    assert {i.key for i in lake.store.list(f"pools/{pool.id}/data/")} == data_before  # no I/O
    got = pool.read()
    assert [t.day for t in got["ts"].to_pylist()] == [5, 5, 5, 7]
    with pytest.raises(NotFoundError, match="2026-01-06"):
        drop_partition(pool, "2026-01-06")


def test_rewrite_partition_is_atomic_and_idempotent(lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc", partition_by="day(ts)")
    load(pool, [_table([(5, 1), (6, 1)], "old")])
    for _ in range(2):  # the same rewrite twice gives the same rows
        rewrite_partition(pool, "2026-01-05", [_table([(5, 3), (5, 4)], "new")])
        rows = [(r["ts"].day, r["tag"]) for r in pool.read().to_pylist()]
        assert rows == [(5, "new"), (5, "new"), (6, "old")]
    tip = pool.tip()
    with pytest.raises(UsageError, match="2026-01-06"):
        rewrite_partition(pool, "2026-01-05", [_table([(6, 3)], "wrong")])
    assert pool.tip() == tip
    with pytest.raises(UsageError, match="not partitioned"):
        drop_partition(lake.create_pool("flat"), "x")


def test_vacate_cuts_history_on_every_branch(lake: Lake) -> None:
    pool = lake.create_pool("v", "ts:asc")
    c1 = load(pool, [pa.table({"ts": [1]})])
    c2 = load(pool, [pa.table({"ts": [2]})])
    pool.create_branch("dev")
    cut = c2.date
    c3 = load(pool, [pa.table({"ts": [3]})])
    c4 = load(pool, [pa.table({"ts": [4]})], "dev")
    result = vacate(pool, cut)
    assert result.tails == {"main": c2.id, "dev": c2.id}
    assert [c.id for c in pool.log()] == [c3.id, c2.id]
    assert [c.id for c in pool.log("dev")] == [c4.id, c2.id]
    assert pool.read()["ts"].to_pylist() == [1, 2, 3]
    assert pool.read(c2.id)["ts"].to_pylist() == [1, 2]  # the tail stays readable
    with pytest.raises(HistoryVacatedError, match=c1.id):
        pool.read(c1.id)
    with pytest.raises(HistoryVacatedError):
        pool.read("main", as_of=c1.date - timedelta(microseconds=1))
    assert pool.read("main", as_of=c2.date)["ts"].to_pylist() == [1, 2]


def test_after_vacate_and_cleanup_merge_tails_and_old_ids_still_behave(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lake_core.changes import merge
    from lake_core.maintenance import cleanup

    # Cached snapshots every 2 commits, so cleanup can reclaim commits outside any tail's
    # opening path with a short history.
    monkeypatch.setattr("lake_core.committing.SNAPSHOT_INTERVAL", 2)
    pool = lake.create_pool("vc", "ts:asc")
    old = [load(pool, [pa.table({"ts": [i]})]) for i in range(6)]
    pool.create_branch("dev")
    cut = old[-1].date
    load(pool, [pa.table({"ts": [10]})], "dev")
    vacate(pool, cut)
    result = cleanup(pool, timedelta(0), now=cut + timedelta(days=1))
    assert result.commits >= 2  # the cut commits' metadata is reclaimed
    assert not lake.store.exists(f"pools/{pool.id}/commits/{old[0].id}.json")
    fresh = Lake.open(lake.config).pool("vc")
    assert fresh.read(old[-1].id)["ts"].to_pylist() == list(range(6))  # the tail opens
    with pytest.raises(HistoryVacatedError, match=old[0].id):
        fresh.read(old[0].id)  # reclaimed, and said so, not "not found"
    merge(fresh, "dev", "main")  # the ancestor walk stops at the tails
    assert fresh.read()["ts"].to_pylist() == [*range(6), 10]
