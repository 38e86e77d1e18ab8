"""The `spark` engine behind the pool assets: ingest and compaction run through lake_spark on a
local Spark session configured by dagster-pyspark's resource, with the same result as the
local engine."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster_pyspark import LazyPySparkResource

from lake_core import Lake
from lake_core.loading import load
from lake_orchestration.config import parse_pools_config
from lake_orchestration.definitions import build_definitions
from lake_orchestration.resources import LakeResource

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("lake_spark") is None or shutil.which("java") is None,
        reason="needs lake_spark, pyspark and java",
    ),
]

POOLS = """
pools:
  - {name: events, key: [ts], order: asc, landing: landing, formats: [ndjson]}
"""


@pytest.fixture(scope="module")
def stop_spark() -> Iterator[None]:
    """Stop the session this module started, so later modules build their own."""
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def test_spark_engine_matches_local(tmp_path: Path, stop_spark: None) -> None:
    (tmp_path / "landing").mkdir()
    for i in range(3):
        rows = [{"ts": (j * 7 + i) % 50, "v": f"f{i}-{j}"} for j in range(40)]
        (tmp_path / "landing" / f"f{i}.ndjson").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    config = parse_pools_config(POOLS, tmp_path, env={})
    results = {}
    for engine in ("local", "spark"):
        uri = str(tmp_path / f"lake-{engine}")
        Lake.init(uri)
        resource = LakeResource(
            uri=uri,
            engine=engine,  # type: ignore[arg-type]
            spark=LazyPySparkResource(spark_config={"spark.master": "local[2]"}),
        )
        defs = build_definitions(config, resource)
        with dg.instance_for_test() as instance:
            result = defs.resolve_job_def("ingest_events").execute_in_process(instance=instance)
            assert result.success
            (event,) = result.get_asset_materialization_events()
            assert event.materialization.metadata["dagster/row_count"].value == 120
            pool = Lake.open(uri).pool("events")
            results[engine] = pool.read().to_pylist()
            if engine == "spark":
                # Two more overlapping loads, then compaction on Spark.
                for k in range(2):
                    load(pool, [pa.table({"ts": [k, 49 - k], "v": ["x", "y"]})])
                compacted = defs.resolve_job_def("compact_events").execute_in_process(
                    instance=instance
                )
                assert compacted.success
                commit = pool.read_commit(pool.tip() or "")
                assert commit.extra["kind"] == "compaction" and commit.author == "dagster"
                assert pool.read().num_rows == 124
    assert results["spark"] == results["local"]  # same rows, same order


UPSERT_POOLS = """
pools:
  - {name: cdc, key: [id], order: asc, landing: cdc, formats: [ndjson], mode: upsert,
     delete_when: "op = 'd'"}
"""


def test_spark_engine_upserts_like_local(
    tmp_path: Path, stop_spark: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upsert pool's ingest on the spark engine (lake_spark.spark_upsert) gives the local
    engine's rows and counts, over two runs (the second rewrites what the first wrote)."""
    from lake_orchestration import engine as engine_module

    (tmp_path / "cdc").mkdir()
    batches = [
        [{"id": i, "v": f"a{i}", "op": "c"} for i in range(60)],
        [{"id": i, "v": f"b{i}", "op": "d" if i % 3 == 0 else "u"} for i in range(0, 90, 2)]
        + [{"id": 4, "v": "last", "op": "u"}, {"v": "keyless", "op": "c"}],
    ]
    config = parse_pools_config(UPSERT_POOLS, tmp_path, env={})
    results: dict[str, Any] = {}
    for engine in ("local", "spark"):
        uri = str(tmp_path / f"lake-{engine}")
        Lake.init(uri)
        resource = LakeResource(
            uri=uri,
            engine=engine,  # type: ignore[arg-type]
            spark=LazyPySparkResource(spark_config={"spark.master": "local[2]"}),
        )
        defs = build_definitions(config, resource)
        if engine == "spark":

            def local_upsert(*args: Any, **kwargs: Any) -> Any:
                raise AssertionError("the spark engine ran the local upsert")

            monkeypatch.setattr(engine_module, "upsert", local_upsert)
        counts = []
        with dg.instance_for_test() as instance:
            for n, rows in enumerate(batches):
                (tmp_path / "cdc" / f"{n}.ndjson").write_text(
                    "".join(json.dumps(r) + "\n" for r in rows)
                )
                result = defs.resolve_job_def("ingest_cdc").execute_in_process(
                    instance=instance,
                    run_config={"ops": {"cdc": {"config": {"files": [f"{n}.ndjson"]}}}},
                )
                assert result.success
                (event,) = result.get_asset_materialization_events()
                md = event.materialization.metadata
                counts.append(
                    tuple(md[f"lake/{k}"].value for k in ("inserted", "updated", "deleted"))
                )
            for f in ("0.ndjson", "1.ndjson"):
                (tmp_path / "cdc" / f).unlink()
        results[engine] = (Lake.open(uri).pool("cdc").read().to_pylist(), counts)
    rows, counts = results["local"]
    # 60 inserted; then of the 45 even ids below 90, 15 are deletes (10 of live ids), the
    # other updates (20 of live ids, 10 new), id 4's last row wins; the keyless row is new.
    assert counts == [(60, 0, 0), (11, 20, 10)]
    assert len(rows) == 61 and {"id": 4, "v": "last", "op": "u"} in rows
    assert results["spark"] == results["local"]  # same rows, same order, same counts
