"""``lake load --spark`` into an OTree pool (real local Spark; local disk and moto S3): the tasks
add each row's weight (Spark's hash of the indexed columns, the same number the local path
stores), the objects are unindexed until ``lake optimize`` builds the tree, and samples equal
the brute-force filter before and after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lake_core import Lake
from lake_core.loading import load
from lake_core.otree.blocks import revision_of
from lake_core.otree.settings import parse_layout
from lake_spark.ingest import spark_load
from tests.otreecheck import brute_sample, check_otree_invariants, rows_of


def test_spark_load_into_an_otree_pool(spark: Any, lake: Lake, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 6_000
    table = pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "x": rng.normal(size=n),
            "s": pa.array([f"v{i % 97}" for i in range(n)]),
        }
    )
    src = tmp_path / "in.parquet"
    pq.write_table(table, src, row_group_size=1_000)
    local = lake.create_pool("local", "id", otree=parse_layout("x,s", 300))
    remote = lake.create_pool("remote", "id", target_size=40_000, otree=parse_layout("x,s", 300))
    load(local, [str(src)])
    commit = spark_load(spark, remote, [str(src)], chunk_bytes=20_000)
    assert [c.id for c in remote.log()] == [commit.id]
    want, got = local.read(), remote.read()
    cols = want.schema.names
    assert got.schema == want.schema
    assert rows_of(got, cols) == rows_of(want, cols)  # same rows, same weights
    objects = list(remote.snapshot(commit.id).objects.values())
    assert len(objects) > 1 and {revision_of(o) for o in objects} == {0}
    for f in (0.05, 0.3):
        assert rows_of(remote.scan(sample=f).to_table(), cols) == rows_of(
            brute_sample(got, f), cols
        )
    remote = lake.pool("remote")
    assert remote.optimize().commit is not None
    remote = lake.pool("remote")
    assert check_otree_invariants(remote)["unindexed"] == 0
    assert rows_of(remote.read(), cols) == rows_of(want, cols)
    scan = remote.scan(sample=0.05)
    assert rows_of(scan.to_table(), cols) == rows_of(brute_sample(want, 0.05), cols)
    assert scan.stats.rows_read < n / 2


def test_spark_read_of_a_sample(spark: Any, lake: Lake) -> None:
    from lake_spark.read import ReadCounters, spark_read

    rng = np.random.default_rng(6)
    n = 5_000
    pool = lake.create_pool("t", "id", otree=parse_layout("x,y", 200))
    pool.load(
        pa.table(
            {"id": pa.array(np.arange(n), pa.int64()), "x": rng.normal(size=n), "y": rng.random(n)}
        )
    )
    pool = lake.pool("t")
    full = pool.read()
    for reader in ("lake", "auto"):
        counters = ReadCounters(spark) if reader == "lake" else None
        df = spark_read(spark, pool, sample=0.1, where="x > 0", reader=reader, counters=counters)
        got = sorted(r["id"] for r in df.collect())
        sampled = brute_sample(full, 0.1)
        want = sorted(
            i
            for i, x in zip(sampled["id"].to_pylist(), sampled["x"].to_pylist(), strict=True)
            if x > 0
        )
        assert got == want, reader
        if counters is not None:
            assert counters.to_json()["rows_read"] < n / 2  # the tasks pruned by block


def test_spark_sql_refuses_the_otree_cut(spark: Any, lake: Lake) -> None:
    import pytest

    from lake_core.errors import UsageError
    from lake_spark.sql import spark_sql

    pool = lake.create_pool("t", "id", otree=parse_layout("x", 100))
    pool.load(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": [0.1, 0.2, 0.3]}))
    with pytest.raises(UsageError, match="OTree cut"):
        spark_sql(spark, "SELECT * FROM t TABLESAMPLE 10%", lake.pool, lake)
    query = spark_sql(spark, "SELECT count(*) AS n FROM t", lake.pool, lake)
    try:
        assert query.to_arrow().column("n").to_pylist() == [3]
    finally:
        query.close()  # its temporary views
