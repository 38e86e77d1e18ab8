"""``lake index apply --spark`` on a real local[2] Spark, local disk and moto S3: the same
entries as the local path, one commit; a failing task commits nothing; Spark SQL reads prune by
the indexes as the local engines do."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.errors import LakeError
from lake_core.indexes.apply import apply_rule
from lake_core.indexes.building import index_key
from lake_spark.indexes import spark_index_apply
from tests.core.test_indexes import NEEDLE, _expected, _rows, check_index_invariant


def _pool(lake: Lake) -> tuple[Any, list[pa.Table]]:
    rng = random.Random(9)
    pool = lake.create_pool("logs", "ts:asc", seek_stride=2048)
    tables = [_rows(i * 2000, 2000, rng, needle_at=100 if i == 2 else None) for i in range(4)]
    for t in tables:
        pool.load(t)
    return pool, tables


def test_spark_apply_indexes_like_the_local_path(spark: Any, lake: Lake) -> None:
    pool, tables = _pool(lake)
    rule, _ = lake.create_index_rule("by_user", "user", "exact")
    pool = lake.pool("logs")
    result = spark_index_apply(spark, pool, rule)
    assert result.indexed == 4 and result.commit is not None
    assert result.commit.extra["kind"] == "index"
    snap = check_index_invariant(pool)
    # Byte for byte what lake_core builds: index the same objects locally on another branch.
    pool.create_branch("local")
    remove = [m for m in snap.indexes.values()]
    from lake_core.indexes.apply import remove_rule

    remove_rule(pool, "by_user", branch="local")
    apply_rule(pool, rule, branch="local")
    local = pool.snapshot(pool.tip("local"))
    for meta in remove:
        twin = local.indexes[meta.slot]
        assert pool.store.get(index_key(pool.id, meta)) == pool.store.get(index_key(pool.id, twin))
    assert spark_index_apply(spark, pool, rule).commit is None  # nothing left to do

    # Spark SQL prunes by the index as DuckDB does.
    from lake_spark.sql import spark_sql

    sql = f'SELECT ts, "user" FROM logs WHERE "user" = \'{NEEDLE}\''
    query = spark_sql(spark, sql, lake.pool, lake)
    got = sorted((r["ts"], r["user"]) for r in query.to_arrow().to_pylist())
    stats = query.stats()["logs"]
    query.close()
    assert got == _expected(tables, NEEDLE)
    assert stats["objects_read"] == 1


def test_a_failing_task_commits_nothing(spark: Any, lake: Lake) -> None:
    pool, _ = _pool(lake)
    rule, _ = lake.create_index_rule("by_user", "user")
    pool = lake.pool("logs")
    victim = next(iter(pool.snapshot(pool.tip()).objects))
    pool.store.delete(pool.layout.data(victim))
    tip = pool.tip()
    with pytest.raises(LakeError):
        spark_index_apply(spark, pool, rule)
    assert pool.tip() == tip


def test_spark_load_and_compaction_index_in_their_tasks(
    spark: Any, lake: Lake, tmp_path: Any
) -> None:
    """Objects written by Spark's tasks are indexed by those tasks, in the load's (and the
    compaction's) own commit: every entry present, lookups exact and pruned."""
    import pyarrow.parquet as pq

    from lake_core.commit import AddIndex
    from lake_spark.compact import spark_compact
    from lake_spark.ingest import spark_load

    rng = random.Random(12)
    lake.create_pool("logs", "ts:asc", seek_stride=2048)
    lake.create_index_rule("by_user", "user", "bloom")
    pool = lake.pool("logs")
    tables = [_rows(i * 1500, 1500, rng, needle_at=40 if i == 1 else None) for i in range(3)]
    paths = []
    for i, t in enumerate(tables):
        pq.write_table(t, tmp_path / f"part{i}.parquet")
        paths.append(str(tmp_path / f"part{i}.parquet"))
    for path in paths:
        c = spark_load(spark, pool, [path])
        assert {a.index.object for a in c.actions if isinstance(a, AddIndex)} == {
            o.id for o in c.adds()
        }
    check_index_invariant(pool)
    result = spark_compact(spark, pool)
    assert result.commit is not None
    assert len(result.commit.index_adds()) == len(result.commit.adds())
    check_index_invariant(pool)
    scan = pool.scan(where=f"user = '{NEEDLE}'")
    rows = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
    got = sorted(zip(rows["ts"].to_pylist(), rows["user"].to_pylist(), strict=True))
    assert got == _expected(tables, NEEDLE)


def test_cli_index_apply_on_spark(tmp_path: Any) -> None:
    """``lake index apply --spark`` as a user runs it (its own process and Spark session): the
    same line as the local path; a rule that does not cover the pool is refused before Spark."""
    import json
    import os
    import subprocess
    import sys

    from lake_core import LakeConfig

    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri))
    pool, _ = _pool(lake)
    lake.create_index_rule("by_user", "user", pools=["logs"])
    lake.create_pool("other", "ts:asc")
    env = {**os.environ, "LAKE_ROOT": uri, "LAKE_SPARK_MASTER": "local[1]"}

    def lake_cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "lake_cli", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    out = lake_cli("index", "apply", "--spark", "-p", "logs", "by_user", "-f", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["indexed"], result["skipped"]) == (4, 0) and result["commit"]
    check_index_invariant(lake.pool("logs"))
    refused = lake_cli("index", "apply", "--spark", "-p", "other", "by_user")
    assert refused.returncode == 2 and refused.stderr.startswith("error: index rule by_user")


def test_a_master_spark_refuses_is_one_error_line(tmp_path: Any, capsys: Any) -> None:
    """``--spark-master bogus://x``: one ``error:`` line (exit 2) before any JVM starts, not
    Spark launcher's Java stack and a Python traceback."""
    from lake_cli import main
    from lake_core import LakeConfig

    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri))
    _pool(lake)
    lake.create_index_rule("by_user", "user")
    code = main(
        ["--lake", uri, "index", "apply", "-p", "logs", "by_user", "--spark-master", "bogus://x"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --spark-master must be") and err.count("\n") == 1
