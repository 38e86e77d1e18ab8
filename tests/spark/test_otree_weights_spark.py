"""The OTree weight equals Spark's own ``hash()`` (real local Spark), on every type an OTree
indexes, single and chained, with nulls, negative zero, non-ASCII strings of every tail length,
dates and timestamps before 1970, and decimals (issue 16: the weight is Qbeast's)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lake_core.otree.weights import spark_hash

N = 1500


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    alphabet = list("abcé€😀xyz0")
    strings = ["".join(rng.choice(alphabet, int(rng.integers(0, 14)))) for _ in range(N)]
    utc = dt.UTC
    return pa.table(
        {
            "i": pa.array(rng.integers(-(2**31), 2**31 - 1, N).astype(np.int32)),
            "l": pa.array(rng.integers(-(2**62), 2**62, N)),
            "d": pa.array(np.where(rng.random(N) < 0.05, -0.0, rng.normal(size=N))),
            "f": pa.array(rng.normal(size=N).astype(np.float32)),
            "s": pa.array([None if i % 17 == 0 else s for i, s in enumerate(strings)]),
            "b": pa.array(
                [None if i % 11 == 0 else bool(x) for i, x in enumerate(rng.random(N) < 0.5)]
            ),
            "dt": pa.array(
                [dt.date(1960, 1, 1) + dt.timedelta(days=int(x)) for x in rng.integers(0, 30000, N)]
            ),
            "ts": pa.array(
                [
                    dt.datetime(1965, 1, 1, tzinfo=utc) + dt.timedelta(microseconds=int(x))
                    for x in rng.integers(0, 2**50, N)
                ]
            ),
            "dec": pa.array(
                [decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-(10**12), 10**12, N)],
                pa.decimal128(15, 2),
            ),
            "sh": pa.array(rng.integers(-30000, 30000, N).astype(np.int16)),
            "by": pa.array(rng.integers(-120, 120, N).astype(np.int8)),
        }
    )


@pytest.mark.parametrize(
    "columns",
    [
        ["i"],
        ["l"],
        ["d"],
        ["f"],
        ["s"],
        ["b"],
        ["dt"],
        ["ts"],
        ["dec"],
        ["sh"],
        ["by"],
        ["d", "s", "ts"],
        ["s", "i", "b"],
    ],
)
def test_weights_equal_sparks_hash(spark: Any, columns: list[str]) -> None:
    table = _table()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    df = spark.createDataFrame(table.to_pandas())
    # Spark sees the types the table has (pandas keeps them; decimals as decimal, not double).
    types = dict(df.dtypes)
    assert types["i"] == "int" and types["l"] == "bigint" and types["f"] == "float"
    assert types["sh"] == "smallint" and types["by"] == "tinyint" and types["dt"] == "date"
    assert types["ts"] == "timestamp" and types["dec"].startswith("decimal")
    df = df.withColumn("_row", F.monotonically_increasing_id())
    rows = df.select("_row", F.hash(*columns).alias("h")).orderBy("_row").collect()
    theirs = [r["h"] for r in rows]
    ours = spark_hash([table.column(c) for c in columns]).tolist()
    assert ours == theirs
