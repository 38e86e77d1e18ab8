"""Search indexes in the Dagster code location, against a real temp lake: the
``objects_indexed`` check fails (a warning) while a rule covering the pool has objects left to
index, the index sensor requests the index job, the job indexes them in a commit by Dagster's
user, and the check passes; a pool asset materialized after the rule exists is indexed in its
own commit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lake_core import Lake, LakeConfig
from lake_orchestration.assets import build_pool_asset
from lake_orchestration.checks import OBJECTS_INDEXED, build_pool_checks
from lake_orchestration.config import parse_pools_config
from lake_orchestration.definitions import build_definitions
from lake_orchestration.resources import LakeResource

POOLS_YAML = """
pools:
  - name: events
    key: [ts]
    order: asc
    landing: landing/events
    formats: [ndjson]
"""


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


class Env:
    def __init__(self, base: Path) -> None:
        self.lake_uri = str(base / "lake")
        self.lake = Lake.init(LakeConfig(uri=self.lake_uri, user="tester"))
        self.config = parse_pools_config(POOLS_YAML, base, env={})
        self.resource = LakeResource(uri=self.lake_uri)
        self.defs = build_definitions(self.config, self.resource)
        landing = self.config.pool("events").landing
        assert landing
        self.landing = Path(landing)
        self.landing.mkdir(parents=True)

    def ingest(self, name: str, rows: list[dict[str, Any]], instance: dg.DagsterInstance) -> Any:
        (self.landing / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        result = self.defs.resolve_job_def("ingest_events").execute_in_process(instance=instance)
        assert result.success
        return result

    def tick(self, cursor: str | None, instance: dg.DagsterInstance) -> dg.SensorResult:
        sensor = self.defs.resolve_sensor_def("events_index_sensor")
        with dg.build_sensor_context(
            instance=instance,
            cursor=cursor,
            resources={"lake": self.resource},
            definitions=self.defs,
        ) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        return result


def indexed_check(result: Any) -> Any:
    (check,) = [e for e in result.get_asset_check_evaluations() if e.check_name == OBJECTS_INDEXED]
    return check


def test_check_sensor_and_job_index_what_a_rule_left_out(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    env = Env(tmp_path)
    first = env.ingest("a.ndjson", [{"ts": i, "user": f"u{i}"} for i in range(5)], instance)
    assert indexed_check(first).passed  # no rules: nothing to index
    env.ingest("b.ndjson", [{"ts": i, "user": f"u{i}"} for i in range(3, 8)], instance)
    pool = env.lake.pool("events")
    objects = set(pool.snapshot(pool.tip()).objects)
    assert len(objects) == 2
    assert env.tick(None, instance).run_requests in (None, [])  # no rules yet

    env.lake.create_index_rule("by_user", "user")
    spec = env.config.pool("events")
    checks = dg.materialize(
        [build_pool_asset(spec), build_pool_checks(spec)],
        resources={"lake": env.resource},
        instance=instance,
        selection=dg.AssetSelection.checks_for_assets(dg.AssetKey("events")),
    )
    check = indexed_check(checks)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    md = check.metadata
    assert md["lake/unindexed"].value == 2 and md["lake/unindexed_objects"].value == 2
    assert md["lake/index_rules"].value == ["by_user"]
    assert md["lake/unindexed_by_rule"].value == {"by_user": 2}
    assert md["lake/index_entries"].value == 0

    tick = env.tick(None, instance)
    (request,) = tick.run_requests or []
    assert request.run_key is not None and request.run_key.startswith(f"events:index:{pool.tip()}:")
    run = env.defs.resolve_job_def("index_events").execute_in_process(instance=instance)
    assert run.success
    pool = env.lake.pool("events")
    commit = pool.read_commit(pool.tip())
    assert commit.extra["kind"] == "index" and commit.author == "dagster"
    assert {m.object for m in commit.index_adds()} == objects
    output = run.output_for_node("events_index")
    assert output == [commit.id]
    (observation,) = [
        e for e in run.all_events if e.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    ]
    obs_md = observation.event_specific_data.asset_observation.metadata  # type: ignore[union-attr]
    assert obs_md["lake/indexed"].value == 2 and obs_md["lake/unindexed"].value == 0

    # Indexed: the sensor asks nothing more, at the new tip or again at the old state.
    assert env.tick(tick.cursor, instance).run_requests in (None, [])
    assert env.tick(None, instance).run_requests in (None, [])
    again = env.defs.resolve_job_def("index_events").execute_in_process(instance=instance)
    assert again.output_for_node("events_index") == []
    assert env.lake.pool("events").tip() == commit.id  # nothing committed

    # Ingest after the rule: the load indexes its object in its own commit; the check passes.
    third = env.ingest("c.ndjson", [{"ts": 20, "user": "u20"}], instance)
    check = indexed_check(third)
    assert check.passed and check.metadata["lake/index_entries"].value == 3
    pool = env.lake.pool("events")
    assert len(pool.read_commit(pool.tip()).index_adds()) == 1
