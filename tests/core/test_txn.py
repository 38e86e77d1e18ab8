"""Application transactions (lake_core.txn) and landing zones (lake_core.landing): a load
recorded as (app, version) commits once, even when real OS processes race, on local disk and
moto S3; landed files are taken once they are stable."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.codec import encode_doc
from lake_core.commit import SNAPSHOT_INTERVAL, Commit
from lake_core.errors import TxnCommittedError, UsageError
from lake_core.landing import (
    LandingFile,
    LandingZone,
    WatchState,
    ingest_once,
    look,
    split_by_retention,
)
from lake_core.loading import load
from lake_core.maintenance import compact
from lake_core.pool import Pool
from lake_core.registry import PoolConfig
from lake_core.snapshot import SNAPSHOT_FORMAT, SNAPSHOT_JSON_VERSION, Snapshot, apply_commit
from lake_core.stores import open_store
from lake_core.txn import DEFAULT_TXN_RETENTION, Txn
from tests import processes
from tests.lakecheck import assert_journal_dense, assert_objects_intact, read_all
from tests.workers_txn import ingest_zone, load_txn


def data_objects(pool: Pool) -> set[str]:
    prefix = pool.layout.data_dir
    return {i.key for i in pool.store.list(prefix)}


def rows(n: int, base: int = 0) -> pa.Table:
    return pa.table({"ts": pa.array(range(base, base + n), pa.int64())})


def test_a_transaction_commits_once_and_says_so(lake: Lake) -> None:
    pool = lake.create_pool("t", "ts:asc")
    assert pool.last_txn("etl") is None
    c = pool.load(rows(3), txn=Txn("etl", 7))  # the handle passes it on
    assert c.extra["txn"] == [{"app": "etl", "version": 7}]
    assert pool.last_txn("etl") == 7
    assert pool.read_commit(c.id).extra["txn"] == [{"app": "etl", "version": 7}]
    before = data_objects(pool)
    for version in (7, 3):  # the same version, or an older one: nothing is committed
        with pytest.raises(TxnCommittedError) as err:
            load(pool, [rows(3, 100)], txn=Txn("etl", version))
        assert err.value.recorded == 7
        assert "already committed" in str(err.value)
    assert pool.tip() == c.id and data_objects(pool) == before
    assert read_all(pool)["ts"].to_pylist() == [0, 1, 2]
    # A later version, and another app, commit; plain loads are untouched by transactions.
    load(pool, [rows(1, 10)], txn=Txn("etl", 8))
    load(pool, [rows(1, 20)], txn=Txn("other", 0))
    load(pool, [rows(1, 30)])
    assert pool.txns() == {"etl": 8, "other": 0}
    assert read_all(pool)["ts"].to_pylist() == [0, 1, 2, 10, 20, 30]


def test_a_racing_writer_that_commits_first_is_seen_at_the_commit_point(
    lake: Lake, lake_uri: str
) -> None:
    """Deterministic interleaving: our load passes the early check, writes its objects, and
    another writer commits the same transaction before our commit point."""
    pool = lake.create_pool("t", "ts:asc")
    other = Lake.open(LakeConfig(uri=lake_uri, user="other")).pool("t")
    raced: list[str] = []

    def race(_: object) -> None:
        if not raced:
            raced.append(load(other, [rows(2, 50)], txn=Txn("etl", 1)).id)

    with pytest.raises(TxnCommittedError):
        load(pool, [rows(3)], txn=Txn("etl", 1), on_object=race)
    assert raced and pool.tip() == raced[0]
    assert read_all(pool)["ts"].to_pylist() == [50, 51]
    live = {pool.layout.data(o) for o in pool.snapshot(pool.tip()).objects}
    assert data_objects(pool) == live  # our objects were discarded


def test_bad_transactions_are_usage_errors(lake: Lake) -> None:
    pool = lake.create_pool("t", "ts:asc")
    with pytest.raises(UsageError):
        Txn("", 1)
    with pytest.raises(UsageError):
        Txn("etl", -1)
    with pytest.raises(UsageError):
        load(pool, [rows(1)], txn=[Txn("etl", 1), Txn("etl", 2)])
    assert pool.tip() is None and data_objects(pool) == set()


def test_recorded_versions_survive_cached_snapshots_compaction_and_reopen(lake: Lake) -> None:
    pool = lake.create_pool("t", "ts:asc", target_size=1 << 20)
    for v in range(SNAPSHOT_INTERVAL + 2):  # past a cached snapshot (written and re-read)
        load(pool, [rows(2, 10 * v)], txn=Txn("etl", v))
    assert compact(pool).commit is not None
    again = Lake.open(LakeConfig(uri=lake.config.uri)).pool("t")
    assert again.last_txn("etl") == SNAPSHOT_INTERVAL + 1
    cached = [c for c in again.log() if c.has_snapshot]
    assert cached and again.snapshot(cached[0].id).txns["etl"] == cached[0].depth - 1
    # A branch inherits its parent's versions and then records its own.
    again.create_branch("dev")
    load(again, [rows(1, 999)], "dev", txn=Txn("etl", 100))
    assert again.last_txn("etl", "dev") == 100
    assert again.last_txn("etl") == SNAPSHOT_INTERVAL + 1


def test_a_merge_brings_the_transactions_the_source_recorded(lake: Lake) -> None:
    """git-like: a merge applies the source's changes since the merge base, so it records the
    transactions that made them (the higher version per app id). Ingesting a file on a branch,
    merging, then ingesting it on main commits it once."""
    pool = lake.create_pool("t", "ts:asc")
    load(pool, [rows(1)], txn=Txn("base", 0))
    pool.create_branch("dev")
    load(pool, [rows(1, 10)], "dev", txn=Txn("file-x", 0))
    load(pool, [rows(1, 11)], "dev", txn=Txn("etl", 5))
    load(pool, [rows(1, 20)], txn=Txn("etl", 7))  # main is further along for etl
    merged = pool.merge("dev")
    # Only what dev recorded since the base, and only above main's versions.
    assert merged.extra["txn"] == [{"app": "file-x", "version": 0}]
    assert pool.txns() == {"base": 0, "file-x": 0, "etl": 7}
    with pytest.raises(TxnCommittedError):
        load(pool, [rows(1, 10)], txn=Txn("file-x", 0))
    assert read_all(pool)["ts"].to_pylist() == [0, 10, 11, 20]
    # A source ahead of the target raises the target's version.
    load(pool, [rows(1, 12)], "dev", txn=Txn("etl", 9))
    assert pool.merge("dev").extra["txn"] == [{"app": "etl", "version": 9}]
    assert pool.last_txn("etl") == 9
    # A revert takes the rows out but not the record (as in Delta): the transaction stays
    # committed, so the same file is not re-ingested by its app id.
    c = load(pool, [rows(1, 40)], txn=Txn("file-y", 0))
    pool.revert(c.id)
    assert pool.last_txn("file-y") == 0
    with pytest.raises(TxnCommittedError):
        load(pool, [rows(1, 40)], txn=Txn("file-y", 0))
    assert read_all(pool)["ts"].to_pylist() == [0, 10, 11, 12, 20]


class DayClock:
    """A settable clock: commit dates are what the test says."""

    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)


def test_recorded_transactions_expire_after_the_pools_retention(lake: Lake, lake_uri: str) -> None:
    """Each recorded transaction keeps the date of the commit that recorded it; one older than
    the pool's retention is dropped when a snapshot is next built, and can then commit again
    (as in Delta, whose txn records expire the same way)."""
    clock = DayClock()
    dated = Lake.open(LakeConfig(uri=lake_uri, user="t", clock=clock))
    pool = dated.create_pool("t", "ts:asc", txn_retention=timedelta(days=30))
    assert Lake.open(LakeConfig(uri=lake_uri)).pool("t").config.txn_retention == timedelta(days=30)
    assert dated.create_pool("u", "ts:asc").config.txn_retention == DEFAULT_TXN_RETENTION
    forever = dated.create_pool("v", "ts:asc", txn_retention=None)
    assert Lake.open(LakeConfig(uri=lake_uri)).pool("v").config.txn_retention is None
    for cfg in (pool.config, forever.config, dated.pool("u").config):
        assert PoolConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(UsageError, match="retention"):
        dated.create_pool("w", "ts:asc", txn_retention=timedelta(0))
    for p in (pool, forever):
        clock.t = datetime(2026, 1, 1, tzinfo=UTC)
        load(p, [rows(1)], txn=Txn("file-a", 0))
        clock.t += timedelta(days=20)
        load(p, [rows(1, 10)], txn=Txn("file-b", 0))
        clock.t += timedelta(days=11)  # file-a is 31 days old, file-b 11
        load(p, [rows(1, 20)])  # no transaction: the map is not rebuilt, nothing expires
        assert p.txns() == {"file-a": 0, "file-b": 0}
        load(p, [rows(1, 30)], txn=Txn("file-c", 0))
    assert pool.txns() == {"file-b": 0, "file-c": 0}
    assert forever.txns() == {"file-a": 0, "file-b": 0, "file-c": 0}
    with pytest.raises(TxnCommittedError):
        load(forever, [rows(1)], txn=Txn("file-a", 0))
    # The expired one commits again: re-ingesting it is possible once it has expired.
    load(pool, [rows(1)], txn=Txn("file-a", 0))
    assert read_all(pool)["ts"].to_pylist() == [0, 0, 10, 20, 30]
    again = Lake.open(LakeConfig(uri=lake_uri)).pool("t")
    snap = again.snapshot(again.tip())
    assert dict(snap.txns) == {"file-a": 0, "file-b": 0, "file-c": 0}
    assert snap.txn_dates["file-b"] == datetime(2026, 1, 21, tzinfo=UTC)
    assert snap.txn_dates["file-a"] == snap.txn_dates["file-c"] == clock.t


def _c(cid: str, day: int, txns: list[dict[str, object]] | None = None, **kw: object) -> Commit:
    extra = {"txn": txns} if txns else {}
    date = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)
    return Commit(cid, None, 1, "a", date, "m", extra=extra, **kw)  # type: ignore[arg-type]


def test_snapshots_share_the_map_without_transactions_and_old_ones_decode() -> None:
    month = timedelta(days=30)
    s1 = apply_commit(Snapshot(), _c("c1", 0, [{"app": "a", "version": 1}]), month)
    s2 = apply_commit(s1, _c("c2", 40))  # carries no transaction: nothing copied, no expiry
    assert s2.txns is s1.txns and s2.txn_dates is s1.txn_dates and dict(s2.txns) == {"a": 1}
    # A commit that caches its snapshot rebuilds it: expired records go.
    s3 = apply_commit(s2, _c("c3", 40, has_snapshot=True), month)
    assert dict(s3.txns) == {} and dict(s3.txn_dates) == {}
    assert dict(apply_commit(s2, _c("c3", 40, has_snapshot=True)).txns) == {"a": 1}  # no retention
    # Dates round-trip through the cached snapshot file.
    s4 = apply_commit(s1, _c("c4", 3, [{"app": "b", "version": 0}]), month)
    assert Snapshot.decode("k", s4.encode()) == s4
    # JSON snapshots (format 1) written before dates (or before transactions) still decode;
    # undated records take the date of the next commit that rebuilds the map, and expire a
    # retention later.
    old = {"commit": "c0", "depth": 1, "schema": None, "objects": []}
    bare = Snapshot.decode("k", encode_doc(SNAPSHOT_FORMAT, SNAPSHOT_JSON_VERSION, old))
    assert dict(bare.txns) == {} and dict(bare.txn_dates) == {}
    undated = Snapshot.decode(
        "k", encode_doc(SNAPSHOT_FORMAT, SNAPSHOT_JSON_VERSION, {**old, "txns": {"a": 5}})
    )
    assert dict(undated.txns) == {"a": 5} and dict(undated.txn_dates) == {}
    s5 = apply_commit(undated, _c("c5", 10, [{"app": "b", "version": 0}]), month)
    assert dict(s5.txns) == {"a": 5, "b": 0}
    assert s5.txn_dates["a"] == s5.txn_dates["b"] == datetime(2026, 1, 11, tzinfo=UTC)
    s6 = apply_commit(s5, _c("c6", 41, [{"app": "c", "version": 0}]), month)
    assert dict(s6.txns) == {"c": 0}


WORKERS = 4


def test_processes_racing_one_transaction_make_exactly_one_commit(
    lake: Lake, lake_uri: str
) -> None:
    lake.create_pool("race", "ts:asc")
    ctx = processes.context()
    for version in (1, 2):  # twice: the second race lands on a pool with history
        start = ctx.Barrier(WORKERS)
        out = ctx.Queue()
        procs = [
            ctx.Process(target=load_txn, args=(lake_uri, "race", w, "etl", version, start, out))
            for w in range(WORKERS)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        committed = [r for r in results if r[0] == "committed"]
        assert len(committed) == 1, results
        assert sorted(r[2] for r in results if r[0] == "skipped") == [version] * (WORKERS - 1)
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    log = list(pool.log())
    assert len(log) == 2 and pool.last_txn("etl") == 2
    assert assert_journal_dense(pool) == 3
    table = read_all(pool)
    winners = [c.author for c in log]
    # Exactly the winners' rows, once each: (worker, version, j) for the two winning loads.
    got = sorted(zip(table["w"].to_pylist(), table["i"].to_pylist(), strict=True))
    want = sorted(
        (int(author.split("-")[1]), version)
        for author, version in zip(winners, (2, 1), strict=True)
        for _ in range(3)
    )
    assert got == want
    # The losers' objects were discarded: the store holds the live objects only.
    live = {pool.layout.data(o) for o in pool.snapshot(pool.tip()).objects}
    assert data_objects(pool) == live
    assert_objects_intact(pool)


def _zone(lake_uri: str, tmp_path: Path) -> str:
    """A landing zone next to the lake (a folder, or a prefix of the lake's bucket)."""
    if lake_uri.startswith("s3://"):
        return lake_uri.rsplit("/", 1)[0] + "/landing"
    return str(tmp_path / "landing")


def _drop(zone: str, path: str, ts: list[int]) -> None:
    body = "".join(json.dumps({"ts": t, "f": path}) + "\n" for t in ts).encode()
    if zone.startswith("s3://"):
        bucket, _, prefix = zone[len("s3://") :].partition("/")
        boto3.client("s3").put_object(Bucket=bucket, Key=f"{prefix}/{path}", Body=body)
    else:
        Path(zone, path).parent.mkdir(parents=True, exist_ok=True)
        Path(zone, path).write_bytes(body)


def test_processes_ingesting_overlapping_files_commit_each_file_once(
    lake: Lake, lake_uri: str, tmp_path: Path
) -> None:
    lake.create_pool("landed", "ts:asc")
    zone = _zone(lake_uri, tmp_path)
    names = [f"f{i}.ndjson" for i in range(6)]
    for i, name in enumerate(names):
        _drop(zone, name, [10 * i, 10 * i + 1])
    # Every worker wants an overlapping window of files: each file wanted by 2-3 workers.
    wanted = {w: names[w : w + 3] for w in range(WORKERS)}
    ctx = processes.context()
    start = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=ingest_zone, args=(lake_uri, "landed", w, zone, wanted[w], start, out)
        )
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    committed = [f for _, commits, _ in results for _, files in commits for f in files]
    assert sorted(committed) == sorted(set(committed))  # no file in two commits
    assert set(committed) == {n for ws in wanted.values() for n in ws}
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("landed")
    got = sorted(read_all(pool)["ts"].to_pylist())
    assert got == sorted(t for i in range(WORKERS + 2) for t in (10 * i, 10 * i + 1))
    live = {pool.layout.data(o) for o in pool.snapshot(pool.tip()).objects}
    assert data_objects(pool) == live
    # Afterwards, every file is recorded: a late run commits nothing.
    landing = LandingZone(zone, open_store(zone), ["ndjson"])
    assert landing.pending(pool, names) == []
    done = ingest_once(pool, landing, names, lambda fs, ts: pytest.fail("nothing to load"))
    assert done.commits == [] and sorted(done.skipped) == names


def test_a_file_is_taken_once_two_looks_agree() -> None:
    a1 = LandingFile("a.csv", 10, 1.0)
    b1 = LandingFile("b.csv", 5, 1.0)
    first = look([a1, b1], WatchState())
    assert first.stable == [] and first.settling == [a1, b1]
    state = first.next_state(WatchState(), [])
    a2 = LandingFile("a.csv", 20, 2.0)  # still growing
    second = look([a2, b1], WatchState.from_text(state.to_text()))
    assert second.stable == [b1] and second.settling == [a2]
    state = second.next_state(state, second.stable)
    assert state.taken == {"b.csv": 5} and state.looked == {"a.csv": (20, 2.0)}
    third = look([a2, b1], state)
    assert third.stable == [a2] and third.fresh == [a2]  # b is not handed out again
    # Files that left the zone are forgotten.
    state = third.next_state(state, [a2])
    assert look([], state).next_state(state, []) == WatchState()


def test_whole_zone_runs_leave_files_older_than_the_retention() -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    day = 86400.0
    files = [LandingFile(n, 1, now.timestamp() - age * day) for n, age in
             (("new", 1), ("edge", 28.5), ("old", 29.5), ("ancient", 400))]
    recent, old = split_by_retention(files, timedelta(days=30), now)
    # A day of slack for clocks: a file 29.5 days old may be expired by the time it commits.
    assert [f.path for f in recent] == ["new", "edge"]
    assert [f.path for f in old] == ["old", "ancient"]
    assert split_by_retention(files, None, now) == (files, [])


def test_recorded_transactions_survive_vacate(lake: Lake, lake_uri: str) -> None:
    """Vacate cuts the history, not the records: the tails' snapshots carry them (so the docs
    can say a file ingested before the cut is still not ingested again)."""
    clock = DayClock()
    pool = Lake.open(LakeConfig(uri=lake_uri, user="t", clock=clock)).create_pool("t", "ts:asc")
    load(pool, [rows(1)], txn=Txn("file-a", 0))
    clock.t += timedelta(days=2)
    load(pool, [rows(1, 10)])  # the tail: the newest commit before the cut
    clock.t += timedelta(days=2)
    load(pool, [rows(1, 20)])
    pool.vacate(clock.t - timedelta(days=1))
    again = Lake.open(LakeConfig(uri=lake_uri)).pool("t")
    assert [c.extra.get("txn") for c in again.log()] == [None, None]  # the txn commit is cut
    assert again.txns() == {"file-a": 0}
    with pytest.raises(TxnCommittedError):
        load(again, [rows(1)], txn=Txn("file-a", 0))
