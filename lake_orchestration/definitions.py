"""The code location `workspace.yaml` loads: pools as assets, with their checks, ingest,
maintenance and index jobs, sensors and schedules, built from a pools config.

:func:`build_definitions` is the factory (tests and other code locations call it with their
own config and resource). The module-level ``defs`` resolves its settings once, here at the
edge, from the environment:

- ``LAKE_ROOT`` — the lake (a path or ``s3://bucket/prefix``), required at run time;
- ``LAKE_POOLS_CONFIG`` — the pools YAML (default: ``lake_orchestration/pools.yaml``);
- ``LAKE_ZOOKEEPER`` — ``HOST:PORT[,…]`` of the ensemble holding maintenance locks (optional);
- ``LAKE_ENGINE`` — ``local`` (default) or ``spark``; ``LAKE_SPARK_MASTER`` — Spark master
  (default ``local[*]``);
- ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN`` — passed as ``EnvVar``s, so their values never enter Dagster's config;
  ``LAKE_S3_ADDRESSING_STYLE`` (``auto``, ``path``, ``virtual``). They make the resource's
  ``S3Settings``, i.e. lake_core's one ``S3Config`` for the lake, landing zones and Spark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, cast

import dagster as dg
from dagster_pyspark import LazyPySparkResource

from lake_orchestration.assets import asset_key, build_pool_asset
from lake_orchestration.checks import build_pool_checks
from lake_orchestration.config import DEFAULT_POOLS_FILE, PoolsConfig, load_pools_config
from lake_orchestration.derived import build_derived
from lake_orchestration.indexing import build_index_job, build_index_sensor
from lake_orchestration.maintenance import build_compact_job, build_retention_job
from lake_orchestration.resources import LakeResource, S3Settings, ZooKeeperResource
from lake_orchestration.schedules import build_compaction_schedule, build_retention_schedule
from lake_orchestration.sensors import (
    build_fragmentation_sensor,
    build_landing_sensor,
    build_observer_sensor,
    ingest_job_name,
)

_S3_ENV = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
}


def build_definitions(config: PoolsConfig, lake: LakeResource) -> dg.Definitions:
    """Everything for the pools of ``config`` on ``lake``."""
    assets: list[Any] = []
    checks: list[Any] = []
    jobs: list[Any] = []
    sensors: list[Any] = []
    schedules: list[Any] = []
    for spec in config.pools:
        assets.append(build_pool_asset(spec))
        checks.append(build_pool_checks(spec))
        ingest = dg.define_asset_job(
            ingest_job_name(spec),
            selection=dg.AssetSelection.assets(asset_key(spec)),
            description=f"ingest landing files into pool {spec.name}",
            tags={"lake/pool": spec.name},
        )
        compact = build_compact_job(spec)
        retention = build_retention_job(spec)
        index = build_index_job(spec)
        jobs += [ingest, compact, retention, index]
        sensors.append(build_index_sensor(spec, index))
        if spec.landing:
            sensors.append(build_landing_sensor(spec, ingest))
        if spec.maintenance.compaction.sensor_interval_seconds:
            sensors.append(build_fragmentation_sensor(spec, compact))
        schedules += [
            s
            for s in (
                build_compaction_schedule(spec, compact),
                build_retention_schedule(spec, retention),
            )
            if s is not None
        ]
    derived_assets, derived_jobs, derived_sensors = build_derived(config)
    assets += derived_assets
    jobs += derived_jobs
    sensors += derived_sensors
    if config.pools:
        sensors.append(build_observer_sensor(config, config.observer_interval_seconds))
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=jobs,
        sensors=sensors,
        schedules=schedules,
        resources={"lake": lake},
        # Pool runs are one step (plus checks): running steps in the run's own process saves
        # a Python start-up and a lake open per step.
        executor=dg.in_process_executor,
    )


def lake_resource_from_env(env: Mapping[str, str]) -> LakeResource:
    """The lake resource the environment describes (secrets stay ``EnvVar``s)."""
    s3: dict[str, Any] = {field: dg.EnvVar(var) for field, var in _S3_ENV.items() if env.get(var)}
    style = env.get("LAKE_S3_ADDRESSING_STYLE")
    if style:
        s3["addressing_style"] = style.strip().lower()
    engine = env.get("LAKE_ENGINE", "local")
    if engine not in ("local", "spark"):
        raise dg.DagsterInvalidDefinitionError(f"LAKE_ENGINE must be local or spark, not {engine}")
    spark = None
    if engine == "spark":
        spark = LazyPySparkResource(
            spark_config={"spark.master": env.get("LAKE_SPARK_MASTER", "local[*]")}
        )
    return LakeResource(
        uri=dg.EnvVar("LAKE_ROOT"),
        user=env.get("LAKE_DAGSTER_USER", "dagster"),
        engine=cast(Literal["local", "spark"], engine),
        zookeeper=ZooKeeperResource(hosts=dg.EnvVar("LAKE_ZOOKEEPER"))
        if env.get("LAKE_ZOOKEEPER")
        else None,
        s3=S3Settings(**s3) if s3 else None,
        spark=spark,
    )


def definitions_from_env(env: Mapping[str, str] | None = None) -> dg.Definitions:
    env = os.environ if env is None else env
    config = load_pools_config(env.get("LAKE_POOLS_CONFIG") or DEFAULT_POOLS_FILE, env)
    return build_definitions(config, lake_resource_from_env(env))


defs = definitions_from_env()
