"""The Dagster adapter against real temp lakes: pool assets materialized, sensors and schedules
evaluated with Dagster's test contexts, asset checks on a corrupted lake, maintenance jobs."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.loading import load
from lake_core.stats import ColumnMeta
from lake_core.txn import DEFAULT_TXN_RETENTION
from lake_orchestration.assets import build_pool_asset
from lake_orchestration.checks import (
    FRAGMENTATION,
    NO_SCHEMA_CONFLICTS,
    OBJECTS_EXIST,
    OBJECTS_INDEXED,
    build_pool_checks,
)
from lake_orchestration.config import PoolsConfig, parse_pools_config
from lake_orchestration.definitions import build_definitions, lake_resource_from_env
from lake_orchestration.resources import LakeResource, S3Settings
from lake_orchestration.sensors import plan_landing_tick

POOLS_YAML = """
pools:
  - name: events
    key: [ts]
    order: asc
    target_size: 1MB
    landing: landing/events
    formats: [ndjson, csv]
    txn_retention: 90d
    sensor: {max_files_per_run: 2}
    maintenance:
      compaction: {max_overlapping_objects: 1, max_small_objects: 100}
      retention: {cron: "0 3 * * *", keep: 2d, grace: 1h}
  - name: ops.daily
    key: [ts]
    order: asc
    partition_by: day(ts)
    partitions: {start: 2024-01-01, end: 2024-02-01}
    landing: landing/daily
    formats: [ndjson]
"""


def ndjson(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def day_rows(day: str, n: int, tag: str = "") -> list[dict[str, Any]]:
    return [{"ts": f"{day}T{h:02d}:00:00Z", "v": h, "tag": tag} for h in range(n)]


class Env:
    """A temp lake, its landing folders and the code location built over them."""

    def __init__(self, base: Path, yaml_text: str = POOLS_YAML) -> None:
        self.base = base
        self.lake_uri = str(base / "lake")
        self.lake = Lake.init(LakeConfig(uri=self.lake_uri, user="tester"))
        self.config: PoolsConfig = parse_pools_config(yaml_text, base, env={})
        self.resource = LakeResource(uri=self.lake_uri)
        self.defs = build_definitions(self.config, self.resource)
        for spec in self.config.pools:
            assert spec.landing
            Path(spec.landing).mkdir(parents=True, exist_ok=True)

    def landing(self, pool: str) -> Path:
        landing = self.config.pool(pool).landing
        assert landing
        return Path(landing)

    def drop(self, pool: str, rel: str, text: str) -> Path:
        p = self.landing(pool) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def job(self, name: str) -> dg.JobDefinition:
        return self.defs.resolve_job_def(name)

    def rows(self, pool: str) -> list[dict[str, Any]]:
        return self.lake.pool(pool).read().to_pylist()  # type: ignore[no-any-return]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture(scope="module")
def instance() -> Iterator[dg.DagsterInstance]:
    """One instance for the module: runs are independent, and a fresh one costs seconds."""
    with dg.instance_for_test() as inst:
        yield inst


def materialization(result: Any) -> dict[str, Any]:
    (event,) = result.get_asset_materialization_events()
    return dict(event.materialization.metadata)


# -- the pools config -------------------------------------------------------------------------


def test_pools_config_expands_env_and_resolves_landing(tmp_path: Path) -> None:
    cfg = parse_pools_config(
        "pools:\n  - {name: a.b, landing: '${ROOT:-x}/in', partition_by: 'day(ts)',"
        " partitions: {start: 2024-01-01}}\n  - {name: c, landing: 's3://bkt/p/'}",
        tmp_path,
        env={"ROOT": "landing"},
    )
    a, c = cfg.pools
    assert a.landing == str(tmp_path / "landing" / "in")
    assert a.asset_name == "a__b" and a.daily and a.concurrency_pool == "lake/a.b"
    assert c.landing == "s3://bkt/p" and not c.daily and c.concurrency_pool == "lake/default.c"
    with pytest.raises(ValueError, match="partitions"):
        parse_pools_config("pools: [{name: x, partition_by: 'day(ts)'}]", tmp_path, env={})
    with pytest.raises(ValueError, match="unknown format"):
        parse_pools_config("pools: [{name: x, formats: [xml]}]", tmp_path, env={})
    # How long landing files' transaction records are kept (lake_core.txn, "Expiry").
    assert a.txn_retention == DEFAULT_TXN_RETENTION
    retained = parse_pools_config(
        "pools: [{name: x, txn_retention: 90d}, {name: y, txn_retention: never}]", tmp_path, env={}
    )
    assert [p.txn_retention for p in retained.pools] == [timedelta(days=90), None]
    with pytest.raises(ValueError, match="txn_retention"):
        parse_pools_config("pools: [{name: x, txn_retention: 0}]", tmp_path, env={})


def test_shipped_definitions_load() -> None:
    defs = __import__("lake_orchestration.definitions", fromlist=["defs"]).defs
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {"ingest_flights", "ingest_flights_daily", "compact_flights"} <= set(repo.job_names)
    assert "flights_landing" in {s.name for s in repo.sensor_defs}


# -- pool assets ------------------------------------------------------------------------------


def test_materialize_pool_records_commit_metadata(env: Env, instance: dg.DagsterInstance) -> None:
    env.drop("events", "a.ndjson", ndjson([{"ts": i, "v": "a"} for i in range(5)]))
    env.drop("events", "b.ndjson", ndjson([{"ts": i, "v": "b"} for i in range(3, 8)]))
    env.drop("events", "_tmp.ndjson", ndjson([{"ts": 99}]))  # in-progress name: ignored
    result = env.job("ingest_events").execute_in_process(instance=instance)
    assert result.success
    md = materialization(result)
    pool = env.lake.pool("events")
    assert md["lake/commit"].value == pool.tip()
    assert md["dagster/row_count"].value == 10 == len(env.rows("events"))
    assert md["lake/objects"].value == len(pool.snapshot(pool.tip()).objects)
    assert md["lake/bytes"].value == pool.snapshot(pool.tip()).size
    assert (md["lake/key_min"].value, md["lake/key_max"].value) == ("0", "7")
    assert md["lake/overlapping_objects"].value == 0  # one load: one sorted run
    schema = md["dagster/column_schema"].value
    assert {c.name: c.type for c in schema.columns} == {"ts": "int64", "v": "string"}
    assert result.get_asset_materialization_events()[0].materialization.tags is not None
    commit = pool.read_commit(pool.tip())
    assert commit.author == "dagster"
    assert pool.config.txn_retention == timedelta(days=90)  # created with the pools file's
    assert commit.meta["landing"]["files"] == ["a.ndjson", "b.ndjson"]
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        OBJECTS_EXIST: True, NO_SCHEMA_CONFLICTS: True, FRAGMENTATION: True, OBJECTS_INDEXED: True
    }

    # Re-running ingests nothing twice; a new file is picked up alone.
    again = env.job("ingest_events").execute_in_process(instance=instance)
    assert materialization(again)["lake/files"].value == 0
    assert len(env.rows("events")) == 10
    env.drop("events", "c.ndjson", ndjson([{"ts": 100, "v": "c"}]))
    third = env.job("ingest_events").execute_in_process(instance=instance)
    assert materialization(third)["lake/rows_added"].value == 1
    zone = env.resource.landing(env.config.pool("events"))
    assert zone is not None
    names = ["a.ndjson", "b.ndjson", "c.ndjson", "d.ndjson"]
    assert zone.pending(pool, names) == ["d.ndjson"]
    # Each file is one application transaction recorded in the commit that ingested it.
    assert pool.read_commit(pool.tip()).extra["txn"] == [
        {"app": f"landing:{env.landing('events')}/c.ndjson", "version": 0}
    ]


def test_a_whole_zone_run_leaves_files_older_than_the_txn_retention(
    env: Env, instance: dg.DagsterInstance
) -> None:
    """A file modified longer ago than the pool's txn_retention (90d here) may have been
    ingested with its record expired since: a run over the whole zone cannot tell, so it
    leaves the file (with a warning) rather than ingest it twice; naming it ingests it."""
    old = env.drop("events", "old.ndjson", ndjson([{"ts": 1}]))
    env.drop("events", "new.ndjson", ndjson([{"ts": 2}]))
    long_ago = time.time() - 91 * 86400
    os.utime(old, (long_ago, long_ago))
    result = env.job("ingest_events").execute_in_process(instance=instance)
    assert result.success and [r["ts"] for r in env.rows("events")] == [2]
    logs = instance.all_logs(result.run_id)
    warned = [e.user_message for e in logs if "txn_retention" in e.user_message]
    assert len(warned) == 1 and "old.ndjson" in warned[0]
    config = {"ops": {"events": {"config": {"files": ["old.ndjson"]}}}}
    named = env.job("ingest_events").execute_in_process(instance=instance, run_config=config)
    assert named.success and sorted(r["ts"] for r in env.rows("events")) == [1, 2]


def test_materialize_named_files_only(env: Env, instance: dg.DagsterInstance) -> None:
    env.drop("events", "a.ndjson", ndjson([{"ts": 1}]))
    env.drop("events", "b.ndjson", ndjson([{"ts": 2}]))
    config = {"ops": {"events": {"config": {"files": ["b.ndjson"]}}}}
    result = env.job("ingest_events").execute_in_process(instance=instance, run_config=config)
    assert [r["ts"] for r in env.rows("events")] == [2]
    assert materialization(result)["lake/landing_files"].value == ["b.ndjson"]


def test_daily_partition_is_replaced_atomically(env: Env, instance: dg.DagsterInstance) -> None:
    env.drop("ops.daily", "2024-01-01/a.ndjson", ndjson(day_rows("2024-01-01", 4, "a")))
    env.drop("ops.daily", "2024-01-02/a.ndjson", ndjson(day_rows("2024-01-02", 3, "a")))
    job = env.job("ingest_ops__daily")
    first = job.execute_in_process(instance=instance, partition_key="2024-01-01")
    md = materialization(first)
    assert md["dagster/row_count"].value == 4
    pool = env.lake.pool("ops.daily")
    assert [
        p.value for p in __import__("lake_core.maintenance", fromlist=["x"]).list_partitions(pool)
    ] == ["2024-01-01"]
    # Idempotent: a re-run gives the same rows, not twice as many.
    job.execute_in_process(instance=instance, partition_key="2024-01-01")
    assert len(env.rows("ops.daily")) == 4
    # A late file for that day: the re-run replaces the day with all of its files.
    env.drop("ops.daily", "2024-01-01/late.ndjson", ndjson(day_rows("2024-01-01", 2, "late")))
    job.execute_in_process(instance=instance, partition_key="2024-01-01")
    rows = env.rows("ops.daily")
    assert len(rows) == 6 and sum(r["tag"] == "late" for r in rows) == 2
    commit = pool.read_commit(pool.tip())
    assert commit.extra["kind"] == "partition-rewrite"
    assert {o.partition for o in commit.adds()} == {"2024-01-01"}


def test_daily_range_runs_once_and_rewrites_each_day(
    env: Env, instance: dg.DagsterInstance
) -> None:
    for day, n in [("2024-01-01", 2), ("2024-01-02", 3), ("2024-01-03", 4)]:
        env.drop("ops.daily", f"{day}/x.ndjson", ndjson(day_rows(day, n)))
    spec = env.config.pool("ops.daily")
    result = dg.materialize(
        [build_pool_asset(spec)],
        resources={"lake": env.resource},
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": "2024-01-01",
            "dagster/asset_partition_range_end": "2024-01-03",
        },
    )
    assert result.success
    events = result.get_asset_materialization_events()
    assert sorted(e.partition for e in events) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    md = dict(events[0].materialization.metadata)
    assert md["dagster/row_count"].value == 9
    assert sorted(md["lake/partition_commits"].value) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert len(env.rows("ops.daily")) == 9


def test_misfiled_rows_fail_the_partition_and_commit_nothing(
    env: Env, instance: dg.DagsterInstance
) -> None:
    env.drop("ops.daily", "2024-01-05/x.ndjson", ndjson(day_rows("2024-01-06", 1)))
    result = env.job("ingest_ops__daily").execute_in_process(
        instance=instance, partition_key="2024-01-05", raise_on_error=False
    )
    assert not result.success
    assert env.lake.pool("ops.daily").tip() is None


def test_s3_lake_and_landing_keep_secrets_out_of_events(
    tmp_path: Path, s3_bucket: str, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"s3://{s3_bucket}/lake"
    monkeypatch.setenv("LAKE_ROOT", uri)
    Lake.init(uri)
    yaml_text = f"pools:\n  - {{name: s3pool, key: [ts], landing: 's3://{s3_bucket}/in'}}\n"
    config = parse_pools_config(yaml_text, tmp_path, env={})
    # Exactly what the shipped code location builds from the environment.
    resource = lake_resource_from_env({**os.environ, "LAKE_ROOT": uri})
    assert isinstance(resource.s3, S3Settings)
    s3 = boto3.client("s3")
    s3.put_object(Bucket=s3_bucket, Key="in/2024/a.ndjson", Body=ndjson([{"ts": 1}, {"ts": 2}]))
    defs = build_definitions(config, resource)
    result = defs.resolve_job_def("ingest_s3pool").execute_in_process(instance=instance)
    assert result.success
    assert materialization(result)["dagster/row_count"].value == 2
    assert Lake.open(uri).pool("s3pool").read().num_rows == 2
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    logged = "\n".join(repr(r) for r in instance.all_logs(result.run_id))
    assert secret not in logged
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and secret not in repr(run.run_config)


def test_s3_settings_and_resource_hide_secrets_and_share_one_config() -> None:
    secret, token = "wJalrXUtnFEMI-not-a-real-secret", "FwoGZXIvYXdzE-not-a-real-token"
    s3 = S3Settings(
        endpoint_url="http://s3:9000",
        secret_access_key=secret,
        session_token=token,
        addressing_style="path",
    )
    resource = LakeResource(uri="s3://b/lake", s3=s3)
    config = resource.config()
    for text in (repr(s3), str(s3), repr(resource), str(resource), repr(config), str(config)):
        assert secret not in text and token not in text
    assert config.s3 == resource.s3_config() == s3.to_config()
    assert config.s3 is not None and config.s3.secret_access_key == secret
    assert config.s3.addressing_style == "path"


# -- sensors ----------------------------------------------------------------------------------


def tick(
    env: Env, sensor: str, cursor: str | None, instance: dg.DagsterInstance | None = None
) -> tuple[list[dg.RunRequest], str | None]:
    sensor_def = env.defs.resolve_sensor_def(sensor)
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"lake": env.resource}, definitions=env.defs
    ) as ctx:
        result = sensor_def(ctx)
    assert isinstance(result, dg.SensorResult)
    return list(result.run_requests or []), result.cursor


def test_landing_sensor_takes_stable_files_once(env: Env) -> None:
    env.drop("events", "a.ndjson", ndjson([{"ts": 1}]))
    env.drop("events", "b.csv", "ts\n2\n")
    env.drop("events", "notes.txt", "not a pool format")
    requests, cursor = tick(env, "events_landing", None)
    assert requests == []  # first look: nothing is known to be stable yet
    requests, cursor2 = tick(env, "events_landing", cursor)
    assert len(requests) == 1
    (req,) = requests
    assert req.run_config["ops"]["events"]["config"]["files"] == ["a.ndjson", "b.csv"]
    # The same tick replayed (the cursor was not saved) asks for the same run key: no duplicate.
    replay, _ = tick(env, "events_landing", cursor)
    assert [r.run_key for r in replay] == [req.run_key]
    # The cursor advanced: nothing is requested again.
    again, cursor3 = tick(env, "events_landing", cursor2)
    sizes = {
        p.name: p.stat().st_size for p in env.landing("events").iterdir() if p.suffix != ".txt"
    }
    assert again == [] and json.loads(cursor3 or "{}")["seen"] == sizes


def test_landing_sensor_skips_files_still_growing(env: Env) -> None:
    growing = env.drop("events", "big.ndjson", ndjson([{"ts": 1}]))
    _, cursor = tick(env, "events_landing", None)
    with open(growing, "a") as f:
        f.write(ndjson([{"ts": 2}]))
    requests, cursor = tick(env, "events_landing", cursor)
    assert requests == []  # its size changed between the two looks
    requests, cursor = tick(env, "events_landing", cursor)
    assert len(requests) == 1
    assert requests[0].run_config["ops"]["events"]["config"]["files"] == ["big.ndjson"]


def test_landing_sensor_batches_and_forgets_archived_files(env: Env) -> None:
    for i in range(5):
        env.drop("events", f"f{i}.ndjson", ndjson([{"ts": i}]))
    _, cursor = tick(env, "events_landing", None)
    requests, cursor = tick(env, "events_landing", cursor)
    assert [len(r.run_config["ops"]["events"]["config"]["files"]) for r in requests] == [2, 2, 1]
    assert len({r.run_key for r in requests}) == 3
    os.remove(env.landing("events") / "f0.ndjson")
    _, cursor = tick(env, "events_landing", cursor)
    assert "f0.ndjson" not in json.loads(cursor or "{}")["seen"]


def test_daily_landing_sensor_requests_changed_days(env: Env) -> None:
    spec = env.config.pool("ops.daily")
    env.drop("ops.daily", "2024-01-01/a.ndjson", ndjson(day_rows("2024-01-01", 1)))
    env.drop("ops.daily", "b-2024-01-02.ndjson", ndjson(day_rows("2024-01-02", 1)))
    env.drop("ops.daily", "2025-06-01/out-of-range.ndjson", ndjson(day_rows("2025-06-01", 1)))
    _, cursor = tick(env, "ops__daily_landing", None)
    requests, cursor = tick(env, "ops__daily_landing", cursor)
    assert sorted(r.partition_key or "" for r in requests) == ["2024-01-01", "2024-01-02"]
    # A late file for day 1 re-requests day 1 only, under a new run key.
    env.drop("ops.daily", "2024-01-01/late.ndjson", ndjson(day_rows("2024-01-01", 1)))
    _, cursor2 = tick(env, "ops__daily_landing", cursor)
    late, _ = tick(env, "ops__daily_landing", cursor2)
    assert [r.partition_key for r in late] == ["2024-01-01"]
    assert late[0].run_key not in {r.run_key for r in requests}
    # Pure planning agrees with the sensor.
    files = env.defs and env.resource.landing(spec)
    assert files is not None
    planned, _, _ = plan_landing_tick(spec, files.files(), cursor2)
    assert [r.run_key for r in planned] == [late[0].run_key]


def test_s3_landing_sensor(tmp_path: Path, s3_bucket: str) -> None:
    yaml_text = f"pools:\n  - {{name: s3pool, key: [ts], landing: 's3://{s3_bucket}/in'}}\n"
    config = parse_pools_config(yaml_text, tmp_path, env={})
    defs = build_definitions(config, LakeResource(uri=str(tmp_path / "lake")))
    s3 = boto3.client("s3")
    s3.put_object(Bucket=s3_bucket, Key="in/a.ndjson", Body=b'{"ts": 1}\n')
    s3.put_object(Bucket=s3_bucket, Key="in/.hidden.ndjson", Body=b'{"ts": 1}\n')
    sensor = defs.resolve_sensor_def("s3pool_landing")
    cursor = None
    requests: list[dg.RunRequest] = []
    resources = {"lake": LakeResource(uri=str(tmp_path / "lake"))}
    for _ in range(2):
        with dg.build_sensor_context(cursor=cursor, definitions=defs, resources=resources) as ctx:
            result = sensor(ctx)
        requests, cursor = list(result.run_requests or []), result.cursor
    assert [r.run_config["ops"]["s3pool"]["config"]["files"] for r in requests] == [["a.ndjson"]]


def test_fragmentation_sensor_requests_compaction(env: Env, instance: dg.DagsterInstance) -> None:
    pool = env.lake.create_pool("events", "ts:asc", target_size=1 << 20)
    requests, cursor = tick(env, "events_fragmentation", None, instance)
    assert requests == []  # no commits yet
    for i in range(3):  # three overlapping loads
        load(pool, [pa.table({"ts": list(range(i, 30, 3))})])
    requests, cursor = tick(env, "events_fragmentation", None, instance)
    assert len(requests) == 1 and requests[0].run_key == f"events:compact:{pool.tip()}"
    result = env.job("compact_events").execute_in_process(instance=instance)
    assert result.success
    commit = pool.read_commit(pool.tip())
    assert commit.extra["kind"] == "compaction" and commit.author == "dagster"
    observations = [
        e for e in result.all_events if e.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    ]
    assert len(observations) == 1
    md = observations[0].event_specific_data.asset_observation.metadata  # type: ignore[union-attr]
    assert md["lake/objects_before"].value == 3 and md["lake/objects_after"].value == 1
    assert md["lake/rows_compacted"].value == 30 and md["dagster/row_count"].value == 30
    assert md["lake/size_in"].value.endswith(("B", "KiB"))  # text for people; raw bytes stay
    assert sorted(r["ts"] for r in env.rows("events")) == list(range(30))
    requests, _ = tick(env, "events_fragmentation", cursor, instance)
    assert requests == []  # compacted: under threshold


def test_observer_reports_outside_commits(env: Env, instance: dg.DagsterInstance) -> None:
    pool = env.lake.create_pool("events", "ts:asc")
    load(pool, [pa.table({"ts": [1, 2]})], author="alice", message="by hand")
    sensor = env.defs.resolve_sensor_def("lake_commit_observer")

    def observe(cursor: str | None) -> dg.SensorResult:
        with dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"lake": env.resource}, definitions=env.defs
        ) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        for event in result.asset_events or []:
            instance.report_runless_asset_event(event)  # what the daemon does with them
        return result

    result = observe(None)
    (obs,) = result.asset_events
    assert isinstance(obs, dg.AssetObservation)
    assert obs.asset_key == dg.AssetKey("events")
    assert obs.metadata["lake/author"].value == "alice"
    assert obs.metadata["lake/commit"].value == pool.tip()
    assert obs.metadata["dagster/row_count"].value == 2
    # Dagster's own commits are materializations already; nothing new is observed.
    load(pool, [pa.table({"ts": [3]})], author="dagster")
    assert not observe(result.cursor).asset_events
    # A sensor whose cursor was lost finds what it reported in the event log.
    assert not observe(None).asset_events
    load(pool, [pa.table({"ts": [4]})], author="bob")
    (bob,) = observe(None).asset_events
    assert bob.metadata["lake/author"].value == "bob"


# -- schedules --------------------------------------------------------------------------------


def test_observed_delete_reports_removed_rows_and_a_current_row_count(
    env: Env, instance: dg.DagsterInstance
) -> None:
    from lake_core.changes import delete_where

    pool = env.lake.create_pool("events", "ts:asc")
    load(pool, [pa.table({"ts": list(range(10))})], author="alice")
    sensor = env.defs.resolve_sensor_def("lake_commit_observer")

    def observe(cursor: str | None) -> dg.SensorResult:
        with dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"lake": env.resource}, definitions=env.defs
        ) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        return result

    cursor = observe(None).cursor
    delete_where(pool, "ts < 3", author="alice")
    # Dagster commits before the observer's next tick: the observation of alice's older
    # commit must not set the asset's row count back to what it was at that commit.
    load(pool, [pa.table({"ts": [100, 101]})], author="dagster")
    (obs,) = observe(cursor).asset_events
    md = obs.metadata
    assert (md["lake/rows_added"].value, md["lake/rows_removed"].value) == (7, 10)
    assert md["lake/rows_net"].value == -3
    assert md["lake/rows_at_commit"].value == 7
    assert md["dagster/row_count"].value == 9 == len(env.rows("events"))


def test_retention_schedule_cuts_relative_to_the_tick(env: Env) -> None:
    schedule = env.defs.resolve_schedule_def("events_retention_schedule")
    tick_time = datetime(2024, 3, 10, 3, 0, tzinfo=UTC)
    ctx = dg.build_schedule_context(scheduled_execution_time=tick_time)
    data = schedule.evaluate_tick(ctx)
    (req,) = data.run_requests or []
    ops = req.run_config["ops"]
    assert ops["events_vacate"]["config"]["before"] == "2024-03-08T03:00:00.000000Z"
    assert ops["events_retain"]["config"]["now"] == "2024-03-10T03:00:00.000000Z"
    assert ops["events_cleanup"]["config"]["grace_seconds"] == 3600
    assert req.run_key and "2024-03-10" in req.run_key
    assert schedule.cron_schedule == "0 3 * * *"
    assert schedule.job_name == "retention_events"


def test_compaction_schedule_targets_the_compaction_job(env: Env) -> None:
    schedule = env.defs.resolve_schedule_def("events_compaction_schedule")
    ctx = dg.build_schedule_context(scheduled_execution_time=datetime(2024, 3, 10, tzinfo=UTC))
    data = schedule.evaluate_tick(ctx)
    assert len(data.run_requests or []) == 1
    assert schedule.job_name == "compact_events"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_retention_job_vacates(env: Env, instance: dg.DagsterInstance) -> None:
    pool = env.lake.create_pool("events", "ts:asc")
    load(pool, [pa.table({"ts": [1]})])
    load(pool, [pa.table({"ts": [2]})])
    cut = datetime.now(UTC)
    time.sleep(0.01)
    load(pool, [pa.table({"ts": [3]})])
    result = env.job("retention_events").execute_in_process(
        instance=instance,
        run_config={
            "ops": {
                "events_vacate": {"config": {"before": cut.isoformat()}},
                "events_cleanup": {"config": {"grace_seconds": 0}},
            }
        },
    )
    assert result.success
    # The newest commit at or before the cut is the tail; the one before it is gone.
    assert len(list(pool.log())) == 2
    assert sorted(r["ts"] for r in env.rows("events")) == [1, 2, 3]


RETAIN_YAML = """
pools:
  - name: logs
    key: [ts]
    order: asc
    landing: landing/logs
    maintenance:
      retention: {cron: "0 3 * * *", data_older_than: 30d, keep: 7d, grace: 1d}
  - name: counters
    key: [n]
    landing: landing/counters
    maintenance:
      retention: {data_older_than: 30d}
"""


def test_retention_job_expires_old_data_then_vacates_and_cleans_up(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """The pools.yaml ``data_older_than`` drives the real retention job: old rows are removed in
    one commit, history before it is vacated, and cleanup deletes the expired files."""
    from datetime import timedelta

    env = Env(tmp_path, RETAIN_YAML)
    assert env.config.pool("logs").maintenance.retention.data_older_than == timedelta(days=30)
    pool = env.lake.create_pool("logs", "ts:asc")
    now = datetime(2026, 6, 1, tzinfo=UTC)

    def stamps(*days: int) -> pa.Table:
        ts = [now - timedelta(days=d) for d in days]
        return pa.table({"ts": pa.array(ts, pa.timestamp("us", "UTC")), "d": list(days)})

    old = load(pool, [stamps(90, 60, 45)])  # wholly expired
    edge = load(pool, [stamps(40, 20)])  # straddles the 30-day cut
    load(pool, [stamps(5, 1)])
    prefix = f"pools/{pool.id}/data/"

    def run_retention() -> Any:
        # The vacate time is taken when the run is configured: a first run cuts the history
        # before its own retain commit, the next run (the next day, say) the retain commit's.
        return env.job("retention_logs").execute_in_process(
            instance=instance,
            run_config={
                "ops": {
                    "logs_retain": {"config": {"now": now.isoformat()}},
                    "logs_vacate": {"config": {"before": datetime.now(UTC).isoformat()}},
                    "logs_cleanup": {"config": {"grace_seconds": 0}},
                }
            },
        )

    result = run_retention()
    assert result.success
    assert sorted(r["d"] for r in env.rows("logs")) == [1, 5, 20]
    (retain_commit, *_) = list(pool.log())
    assert retain_commit.extra["kind"] == "retain"

    def files() -> set[str]:
        return {i.key[len(prefix) : -len(".parquet")] for i in pool.store.list(prefix)}

    assert {old.adds()[0].id, edge.adds()[0].id} <= files()  # history still references them
    again = run_retention()
    assert again.success
    assert old.adds()[0].id not in files() and edge.adds()[0].id not in files()
    assert sorted(r["d"] for r in env.rows("logs")) == [1, 5, 20]
    assert [c.id for c in pool.log()] == [retain_commit.id]
    obs = {
        e.event_specific_data.asset_observation.description: e.event_specific_data.asset_observation
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    }
    assert obs["retain"].metadata["lake/rows_removed"].value == 4
    assert obs["retain"].metadata["dagster/row_count"].value == 3
    again_cleanup = next(
        e.event_specific_data.asset_observation
        for e in again.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
        and e.event_specific_data.asset_observation.description == "cleanup"
    )
    assert again_cleanup.metadata["lake/tombstoned"].value == 2
    assert obs["cleanup"].metadata["lake/reclaimed"].value.endswith(("B", "KiB", "MiB"))

    # A pool without a time column: the job fails saying why, and nothing changes.
    counters = env.lake.create_pool("counters", "n:asc")
    load(counters, [pa.table({"n": [1, 2]})])
    before = {i.key for i in counters.store.list(f"pools/{counters.id}/")}
    bad = env.job("retention_counters").execute_in_process(instance=instance, raise_on_error=False)
    assert not bad.success
    (failure,) = [e for e in bad.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "cannot be retained by time" in str(failure.event_specific_data.error)
    assert {i.key for i in counters.store.list(f"pools/{counters.id}/")} == before


def test_maintenance_ops_use_the_pools_concurrency_pool(env: Env) -> None:
    for job, ops in [
        ("compact_events", ["events_compact"]),
        ("retention_events", ["events_retain", "events_vacate", "events_cleanup"]),
    ]:
        for op in ops:
            assert env.job(job).graph.node_named(op).definition.pool == "lake/default.events"
    daily = env.defs.resolve_assets_def(dg.AssetKey("ops__daily"))
    assert daily.op.pool == "lake/ops.daily"
    assert daily.backfill_policy == dg.BackfillPolicy.single_run()


# -- asset checks -----------------------------------------------------------------------------


def run_checks(env: Env, pool: str, instance: dg.DagsterInstance) -> dict[str, Any]:
    spec = env.config.pool(pool)
    result = dg.materialize(
        [build_pool_asset(spec), build_pool_checks(spec)],
        resources={"lake": env.resource},
        instance=instance,
        selection=dg.AssetSelection.checks_for_assets(dg.AssetKey(spec.asset_name)),
    )
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_checks_fail_on_a_corrupted_lake(env: Env, instance: dg.DagsterInstance) -> None:
    pool = env.lake.create_pool("events", "ts:asc")
    for i in range(3):
        load(pool, [pa.table({"ts": [i, i + 10], "v": ["x", "y"]})])
    ok = run_checks(env, "events", instance)
    assert ok[OBJECTS_EXIST].passed and ok[NO_SCHEMA_CONFLICTS].passed
    # Three overlapping objects over a threshold of one: a warning.
    assert not ok[FRAGMENTATION].passed
    assert ok[FRAGMENTATION].severity == dg.AssetCheckSeverity.WARN
    objects = list(pool.snapshot(pool.tip()).objects.values())

    # A missing object and a truncated one.
    root = Path(env.lake_uri)
    os.remove(root / pool.layout.data(objects[0].id))
    with open(root / pool.layout.data(objects[1].id), "r+b") as f:
        f.truncate(10)
    bad = run_checks(env, "events", instance)
    assert not bad[OBJECTS_EXIST].passed
    md = bad[OBJECTS_EXIST].metadata
    assert md["lake/missing"].value == 1 and md["lake/wrong_size"].value == 1
    assert md["lake/missing_ids"].value == [objects[0].id]


def test_schema_check_catches_an_object_that_conflicts(
    env: Env, instance: dg.DagsterInstance
) -> None:
    pool = env.lake.create_pool("events", "ts:asc")
    load(pool, [pa.table({"ts": [1, 2], "v": ["x", "y"]})])
    good = next(iter(pool.snapshot(pool.tip()).objects.values()))
    # A writer bug: an object whose column ``v`` is recorded (and written) as int64.
    root = Path(env.lake_uri)
    import pyarrow.parquet as pq

    forged_id = "2" + good.id[1:]
    path = root / pool.layout.data(forged_id)
    pq.write_table(pa.table({"ts": [3], "v": [7]}), path)
    forged = replace(
        good,
        id=forged_id,
        size=path.stat().st_size,
        count=1,
        columns={**good.columns, "v": ColumnMeta("int64", 7, 7, 0)},
    )
    pool.commit("main", [forged], [], author="buggy")
    checks = run_checks(env, "events", instance)
    assert checks[OBJECTS_EXIST].passed
    assert not checks[NO_SCHEMA_CONFLICTS].passed
    details = checks[NO_SCHEMA_CONFLICTS].metadata["lake/conflict_details"].value
    assert any("column v is int64, the pool has string" in d for d in details)


def test_checks_pass_before_the_pool_exists(env: Env, instance: dg.DagsterInstance) -> None:
    checks = run_checks(env, "events", instance)
    assert all(e.passed for e in checks.values())


def test_spark_engine_without_lake_spark_fails_clearly(env: Env) -> None:
    assert shutil.which("java") is not None, "java is not installed: run scripts/setup.sh"
    resource = LakeResource(uri=env.lake_uri, engine="spark")
    with pytest.raises(Exception, match="spark"):
        resource.spark_session()


# -- the component ----------------------------------------------------------------------------


def test_pools_component_builds_the_same_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster.components.testing import create_defs_folder_sandbox

    from lake_orchestration.component import LakePoolsComponent

    monkeypatch.setenv("LAKE_ROOT", "/nonexistent/lake")  # resolved at run time only
    monkeypatch.delenv("LAKE_ZOOKEEPER", raising=False)
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(
            component_cls=LakePoolsComponent,
            defs_yaml_contents={
                "type": "lake_orchestration.component.LakePoolsComponent",
                "attributes": {
                    "pools": [
                        {"name": "events", "key": ["ts"], "landing": "landing/events"},
                        {
                            "name": "daily",
                            "partition_by": "day(ts)",
                            "partitions": {"start": "2024-01-01"},
                        },
                    ]
                },
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, LakePoolsComponent)
            keys = defs.resolve_asset_graph().get_all_asset_keys()
            assert keys == {dg.AssetKey("events"), dg.AssetKey("daily")}
            assert defs.resolve_sensor_def("events_landing").name == "events_landing"
            assert defs.resolve_job_def("compact_daily").name == "compact_daily"
            landing = component.pools_config(path).pool("events").landing
            assert landing == str((path / "landing" / "events").resolve())
