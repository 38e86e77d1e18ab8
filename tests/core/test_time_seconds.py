"""A ``time32`` column of seconds: Parquet stores times in milliseconds at the finest-but-one
unit it has, so such a column read back from an object is ``time32[ms]``. Loads normalize it to
milliseconds, so the pool's type and its objects agree and the rows read back (before, the
pool took ``time32[s]`` and every read of it failed with a schema conflict)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from lake_core import Lake


def test_a_time_of_seconds_loads_and_reads_back(lake: Lake) -> None:
    pool = lake.create_pool("t", "k:asc")
    times = [dt.time(1, 2, 3), None, dt.time(23, 59, 59)]
    pool.load(pa.table({"k": [1, 2, 3], "clock": pa.array(times, pa.time32("s"))}))
    assert pool.schema().field("clock").type == pa.time32("ms")
    got = pool.read()
    assert got.column("clock").to_pylist() == times
    assert lake.sql("SELECT count(*) FROM t WHERE clock > TIME '12:00:00'").fetchall() == [(1,)]
