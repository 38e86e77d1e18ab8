"""The Python API for readers: tables, batch readers, file lists and datasets that other
engines read directly; and snapshot isolation of a running scan."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_core import Lake
from lake_core.loading import load

ROOT = Path(__file__).resolve().parents[2]


def _pool(lake: Lake):  # type: ignore[no-untyped-def]
    pool = lake.create_pool("api", "ts:asc", seek_stride=1024)
    load(pool, [pa.table({"ts": list(range(0, 20000, 2)), "s": ["even"] * 10000})])
    load(pool, [pa.table({"ts": list(range(1, 20000, 2)), "x": [1.5] * 10000})])
    return pool


def test_read_reader_files_dataset(lake: Lake, lake_uri: str) -> None:
    pool = _pool(lake)
    table = pool.read()
    assert table["ts"].to_pylist() == list(range(20000))  # merge on read over two objects
    assert table.schema.names == ["ts", "s", "x"]
    batches = list(pool.scan(order="desc").reader())
    assert pa.Table.from_batches(batches)["ts"][0].as_py() == 19999
    files = pool.files(where="ts < 100")
    assert len(files) == 2
    if lake_uri.startswith("s3://"):
        assert all(f.startswith("s3://") for f in files)
    else:
        assert sum(pq.read_metadata(f).num_rows for f in files) == 20000
    ds = pool.dataset()
    assert ds.count_rows() == 20000
    assert ds.to_table(filter=pa.compute.field("x") == 1.5).num_rows == 10000


def test_duckdb_reads_the_file_list(tmp_path: Path) -> None:
    """DuckDB reads the plain Parquet files. Local disk only: DuckDB's S3 support is its httpfs
    extension, which it downloads at run time, and this machine has no such network (the S3
    file list is checked with pyarrow above)."""
    import duckdb

    pool = _pool(Lake.init(str(tmp_path / "lake")))
    files = pool.files()
    n = duckdb.sql(f"select count(*) from read_parquet({files!r}, union_by_name=true)").fetchall()
    assert n == [(20000,)]


def test_row_group_pruning_and_stats(lake: Lake) -> None:
    pool = _pool(lake)
    scan = pool.scan(where="ts >= 100 AND ts < 110")
    assert scan.to_table()["ts"].to_pylist() == list(range(100, 110))
    assert scan.stats.objects_total == 2 and scan.stats.objects_read == 2
    assert 1 <= scan.stats.row_groups_read < 10  # a handful of small row groups, not all
    assert scan.stats.rows_read < 5000
    none = pool.scan(where="ts > 1000000")
    assert none.to_table().num_rows == 0 and none.stats.objects_read == 0


def test_a_running_scan_is_unaffected_by_later_commits(lake: Lake) -> None:
    pool = lake.create_pool("iso", "ts:asc")
    load(pool, [pa.table({"ts": [1, 2, 3]})])
    reader = pool.scan().reader()
    load(pool, [pa.table({"ts": [0, 4]})])
    assert pa.Table.from_batches(list(reader))["ts"].to_pylist() == [1, 2, 3]
    assert pool.read()["ts"].to_pylist() == [0, 1, 2, 3, 4]


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    src = code.group(1).replace("/tmp/pylake", str(tmp_path / "pylake"))
    exec(compile(src, "README.md", "exec"), {})


def test_composite_key_with_null_secondary_field_reads_in_order(lake: Lake) -> None:
    pool = lake.create_pool("ck", "a,b:asc")
    load(pool, [pa.table({"a": [1, 1, 2], "b": pa.array(["x", None, "y"], pa.string())})])
    load(pool, [pa.table({"a": [1, 3], "b": pa.array([None, "z"], pa.string())})])
    load(pool, [pa.table({"a": [2], "b": ["a"]})])
    rows = [(r["a"], r["b"]) for r in pool.read().to_pylist()]
    assert rows == [(1, "x"), (1, None), (1, None), (2, "a"), (2, "y"), (3, "z")]


def test_default_load_message_counts_objects_in_the_singular_and_plural(tmp_path: Path) -> None:
    pool = Lake.init(str(tmp_path / "lake")).create_pool("msg", "ts:asc", target_size=4096)
    one = load(pool, [pa.table({"ts": [1, 2]})])
    assert one.message == "loaded 1 data object from table #1"
    many = load(pool, [pa.table({"ts": list(range(20000)), "s": ["x" * 40] * 20000})])
    assert len(many.adds()) > 1
    assert many.message == f"loaded {len(many.adds())} data objects from table #1"
