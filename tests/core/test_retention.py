"""Retention: cleanup of tombstoned and orphaned files, reclaiming vacated metadata, and purge.

Every test runs on local disk and on moto S3 and checks the exact files and rows afterwards.
Time is a fake clock (commit dates, KSUIDs and cleanup's ``now`` all come from it), so grace
periods are tested without sleeping; only the race test runs on the real clock.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.changes import delete_objects
from lake_core.codec import decode_doc
from lake_core.commit import Commit
from lake_core.errors import (
    HistoryVacatedError,
    LockLostError,
    NotFoundError,
    PurgedObjectError,
)
from lake_core.inflight import MIN_ORPHAN_AGE, WRITE_WINDOW
from lake_core.loading import commit_staged, list_staged, load, stage
from lake_core.maintenance.cleanup import CleanupResult, cleanup
from lake_core.maintenance.partitions import drop_partition
from lake_core.maintenance.purge import purge
from lake_core.maintenance.vacate import vacate
from lake_core.pool import Pool
from lake_core.purge_records import PURGED_FORMAT, PURGED_VERSION
from tests.clocks import FakeClock
from tests.lakecheck import assert_objects_intact, journal_numbers

H = timedelta(hours=1)
M = timedelta(minutes=1)


def make_lake(lake_uri: str) -> tuple[FakeClock, Lake]:
    clock = FakeClock()
    return clock, Lake.init(LakeConfig(uri=lake_uri, user="tester", clock=clock))


def fresh(pool: Pool) -> Pool:
    """The same pool opened anew: no cached commits or snapshots hide what cleanup removed."""
    return Lake.open(pool.lake_config).pool(pool.name)


def tbl(*ts: int) -> pa.Table:
    return pa.table({"ts": pa.array(ts, pa.int64())})


def ts(pool: Pool, ref: str | None = None, **kw: Any) -> list[int]:
    return [int(v) for v in pool.read(ref, **kw)["ts"].to_pylist()]


def obj(commit: Commit) -> str:
    (added,) = commit.adds()
    return added.id


def data_ids(pool: Pool) -> set[str]:
    prefix = f"pools/{pool.id}/data/"
    return {i.key[len(prefix) : -len(".parquet")] for i in pool.store.list(prefix)}


def commit_files(pool: Pool) -> set[str]:
    prefix = f"pools/{pool.id}/commits/"
    return {i.key[len(prefix) :] for i in pool.store.list(prefix)}


def all_keys(pool: Pool) -> set[str]:
    return {i.key for i in pool.store.list(f"pools/{pool.id}/")}


def history_rows(pool: Pool) -> dict[str, list[int]]:
    """Rows of every commit the log of every branch shows (the retained ones)."""
    out = {}
    for branch in pool.branches():
        for c in pool.log(branch):
            out[c.id] = ts(pool, c.id)
    return out


def boom(_: object) -> None:
    raise RuntimeError("load killed after writing an object")


# -- tombstones and the grace period ------------------------------------------------------------


def test_cleanup_removes_tombstoned_files_only_past_grace(lake_uri: str) -> None:
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("t", "ts:asc")
    k = load(pool, [tbl(0)])
    clock.advance(H)
    a = load(pool, [tbl(1)])
    clock.advance(H)
    b = load(pool, [tbl(2)])
    clock.advance(H)
    del_a = delete_objects(pool, [obj(a)])  # tombstone of a: t0+3h
    clock.advance(H)
    del_b = delete_objects(pool, [obj(b)])  # tombstone of b: t0+4h
    clock.advance(H)
    c = load(pool, [tbl(3)])
    clock.advance(H)  # now: t0+6h

    # Without a vacate every commit is retained, so deleted objects stay reachable (time
    # travel to them must work) whatever the grace period.
    before = history_rows(pool)
    r = cleanup(pool, timedelta(0))
    assert (r.tombstoned, r.orphans, r.pending, r.objects) == (0, 0, 0, ())
    assert data_ids(pool) == {obj(k), obj(a), obj(b), obj(c)}
    assert history_rows(fresh(pool)) == before

    vacate(pool, del_b.date + 30 * M)  # tail: del_b (live {k}); then c
    # Grace 2h30m, cutoff t0+3h30m: a's tombstone (3h) is past it, b's (4h) is not.
    r = cleanup(pool, 2 * H + 30 * M)
    assert r.objects == (obj(a),)
    assert (r.tombstoned, r.tombstoned_bytes) == (1, a.adds()[0].size)
    assert (r.orphans, r.pending, r.pending_bytes) == (0, 1, b.adds()[0].size)
    assert data_ids(pool) == {obj(k), obj(b), obj(c)}
    # One hour later in grace terms: b goes too.
    r = cleanup(pool, H)
    assert r.objects == (obj(b),) and r.tombstoned == 1 and r.pending == 0
    assert data_ids(pool) == {obj(k), obj(c)}
    p = fresh(pool)
    assert ts(p) == [0, 3]
    assert ts(p, del_b.id) == [0]
    assert ts(p, c.id) == [0, 3]
    assert_objects_intact(p)
    assert del_a.id not in {x.id for x in p.log()}


def test_cleanup_keeps_objects_live_on_another_branch_until_it_is_dropped(lake_uri: str) -> None:
    """Zed's vacuum looked at one branch only and could delete what a sibling still shows."""
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("b", "ts:asc")
    k = load(pool, [tbl(0)])
    x = load(pool, [tbl(1)])
    pool.create_branch("dev")
    d = load(pool, [tbl(10)], "dev")
    clock.advance(H)
    dx = delete_objects(pool, [obj(x)])  # gone from main, still live on dev
    clock.advance(H)
    vacate(pool, clock.now())  # tails: main → dx, dev → d
    clock.advance(2 * H)

    r = cleanup(pool, H)
    assert r.objects == () and r.pending == 0
    assert data_ids(pool) == {obj(k), obj(x), obj(d)}
    p = fresh(pool)
    assert ts(p, "dev") == [0, 1, 10]
    assert ts(p) == [0]

    # Dropping the branch leaves its data unreachable. What a commit deleted (x) goes past the
    # grace period. What only the dropped branch's commits added (d) cannot be told from a load
    # still on its way to the journal, so it also waits out the minimum orphan age; then it goes
    # with the commit that only the dropped branch knew and the tail snapshot vacate wrote.
    pool.delete_branch("dev")
    assert pool.store.exists(pool.layout.commit(d.id))
    r = cleanup(pool, H)
    assert r.objects == (obj(x),) and r.tombstoned == 1 and r.pending == 1
    assert pool.store.exists(pool.layout.commit(d.id))
    clock.advance(MIN_ORPHAN_AGE)
    r = cleanup(pool, H)
    assert r.objects == (obj(d),) and r.tombstoned == 1
    assert data_ids(pool) == {obj(k)}
    assert not pool.store.exists(pool.layout.commit(d.id))
    assert not pool.store.exists(pool.layout.snapshot(d.id))
    p = fresh(pool)
    assert ts(p) == [0] and ts(p, dx.id) == [0]


def test_cleanup_keeps_staged_objects(lake_uri: str) -> None:
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("s", "ts:asc")
    k = load(pool, [tbl(0)])
    staged = stage(pool, [tbl(5, 6)])
    clock.advance(timedelta(days=30))
    r = cleanup(pool, timedelta(0))
    assert r.objects == () and r.pending == 0
    assert data_ids(pool) == {obj(k), *(o.id for o in staged.objects)}
    assert pool.store.exists(pool.layout.staged(staged.id))  # staged docs are never removed
    assert [s.id for s in list_staged(pool)] == [staged.id]
    commit_staged(pool, [staged.id])
    assert ts(fresh(pool)) == [0, 5, 6]


def test_orphans_of_failed_loads_go_past_grace_and_the_minimum_age_and_running_loads_survive(
    lake_uri: str,
) -> None:
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("o", "ts:asc")
    k = load(pool, [tbl(0)])
    with pytest.raises(RuntimeError, match="killed"):
        load(pool, [tbl(1)], on_object=boom)
    (old,) = data_ids(pool) - {obj(k)}
    clock.advance(MIN_ORPHAN_AGE + H)
    with pytest.raises(RuntimeError, match="killed"):
        load(pool, [tbl(2)], on_object=boom)
    (young,) = data_ids(pool) - {obj(k), old}
    clock.advance(M)

    temps: dict[str, str] = {}
    if not lake_uri.startswith("s3://"):  # temp files of writers killed mid-write: local only
        data_dir = os.path.join(lake_uri, "pools", pool.id, "data")
        for name, age in (("old", MIN_ORPHAN_AGE + H), ("young", 2 * H)):
            path = os.path.join(data_dir, f".tmp-killed-{name}")
            with open(path, "wb") as f:
                f.write(b"partial")
            stamp = (clock.now() - age).timestamp()
            os.utime(path, (stamp, stamp))
            temps[name] = path

    # Cleanup runs while a load is between writing its object and committing it: the fresh
    # object is unreferenced, but young, so it survives and the load commits. The young orphan
    # is past the grace period (1 h) but not past the minimum orphan age: it stays too.
    seen: list[CleanupResult] = []
    running = load(pool, [tbl(3)], on_object=lambda _: seen.append(cleanup(pool, H)))
    (r,) = seen
    assert r.objects == (old,) and (r.orphans, r.tombstoned) == (1, 0)
    assert r.pending == 2  # the young orphan and the running load's object
    assert data_ids(pool) == {obj(k), young, obj(running)}
    assert ts(fresh(pool)) == [0, 3]
    if temps:
        assert r.temp_files == 1 and r.temp_files_bytes == len(b"partial")
        assert not os.path.exists(temps["old"]) and os.path.exists(temps["young"])
    else:
        assert r.temp_files == 0

    clock.advance(MIN_ORPHAN_AGE)
    r = cleanup(pool, H)
    assert r.objects == (young,) and r.orphans == 1
    assert data_ids(pool) == {obj(k), obj(running)}
    assert ts(fresh(pool)) == [0, 3]

    # Grace 0 while a load is in flight: the load's object is younger than the minimum orphan
    # age, so it stays, and the acknowledged load reads in full (it used to be deleted).
    seen.clear()
    landed = load(pool, [tbl(4)], on_object=lambda _: seen.append(cleanup(pool, timedelta(0))))
    assert seen[0].objects == () and seen[0].pending == 1
    p = fresh(pool)
    assert ts(p) == [0, 3, 4]
    assert_objects_intact(p)
    assert obj(landed) in data_ids(pool)


def test_writers_past_the_write_window_refuse_to_commit(
    lake_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other half of the minimum orphan age: a writer that reaches its commit point more
    than the write window after it began commits nothing (its objects may count as orphans)."""
    import lake_core.loading as loading
    from lake_core.errors import WriteWindowExpiredError

    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("w", "ts:asc")
    k = load(pool, [tbl(0)])
    journal = journal_numbers(pool)
    # A load whose commit point comes just inside the window commits ...
    ok = load(pool, [tbl(1)], on_object=lambda _: clock.advance(WRITE_WINDOW - M))
    # ... one that comes past it does not, and leaves nothing behind.
    with pytest.raises(WriteWindowExpiredError, match="more than 12h ago"):
        load(pool, [tbl(2)], on_object=lambda _: clock.advance(WRITE_WINDOW + M))
    assert data_ids(pool) == {obj(k), obj(ok)}
    assert ts(fresh(pool)) == [0, 1]
    assert len(journal_numbers(pool)) == len(journal) + 1

    def past_the_window(write: Any) -> Any:
        """``write``, then the clock moved past the write window (a slow writer)."""

        def slow(*args: Any, **kw: Any) -> Any:
            out = write(*args, **kw)
            clock.advance(WRITE_WINDOW + M)
            return out

        return slow

    # ``lake add``: the staging document is the commit point.
    monkeypatch.setattr(loading, "write_sources", past_the_window(loading.write_sources))
    with pytest.raises(WriteWindowExpiredError):
        stage(pool, [tbl(5)])
    assert list_staged(pool) == []
    assert data_ids(pool) == {obj(k), obj(ok)}

    # ``delete --where`` rewrites objects: the same window, and no re-plan past it.
    import lake_core.changes as changes

    monkeypatch.undo()  # loads write at their own pace again
    two = load(pool, [tbl(3, 4)])
    monkeypatch.setattr(changes, "write_objects", past_the_window(changes.write_objects))
    with pytest.raises(WriteWindowExpiredError):
        changes.delete_where(pool, "ts = 3")  # 4 stays: a new object is written
    assert data_ids(pool) == {obj(k), obj(ok), obj(two)}
    assert ts(fresh(pool)) == [0, 1, 3, 4]


def test_dry_run_deletes_nothing_and_reports_the_same(lake_uri: str) -> None:
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("d", "ts:asc")
    cs = [load(pool, [tbl(i)]) for i in range(3)]
    clock.advance(H)
    gone = delete_objects(pool, [obj(cs[0])])
    with pytest.raises(RuntimeError):
        load(pool, [tbl(9)], on_object=boom)
    clock.advance(H)
    vacate(pool, clock.now())
    clock.advance(MIN_ORPHAN_AGE)

    before = all_keys(pool)
    dry = cleanup(pool, H, dry_run=True)
    assert all_keys(pool) == before
    assert (dry.tombstoned, dry.orphans, dry.dry_run) == (1, 1, True)
    assert dry.objects and dry.files >= 2

    # A lost lock: the guard raises before the first delete, and nothing is deleted.
    def lost() -> None:
        raise LockLostError("maintenance lock of pool d", "session expired")

    with pytest.raises(LockLostError):
        cleanup(pool, H, guard=lost)
    assert all_keys(pool) == before

    calls: list[int] = []
    real = cleanup(pool, H, guard=lambda: calls.append(1))
    assert calls == [1]
    assert dataclasses.replace(dry, dry_run=False) == real
    removed = before - all_keys(pool)
    assert len(removed) == real.files
    assert {pool.layout.data(o) for o in real.objects} <= removed
    assert obj(cs[0]) in real.objects
    assert real.to_json()["files"] == real.files and real.to_json()["dry_run"] is False
    p = fresh(pool)
    assert ts(p) == [1, 2] and ts(p, gone.id) == [1, 2]


# -- time travel and vacate ---------------------------------------------------------------------


def test_time_travel_to_every_retained_commit_works_after_cleanup(lake_uri: str) -> None:
    """Branches, a merge, a compaction, deletes by id and by rows, a revert: after a vacate and
    a cleanup, every retained commit of every branch (and ``as_of`` each one's date) reads
    exactly as before."""
    from lake_core.changes import delete_where, merge, revert
    from lake_core.maintenance.compact import compact

    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("tt", "ts:asc")
    for i in range(4):
        load(pool, [tbl(i, i + 100)])
        clock.advance(M)
    pool.create_branch("dev")
    load(pool, [tbl(50)], "dev")
    clock.advance(M)
    delete_where(pool, "ts = 101")  # rewrites one object
    clock.advance(M)
    cut = compact(pool).commit.date  # type: ignore[union-attr]
    clock.advance(M)
    merge(pool, "dev", "main")
    clock.advance(M)
    doomed = load(pool, [tbl(7)])
    clock.advance(M)
    d = delete_objects(pool, [obj(doomed)])
    clock.advance(M)
    revert(pool, d.id)
    clock.advance(M)
    load(pool, [tbl(60)], "dev")
    clock.advance(H)
    vacate(pool, cut)
    clock.advance(2 * H)

    rows = history_rows(pool)
    dates = {c.id: c.date for b in pool.branches() for c in pool.log(b)}
    r = cleanup(pool, H)
    assert r.tombstoned > 0  # the compaction's sources cut by the vacate
    p = fresh(pool)
    assert history_rows(p) == rows
    for branch in p.branches():
        for c in p.log(branch):
            if dates[c.id] >= cut:  # as_of before the vacate time fails by design
                assert ts(p, branch, as_of=dates[c.id]) == rows[c.id]
    assert ts(p) == sorted([0, 1, 2, 3, 50, 100, 102, 103, 7])
    assert_objects_intact(p)
    assert_objects_intact(p, "dev")


def test_vacate_then_cleanup_reclaims_cut_history(
    lake_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cached snapshot every 8 commits instead of 32, so a short history crosses one.
    monkeypatch.setattr("lake_core.committing.SNAPSHOT_INTERVAL", 8)
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("v", "ts:asc")
    commits: list[Commit] = []
    for i in range(10):
        commits.append(load(pool, [tbl(i)]))
        clock.advance(M)
        if i in (3, 6):  # deletes inside the history that will be cut
            commits.append(delete_objects(pool, [obj(commits[0 if i == 3 else 1])]))
            clock.advance(M)
    assert len(commits) == 12 and commits[7].has_snapshot  # the 8th commit caches one
    vacate(pool, commits[3].date)  # a first vacate: its tail snapshot is cut by the second
    tail = commits[9]
    vacate(pool, tail.date)
    clock.advance(M)
    d2 = delete_objects(pool, [obj(commits[2])])  # after the tail: still reachable from it
    clock.advance(M)
    last = load(pool, [tbl(99)])
    clock.advance(2 * H)

    retained = [last, d2, commits[11], commits[10], tail]
    assert [c.id for c in pool.log()] == [c.id for c in retained]
    rows = {c.id: ts(pool, c.id) for c in retained}
    journal_tail = pool.journal.read_tail()
    head = pool.journal.read_head().n
    assert journal_tail > 2

    r = cleanup(pool, H)
    # Data reachable only from the cut history: the two objects deleted inside it.
    assert set(r.objects) == {obj(commits[0]), obj(commits[1])} and r.tombstoned == 2
    assert data_ids(pool) == {obj(c) for c in commits if c.adds()} - set(r.objects) | {obj(last)}
    # Metadata: the retained commits stay, and what their bounded opening needs (the cached
    # snapshot of the 8th commit and the 9th, between it and the tail); the cut history goes,
    # with the first vacate's tail snapshot.
    kept = {f"{c.id}.json" for c in [*retained, commits[8]]}
    kept |= {f"{commits[7].id}.snap", f"{tail.id}.snap"}
    assert commit_files(pool) == kept
    assert tail.snapshot_base == commits[7].id and tail.chain == (commits[8].id,)
    assert (r.commits, r.snapshots) == (len(commits) - 4, 1)
    # Journal entries below TAIL go (TAIL-1 stays: readers fall back to it), but not before
    # they are older than the minimum orphan age: a writer that saw the head lately appends
    # after it unread, and only an entry still there refuses it (lake_core.journal).
    assert journal_numbers(pool) == list(range(1, head + 1)) and r.journal_entries == 0
    newest_cut = pool.journal.read_entry(journal_tail - 2).ts
    assert newest_cut is not None
    almost = cleanup(pool, H, dry_run=True, now=newest_cut + MIN_ORPHAN_AGE - M)
    assert almost.journal_entries == journal_tail - 3  # all but the newest are old enough
    clock.advance(MIN_ORPHAN_AGE)
    r2 = cleanup(pool, H)
    assert journal_numbers(pool) == list(range(journal_tail - 1, head + 1))
    assert r2.journal_entries == journal_tail - 2 and r2.files == journal_tail - 2

    p = fresh(pool)
    assert {c.id: ts(p, c.id) for c in p.log()} == rows
    assert ts(p, tail.id) == rows[tail.id]  # the tail still opens
    assert ts(p, as_of=d2.date) == rows[d2.id]
    with pytest.raises(HistoryVacatedError):
        p.read(as_of=commits[6].date)
    # A cut commit: vacated (or, its metadata reclaimed, not found).
    with pytest.raises((HistoryVacatedError, NotFoundError), match=commits[5].id):
        p.read(commits[5].id)
    assert_objects_intact(p)
    # A second cleanup finds nothing more to do.
    again = cleanup(pool, H)
    assert again.files == 0 and again.pending == 0


def test_dropping_one_partition_then_cleanup_keeps_the_others(lake_uri: str) -> None:
    """IceDB lost other partitions' rows when one insert held files of several partitions and
    one partition was dropped before a cleanup."""
    clock, lake = make_lake(lake_uri)
    pool = lake.create_pool("p", "ts:asc", partition_by="g")
    both = load(pool, [pa.table({"ts": [1, 2, 3, 4], "g": ["a", "b", "a", "b"]})])
    more_a = load(pool, [pa.table({"ts": [5], "g": ["a"]})])
    by_part = {o.partition: o.id for o in both.adds()}
    assert set(by_part) == {"a", "b"}
    clock.advance(H)
    drop = drop_partition(pool, "a")
    clock.advance(H)
    vacate(pool, clock.now())
    clock.advance(2 * H)

    r = cleanup(pool, H)
    assert set(r.objects) == {by_part["a"], obj(more_a)}
    assert data_ids(pool) == {by_part["b"]}
    p = fresh(pool)
    assert p.read().to_pylist() == [{"ts": 2, "g": "b"}, {"ts": 4, "g": "b"}]
    assert ts(p, drop.id) == [2, 4]
    assert_objects_intact(p)


# -- purge --------------------------------------------------------------------------------------


def test_purge_deletes_a_commits_data_and_scans_name_it(lake_uri: str) -> None:
    _, lake = make_lake(lake_uri)
    pool = lake.create_pool("pg", "ts:asc")
    c1 = load(pool, [tbl(1, 2)])
    c2 = load(pool, [tbl(3)])
    victim = obj(c1)

    res = purge(pool, c1.id)
    assert res.objects == (victim,) and res.bytes == c1.adds()[0].size
    assert res.record == pool.layout.purge_record(c1.id)
    doc = decode_doc(res.record, pool.store.get(res.record), PURGED_FORMAT, PURGED_VERSION)
    assert [o["id"] for o in doc["objects"]] == [victim] and doc["commit"] == c1.id
    assert data_ids(pool) == {obj(c2)}

    p = fresh(pool)
    with pytest.raises(PurgedObjectError) as err:
        p.read()
    assert str(err.value) == f"data object {victim} was purged (lake purge of commit {c1.id})"
    assert (err.value.object_id, err.value.commit_id) == (victim, c1.id)
    with pytest.raises(PurgedObjectError, match=victim):
        p.read(c1.id)
    assert ts(p, where="ts = 3") == [3]  # pruning never opens the purged object
    assert purge(pool, c1.id).objects == (victim,)  # again: idempotent

    # An object missing without a purge record is reported as missing, not purged.
    pool.store.delete(pool.layout.data(obj(c2)))
    with pytest.raises(PurgedObjectError, match=f"{obj(c2)} is missing"):
        fresh(pool).read(where="ts = 3")


def test_purge_of_an_unknown_commit_is_not_found(lake_uri: str) -> None:
    _, lake = make_lake(lake_uri)
    pool = lake.create_pool("pu", "ts:asc")
    load(pool, [tbl(1)])
    before = all_keys(pool)
    unknown = "2Cp6AbqYy1bLoRLcTgqhAlYjKeM"
    with pytest.raises(NotFoundError, match=f"{unknown}: commit not found"):
        purge(pool, unknown)
    with pytest.raises(NotFoundError, match="no-such-commit"):
        purge(pool, "no-such-commit")
    assert all_keys(pool) == before


# The real race (loaders, deletes, compaction, vacate and cleanup with grace 0, in separate
# processes) is tests/core/test_maintenance_race.py.
