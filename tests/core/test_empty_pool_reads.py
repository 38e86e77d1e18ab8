"""Reading a pool that never held rows (created, nothing loaded): no rows, not an error.

Such a pool has no schema, so a ``--columns`` or ``--where`` naming the columns its rows will
have cannot be checked against anything; the scan reads nothing and returns those columns
typed null. Once the pool has columns (it holds rows, or held them and all were deleted), an
unknown column is a usage error as always. (Found
through the service's load test: a query that raced the first load answered 500 with a
KeyError.)"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import UsageError


def test_an_empty_pool_reads_as_no_rows(lake_uri: str) -> None:
    pool = Lake.init(LakeConfig(uri=lake_uri, user="t")).create_pool("p", "ts:asc")
    assert pool.read(columns=["ts", "msg"]).schema == pa.schema(
        [pa.field("ts", pa.null()), pa.field("msg", pa.null())]
    )
    assert pool.read(columns=["ts"]).num_rows == 0
    assert pool.read(where="ts > 3").num_rows == 0
    assert pool.read(where="ts > 3 and msg = 'x'", columns=["ts"]).column_names == ["ts"]
    assert list(pool.scan(where="ts > 3", columns=["ts"]).batches()) == []

    pool.load(pa.table({"ts": [1, 5], "msg": ["a", "b"]}))
    assert pool.read(where="ts > 3", columns=["ts"]).to_pylist() == [{"ts": 5}]
    with pytest.raises(UsageError, match="unknown column 'nope' in --columns"):
        pool.read(columns=["nope"])
    with pytest.raises(UsageError, match="unknown column 'nope'"):
        pool.read(where="nope > 3")


def test_a_pool_whose_rows_were_all_deleted_still_knows_its_columns(lake_uri: str) -> None:
    pool = Lake.init(LakeConfig(uri=lake_uri, user="t")).create_pool("p", "ts:asc")
    pool.load(pa.table({"ts": [1, 5], "msg": ["a", "b"]}))
    pool.delete(where="ts > 0")
    got = pool.read(where="ts > 3", columns=["msg"])
    assert (got.num_rows, got.schema) == (0, pa.schema([pa.field("msg", pa.string())]))
    with pytest.raises(UsageError, match="unknown column 'nope' in --columns"):
        pool.read(columns=["nope"])
    with pytest.raises(UsageError, match="unknown column 'nope'"):
        pool.read(where="nope > 3")
