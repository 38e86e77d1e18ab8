"""Search indexes (issue 15): rules in the catalog, index entries in snapshots, pruning by them,
and what every history operation does to them — on local disk and on moto S3."""

from __future__ import annotations

import random
from datetime import timedelta

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.commit import AddIndex, Commit, DeleteIndex
from lake_core.errors import (
    AlreadyExistsError,
    InvalidNameError,
    NotFoundError,
    PoolNotFoundError,
    UsageError,
)
from lake_core.indexes.apply import apply_rule, remove_rule
from lake_core.indexes.building import index_key
from lake_core.indexes.meta import IndexMeta
from lake_core.indexes.pruner import INDEX_WHOLE_READ
from lake_core.pool import Pool
from lake_core.snapshot import Snapshot

NEEDLE = "u0500-needle"  # inside every object's min/max of user: statistics cannot prune


def _rows(start: int, n: int, rng: random.Random, needle_at: int | None = None) -> pa.Table:
    """``n`` rows from ts ``start``; users spread over the whole range of names, so min/max
    statistics of every object and row group cover every other user; ``needle_at`` puts
    NEEDLE on three rows from that offset."""
    users = [f"u{rng.randrange(1000):04d}" for _ in range(n)]
    if needle_at is not None:
        for j in range(needle_at, needle_at + 3):
            users[j] = NEEDLE
    return pa.table(
        {
            "ts": pa.array(range(start, start + n), pa.int64()),
            "user": pa.array(users, pa.string()),
            "n": pa.array([rng.randrange(100) for _ in range(n)], pa.int64()),
        }
    )


def _query(pool: Pool, where: str, ref: str | None = None) -> tuple[list[tuple[int, str]], dict]:
    scan = pool.scan(ref, where=where)
    table = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
    rows = sorted(zip(table["ts"].to_pylist(), table["user"].to_pylist(), strict=True))
    return rows, scan.stats.to_json()


def _expected(tables: list[pa.Table], user: str) -> list[tuple[int, str]]:
    return sorted(
        (ts, u)
        for t in tables
        for ts, u in zip(t["ts"].to_pylist(), t["user"].to_pylist(), strict=True)
        if u == user
    )


def check_index_invariant(pool: Pool, ref: str | None = None, *, complete: bool = True) -> Snapshot:
    """Every entry names a live object whose index file is there; with ``complete``, every live
    object holding a covering rule's field has exactly that rule's entry (one per object and
    rule: true when every object was added after the rule, or ``apply`` ran since)."""
    snap = pool.snapshot(pool.resolve(ref))
    for (oid, rule), meta in snap.indexes.items():
        assert oid in snap.objects, f"entry for dead object {oid}"
        assert (meta.object, meta.rule) == (oid, rule)
        assert pool.store.exists(index_key(pool.id, meta))
    for rule in pool.index_rules if complete else ():
        for obj in snap.objects.values():
            if rule.field in obj.columns:
                held = snap.indexes.get((obj.id, rule.name))
                assert held is not None and held.rule_id == rule.id, (obj.id, rule.name)
    return snap


@pytest.mark.parametrize("kind", ["exact", "bloom"])
def test_loads_are_indexed_and_lookups_read_one_object(lake: Lake, kind: str) -> None:
    rng = random.Random(7)
    lake.create_pool("logs", "ts:asc", seek_stride=2048)
    lake.create_index_rule("by_user", "user", kind)
    pool = lake.pool("logs")
    tables = [_rows(i * 3000, 3000, rng, needle_at=1500 if i == 1 else None) for i in range(3)]
    for t in tables:
        c = pool.load(t, message="load")
        adds = [a for a in c.actions if isinstance(a, AddIndex)]
        assert [a.index.object for a in adds] == [o.id for o in c.adds()]  # same commit
    check_index_invariant(pool)

    rows, stats = _query(pool, f"user = '{NEEDLE}'")
    assert rows == _expected(tables, NEEDLE)
    assert stats["objects_read"] == 1 and stats["index_objects_pruned"] == 2
    assert stats["index_row_groups_pruned"] >= 1  # the needle's object has several row groups
    # IN, and AND with another predicate, pin the field too; a value nobody has reads nothing.
    rows, stats = _query(pool, f"user IN ('{NEEDLE}', 'u0500-nobody') AND n >= 0")
    assert rows == _expected(tables, NEEDLE) and stats["objects_read"] == 1
    rows, stats = _query(pool, "user = 'u0500-nobody'")
    assert rows == [] and stats["objects_read"] == 0 and stats["index_objects_pruned"] == 3
    # A predicate that does not pin the field uses no index and reports none.
    rows, stats = _query(pool, "user >= 'u0999'")
    assert rows == sorted(
        r
        for t in tables
        for r in zip(t["ts"].to_pylist(), t["user"].to_pylist(), strict=True)
        if r[1] >= "u0999"
    )
    assert "index_objects_pruned" not in stats
    # SQL prunes through the same step (DuckDB reads the kept row groups).
    got = lake.sql(f"SELECT count(*) FROM logs WHERE \"user\" = '{NEEDLE}'").fetchall()
    assert got == [(3,)]


def test_maintenance_and_history_keep_entries_with_their_objects(lake: Lake) -> None:
    rng = random.Random(3)
    lake.create_pool("logs", "ts:asc", seek_stride=2048)
    lake.create_index_rule("by_user", "user", "exact")
    pool = lake.pool("logs")
    tables = [_rows(i * 1000, 1000, rng, needle_at=10 if i == 2 else None) for i in range(4)]
    commits = [pool.load(t) for t in tables]
    before = check_index_invariant(pool)
    assert len(before.indexes) == 4

    result = pool.compact()
    assert result.commit is not None
    compaction = result.commit
    dropped = {(a.object, a.rule) for a in compaction.actions if isinstance(a, DeleteIndex)}
    assert dropped == set(before.indexes)  # every compacted object's entry left with it
    after = check_index_invariant(pool)
    assert set(after.objects).isdisjoint(before.objects)
    assert _query(pool, f"user = '{NEEDLE}'")[0] == _expected(tables, NEEDLE)

    # Time travel sees the entries of that snapshot and prunes by them.
    rows, stats = _query(pool, f"user = '{NEEDLE}'", ref=commits[-1].id)
    assert rows == _expected(tables, NEEDLE)
    assert stats["index_objects_pruned"] == 3 and stats["objects_read"] == 1

    # A delete by predicate rewrites objects: new ones indexed, old entries gone.
    pool.delete(where=f"user = '{NEEDLE}'")
    check_index_invariant(pool)
    assert _query(pool, f"user = '{NEEDLE}'")[0] == []

    # Revert brings old rows back: the objects it adds are indexed in its commit.
    pool.revert(pool.tip())
    check_index_invariant(pool)
    assert _query(pool, f"user = '{NEEDLE}'")[0] == _expected(tables, NEEDLE)

    # A branch and a merge: the merged objects are indexed on the target.
    pool.create_branch("dev")
    extra = _rows(10_000, 500, rng, needle_at=0)
    pool.load(extra, branch="dev")
    check_index_invariant(pool, "dev")
    pool.merge("dev", "main")
    check_index_invariant(pool)
    assert _query(pool, f"user = '{NEEDLE}'")[0] == _expected([*tables, extra], NEEDLE)


def test_apply_indexes_existing_objects_and_remove_takes_entries_out(lake: Lake) -> None:
    rng = random.Random(5)
    pool = lake.create_pool("logs", "ts:asc")
    tables = [_rows(i * 500, 500, rng, needle_at=5 if i == 0 else None) for i in range(3)]
    for t in tables:
        pool.load(t)
    rule, _ = lake.create_index_rule("by_user", "user", "bloom", fpp=0.02)
    pool = lake.pool("logs")
    assert not pool.snapshot(pool.tip()).indexes  # made before the rule: unindexed
    rows, stats = _query(pool, f"user = '{NEEDLE}'")
    assert stats["objects_read"] == 3 and "index_objects_pruned" not in stats

    some = [o.id for o in pool.snapshot(pool.tip()).objects.values()][:1]
    first = apply_rule(pool, rule, some)
    assert (first.indexed, first.skipped) == (1, 0) and first.commit is not None
    assert first.commit.extra["kind"] == "index" and first.commit.layout_only
    assert first.commit.adds() == [] and first.commit.deletes() == []
    done = apply_rule(pool, rule)
    assert (done.indexed, done.skipped) == (2, 1)
    check_index_invariant(pool)
    again = apply_rule(pool, rule)
    assert again.commit is None and again.indexed == 0  # nothing to do: nothing committed
    rows, stats = _query(pool, f"user = '{NEEDLE}'")
    assert rows == _expected(tables, NEEDLE) and stats["objects_read"] == 1

    with pytest.raises(NotFoundError):
        apply_rule(pool, rule, ["3MWSxLEQBqqkl9Bba7k9oN8Aq9G"])
    gone = remove_rule(pool, "by_user")
    assert gone.removed == 3 and gone.commit is not None
    assert not pool.snapshot(pool.tip()).indexes
    assert remove_rule(pool, "by_user").commit is None
    # The history of index commits changes no rows.
    assert _query(pool, f"user = '{NEEDLE}'")[0] == _expected(tables, NEEDLE)


def test_rules_are_catalog_objects_and_bad_ones_change_nothing(lake: Lake) -> None:
    lake.create_pool("logs", "ts:asc").load(
        pa.table({"ts": [1], "user": ["a"], "nested": [{"x": 1}]})
    )
    lake.create_pool("other", "ts:asc")
    rule, version = lake.create_index_rule("by_user", "user", pools=["logs"])
    assert lake.index_rule("by_user") == rule
    assert rule.covers(lake.pool("logs").config.name)
    assert not rule.covers(lake.pool("other").config.name)
    assert lake.pool("logs").index_rules == (rule,)
    assert lake.pool("other").index_rules == ()

    latest = lake.catalog.snapshot().version
    for bad, err in [
        (lambda: lake.create_index_rule("by_user", "user"), AlreadyExistsError),
        (lambda: lake.create_index_rule("r2", "user", "hash"), UsageError),
        (lambda: lake.create_index_rule("r2", "user", "bloom", fpp=0.9), UsageError),
        (lambda: lake.create_index_rule("r2", "user", pools=["nope"]), PoolNotFoundError),
        (lambda: lake.create_index_rule("r2", "nested"), UsageError),
        (lambda: lake.create_index_rule("r2", "a.b"), UsageError),
        (lambda: lake.create_index_rule("bad name", "user"), InvalidNameError),
        (lambda: lake.drop_index_rule("nope"), NotFoundError),
        (lambda: lake.index_rule("nope"), NotFoundError),
    ]:
        with pytest.raises(err):
            bad()
        assert lake.catalog.snapshot().version == latest, err

    _, dropped = lake.drop_index_rule("by_user")
    assert lake.index_rules() == []
    lake.catalog.rollback(version)  # rollback restores the rule, as it restores pools
    assert [r.name for r in lake.index_rules()] == ["by_user"]
    assert dropped > version


def test_an_unreadable_index_costs_pruning_never_rows(lake: Lake) -> None:
    rng = random.Random(11)
    lake.create_pool("logs", "ts:asc")
    lake.create_index_rule("by_user", "user")
    pool = lake.pool("logs")
    tables = [_rows(i * 400, 400, rng, needle_at=7) for i in range(3)]
    for t in tables:
        pool.load(t)
    snap = pool.snapshot(pool.tip())
    metas = list(snap.indexes.values())
    pool.store.delete(index_key(pool.id, metas[0]))
    pool.store.put(index_key(pool.id, metas[1]), b"not an index")
    rows, stats = _query(pool, f"user = '{NEEDLE}'")
    assert rows == _expected(tables, NEEDLE)
    assert stats["objects_read"] == 3


def test_cleanup_removes_index_files_no_retained_commit_reaches(lake: Lake) -> None:
    rng = random.Random(2)
    lake.create_pool("logs", "ts:asc")
    lake.create_index_rule("by_user", "user")
    pool = lake.pool("logs")
    for i in range(3):
        pool.load(_rows(i * 100, 100, rng))
    old = pool.snapshot(pool.tip())
    pool.compact()
    pool.vacate(before=pool.clock.now() + timedelta(seconds=1))
    # An index file a failed build left, no commit naming it.
    orphan = index_key(pool.id, next(iter(old.indexes.values())))[:-8] + "X.parquet"
    orphan = orphan.replace(orphan.rsplit("-", 1)[1], "3MWSxLEQBqqkl9Bba7k9oN8Aq9G.parquet")
    pool.store.put(orphan, b"partial")
    result = pool.cleanup(timedelta(0), now=pool.clock.now() + timedelta(days=30))
    assert result.index_files == 4  # three compacted objects' indexes and the orphan
    live = check_index_invariant(pool)
    left = {i.key for i in pool.store.list(pool.layout.index_dir)}
    assert left == {index_key(pool.id, m) for m in live.indexes.values()}


def test_snapshots_and_commits_of_the_previous_formats_still_open() -> None:
    import json

    snap = Snapshot("c1", 1)
    data = snap.encode()
    decoded = Snapshot.decode("k", data)
    assert decoded.indexes == {}
    # A version-2 snapshot (before indexes) decodes, with no index entries.
    import pyarrow.ipc as ipc

    table = ipc.open_file(pa.py_buffer(data)).read_all()
    header = json.loads(table.schema.metadata[b"lakepool.snapshot"])
    assert header["version"] == 2 and "indexes" not in header  # no index: the old format
    header["version"] = 2
    table = table.replace_schema_metadata({b"lakepool.snapshot": json.dumps(header).encode()})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    assert Snapshot.decode("k", sink.getvalue().to_pybytes()).indexes == {}
    old_commit = json.dumps(
        {
            "format": "lakepool.commit",
            "version": 1,
            "id": "c1",
            "parent": None,
            "depth": 1,
            "date": "2026-01-01T00:00:00Z",
            "actions": [{"op": "delete", "id": "o1"}],
        }
    ).encode()
    assert Commit.decode("k", old_commit).deletes() == ["o1"]
    # Only what holds an index is written in the new versions.
    plain = Commit.decode("k", old_commit)
    assert json.loads(plain.encode())["version"] == 1
    meta = IndexMeta("o1", "r", "rid", "exact", "f", "iid", 10)
    indexed = Commit("c2", "c1", 2, "", plain.date, "", actions=(AddIndex(meta),))
    assert json.loads(indexed.encode())["version"] == 2
    assert Commit.decode("k", indexed.encode()).index_adds() == [meta]
    snap = Snapshot("c2", 2, indexes={meta.slot: meta})
    table = ipc.open_file(pa.py_buffer(snap.encode())).read_all()
    assert json.loads(table.schema.metadata[b"lakepool.snapshot"])["version"] == 3
    assert dict(Snapshot.decode("k", snap.encode()).indexes) == {meta.slot: meta}


def test_in_on_a_float_column_matches_negative_zero_as_equals_does(lake: Lake) -> None:
    pool = lake.create_pool("f", "ts:asc")
    pool.load(pa.table({"ts": [1, 2, 3], "x": [-0.0, 5.0, 1.5]}))
    for where in ("x IN (0.0, 5.0)", "x = 0.0 OR x = 5.0"):
        assert sorted(pool.read(where=where)["ts"].to_pylist()) == [1, 2], where


def test_cleanup_during_a_commit_in_flight_keeps_its_index_files(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit object written, its journal append not yet made: cleanup with --grace 0 must
    leave the index files it names (the minimum orphan age), as it leaves its data."""
    import lake_core.committing as committing

    lake.create_pool("p", "ts:asc")
    lake.create_index_rule("by_user", "user")
    pool = lake.pool("p")
    append = committing._append
    reports = []

    def cleanup_first(*args: object, **kwargs: object) -> object:
        reports.append(pool.cleanup(timedelta(0)))
        return append(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(committing, "_append", cleanup_first)
    pool.load(_rows(0, 50, random.Random(1), needle_at=3))
    monkeypatch.setattr(committing, "_append", append)
    assert reports and reports[0].index_files == 0
    check_index_invariant(pool)


def test_a_rule_stored_without_an_id_or_with_dashes_still_indexes(lake: Lake) -> None:
    """A rule another catalog writer stored (no id, a '-' in its name) gets a key-safe id:
    loads into the pools it covers work and are indexed."""
    from lake_core.catalog.proto import objects_pb2

    lake.create_pool("p", "ts:asc")
    with lake.catalog.begin() as txn:
        txn.create_index_rule(
            "default",
            "by-user",
            objects_pb2.IndexRuleDef(kind="field", fields=["user"], properties={"index": "exact"}),
        )
        txn.commit()
    pool = lake.pool("p")
    (rule,) = pool.index_rules
    assert rule.id.isalnum() and rule.id == lake.index_rule("by-user").id  # stable
    tables = [_rows(0, 300, random.Random(2), needle_at=5)]
    pool.load(tables[0])
    check_index_invariant(pool)
    assert _query(pool, f"user = '{NEEDLE}'")[0] == _expected(tables, NEEDLE)


def test_all_null_objects_get_an_empty_index_and_are_pruned(lake: Lake) -> None:
    """A batch whose indexed field is null in every row is indexed (an empty index: "no" to
    every value), so lookups skip it and coverage reaches zero; a struct field is never
    counted unindexed."""
    from lake_core.indexes.coverage import unindexed

    lake.create_pool("q", "id:asc")
    lake.create_index_rule("byx", "x")
    pool = lake.pool("q")
    pool.load(pa.table({"id": [1, 2], "x": pa.array([None, None], pa.null())}))
    pool.load(pa.table({"id": [3, 4], "x": ["a", "b"]}))
    snap = check_index_invariant(pool)
    assert len(snap.indexes) == 2 and unindexed(snap, pool.index_rules) == []
    rows, stats = _query_q(pool, "x = 'a'")
    assert rows == [3] and stats["objects_read"] == 1
    lake.create_pool("s", "id:asc")
    lake.create_index_rule("bys", "st", pools=["s"])  # no data yet: nothing to refuse
    s = lake.pool("s")
    s.load(pa.table({"id": [1], "st": [{"a": 1}]}))  # the struct is skipped, not an error
    assert unindexed(s.snapshot(s.tip()), s.index_rules) == []


def _query_q(pool: Pool, where: str) -> tuple[list[int], dict]:
    scan = pool.scan(where=where)
    table = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
    return sorted(table["id"].to_pylist()), scan.stats.to_json()


def test_an_integer_column_compares_with_a_float_literal_beyond_2_24(lake: Lake) -> None:
    pool = lake.create_pool("n", "ts:asc")
    pool.load(pa.table({"ts": [1, 2], "x": pa.array([5, 16_777_217], pa.int64())}))
    assert pool.read(where="x = 5.0")["ts"].to_pylist() == [1]
    assert pool.read(where="x > 16777216.5")["ts"].to_pylist() == [2]


def test_a_lookup_fetches_each_small_index_once(lake: Lake) -> None:
    """An index object under INDEX_WHOLE_READ is fetched in one request, whole, on S3: the
    bytes the rule reports are exactly the sizes of the index objects it consulted (read in
    ranges with read-ahead it took 2-4 requests and up to twice its size). On local disk
    (mapped) the rule counts what the lookup touched: at most that."""
    rng = random.Random(3)
    lake.create_pool("logs", "ts:asc", seek_stride=2048)
    lake.create_index_rule("by_user", "user", "exact")
    pool = lake.pool("logs")
    for i in range(3):
        pool.load(_rows(i * 3000, 3000, rng, needle_at=1500 if i == 1 else None))
    snap = pool.snapshot(pool.tip())
    sizes = sum(m.size for m in snap.indexes.values())
    assert 0 < max(m.size for m in snap.indexes.values()) <= INDEX_WHOLE_READ
    rows, stats = _query(pool, f"user = '{NEEDLE}'")
    assert len(rows) == 3 and stats["objects_read"] == 1
    if pool.store.local_path(pool.layout.commit(pool.tip())) is None:
        assert stats["index_bytes_read"] == sizes
    else:
        assert 0 < stats["index_bytes_read"] <= sizes
