"""Derived pools in the Dagster code location, against a real temp lake: a ``derived:`` entry
of pools.yaml is an asset downstream of its source's asset; materializing it creates the
derived pool, later runs refresh it (incrementally after an ingest), the metadata names the
source commit it reflects, the sensor asks for a run exactly when the source moved, and bad
entries are refused when the config is parsed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lake_core import Lake, LakeConfig
from lake_core.derived.lineage import reflected
from lake_orchestration.config import parse_pools_config
from lake_orchestration.definitions import build_definitions
from lake_orchestration.resources import LakeResource

DEFINITION = (
    "SELECT date_trunc('day', ts) AS day, kind, count(*) AS n, sum(v) AS v_sum FROM events "
    "GROUP BY ALL"
)
POOLS_YAML = f"""
pools:
  - name: events
    key: [ts]
    order: asc
    landing: landing/events
    formats: [ndjson]
derived:
  - name: daily
    from: events
    sql: "{DEFINITION}"
    sensor: {{interval_seconds: 10}}
"""


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {"ts": f"2026-02-{1 + i % 5:02d}T{i % 24:02d}:00:00Z", "kind": "xy"[i % 2], "v": i}
        for i in range(start, start + n)
    ]


def test_derived_asset_sensor_and_refresh(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lake_uri = str(tmp_path / "lake")
    Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    config = parse_pools_config(POOLS_YAML, tmp_path, env={})
    resource = LakeResource(uri=lake_uri)
    defs = build_definitions(config, resource)
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey("daily")).parent_keys == {dg.AssetKey("events")}
    landing = Path(config.pool("events").landing or "")
    landing.mkdir(parents=True)

    def ingest(name: str, rows: list[dict[str, Any]]) -> None:
        (landing / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert defs.resolve_job_def("ingest_events").execute_in_process(instance=instance).success

    def tick(cursor: str | None) -> dg.SensorResult:
        sensor = defs.resolve_sensor_def("daily_refresh")
        with dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"lake": resource}, definitions=defs
        ) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        return result

    assert "does not exist yet" in str(tick(None).skip_reason)
    ingest("a.ndjson", _rows(0, 100))
    asked = tick(None)
    assert len(asked.run_requests or []) == 1
    refresh = defs.resolve_job_def("refresh_daily")

    def run() -> dict[str, Any]:
        result = refresh.execute_in_process(instance=instance)
        assert result.success
        (mat,) = result.asset_materializations_for_node("daily")
        return {k: v.value for k, v in mat.metadata.items()}

    first = run()
    lake = Lake.open(LakeConfig(uri=lake_uri))
    tip = lake.pool("events").tip()
    assert (first["lake/mode"], first["lake/source_commit"]) == ("initial", tip)
    assert reflected(lake.pool("daily")) == tip
    quiet = tick(asked.cursor)
    assert not quiet.run_requests and "reflects" in str(quiet.skip_reason)
    ingest("b.ndjson", _rows(100, 40))
    again = tick(quiet.cursor)
    (request,) = again.run_requests or []
    lake = Lake.open(LakeConfig(uri=lake_uri))
    tip = lake.pool("events").tip()
    assert request.run_key == f"daily:refresh:{tip}"
    second = run()
    assert (second["lake/mode"], second["lake/source_commit"]) == ("incremental", tip)
    assert second["lake/source_rows_read"] == 40
    picture = second["lake/histogram"]  # the latest days' counts, as bars
    assert picture.splitlines()[0] == "| day | rows | |" and len(picture.splitlines()) == 2 + 5
    got = lake.sql("SELECT kind, count(*) AS n, sum(v) AS s FROM events GROUP BY ALL ORDER BY 1")
    assert got.fetchall() == [("x", 70, sum(range(0, 140, 2))), ("y", 70, sum(range(1, 140, 2)))]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('  - name: d\n    from: nope\n    sql: "' + DEFINITION + '"', "not in pools"),
        ('  - name: events\n    from: events\n    sql: "' + DEFINITION + '"', "twice"),
        ('  - name: d\n    from: events\n    sql: "SELECT count(*) AS n FROM events"', "bucket"),
    ],
)
def test_bad_derived_entries_are_refused(tmp_path: Path, entry: str, message: str) -> None:
    text = "pools:\n  - name: events\n    key: [ts]\nderived:\n" + entry + "\n"
    with pytest.raises(Exception, match=message):
        parse_pools_config(text, tmp_path, env={})


DAILY_YAML = f"""
pools:
  - name: events
    key: [ts]
    order: asc
    partition_by: day(ts)
    partitions: {{start: 2026-02-01, end: 2026-02-08}}
derived:
  - name: daily
    from: events
    sql: "{DEFINITION}"
"""


def test_a_daily_source_makes_a_partitioned_derived_asset(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """A partition's run refreshes the derived pool and rebuilds that day's buckets (a
    backfill); the sensor names the last partition."""
    import pyarrow as pa

    lake_uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    config = parse_pools_config(DAILY_YAML, tmp_path, env={})
    resource = LakeResource(uri=lake_uri)
    defs = build_definitions(config, resource)
    job = defs.resolve_job_def("refresh_daily")
    source = lake.create_pool("events", "ts:asc", partition_by="day(ts)")
    rows = _rows(0, 100)
    table = pa.Table.from_pylist(rows).set_column(
        0, "ts", pa.array([r["ts"] for r in rows]).cast(pa.timestamp("us", tz="UTC"))
    )
    source.load(table)
    first = job.execute_in_process(instance=instance, partition_key="2026-02-03")
    assert first.success
    (mat,) = first.asset_materializations_for_node("daily")
    assert mat.partition == "2026-02-03" and mat.metadata["lake/mode"].value == "initial"
    again = job.execute_in_process(instance=instance, partition_key="2026-02-02")
    (mat,) = again.asset_materializations_for_node("daily")
    # Nothing new in the source: the run still rebuilds that day's buckets (a backfill).
    assert mat.metadata["lake/mode"].value == "recomputed"
    assert mat.metadata["lake/source_rows_read"].value == 20  # one day of five
    got = Lake.open(LakeConfig(uri=lake_uri)).sql(
        "SELECT kind, sum(n) AS n FROM daily GROUP BY ALL ORDER BY 1"
    )
    assert got.fetchall() == [("x", 50), ("y", 50)]
    source.load(table.slice(0, 10))
    sensor = defs.resolve_sensor_def("daily_refresh")
    with dg.build_sensor_context(
        instance=instance, cursor=None, resources={"lake": resource}, definitions=defs
    ) as ctx:
        result = sensor(ctx)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    assert request.partition_key == "2026-02-07"
