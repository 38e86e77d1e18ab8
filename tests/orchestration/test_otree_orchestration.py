"""OTree pools in the Dagster code location, against a real temp lake: a pools.yaml entry with
``layout: otree`` creates the pool with its index; landed files are ingested into it (the
materialization shows the tree per depth); the compaction sensor asks for a run only when
``lake optimize`` has work; the compaction job optimizes (never LSM-compacts) an OTree pool;
the fragmentation check follows; bad OTree settings are refused when the config is parsed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lake_core import Lake, LakeConfig
from lake_core.otree.blocks import revision_of
from lake_orchestration.config import parse_pools_config
from lake_orchestration.definitions import build_definitions
from lake_orchestration.resources import LakeResource

POOLS_YAML = """
pools:
  - name: trips
    key: [id]
    order: asc
    layout: otree
    index: [x, y]
    cube_size: 50
    landing: landing/trips
    formats: [ndjson]
    maintenance:
      compaction: {cron: "*/30 * * * *", sensor_interval_seconds: 30}
"""


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _rows(start: int, n: int, scale: float) -> list[dict[str, Any]]:
    return [
        {"id": start + i, "x": ((i * 37) % 101) * scale / 100, "y": ((i * 53) % 97) * scale / 97}
        for i in range(n)
    ]


def test_otree_pool_ingest_optimize_and_sensor(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    lake_uri = str(tmp_path / "lake")
    Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    config = parse_pools_config(POOLS_YAML, tmp_path, env={})
    resource = LakeResource(uri=lake_uri)
    defs = build_definitions(config, resource)
    landing = Path(config.pool("trips").landing or "")
    landing.mkdir(parents=True)

    def ingest(name: str, rows: list[dict[str, Any]]) -> Any:
        (landing / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        result = defs.resolve_job_def("ingest_trips").execute_in_process(instance=instance)
        assert result.success
        return result

    first = ingest("a.ndjson", _rows(0, 400, 1.0))
    (mat,) = first.asset_materializations_for_node("trips")
    assert "lake/otree_depths" in mat.metadata and mat.metadata["lake/otree_revisions"].value == 1
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("trips")
    assert pool.config.otree is not None and pool.config.otree.columns == ("x", "y")

    def tick(cursor: str | None) -> dg.SensorResult:
        sensor = defs.resolve_sensor_def("trips_fragmentation")
        with dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"lake": resource}, definitions=defs
        ) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        return result

    quiet = tick(None)
    assert not quiet.run_requests and "nothing to optimize" in str(quiet.skip_reason)
    ingest("b.ndjson", _rows(400, 100, 3.0))  # wider: a second revision
    asked = tick(quiet.cursor)
    assert len(asked.run_requests or []) == 1
    job = defs.resolve_job_def("compact_trips")
    run = job.execute_in_process(instance=instance)
    assert run.success
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("trips")
    latest = pool.config.otree.latest  # type: ignore[union-attr]
    assert latest is not None and latest.id == 2
    objects = list(pool.snapshot(pool.tip()).objects.values())
    assert {revision_of(o) for o in objects} == {2}
    assert sorted(pool.read()["id"].to_pylist()) == list(range(500))
    (log,) = [c for c in pool.log()][:1]
    assert log.extra.get("kind") == "compaction" and "optimize" in (log.meta or {})
    observations = [e for e in run.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    assert observations
    again = job.execute_in_process(instance=instance)  # nothing to do now
    assert again.success
    assert pool.tip() == Lake.open(LakeConfig(uri=lake_uri)).pool("trips").tip()


@pytest.mark.parametrize(
    "entry, message",
    [
        ("layout: otree", "index"),
        ("layout: otree\n    index: [x, x]", "twice"),
        ("layout: otree\n    index: [x]\n    mode: upsert", "OTree"),
        ("index: [x]", "layout: otree"),
    ],
)
def test_bad_otree_settings_are_refused(tmp_path: Path, entry: str, message: str) -> None:
    text = f"pools:\n  - name: t\n    key: [id]\n    {entry}\n"
    with pytest.raises(Exception, match=message):
        parse_pools_config(text, tmp_path, env={})
