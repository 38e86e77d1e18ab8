"""SQL ``TABLESAMPLE p%`` on an OTree pool is the OTree cut, not DuckDB's row sampling: exactly
the brute-force weight filter (with the query's WHERE too), the same rows every time, pruned by
cube; on both stores (DuckDB over local files, and over the planned fragments on S3). Other
samples stay DuckDB's; mixing sampled and unsampled reads of one OTree pool is refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.otree.settings import parse_layout
from lake_core.sql import run_sql
from lake_core.sql.errors import SqlError
from tests.otreecheck import brute_sample


@pytest.fixture
def lake_with_trips(lake: Lake) -> Lake:
    rng = np.random.default_rng(4)
    n = 8_000
    pool = lake.create_pool("trips", "id", otree=parse_layout("x,y", 400))
    pool.load(
        pa.table(
            {
                "id": pa.array(np.arange(n), pa.int64()),
                "x": rng.normal(size=n),
                "y": rng.random(n),
                "g": pa.array([f"g{i % 5}" for i in range(n)]),
            }
        )
    )
    lake.create_pool("plain", "id").load(pa.table({"id": pa.array(np.arange(50), pa.int64())}))
    return lake


def _ids(lake: Lake, sql: str) -> list[int]:
    return sorted(lake.sql(sql).arrow().read_all().column("id").to_pylist())


def test_tablesample_is_the_otree_cut(lake_with_trips: Lake) -> None:
    lake = lake_with_trips
    full = lake.pool("trips").read()
    for clause, f in (("1%", 0.01), ("10 PERCENT", 0.1), ("system(35%)", 0.35)):
        want = sorted(brute_sample(full, f).column("id").to_pylist())
        assert _ids(lake, f"SELECT id FROM trips TABLESAMPLE {clause}") == want
        assert _ids(lake, f"SELECT id FROM trips TABLESAMPLE {clause}") == want  # the same rows
    cut = brute_sample(full, 0.2)
    want = sorted(cut.filter(pa.compute.greater(cut.column("x"), 0.5)).column("id").to_pylist())
    assert _ids(lake, "SELECT id FROM trips t TABLESAMPLE 20% WHERE t.x > 0.5") == want
    joined = (
        lake.sql("SELECT count(*) AS n FROM trips TABLESAMPLE 20% JOIN plain USING (id)")
        .arrow()
        .read_all()
    )
    assert joined.column("n").to_pylist() == [
        sum(1 for i in cut.column("id").to_pylist() if i < 50)
    ]
    run = run_sql("SELECT count(*) FROM trips TABLESAMPLE 1%", lake.pool, lake)
    run.relation.arrow().read_all()
    stats = run.stats()["trips"]
    assert stats["otree_row_groups_pruned"] + stats["otree_objects_pruned"] > 0
    assert stats["rows_read"] < full.num_rows / 5


def test_other_samples_are_duckdbs_and_mixed_reads_are_refused(lake_with_trips: Lake) -> None:
    lake = lake_with_trips
    rows = lake.sql("SELECT id FROM trips TABLESAMPLE 7 ROWS").arrow().read_all()
    assert rows.num_rows == 7
    plain = lake.sql("SELECT count(*) AS n FROM plain TABLESAMPLE 100%").arrow().read_all()
    assert plain.column("n").to_pylist() == [50]
    with pytest.raises(SqlError, match="sampled alike"):
        lake.sql("SELECT count(*) FROM trips TABLESAMPLE 1% JOIN trips t2 USING (id)")
    with pytest.raises(SqlError, match="sampled alike"):
        lake.sql(
            "SELECT count(*) FROM trips TABLESAMPLE 1% JOIN trips t2 TABLESAMPLE 2% USING (id)"
        )
