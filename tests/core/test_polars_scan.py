"""``Pool.to_polars``: a LazyFrame of a snapshot (branch, commit, as of a time) whose filters
go through the read planner, on local disk and on moto S3: the same rows as the lake's own
read, and pruning measured by the planner's counters of what each collect read."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl
import pyarrow as pa

from lake_core import Lake
from lake_core.loading import load
from lake_core.planning import ReadStats
from lake_core.polars_scan import lake_predicate
from lake_core.pool import Pool

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


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
    read = ReadStats()
    lf = pool.to_polars(stats=read)
    assert isinstance(lf, pl.LazyFrame)
    assert lf.collect_schema().names() == ["ts", "label", "v", "extra"]
    assert _rows(lf) == _lake_rows(pool)
    assert (read.objects_total, read.objects_read, read.rows_read) == (6, 6, 2400)

    def counted(frame: Any) -> tuple[Any, int, int]:
        before = (read.objects_read, read.rows_read)
        got = frame.collect()
        return got, read.objects_read - before[0], read.rows_read - before[1]

    day2 = pl.col("ts") >= DAY0 + timedelta(days=2)
    got, objects, rows = counted(lf.filter(day2 & (pl.col("ts") < DAY0 + timedelta(days=3))))
    assert got.height == 400 and got["v"].drop_nulls().min() == 2001
    assert objects == 1 and rows == 400  # one object read, not six
    got, objects, _ = counted(lf.filter(pl.col("v") == 4005).select("label"))
    assert got["label"].to_list() == ["d4-5"] and objects == 1  # a non-key column prunes too
    got, objects, _ = counted(lf.filter(pl.col("extra").is_not_null()))
    assert got.height == 400 and objects == 1  # objects without the column hold nulls
    got, objects, _ = counted(lf.filter(pl.col("label").is_in(["d1-3", "d5-0"])))
    assert got.height == 2 * 57 + 1 and objects == 2
    got, objects, _ = counted(lf.filter(pl.col("v").is_between(3000, 3010)))
    assert got["v"].to_list() == list(range(3001, 3010)) and objects == 1
    # Untranslatable terms are dropped from an AND (pruning stays), and widen nothing else.
    got, objects, _ = counted(lf.filter((pl.col("label").str.len_chars() > 3) & day2))
    assert got.height == 4 * 400 and objects == 4
    got, objects, _ = counted(lf.filter((pl.col("label").str.len_chars() > 3) | day2))
    assert got.height == 6 * 400 and objects == 6
    got, objects, _ = counted(lf.filter(~(pl.col("ts") < DAY0 + timedelta(days=5))))
    assert got.height == 400 and objects == 1
    # Polars' own semantics decide the rows: nulls, and a column an object lacks.
    assert lf.filter(pl.col("v").is_null()).collect().height == 6 * 40
    assert lf.filter(pl.col("extra").is_null()).collect().height == 5 * 400
    assert lf.filter(pl.col("v") > 5000).head(7).collect().height == 7


def test_predicates_translate_soundly() -> None:
    schema = pa.schema(
        [("k", pa.int64()), ("s", pa.string()), ("f", pa.float64()),
         ("t", pa.timestamp("us", tz="UTC")), ("d", pa.date32())]
    )  # fmt: skip

    def sql(e: Any) -> str | None:
        found = lake_predicate(e, schema)
        return None if found is None else str(found)

    assert sql(pl.col("k") > 3) == "k > 3"
    assert sql(pl.lit(3) < pl.col("k")) == "k > 3"
    assert sql(pl.col("f") > 1.5) is None  # floats are never pruned by value (NaN)
    assert sql(pl.col("s") == 3) is None  # Polars would not compare these as the lake does
    assert sql(pl.col("d") == date(2026, 1, 2)) == "d = DATE '2026-01-02'"
    got = sql(pl.col("t") >= datetime(2026, 1, 2, tzinfo=UTC))
    assert got == "t >= TIMESTAMP '2026-01-02T00:00:00+00:00'"
    assert sql((pl.col("k") > 1) & (pl.col("f").sqrt() > 2)) == "k > 1"
    assert sql((pl.col("k") > 1) | (pl.col("f").sqrt() > 2)) is None
    assert sql(~((pl.col("k") > 1) | (pl.col("f").sqrt() > 2))) == "NOT k > 1"
    assert sql(~((pl.col("k") > 1) & (pl.col("f").sqrt() > 2))) is None
    assert sql(pl.col("s").is_in(["a", "b"])) == "s IN ('a', 'b')"
    assert sql(pl.col("s").is_null()) == "s IS NULL"
    assert sql(pl.col("nope") == 1) is None


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
