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
