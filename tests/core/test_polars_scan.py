"""``Pool.to_polars``: a LazyFrame of a snapshot (branch, commit, as of a time) whose filters
prune objects by their recorded stats, on local disk and on moto S3. Pruning is measured by
the files pyarrow actually opens (a counting filesystem wrapped around the store's own)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lake_core import Lake
from lake_core.loading import load
from lake_core.pool import Pool

pl = pytest.importorskip("polars")

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


class _Counting(pafs.FileSystemHandler):
    """Delegates to ``inner``; records the paths opened for reading."""

    def __init__(self, inner: pafs.FileSystem) -> None:
        self.inner = inner
        self.opened: list[str] = []

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: Any) -> bool:
        return other is self

    def get_file_info(self, paths: list[str]) -> Any:
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.inner.get_file_info(selector)

    def open_input_file(self, path: str) -> Any:
        self.opened.append(path)
        return self.inner.open_input_file(path)

    def open_input_stream(self, path: str) -> Any:
        self.opened.append(path)
        return self.inner.open_input_stream(path)

    def _read_only(self, *args: Any) -> Any:
        raise OSError("read-only in this test")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def _count_opens(pool: Pool) -> _Counting:
    """Route the pool's Arrow reads through a counting handler around the real filesystem."""
    real = pool.store.arrow_location
    fs0, _ = real(pool.layout.data("x"))
    handler = _Counting(fs0)
    counting = pafs.PyFileSystem(handler)
    pool.store.arrow_location = lambda key: (counting, real(key)[1])  # type: ignore[method-assign]
    return handler


def _day(d: int, n: int = 400) -> pa.Table:
    """Day ``d``: ``n`` rows keyed by ts, a label, a nullable int; day 3 has an extra column."""
    ts = [DAY0 + timedelta(days=d, seconds=200 * i) for i in range(n)]
    cols: dict[str, Any] = {
        "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "label": [f"d{d}-{i % 7}" for i in range(n)],
        "v": [None if i % 10 == 0 else d * 1000 + i for i in range(n)],
    }
    if d == 3:
        cols["extra"] = ["x"] * n
    return pa.table(cols)


def _pool(lake: Lake) -> Pool:
    pool = lake.create_pool("pl", "ts:asc")
    for d in range(6):  # one load per day: six objects with disjoint key ranges
        load(pool, [_day(d)])
    return pool


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(frame.collect().rows(), key=repr)


def _lake_rows(pool: Pool, where: str | None = None, ref: str | None = None) -> list[Any]:
    table = pool.read(ref, where=where)
    return sorted(pl.from_arrow(table).rows(), key=repr)


def test_frame_equals_the_snapshot_and_filters_prune(lake: Lake) -> None:
    pool = _pool(lake)
    opened = _count_opens(pool)
    lf = pool.to_polars()
    assert isinstance(lf, pl.LazyFrame)
    assert lf.collect_schema().names() == ["ts", "label", "v", "extra"]
    assert _rows(lf) == _lake_rows(pool)
    assert len(set(opened.opened)) == 6

    opened.opened.clear()
    day2 = pl.col("ts") >= DAY0 + timedelta(days=2)
    one_day = lf.filter(day2 & (pl.col("ts") < DAY0 + timedelta(days=3)))
    got = one_day.select("ts", "v").collect()
    assert got.height == 400
    assert got["v"].drop_nulls().min() == 2001
    assert len(set(opened.opened)) == 1  # one object's file opened, not six

    opened.opened.clear()
    assert lf.filter(pl.col("v") == 4005).select("label").collect()["label"].to_list() == ["d4-5"]
    assert len(set(opened.opened)) == 1  # a non-key column's stats prune too

    opened.opened.clear()  # objects without the column hold nulls: only day 3 may match
    assert lf.filter(pl.col("extra").is_not_null()).collect().height == 400
    assert len(set(opened.opened)) == 1

    opened.opened.clear()  # v has nulls: the guarantee keeps every object for IS NULL
    assert lf.filter(pl.col("v").is_null()).collect().height == 6 * 40
    assert lf.filter(pl.col("extra").is_null()).collect().height == 5 * 400


def test_refs_and_time_travel(lake: Lake) -> None:
    pool = _pool(lake)
    before = datetime.now(UTC)
    time.sleep(0.01)
    pool.create_branch("dev")
    load(pool, [_day(10)], branch="dev")
    load(pool, [_day(11)])
    main = pool.to_polars()
    assert _rows(main) == _lake_rows(pool)
    assert main.select(pl.len()).collect().item() == 7 * 400
    dev = pool.to_polars("dev")
    assert _rows(dev) == _lake_rows(pool, ref="dev")
    assert dev.filter(pl.col("ts") >= DAY0 + timedelta(days=9)).collect().height == 400
    then = pool.to_polars(as_of=before)
    assert then.select(pl.len()).collect().item() == 6 * 400
    commit = pool.resolve("dev")
    assert commit is not None
    assert _rows(pool.to_polars(commit)) == _rows(dev)


def test_empty_pool_and_the_import_stays_lazy(lake: Lake) -> None:
    import subprocess
    import sys

    pool = lake.create_pool("empty", "k")
    assert pool.to_polars().collect().height == 0
    code = "import sys, lake_core, lake_core.pool, lake_core.scan; print('polars' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
