"""``lake load --spark`` into an OTree pool (real local Spark; local disk and moto S3): Spark
tasks weigh the rows (Spark's hash of the indexed columns, the same number the local path
stores), build the tree — the same revision, thresholds and rows per cube as lake_core's build
of the whole batch — and write its objects; samples equal the brute-force filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_core import Lake
from lake_core.errors import MalformedInputError
from lake_core.loading import load
from lake_core.otree.blocks import blocks_of, revision_of
from lake_core.otree.build import build_tree
from lake_core.otree.revisions import coordinates
from lake_core.otree.settings import parse_layout
from lake_core.otree.weights import WEIGHT_COLUMN
from lake_core.otree.write import batch_cube_size
from lake_core.pool import Pool
from lake_spark.ingest import spark_load
from tests.otreecheck import brute_sample, check_otree_invariants, read_object, rows_of


def _cubes_of_pool(pool: Pool, commit: str, revision: int) -> dict[str, tuple[int, list[int]]]:
    """Per cube of ``revision`` in the objects ``commit`` added: its threshold and row ids."""
    assert pool.config.otree is not None
    dims = len(pool.config.otree.columns)
    out: dict[str, tuple[int, list[int]]] = {}
    for obj in pool.snapshot(commit).objects.values():
        if revision_of(obj) != revision:
            continue
        blocks = blocks_of(obj, dims)
        assert blocks is not None
        f = read_object(pool, obj.id)
        for i, block in enumerate(blocks):
            ids = f.read_row_group(i, columns=["id"]).column("id").to_pylist()
            threshold, rows = out.setdefault(block.cube.to_string(), (block.max_weight, []))
            assert threshold == block.max_weight
            rows += ids
    return {c: (t, sorted(r)) for c, (t, r) in out.items()}


def _cubes_of_build(batch: pa.Table, pool: Pool, existing: int) -> dict[str, tuple[int, list[int]]]:
    """The same of lake_core's build of the whole ``batch`` (with its weights) in the pool's
    latest revision, which holds ``existing`` rows already."""
    assert pool.config.otree is not None and pool.config.otree.latest is not None
    revision = pool.config.otree.latest
    weights = batch.column(WEIGHT_COLUMN).to_numpy().astype(np.int32)
    size = batch_cube_size(revision.cube_size, batch.num_rows, existing)
    tree = build_tree(coordinates(batch, revision), weights, size)
    ids = batch.column("id").to_numpy()
    return {b.cube.to_string(): (b.max_weight, sorted(ids[b.rows].tolist())) for b in tree.blocks}


def _table(rng: np.random.Generator, n: int, offset: int = 0, scale: float = 1.0) -> pa.Table:
    x = rng.normal(size=n) * scale
    return pa.table(
        {
            "id": pa.array(np.arange(offset, offset + n), pa.int64()),
            "x": pa.array(x, mask=rng.random(n) < 0.05),  # nulls take the null value
            "s": pa.array([f"v{i % 97}" for i in range(n)]),
        }
    )


def test_spark_load_builds_the_tree_of_the_local_path(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    rng = np.random.default_rng(5)
    n = 6_000
    table = _table(rng, n)
    src = tmp_path / "in.parquet"
    pq.write_table(table, src, row_group_size=1_000)
    local = lake.create_pool("local", "id", otree=parse_layout("x,s", 300))
    remote = lake.create_pool("remote", "id", target_size=8_000, otree=parse_layout("x,s", 300))
    load(local, [str(src)])
    commit = spark_load(spark, remote, [str(src)], chunk_bytes=20_000)
    assert [c.id for c in remote.log()] == [commit.id]
    want, got = local.read(), remote.read()
    cols = want.schema.names
    assert got.schema == want.schema
    assert rows_of(got, cols) == rows_of(want, cols)  # same rows, same weights
    remote = lake.pool("remote")
    counts = check_otree_invariants(remote)
    assert counts["unindexed"] == 0 and counts["indexed"] > 1  # rolled up into several objects
    assert _cubes_of_pool(remote, commit.id, 1) == _cubes_of_build(got, remote, 0)
    for f in (0.05, 0.3):
        scan = remote.scan(sample=f)
        assert rows_of(scan.to_table(), cols) == rows_of(brute_sample(got, f), cols)
    assert scan.stats.rows_read < n / 2  # type: ignore[possibly-undefined]

    # A second batch outside the range opens revision 2, built from that batch alone; a
    # batch inside it joins revision 2 with the cube size shared by its rows.
    wider = _table(rng, 3_000, offset=n, scale=5.0)
    pq.write_table(wider, tmp_path / "wider.parquet", row_group_size=700)
    second = spark_load(spark, remote, [str(tmp_path / "wider.parquet")], chunk_bytes=15_000)
    remote = lake.pool("remote")
    assert remote.config.otree is not None and remote.config.otree.latest is not None
    assert remote.config.otree.latest.id == 2
    batch = remote.read().filter(pa.compute.greater_equal(remote.read()["id"], n))
    assert _cubes_of_pool(remote, second.id, 2) == _cubes_of_build(batch, remote, 0)
    inside = _table(rng, 2_000, offset=n + 3_000)
    third = spark_load(spark, remote, spark.createDataFrame(inside.to_pandas()).repartition(3))
    remote = lake.pool("remote")
    assert remote.config.otree is not None and remote.config.otree.latest is not None
    assert remote.config.otree.latest.id == 2  # covered: no new revision
    check_otree_invariants(remote)
    everything = remote.read()
    assert everything.num_rows == n + 5_000
    assert sorted(everything["id"].to_pylist()) == list(range(n + 5_000))
    before = {o.id for o in remote.snapshot(second.id).objects.values()}
    added = [o for o in remote.snapshot(third.id).objects.values() if o.id not in before]
    assert added and all(revision_of(o) == 2 for o in added)
    for f in (0.02, 0.2):
        sampled = remote.scan(sample=f).to_table()
        assert rows_of(sampled, cols) == rows_of(brute_sample(everything, f), cols)


def test_spark_load_of_a_salted_pool_and_of_bad_input(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    rng = np.random.default_rng(8)
    table = pa.table(
        {"id": pa.array(np.arange(4_000), pa.int64()), "k": pa.array(rng.integers(0, 3, 4_000))}
    )
    src = tmp_path / "in.parquet"
    pq.write_table(table, src, row_group_size=500)
    pool = lake.create_pool("salty", "id", otree=parse_layout("k", 200, weight="salted"))
    commit = spark_load(spark, pool, [str(src)], chunk_bytes=8_000)
    pool = lake.pool("salty")
    # Salts drawn per chunk from the load's seed: the route stage drew the very weights the
    # plan used (else rows would land in cubes the plan does not know, and the load fail).
    assert check_otree_invariants(pool)["unindexed"] == 0
    got = pool.read()
    assert len(set(got[WEIGHT_COLUMN].to_pylist())) > 3_900  # three values, ~4,000 weights
    cols = got.schema.names
    assert rows_of(pool.scan(sample=0.1).to_table(), cols) == rows_of(brute_sample(got, 0.1), cols)
    # A bad file: a clear error, nothing committed, no object left behind.
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": 1, "k": 2}\n{"id": \n')
    with pytest.raises(MalformedInputError):
        spark_load(spark, pool, [str(bad)])
    assert [c.id for c in pool.log()] == [commit.id]
    listed = {i.key for i in pool.store.list(pool.layout.data_dir)}
    assert len(listed) == len(pool.snapshot(commit.id).objects)


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
