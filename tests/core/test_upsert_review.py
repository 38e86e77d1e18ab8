"""Adversarial review of issue 14 (upserts, unique pools, dedupe, unique-pool compaction):
each test is a bug found by attacking the landed code, kept as a regression test."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_core import Lake
from lake_core.commit import Commit
from lake_core.errors import DuplicateKeyError, EmptyTransactionError
from lake_core.landing import LandingZone, ingest_once
from lake_core.pool import Pool
from lake_core.stores import open_store
from lake_core.txn import Txn

Row = dict[str, Any]


def _groups(pool: Pool, object_id: str) -> int:
    data = pool.store.get(pool.layout.data(object_id))
    return int(pq.ParquetFile(pa.BufferReader(data)).metadata.num_row_groups)


def _inf_table(n: int, high: bool = True) -> pa.Table:
    """ids 0..n-1; ``f`` is -inf in row 10 (the first row group), +inf in the last row
    (when ``high``), else ``i + 1``."""
    f = [float(i + 1) for i in range(n)]
    f[10] = float("-inf")
    if high:
        f[-1] = float("inf")
    return pa.table({"id": list(range(n)), "f": f})


def test_an_infinity_in_one_row_group_leaves_the_object_bound_unknown(lake: Lake) -> None:
    # The writer merged its row groups' stats skipping a group whose bound it could not
    # encode (an infinity), so the object claimed f >= 1025 while holding -inf: a query
    # pruned by the stats then missed the row.
    pool = lake.create_pool("p", "id:asc", seek_stride=1000)
    (obj,) = pool.load(_inf_table(3000)).adds()
    assert _groups(pool, obj.id) >= 3
    assert obj.columns["f"].min is None and obj.columns["f"].max is None
    assert pool.count(where="f < 0").rows == 1
    assert pool.count(where="f > 5000").rows == 1


def test_copied_row_groups_with_an_infinity_keep_the_bound_unknown(lake: Lake) -> None:
    # The upsert's copy path computed a run's stats from the footer the same way (for a
    # column whose object has a known bound on the other side).
    pool = lake.create_pool("p", "id:asc", seek_stride=1000)
    (obj,) = pool.load(_inf_table(6000, high=False)).adds()
    assert obj.columns["f"].min is None and obj.columns["f"].max == 6000.0
    assert _groups(pool, obj.id) >= 4
    result = pool.upsert(pa.table({"id": [3000], "f": [0.5]}))
    assert result.updated == 1
    live = list(pool.snapshot(pool.tip()).objects.values())
    assert len(live) == 3  # two copied runs and the rewritten group
    for o in live:
        rows = pool.store.get(pool.layout.data(o.id))
        f = pq.read_table(pa.BufferReader(rows)).column("f").to_pylist()
        if float("-inf") in f:
            assert o.columns["f"].min is None, o.columns["f"]
        if float("inf") in f:
            assert o.columns["f"].max is None, o.columns["f"]
    assert pool.count(where="f < 0").rows == 1
    pool.verify()


def _rows(pool: Pool, ref: str | None = None) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["v"]) for r in pool.read(ref).to_pylist())


def test_revert_of_an_upsert_on_a_unique_pool(lake: Lake) -> None:
    # The unique-pool check validated the revert's commit as an upsert's but left the
    # objects the revert deletes out of the ones it read: they meet its keys, so every
    # commit attempt was refused as a racing writer's (CommitConflictError), even alone.
    pool = lake.create_pool("p", "id:asc", unique=True)
    pool.load(pa.table({"id": [1, 2], "v": ["a", "x"]}))
    upsert = pool.upsert(pa.table({"id": [1, 3], "v": ["b", "c"]}))
    assert upsert.commit is not None
    assert _rows(pool) == [(1, "b"), (2, "x"), (3, "c")]
    pool.revert(upsert.commit.id)
    assert _rows(pool) == [(1, "a"), (2, "x")]


def test_merge_of_a_branch_upsert_into_a_unique_pool(lake: Lake) -> None:
    pool = lake.create_pool("p", "id:asc", unique=True)
    pool.load(pa.table({"id": [1, 2], "v": ["a", "x"]}))
    pool.create_branch("dev")
    pool.upsert(pa.table({"id": [1], "v": ["b"]}), "dev")
    pool.merge("dev", "main")
    assert _rows(pool) == [(1, "b"), (2, "x")]
    assert _rows(pool, "dev") == _rows(pool)


def test_dedupe_after_a_compaction_keeps_the_newest_row(lake: Lake) -> None:
    # Compaction appended partition x's merged object (holding the old row of id 1) after
    # partition y's newer object: by snapshot order the old row won. Recency now comes from
    # history: the commit that net-added "new" is newer than the one that added "old".
    pool = lake.create_pool("p", "id:asc", partition_by="g")
    pool.load(pa.table({"id": [1], "g": ["x"], "v": ["old"]}))
    pool.load(pa.table({"id": [1], "g": ["y"], "v": ["new"]}))
    pool.load(pa.table({"id": [5], "g": ["x"], "v": ["other"]}))
    assert pool.compact().commit is not None  # merges partition x only
    result = pool.dedupe()
    assert result.rows_removed == 1 and result.resolved_from_history == 1
    assert _rows(pool) == [(1, "new"), (5, "other")]


def test_an_upsert_that_changes_nothing_records_its_transaction(lake: Lake, tmp_path: Path) -> None:
    # A change-feed file of deletes of absent keys changed nothing, so the upsert committed
    # nothing and no commit recorded its transaction: a later whole-zone run took it again
    # and, after a newer file had inserted that key, deleted the newer row (not the serial
    # result of the files in order).
    pool = lake.create_pool("p", "id:asc", unique=True)
    pool.load(pa.table({"id": [1], "v": ["a"], "op": ["c"]}))
    zone_dir = tmp_path / "zone"
    zone_dir.mkdir()
    zone = LandingZone(str(zone_dir), open_store(str(zone_dir)), ["ndjson"])

    def upsert_files(files: Sequence[str], txns: Sequence[Txn]) -> Commit | None:
        sources = [zone.source(f) for f in files]
        return pool.upsert(sources, delete_when="op = 'd'", txn=txns).commit

    (zone_dir / "001.ndjson").write_text(json.dumps({"id": 5, "op": "d"}) + "\n")
    first = ingest_once(pool, zone, ["001.ndjson"], upsert_files)
    assert first.unchanged == [] and first.files == ["001.ndjson"]
    assert pool.read_commit(pool.tip()).extra["upsert"] == {
        "inserted": 0,
        "updated": 0,
        "deleted": 0,
    }
    (zone_dir / "002.ndjson").write_text(json.dumps({"id": 5, "v": "new", "op": "c"}) + "\n")
    assert ingest_once(pool, zone, ["002.ndjson"], upsert_files).files == ["002.ndjson"]
    again = ingest_once(pool, zone, [f.path for f in zone.files()], upsert_files)
    assert again.files == [] and again.skipped == ["001.ndjson", "002.ndjson"]
    assert _rows(pool) == [(1, "a"), (5, "new")]
    # Without a transaction nothing is committed, as before.
    assert pool.upsert(pa.table({"id": [9], "op": ["d"]}), delete_when="op = 'd'").commit is None


def _records(pool: Pool) -> list[str]:
    return sorted(map(str, pool.read().to_pylist()))


def test_revert_cannot_bring_back_an_identical_record_into_a_unique_this_pool(
    lake: Lake,
) -> None:
    # check_unique built the revert's keys with KeySet.of_columns, which drops a record
    # holding a null; under ``this`` nulls are values, so the live identical record was
    # never looked at and the revert left it twice.
    pool = lake.create_pool("p", "this:asc", unique=True)
    pool.load(pa.table({"a": [1], "b": [2]}))
    pool.load(pa.table({"a": [5]}))
    removed = pool.delete(where="a = 5")
    pool.load(pa.table({"a": [5]}))
    tip = pool.tip()
    with pytest.raises(DuplicateKeyError):
        pool.revert(removed.id)
    assert pool.tip() == tip
    assert _records(pool) == ["{'a': 1, 'b': 2}", "{'a': 5, 'b': None}"]


def test_revert_into_a_unique_this_pool_next_to_an_object_lacking_a_middle_column(
    lake: Lake,
) -> None:
    # The live object's key columns were read as it stores them (no ``b``), so the join's
    # columns did not line up with the revert's (ArrowInvalid: bool against int64).
    pool = lake.create_pool("p", "this:asc", unique=True)
    pool.load(pa.table({"a": [1], "b": [9], "c": [3]}))
    removed = pool.delete(where="b = 9")
    pool.load(pa.table({"a": [1], "c": [3]}))
    pool.revert(removed.id)
    assert _records(pool) == ["{'a': 1, 'b': 9, 'c': 3}", "{'a': 1, 'b': None, 'c': 3}"]


def test_a_float_key_of_zero_matches_negative_zero(lake: Lake) -> None:
    # The join and the last-row-per-key grouping told -0.0 from 0.0 (compaction and dedupe,
    # comparing with pc.equal, do not): the upsert inserted 0.0 beside -0.0 in a unique pool,
    # two rows 'where k = 0' finds, and the next compaction dropped one as a duplicate.
    pool = lake.create_pool("p", "k:asc", unique=True)
    pool.load(pa.table({"k": [-0.0, 1.0], "v": ["neg", "one"]}))
    result = pool.upsert(pa.table({"k": [0.0, -0.0, 2.0], "v": ["a", "b", "two"]}))
    assert (result.inserted, result.updated) == (1, 1)  # the last of 0.0 / -0.0 wins
    assert sorted((r["k"], r["v"]) for r in pool.read().to_pylist()) == [
        (0.0, "b"),
        (1.0, "one"),
        (2.0, "two"),
    ]
    assert pool.count(where="k = 0").rows == 1


def test_only_an_upsert_commits_nothing_but_its_transaction(lake: Lake) -> None:
    # The empty-but-recorded commit is the upsert's alone: an empty partition rewrite with a
    # transaction still commits nothing (the Dagster IO manager counts on it).
    pool = lake.create_pool("p", "id:asc", partition_by="g")
    pool.load(pa.table({"id": [1], "g": ["x"]}))
    tip = pool.tip()
    with pytest.raises(EmptyTransactionError):
        pool.rewrite_partition("y", [], txn=Txn("app", 1))
    assert pool.tip() == tip
