"""A load builds its indexes from the rows it writes (``lake_core.indexes.building.IndexInputs``,
the writer's ``GroupTap``), not by reading its objects back — and gets the very index objects
the read-back path (``lake index apply``, compaction, upserts) builds. On local disk and moto S3.
"""

from __future__ import annotations

import io
import logging
import math
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lake_core.integrity
from lake_core import Lake
from lake_core.indexes.building import index_key
from lake_core.indexes.kinds import build_index, index_row_groups
from lake_core.pool import Pool

RULES = (
    ("by_user_exact", "user", "exact"),
    ("by_user_bloom", "user", "bloom"),
    ("by_n", "n", "exact"),
    ("by_score", "score", "exact"),
    ("by_score_bloom", "score", "bloom"),
    ("by_at", "at", "bloom"),
    ("by_tag", "tag", "exact"),
    ("by_clock", "clock", "exact"),
)


def _rows(start: int, n: int, rng: random.Random) -> pa.Table:
    """Rows over several row groups and objects (see the pool below), with nulls, repeated
    values, NaN and both zeros, a timestamp and a column that is null in some loads."""
    floats = [rng.choice([0.0, -0.0, math.nan, None, rng.random(), 2.5]) for _ in range(n)]
    return pa.table(
        {
            "ts": pa.array(range(start, start + n), pa.int64()),
            "user": pa.array(
                [None if rng.random() < 0.05 else f"u{rng.randrange(300):03d}" for _ in range(n)]
            ),
            "n": pa.array(
                [rng.choice([None, -(2**62), 2**62, rng.randrange(50)]) for _ in range(n)],
                pa.int64(),
            ),
            "score": pa.array(floats, pa.float64()),
            "at": pa.array([rng.randrange(10**15) for _ in range(n)], pa.timestamp("us", tz="UTC")),
            "tag": pa.array([None] * n, pa.string()) if start else pa.nulls(n),
            # Seconds: Parquet keeps times in milliseconds, so read back the column differs.
            "clock": pa.array([rng.randrange(86_400) for _ in range(n)], pa.int32()).view(
                pa.time32("s")
            ),
        }
    )


def _indexed_pool(lake: Lake) -> Pool:
    lake.create_pool("logs", "ts:asc", seek_stride=4096, target_size=60_000)
    for name, field, kind in RULES:
        lake.create_index_rule(name, field, kind, **({"fpp": 0.05} if kind == "bloom" else {}))
    return lake.pool("logs")


def _check_as_read_back(pool: Pool) -> int:
    """Every index entry of the tip holds what building it from its object's file gives."""
    snap = pool.snapshot(pool.tip())
    rules = {r.name: r for r in pool.index_rules}
    checked = 0
    for (oid, rule_name), meta in snap.indexes.items():
        rule = rules[rule_name]
        data_file = pq.ParquetFile(io.BytesIO(pool.store.get(pool.layout.data(oid))))
        columns = [
            data_file.read_row_group(rg, columns=[rule.field]).column(0)
            for rg in range(data_file.metadata.num_row_groups)
        ]
        version = None
        if columns and pa.types.is_null(columns[0].type):
            # No value in any row group: an empty index of version 1, as the read-back builds.
            columns = [pa.array([], pa.int64()) for _ in columns]
            version = 1
        expected = build_index(rule.kind, columns, fpp=rule.fpp, version=version)
        # The same rows and header written the same way: the same bytes.
        assert pool.store.get(index_key(pool.id, meta)) == expected, (oid, rule_name)
        checked += 1
    return checked


def test_a_load_indexes_from_its_rows_as_the_read_back_path_would(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    pool = _indexed_pool(lake)

    def no_read_back(*args: object, **kwargs: object) -> object:
        raise AssertionError("a load read one of its objects back to index it")

    # A tripwire, not a stand-in: every load below indexes only indexable columns, so none of
    # them may open the objects it wrote.
    monkeypatch.setattr(lake_core.integrity, "open_verified", no_read_back)
    tables = [_rows(i * 6000, 6000, rng) for i in range(3)]
    for t in tables:
        commit = pool.load(t)
        assert len(commit.adds()) > 1  # several objects, each of several row groups
    monkeypatch.undo()

    snap = pool.snapshot(pool.tip())
    assert any(
        pq.ParquetFile(io.BytesIO(pool.store.get(pool.layout.data(o)))).metadata.num_row_groups > 2
        for o in snap.objects
    )
    # Every object has an entry for every rule whose field it holds (the all-null ``tag`` too).
    assert len(snap.indexes) == len(snap.objects) * len(RULES)
    assert _check_as_read_back(pool) == len(snap.indexes)
    # The indexes answer lookups exactly.
    want = sorted(
        ts
        for t in tables
        for ts, u in zip(t["ts"].to_pylist(), t["user"].to_pylist(), strict=True)
        if u == "u007"
    )
    scan = pool.scan(where="user = 'u007'")
    got = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
    assert sorted(got["ts"].to_pylist()) == want
    assert scan.stats.to_json()["index_row_groups_pruned"] > 0
    # A time of seconds is found in the row group that holds it, whichever path built the
    # index (both count it in milliseconds).
    rules = {r.name: r for r in pool.index_rules}
    for (oid, rule_name), meta in snap.indexes.items():
        if rule_name != "by_clock":
            continue
        data_file = pq.ParquetFile(io.BytesIO(pool.store.get(pool.layout.data(oid))))
        first = data_file.read_row_group(0, columns=["clock"]).column(0)[0]
        wanted = pa.array([first.as_py()], pa.time32("s"))
        groups = index_row_groups("exact", pool.store.get(index_key(pool.id, meta)), wanted)
        assert groups is not None and 0 in groups, (oid, rules[rule_name].field)


def test_a_column_that_cannot_be_indexed_falls_back_to_the_read_back_path(
    lake: Lake, caplog: pytest.LogCaptureFixture
) -> None:
    """A rule over a nested column is refused per object by the read-back path, which logs
    why; the other rules of the same load still index every object."""
    pool = lake.create_pool("logs", "ts:asc", seek_stride=4096, target_size=40_000)
    lake.create_index_rule("by_user", "user", "exact")
    lake.create_index_rule("by_tags", "tags", "exact")
    pool = lake.pool("logs")
    n = 3000
    table = pa.table(
        {
            "ts": pa.array(range(n), pa.int64()),
            "user": pa.array([f"u{i % 97}" for i in range(n)]),
            "tags": pa.array([[i % 3] for i in range(n)], pa.list_(pa.int64())),
        }
    )
    with caplog.at_level(logging.WARNING, logger="lake_core.indexes.building"):
        commit = pool.load(table)
    snap = pool.snapshot(pool.tip())
    assert {rule for (_, rule) in snap.indexes} == {"by_user"}
    assert len(snap.indexes) == len(commit.adds())
    assert any("by_tags" in r.getMessage() for r in caplog.records)
    assert _check_as_read_back(pool) == len(snap.indexes)
