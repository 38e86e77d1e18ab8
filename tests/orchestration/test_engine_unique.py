"""The engine seam on a unique pool: a ``mode: load`` pool that someone created unique
(``lake create --unique``) still upserts, as every load into a unique pool does."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core import Lake
from lake_orchestration.engine import load_sources
from lake_orchestration.resources import LakeResource


def test_load_sources_into_a_unique_pool_upserts(tmp_path: Path) -> None:
    resource = LakeResource(uri=str(tmp_path / "lake"))
    Lake.init(resource.config())
    pool = resource.open().create_pool("p", "id:asc", unique=True)
    pool.load(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [2, 3], "v": ["bb", "c"]}), src)
    commit = load_sources(resource, pool, [str(src)], branch="main", message="m", meta=None)
    assert commit.extra["upsert"] == {"inserted": 1, "updated": 1, "deleted": 0}
    got = sorted((r["id"], r["v"]) for r in pool.read().to_pylist())
    assert got == [(1, "a"), (2, "bb"), (3, "c")]
