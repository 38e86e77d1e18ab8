"""lake_spark on a real ``local[2]`` Spark session (one per test session), on local disk and
on moto S3: ingest, compaction, reads and deletes give what the local path gives.

The session starts after the moto server, so its executors get the ``AWS_*`` settings the way
users configure them (``spark.executorEnv.*``) and reach moto through ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lake_spark.ingest as ingest
from lake_core import Lake, LakeConfig
from lake_core.errors import (
    CommitConflictError,
    EmptyTransactionError,
    LakeError,
    MalformedInputError,
    SchemaConflictError,
    UsageError,
)
from lake_core.loading import load
from lake_core.maintenance import compact, fragmentation
from lake_core.maintenance.policy import PLAN_SIZE_TAG
from lake_core.pool import Pool
from lake_core.stores.s3 import S3ObjectStore
from lake_spark import spark_compact, spark_delete_keys, spark_load
from lake_spark.read import spark_read
from lake_spark.session import SparkSettings, executor_env, session_conf
from tests.clocks import FakeClock
from tests.lakecheck import assert_objects_intact

pytestmark = pytest.mark.slow


# -- helpers ----------------------------------------------------------------------------------


def _ts(i: int) -> str:
    return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=37 * i)).isoformat()


def _write_sources(folder: Path) -> list[Path]:
    """NDJSON (duplicate keys, null keys, a column only it has), CSV, a multi-row-group
    Parquet file and a gzip'd NDJSON file — the same rows for both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    a = folder / "a.ndjson"
    with a.open("w") as f:
        for i in range(3000):
            rec: dict[str, Any] = {"k": (i * 7919) % 700, "v": i, "s": "a" * (i % 17)}
            if i % 250 == 0:
                rec.pop("k")  # a record without the key: kept, sorted last
            if i % 3 == 0:
                rec["only_a"] = True
            f.write(json.dumps(rec) + "\n")
    b = folder / "b.csv"
    b.write_text("k,v,t\n" + "".join(f"{i % 300},{10_000 + i},{_ts(i)}\n" for i in range(2000)))
    c = folder / "c.parquet"
    pq.write_table(
        pa.table({"k": pa.array([i % 900 for i in range(4000)], pa.int32()), "v": range(4000)}),
        c,
        row_group_size=500,
    )
    d = folder / "d.ndjson.gz"
    d.write_bytes(
        gzip.compress(b"".join(b'{"k": %d, "v": -%d}\n' % (i % 50, i) for i in range(500)))
    )
    return [a, b, c, d]


def _upload(paths: list[Path], bucket: str) -> list[str]:
    s3 = boto3.client("s3")
    out = []
    for p in paths:
        s3.upload_file(str(p), bucket, f"landing/{p.name}")
        out.append(f"s3://{bucket}/landing/{p.name}")
    return out


def _data_files(pool: Pool) -> set[str]:
    return {i.key for i in pool.store.list(f"pools/{pool.id}/data/")}


def _assert_same(got: pa.Table, expected: pa.Table) -> None:
    """Same schema, same rows in the same order (NaN equal to NaN, unlike ``Table.equals``)."""

    def rows(t: pa.Table) -> list[tuple[Any, ...]]:
        return [
            tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r.values())
            for r in t.to_pylist()
        ]

    assert got.schema == expected.schema
    assert rows(got) == rows(expected)


def _assert_layout(pool: Pool) -> None:
    """Objects sorted, never overlapping within a partition (so equal keys never split),
    never straddling partitions, and each holding what its metadata says."""
    assert_objects_intact(pool)
    snap = pool.snapshot(pool.tip())
    key = pool.config.key
    by_partition: dict[Any, list[Any]] = {}
    for o in snap.objects.values():
        by_partition.setdefault(o.partition, []).append(o)
        table = pool.store.get(pool.layout.data(o.id))
        rows = pq.read_table(pa.BufferReader(table))
        # A stable sort of sorted rows leaves them where they are.
        order = key.sort_indices(rows).to_pylist()
        assert order == list(range(rows.num_rows)), f"object {o.id} not sorted"
        if pool.partition_spec is not None:
            assert set(pool.partition_spec.values(rows).to_pylist()) == {o.partition}
    for objs in by_partition.values():
        keyed = sorted((o for o in objs if o.min is not None), key=lambda o: o.min)
        for x, y in zip(keyed, keyed[1:], strict=False):
            assert x.max < y.min, f"objects {x.id} and {y.id} overlap"


# -- session settings (no Spark needed) -------------------------------------------------------


def test_settings_resolve_argument_then_env_then_local() -> None:
    assert SparkSettings.resolve("spark://h:7077", env={}).master == "spark://h:7077"
    env = {"LAKE_SPARK_MASTER": "spark://e:7077"}
    assert SparkSettings.resolve(None, env=env).master == "spark://e:7077"
    assert SparkSettings.resolve("local[2]", env=env).master == "local[2]"
    assert SparkSettings.resolve(None, env={}).master == "local[*]"


def test_session_conf_passes_only_present_aws_keys_and_the_interpreter() -> None:
    env = {"AWS_ACCESS_KEY_ID": "id", "AWS_ENDPOINT_URL": "http://x:1", "HOME": "/root"}
    assert executor_env(env) == {
        "spark.executorEnv.AWS_ACCESS_KEY_ID": "id",
        "spark.executorEnv.AWS_ENDPOINT_URL": "http://x:1",
    }
    conf = session_conf(SparkSettings("local[2]", conf={"spark.sql.shuffle.partitions": "3"}), env)
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.default.parallelism"] == "2"
    assert conf["spark.sql.shuffle.partitions"] == "3"  # the caller's conf wins
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert "secret" in conf["spark.redaction.regex"]
    assert not any("HOME" in k for k in conf)


def test_the_session_is_configured(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.pyspark.python") == sys.executable
    assert conf.get("spark.executorEnv.AWS_ENDPOINT_URL") == os.environ["AWS_ENDPOINT_URL"]
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


# -- ingest -----------------------------------------------------------------------------------


def test_spark_load_gives_the_local_paths_rows_in_its_order(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    paths = _write_sources(tmp_path / "in")
    sources: list[Any] = paths
    if lake.config.uri.startswith("s3://"):
        bucket = lake.config.uri[len("s3://") :].split("/")[0]
        assert len(_upload(paths, bucket)) == 4
        sources = [f"s3://{bucket}/landing/"]  # a prefix: its objects in key order
    local = lake.create_pool("local", "k:asc", target_size=12_000, seek_stride=4096)
    remote = lake.create_pool("spark", "k:asc", target_size=12_000, seek_stride=4096)
    load(local, paths)
    # Small chunks: the Parquet file is read by several tasks.
    commit = spark_load(spark, remote, sources, chunk_bytes=8_000, message="via spark")
    assert [c.id for c in remote.log()] == [commit.id]  # one commit
    assert commit.message == "via spark"
    expected, got = local.read(), remote.read()
    assert got.schema == expected.schema
    assert got.equals(expected)  # same rows, same order (ties in source order, nulls last)
    assert len(remote.snapshot(commit.id).objects) > 3  # the work really was split
    _assert_layout(remote)
    sizes = [o.size for o in remote.snapshot(commit.id).objects.values()]
    assert max(sizes) < 4 * 12_000  # near the target, not one big object


def _parquet_sources(folder: Path) -> list[Path]:
    """Two multi-row-group Parquet files: keys repeating within and across files, null keys,
    a column only the second has, a float column with NaN."""
    folder.mkdir(parents=True, exist_ok=True)
    first, second = folder / "a.parquet", folder / "b.parquet"
    n = 6000
    keys = [None if i % 401 == 0 else (i * 7919) % 1500 for i in range(n)]
    pq.write_table(
        pa.table(
            {
                "k": pa.array(keys, pa.int64()),
                "v": range(n),
                "s": [f"s{i % 97}" for i in range(n)],
                "p": [("x", "y")[i % 2] for i in range(n)],  # b has no p: partition null
            }
        ),
        first,
        row_group_size=700,
    )
    pq.write_table(
        pa.table(
            {
                "k": pa.array([(i * 31) % 1500 for i in range(n)], pa.int32()),
                "v": range(n, 2 * n),
                "x": [float("nan") if i % 13 == 0 else i / 3 for i in range(n)],
            }
        ),
        second,
        row_group_size=900,
    )
    return [first, second]


@pytest.mark.parametrize("ranges", [1, "several", "shuffle", "partitioned"])
def test_parquet_loads_of_few_ranges_read_the_sources_in_each_range_task(
    spark: Any, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ranges: Any
) -> None:
    """A Parquet load of at most DIRECT_MAX_RANGES key ranges skips the shuffle (each range's
    task reads every chunk): the same rows in the same order as the local path and as the
    shuffle, the same layout."""
    paths = _parquet_sources(tmp_path / "in")
    parts = {"partition_by": "p"} if ranges == "partitioned" else {}
    local = lake.create_pool("local", "k:asc", target_size=300_000, **parts)
    load(local, paths)
    # One range reads directly as shipped; more are forced to (or, for the shuffle, away
    # from) the direct path: this tests the mechanism, DIRECT_MAX_RANGES is a cost policy.
    if ranges != 1:
        monkeypatch.setattr(ingest, "DIRECT_MAX_RANGES", 0 if ranges == "shuffle" else 4)
    target = 300_000 if ranges in (1, "partitioned") else 300_000 // 3
    taken: list[tuple[int, bool]] = []  # (key ranges, read directly) of each load

    def spy(buckets: int, *rest: Any) -> bool:
        taken.append((buckets, chose(buckets, *rest)))
        return taken[-1][1]

    chose = ingest._direct
    monkeypatch.setattr(ingest, "_direct", spy)
    sources: list[Any] = list(paths)
    if lake.config.uri.startswith("s3://"):  # Parquet read from S3 by the range tasks
        sources = _upload(paths, lake.config.uri[len("s3://") :].split("/")[0])
    pool = lake.create_pool("spark", "k:asc", target_size=target, **parts)
    spark_load(spark, pool, sources, chunk_bytes=20_000)
    [(buckets, direct)] = taken
    assert direct == (ranges != "shuffle")
    assert buckets == 1 if ranges == 1 else 2 <= buckets <= 4
    got, expected = pool.read(), local.read()
    if ranges == "partitioned":  # x, y and null: a range each
        partitions = {o.partition for o in pool.snapshot(pool.tip()).objects.values()}
        assert partitions == {"x", "y", "null"}
        # Equal keys in different partitions are read in no set order: compare each
        # partition's rows (within one, ties keep the source order).
        for value in ("x", "y", None):

            def part(t: pa.Table, value: str | None = value) -> pa.Table:
                column = t.column("p")
                mask = pc.is_null(column) if value is None else pc.equal(column, value)
                return t.filter(pc.fill_null(mask, False))

            _assert_same(part(got), part(expected))
        assert got.num_rows == expected.num_rows
    else:
        _assert_same(got, expected)
    _assert_layout(pool)


def test_spark_load_of_a_descending_multi_field_key_with_nulls_and_nan(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    src = tmp_path / "m.parquet"
    pq.write_table(
        pa.table(
            {
                "a": [i % 7 if i % 50 else None for i in range(5000)],
                "b": [f"x{(i * 31) % 97}" for i in range(5000)],
                "f": [float(i % 11) if i % 13 else float("nan") for i in range(5000)],
                "v": range(5000),
            }
        ),
        src,
        row_group_size=700,
    )
    local = lake.create_pool("l", "a,b,f:desc", target_size=8_000, seek_stride=2048)
    remote = lake.create_pool("r", "a,b,f:desc", target_size=8_000, seek_stride=2048)
    load(local, [src])
    spark_load(spark, remote, [src], chunk_bytes=10_000)
    _assert_same(remote.read(), local.read())
    _assert_layout(remote)


def test_spark_load_of_a_dataframe_keeps_its_types_and_order(spark: Any, lake: Lake) -> None:
    table = pa.table(
        {
            "ts": pa.array(
                [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i % 40) for i in range(400)],
                pa.timestamp("us", tz="UTC"),
            ),
            "n": pa.array(range(400), pa.int32()),
            "tags": [["a", "b"][: i % 3] for i in range(400)],
        }
    )
    local = lake.create_pool("l", "ts:desc", target_size=3_000)
    remote = lake.create_pool("r", "ts:desc", target_size=3_000)
    load(local, [table])
    df = spark.createDataFrame(table)
    assert df.rdd.getNumPartitions() > 1
    commit = spark_load(spark, remote, df)
    assert "DataFrame" in commit.message
    assert remote.read().equals(local.read())  # partitions in order: the table's own order
    _assert_layout(remote)


def test_spark_load_into_a_partitioned_pool(spark: Any, lake: Lake, tmp_path: Path) -> None:
    src = tmp_path / "p.ndjson"
    src.write_text(
        "".join(
            json.dumps({"ts": _ts(i * 7 % 900), "u": i % 23, "v": i}) + "\n" for i in range(3000)
        )
        + json.dumps({"u": 1, "v": -1})  # no ts: partition "null"
        + "\n"
    )
    local = lake.create_pool("l", "u,ts:asc", target_size=6_000, partition_by="day(ts)")
    remote = lake.create_pool("r", "u,ts:asc", target_size=6_000, partition_by="day(ts)")
    load(local, [src])
    commit = spark_load(spark, remote, [src])
    _assert_layout(remote)
    parts = {o.partition for o in remote.snapshot(commit.id).objects.values()}
    assert "null" in parts and len(parts) > 5
    # Equal keys share a day, so they never span objects of different partitions: the order
    # is the local path's, ties included.
    assert remote.read().equals(local.read())


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"b.ndjson": '{"k": 1}\n{"k": 2\n'}, id="malformed-ndjson-line"),
        pytest.param({"b.ndjson": '{"k": 1, "a": "text"}\n'}, id="schema-conflict-between-files"),
        pytest.param({"b.csv": "k,a\n1,2\n3\n"}, id="csv-arity"),
        pytest.param({"missing.ndjson": None}, id="missing-file"),
    ],
)
def test_bad_input_gives_the_local_error_and_commits_and_leaves_nothing(
    spark: Any, lake: Lake, tmp_path: Path, bad: dict[str, str | None]
) -> None:
    good = tmp_path / "a.ndjson"
    good.write_text("".join(json.dumps({"k": i, "a": i}) + "\n" for i in range(100)))
    paths = [good]
    for name, text in bad.items():
        p = tmp_path / name
        if text is not None:
            p.write_text(text)
        paths.append(p)
    pool = lake.create_pool("p", "k:asc", target_size=1_000)
    with pytest.raises(LakeError) as local_error:
        load(pool, paths)
    with pytest.raises(LakeError) as spark_error:
        spark_load(spark, pool, paths)
    assert type(spark_error.value) is type(local_error.value)
    assert str(spark_error.value) == str(local_error.value)
    assert str(paths[-1]) in str(spark_error.value)
    assert pool.tip() is None
    assert _data_files(pool) == set()


def test_parquet_errors_found_by_reading_data_are_the_local_ones(
    spark: Any, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Parquet file read in row-group chunks is surveyed from its footer and key columns:
    a uint64 overflow in another column, and a damaged data page the survey never reads, must
    still fail as the local path fails, commit nothing and leave no object."""
    big = tmp_path / "big.parquet"
    values = pa.array([1] * 2999 + [2**63 + 5], pa.uint64())
    pq.write_table(pa.table({"k": range(3000), "u": values}), big, row_group_size=500)
    damaged = tmp_path / "damaged.parquet"
    pq.write_table(
        pa.table({"k": range(3000), "s": [f"text {i}" * 3 for i in range(3000)]}),
        damaged,
        row_group_size=500,
        compression="snappy",
    )
    column = pq.ParquetFile(damaged).metadata.row_group(4).column(1)
    data = bytearray(damaged.read_bytes())
    start = column.data_page_offset
    data[start : start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    damaged.write_bytes(bytes(data))
    pool = lake.create_pool("p", "k:asc", target_size=2_000)
    whole = lake.create_pool("whole", "k:asc")  # one key range: its task reads the sources
    ranged = lake.create_pool("ranged", "k:asc", target_size=6_000)  # several, read directly
    for src, match in ((big, "does not fit int64"), (damaged, "not a valid Parquet file")):
        for direct in (whole, ranged):
            with monkeypatch.context() as m:
                m.setattr(ingest, "DIRECT_MAX_RANGES", 1_000)
                with pytest.raises(MalformedInputError, match=match) as direct_error:
                    spark_load(spark, direct, [src], chunk_bytes=1_000)
            assert str(src) in str(direct_error.value)
            assert direct.tip() is None and _data_files(direct) == set()
        with pytest.raises(MalformedInputError) as local_error:
            load(pool, [src])
        with pytest.raises(MalformedInputError, match=match) as spark_error:
            spark_load(spark, pool, [src], chunk_bytes=1_000)
        assert str(src) in str(spark_error.value)
        if src == big:
            assert str(spark_error.value) == str(local_error.value)
        assert pool.tip() is None and _data_files(pool) == set()


def test_malformed_line_names_the_file_and_line(spark: Any, lake: Lake, tmp_path: Path) -> None:
    src = tmp_path / "x.ndjson"
    src.write_text('{"k": 1}\n\n{"k": 2,}\n')
    pool = lake.create_pool("p", "k:asc")
    with pytest.raises(MalformedInputError, match=r"x\.ndjson.*line 3"):
        spark_load(spark, pool, [src])


def test_conflict_with_the_pools_schema_commits_nothing(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    pool = lake.create_pool("p", "k:asc")
    first = load(pool, [pa.table({"k": [1], "a": [1]})])
    src = tmp_path / "x.ndjson"
    src.write_text('{"k": 2, "a": "two"}\n')
    files = _data_files(pool)
    with pytest.raises(SchemaConflictError, match="'a'.*int64.*string"):
        spark_load(spark, pool, [src])
    assert pool.tip() == first.id and _data_files(pool) == files


def test_a_failed_commit_removes_every_object_the_tasks_wrote(
    spark: Any, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _write_sources(tmp_path / "in")
    pool = lake.create_pool("p", "k:asc", target_size=12_000)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        assert len(_data_files(pool)) > 3  # the tasks wrote their objects
        raise CommitConflictError("refused for the test")

    monkeypatch.setattr(pool, "commit", refuse)
    with pytest.raises(CommitConflictError, match="refused"):
        spark_load(spark, pool, paths)
    assert _data_files(pool) == set()


def test_empty_input_and_unknown_branch(spark: Any, lake: Lake, tmp_path: Path) -> None:
    pool = lake.create_pool("p", "k:asc")
    empty = tmp_path / "e.ndjson"
    empty.write_text("\n")
    with pytest.raises(EmptyTransactionError):
        spark_load(spark, pool, [empty])
    with pytest.raises(LakeError, match="nope"):
        spark_load(spark, pool, [empty], branch="nope")
    with pytest.raises(UsageError, match="standard input"):
        spark_load(spark, pool, ["-"])


# -- compaction -------------------------------------------------------------------------------


def _fragment(pool: Pool) -> None:
    for i in range(10):  # overlapping loads: every load spans the whole key range
        load(pool, [pa.table({"ts": [j * 10 + i for j in range(400)], "w": [i] * 400})])
    load(pool, [pa.table({"ts": pa.array([None, None], pa.int64()), "w": [99, 99]})])


def test_spark_compaction_equals_local_compaction(spark: Any, lake: Lake) -> None:
    local = lake.create_pool("l", "ts:asc", target_size=20_000, seek_stride=4096)
    remote = lake.create_pool("r", "ts:asc", target_size=20_000, seek_stride=4096)
    _fragment(local)
    _fragment(remote)
    before = remote.read()
    expected = compact(local)
    result = spark_compact(spark, remote)
    assert result.commit is not None
    assert (result.runs, result.objects_in, result.objects_out) == (
        expected.runs,
        expected.objects_in,
        expected.objects_out,
    )
    assert remote.read().equals(before)
    assert remote.read().equals(local.read())
    outs = sorted(remote.snapshot(remote.tip()).objects.values(), key=lambda o: o.min or [1 << 62])
    outs_local = sorted(
        local.snapshot(local.tip()).objects.values(), key=lambda o: o.min or [1 << 62]
    )
    assert [(o.min, o.max, o.count, o.tags.get(PLAN_SIZE_TAG)) for o in outs] == [
        (o.min, o.max, o.count, o.tags.get(PLAN_SIZE_TAG)) for o in outs_local
    ]
    assert spark_compact(spark, remote).commit is None  # the same fixpoint
    assert fragmentation(remote).overlapping_objects == 0
    assert remote.read_commit(remote.tip()).extra.get("kind") == "compaction"
    _assert_layout(remote)


def test_spark_compaction_racing_a_delete_fails_and_removes_its_objects(
    spark: Any, lake: Lake
) -> None:
    pool = lake.create_pool("r", "ts:asc")
    victim = load(pool, [pa.table({"ts": [1, 3]})]).adds()[0].id
    load(pool, [pa.table({"ts": [2, 4]})])
    other = Lake.open(lake.config).pool("r")

    def delete_meanwhile() -> None:
        other.commit("main", [], [victim], message="concurrent delete")

    files = _data_files(pool)
    with pytest.raises(CommitConflictError, match=victim):
        spark_compact(spark, pool, guard=delete_meanwhile)
    assert _data_files(pool) == files
    assert pool.read()["ts"].to_pylist() == [2, 4]


def test_spark_compaction_of_explicit_objects(spark: Any, lake: Lake) -> None:
    pool = lake.create_pool("x", "ts:asc")
    a = load(pool, [pa.table({"ts": [1, 5]})]).adds()[0].id
    b = load(pool, [pa.table({"ts": [2, 6]})]).adds()[0].id
    load(pool, [pa.table({"ts": [3]})])
    result = spark_compact(spark, pool, object_ids=[a, b])
    assert (result.objects_in, result.objects_out) == (2, 1)
    assert pool.read()["ts"].to_pylist() == [1, 2, 3, 5, 6]


def _merged_duplicates(lake: Lake, name: str) -> Pool:
    """A unique pool holding duplicate keys, injected through the raw commit path (its own
    loads upsert and merges refuse duplicates); the injected rows are the newest."""
    from lake_core.loading import write_sources

    pool = lake.create_pool(name, "id:asc", unique=True, target_size=2_000, seek_stride=1024)
    pool.load([pa.table({"id": list(range(60)), "v": ["a"] * 60})])
    pool.load([pa.table({"id": list(range(0, 60, 2)), "v": ["main"] * 30})])
    dev = pa.table({"id": list(range(0, 60, 3)), "v": ["dev"] * 20})
    objects, schema = write_sources(pool, [dev], "main")
    pool.commit("main", objects, [], incoming_schema=schema)
    return pool


def test_spark_compaction_of_a_unique_pool_keeps_the_newest_row_per_key(
    spark: Any, lake: Lake
) -> None:
    local = _merged_duplicates(lake, "l")
    remote = _merged_duplicates(lake, "r")
    assert remote.read().num_rows > 60
    ids = [o for o in remote.snapshot(remote.tip()).objects]
    expected = compact(local, object_ids=list(local.snapshot(local.tip()).objects))
    result = spark_compact(spark, remote, object_ids=ids)
    assert result.duplicates_removed == expected.duplicates_removed > 0
    assert result.commit is not None and result.commit.extra["kind"] == "dedupe"
    got = remote.read()
    assert got.num_rows == 60 and got.equals(local.read())
    want = ["dev" if i % 3 == 0 else "main" if i % 2 == 0 else "a" for i in range(60)]
    assert got["v"].to_pylist() == want


def test_spark_load_into_a_this_pool_equals_the_local_load(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    rows = [{"a": i % 7, "b": f"s{i % 5}"} for i in range(300)] + [{"b": "z", "c": 1}] * 3
    f = tmp_path / "rows.ndjson"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    local = lake.create_pool("l", "this:asc", target_size=2_000, seek_stride=1024)
    remote = lake.create_pool("r", "this:asc", target_size=2_000, seek_stride=1024)
    local.load([str(f)])
    commit = spark_load(spark, remote, [str(f)])
    assert commit.adds()
    assert remote.read().equals(local.read())  # the same rows in the same whole-record order
    names = remote.config.key.names(remote.schema())
    assert names == ("a", "b", "c")
    for o in remote.snapshot(remote.tip()).objects.values():
        assert o.min is None or len(o.min) == 3  # bounds over the pool's columns


# -- reading and deleting ---------------------------------------------------------------------


def test_spark_read_prunes_filters_and_time_travels(spark: Any, lake: Lake) -> None:
    pool = lake.create_pool("p", "ts:asc", target_size=4_000)
    first = load(pool, [pa.table({"ts": range(0, 1000), "s": [f"s{i % 5}" for i in range(1000)]})])
    load(pool, [pa.table({"ts": range(1000, 2000), "x": [1.5] * 1000})])
    where = "ts >= 900 AND ts < 1100 AND (s = 's1' OR s IS NULL)"
    expected = sorted(pool.read(where=where, columns=["ts", "s"])["ts"].to_pylist())
    readers = ["lake"] if lake.config.uri.startswith("s3://") else ["lake", "parquet", "auto"]
    for reader in readers:
        df = spark_read(spark, pool, where=where, columns=["ts", "s"], reader=reader)
        assert df.columns == ["ts", "s"]
        assert sorted(r.ts for r in df.collect()) == expected, reader
        old = spark_read(spark, pool, first.id, reader=reader)
        assert old.count() == 1000 and "x" not in old.columns
    # Pruning happens before Spark: a range in one object gives one file to read.
    files = pool.files(where="ts < 10")
    assert len(files) == 1
    df = spark_read(spark, pool, where="ts < 10", reader="lake")
    assert df.rdd.getNumPartitions() == 1 and df.count() == 10
    with pytest.raises(UsageError, match="nope"):
        spark_read(spark, pool, where="nope > 1")


def test_spark_delete_keys(spark: Any, lake: Lake) -> None:
    keys = [f"junk/{i}.bin" for i in range(120)]
    for k in keys:
        lake.store.put(k, b"x")
    assert spark_delete_keys(spark, lake.config.uri, keys, batch=25) == 120
    assert list(lake.store.list("junk/")) == []
    assert spark_delete_keys(spark, lake.config.uri, []) == 0


# -- the CLI ----------------------------------------------------------------------------------


def test_cli_compact_with_spark(tmp_path: Path) -> None:
    """The real command in its own process (its own JVM, ``LAKE_SPARK_MASTER``); the test
    below drives ``load --spark`` in-process."""
    uri = str(tmp_path / "lake")
    env = {**os.environ, "LAKE_ROOT": uri, "LAKE_SPARK_MASTER": "local[1]"}
    lake = Lake.init(LakeConfig(uri=uri))
    pool = lake.create_pool("logs", "k:asc", target_size=20_000)
    srcs = []
    for i in range(4):
        p = tmp_path / f"{i}.ndjson"
        p.write_text("".join(json.dumps({"k": j * 4 + i, "v": i}) + "\n" for j in range(300)))
        srcs.append(p)
    for s in srcs:
        load(pool, [s])
    out = subprocess.run(
        [sys.executable, "-m", "lake_cli", "compact", "--spark", "-p", "logs"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "compacted 4 objects" in out.stdout and out.stdout.strip().endswith("committed")
    assert pool.read()["k"].to_pylist() == list(range(1200))
    assert len(pool.snapshot(pool.tip()).objects) == 1


def test_cli_spark_load_errors_and_output_are_the_local_ones(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process (the test session's Spark): the same message and exit code as ``lake load``."""
    from contextlib import contextmanager

    from lake_cli import main
    from lake_cli.commands import spark as cli_spark

    @contextmanager
    def shared(master: str | None, what: str) -> Iterator[Any]:
        assert master in ("spark://nowhere:7077", None) and what in ("load", "compact")
        yield spark

    monkeypatch.setattr(cli_spark, "spark_session_for", shared)
    uri = str(tmp_path / "lake")
    Lake.init(LakeConfig(uri=uri)).create_pool("logs", "k:asc")
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"k": 1}\n{"k": \n')
    results = []
    for flags in ([], ["--spark"], ["--spark-master", "spark://nowhere:7077"]):
        code = main(["--lake", uri, "load", *flags, "-p", "logs", str(bad)])
        results.append((code, capsys.readouterr().err))
    assert results[0][0] == 1 and "line 2" in results[0][1] and str(bad) in results[0][1]
    assert results[1] == results[0] and results[2] == results[0]
    good = tmp_path / "good.ndjson"
    good.write_text("".join(json.dumps({"k": i}) + "\n" for i in range(100)))
    code = main(["--lake", uri, "load", "--spark", "-p", "logs", str(good), "-m", "via spark"])
    out = capsys.readouterr().out.strip()
    pool = Lake.open(LakeConfig(uri=uri)).pool("logs")
    # The same output as a local load: the row count, then the commit line last.
    assert code == 0 and out.splitlines() == [
        "loaded 100 rows in 1 object",
        f"{pool.tip()} committed",
    ]
    assert pool.read_commit(pool.tip()).message == "via spark"
    code = main(["--lake", uri, "compact", "--spark", "-p", "logs"])
    assert code == 0 and capsys.readouterr().out.strip() == "nothing to compact"


def test_s3_objects_written_by_tasks_are_in_the_bucket(spark: Any, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri))
    pool = lake.create_pool("p", "k:asc")
    commit = spark_load(
        spark, pool, spark.createDataFrame([(i, i * 2) for i in range(50)], "k long, v long")
    )
    store = S3ObjectStore.from_uri(uri)
    for obj in commit.adds():
        assert store.head(pool.layout.data(obj.id)).size == obj.size


# -- tombstone cleanup and vacate on Spark ------------------------------------------------------


def _littered_pool(uri: str, name: str, clock: FakeClock) -> Pool:
    """A pool with every kind of garbage: compacted-away and deleted objects cut by a vacate,
    an orphan of a failed load, a dropped branch's data, and cut history metadata."""
    from lake_core.changes import delete_objects
    from lake_core.inflight import MIN_ORPHAN_AGE
    from lake_core.maintenance import vacate

    lake = Lake.open(LakeConfig(uri=uri, user="t", clock=clock))
    pool = lake.create_pool(name, "k:asc", target_size=64 * 1024)
    commits = [load(pool, [pa.table({"k": [i, i + 100], "v": [i, i]})]) for i in range(8)]
    clock.advance(timedelta(minutes=1))
    delete_objects(pool, [commits[0].adds()[0].id, commits[1].adds()[0].id])
    compact(pool)
    pool.create_branch("dev")
    load(pool, [pa.table({"k": [999], "v": [9]})], "dev")
    pool.delete_branch("dev")

    def boom(_: object) -> None:
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        load(pool, [pa.table({"k": [5]})], on_object=boom)
    clock.advance(timedelta(hours=1))
    vacate(pool, clock.now())
    load(pool, [pa.table({"k": [7]})])
    clock.advance(MIN_ORPHAN_AGE + timedelta(hours=1))
    return pool


def test_spark_cleanup_deletes_exactly_what_the_local_path_does(
    spark: Any, lake_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    import lake_spark.cleanup as spark_cleanup_module
    from lake_core.maintenance import cleanup
    from lake_spark import spark_cleanup

    clock = FakeClock()
    Lake.init(LakeConfig(uri=lake_uri, user="t", clock=clock))
    local_twin = _littered_pool(lake_uri, "local", clock)
    pool = _littered_pool(lake_uri, "spark", clock)
    rows = pool.read()
    before = {i.key for i in pool.store.list(f"pools/{pool.id}/")}

    plan = cleanup(pool, timedelta(hours=1), dry_run=True)  # the local planner's verdict
    assert plan.tombstoned >= 4 and plan.orphans == 1 and plan.commits > 0

    batches: list[int] = []
    real = spark_cleanup_module.spark_delete_keys

    def recording(spark_: Any, uri: str, keys: Any, batch: int = 5000) -> int:
        batches.append(len(keys))
        return real(spark_, uri, keys, batch)

    monkeypatch.setattr(spark_cleanup_module, "spark_delete_keys", recording)
    done = spark_cleanup(spark, pool, timedelta(hours=1), batch=2)
    assert done == dataclasses.replace(plan, dry_run=False)
    assert batches and batches[0] == len(plan.objects)  # the data deletes went to Spark tasks
    after = {i.key for i in pool.store.list(f"pools/{pool.id}/")}
    removed = before - after
    assert len(removed) == done.files and not after - before
    assert {pool.layout.data(o) for o in plan.objects} <= removed
    fresh = Lake.open(LakeConfig(uri=lake_uri)).pool("spark")
    assert fresh.read().equals(rows)
    assert_objects_intact(fresh)
    assert cleanup(fresh, timedelta(hours=1), now=clock.now()).files == 0

    # The twin pool, cleaned up by the local path, loses the same kinds and numbers of files.
    local = cleanup(local_twin, timedelta(hours=1))
    keys = ("tombstoned", "orphans", "commits", "snapshots", "journal_entries", "pending", "held")
    assert {k: getattr(local, k) for k in keys} == {k: getattr(done, k) for k in keys}


def test_cli_cleanup_with_spark_prints_what_the_local_command_prints(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from contextlib import contextmanager

    from lake_cli import main
    from lake_cli.commands import spark as cli_spark

    @contextmanager
    def shared(master: str | None, what: str) -> Iterator[Any]:
        assert master is None and what == "cleanup"
        yield spark

    monkeypatch.setattr(cli_spark, "spark_session_for", shared)
    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri))
    outputs = []
    for name, flags in (("a", []), ("b", ["--spark"])):
        pool = lake.create_pool(name, "k:asc")
        for i in range(3):
            load(pool, [pa.table({"k": [i]})])
        compact(pool)
        code = main(["--lake", uri, "cleanup", *flags, "-p", name, "--grace", "0"])
        out = capsys.readouterr().out
        assert code == 0
        outputs.append(
            re.sub(r"--before \S+`", "--before TIME`", out.replace(f"-p {name} ", "-p POOL "))
        )
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("nothing to remove\n3 deleted files are still referenced")
    code = main(["--lake", uri, "cleanup", "--spark", "-p", "b", "--grace", "soon"])
    assert code == 2 and capsys.readouterr().err.startswith("error: invalid duration")


def test_spark_retention_vacates_then_cleans_up(spark: Any, tmp_path: Path) -> None:
    from lake_core.changes import delete_objects
    from lake_core.errors import HistoryVacatedError
    from lake_spark import spark_retention

    clock = FakeClock()
    lake = Lake.init(LakeConfig(uri=str(tmp_path / "lake"), user="t", clock=clock))
    pool = lake.create_pool("r", "k:asc")
    first = load(pool, [pa.table({"k": [1, 2]})])
    load(pool, [pa.table({"k": [3]})])
    clock.advance(timedelta(minutes=1))
    delete_objects(pool, [first.adds()[0].id])
    clock.advance(timedelta(minutes=1))
    vacated, cleaned = spark_retention(spark, pool, clock.now(), timedelta(0))
    assert vacated.tails == {"main": pool.tip()}
    assert cleaned.objects == (first.adds()[0].id,) and cleaned.tombstoned == 1
    assert not pool.store.exists(pool.layout.data(first.adds()[0].id))
    fresh = Lake.open(LakeConfig(uri=str(tmp_path / "lake"))).pool("r")
    assert fresh.read()["k"].to_pylist() == [3]
    with pytest.raises(HistoryVacatedError):
        fresh.read(first.id)
