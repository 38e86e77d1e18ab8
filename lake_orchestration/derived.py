"""Derived pools in Dagster (docs/derived.md, "In Dagster"): each ``derived:`` entry of the
pools config is an asset downstream of its source pool's asset. Materializing it creates the
derived pool (first time) or refreshes it (:func:`lake_core.derived.maintain.refresh`: new
source objects aggregated and merged, removed ones' buckets recomputed); the materialization
metadata carries the source commit it reflects. A sensor asks for a refresh run whenever the
source's main tip differs from the commit the derived pool reflects (run key: that tip), so
no source commit is skipped silently and none is refreshed twice."""

from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg
import pyarrow as pa

from lake_core.errors import PoolNotFoundError, UsageError
from lake_orchestration.assets import asset_key, daily_partitions
from lake_orchestration.config import DerivedPoolSpec, PoolsConfig
from lake_orchestration.resources import LakeResource
from lake_orchestration.sensors import request_unless_running


def derived_asset_key(spec: DerivedPoolSpec) -> dg.AssetKey:
    return dg.AssetKey([spec.asset_name])


def refresh_job_name(spec: DerivedPoolSpec) -> str:
    return f"refresh_{spec.asset_name}"


def refresh_sensor_name(spec: DerivedPoolSpec) -> str:
    return f"{spec.asset_name}_refresh"


def _rebuild(lake: Any, spec: DerivedPoolSpec, day: str) -> tuple[Any, Any]:
    """The bucket-column values of partition ``day`` (its first and last instant)."""
    from lake_core.derived.maintain import spec_of

    column = spec_of(lake.pool(spec.name)).bucket_column
    schema = lake.pool(spec.source).schema()
    first = date.fromisoformat(day)
    if schema is not None and pa.types.is_date(schema.field(column).type):
        return first, first
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    return start, start + timedelta(days=1) - timedelta(microseconds=1)


def build_derived_asset(spec: DerivedPoolSpec, config: PoolsConfig) -> dg.AssetsDefinition:
    source = config.pool(spec.source)

    @dg.asset(
        name=spec.asset_name,
        deps=[asset_key(source)],
        # Partitioned as its source (a daily pool): a partition's run refreshes and rebuilds
        # that day's buckets from the source's rows — a backfill.
        partitions_def=daily_partitions(source),
        description=spec.description
        or f"derived pool {spec.name}: partial aggregations of {spec.source} (docs/derived.md)",
        metadata={"lake/pool": spec.name, "lake/source": spec.source, "lake/sql": spec.sql},
        tags={"lake/derived": "true"},
    )
    def derived_pool(
        context: dg.AssetExecutionContext, lake: LakeResource
    ) -> dg.MaterializeResult[None]:
        from lake_core.derived.maintain import create_derived, refresh

        lk = lake.open()
        try:
            pool = lk.pool(spec.name)
        except PoolNotFoundError:
            pool, result = create_derived(lk, spec.name, spec.source, spec.sql)
        else:
            rebuild = (
                _rebuild(lk, spec, context.partition_key) if context.has_partition_key else None
            )
            link = pool.config.derived
            if link is None:
                raise UsageError(f"pool {spec.name} exists and is not a derived pool")
            if link.sql != spec.sql:
                raise UsageError(
                    f"derived pool {spec.name} keeps another query than pools.yaml says: drop it "
                    f"(lake derive drop {spec.name}) to define it anew"
                )
            result = refresh(
                lk, pool, lock_timeout=spec.lock_timeout.total_seconds(), rebuild=rebuild
            )
        context.log.info(
            f"{spec.name}: {result.mode}, reflects {spec.source} at {result.source_commit}"
        )
        metadata: dict[str, Any] = {
            "lake/source_commit": result.source_commit or "",
            "lake/mode": result.mode,
            "lake/rows_written": result.rows_written,
            "lake/source_rows_read": result.source_rows_read,
            "lake/commit": result.commit or "",
        }
        picture = histogram_markdown(lk, spec.name)
        if picture is not None:
            metadata["lake/histogram"] = dg.MetadataValue.md(picture)
        return dg.MaterializeResult(metadata=metadata)

    return derived_pool


#: Buckets the materialization's histogram shows (the latest).
HISTOGRAM_BUCKETS = 24


def histogram_markdown(lake: Any, name: str) -> str | None:
    """The latest buckets' source-row counts as a markdown bar chart (the Brim histogram, in
    the Dagster UI), from the derived pool's ``count(*)``; None when it keeps no count(*)."""
    from lake_core.derived.maintain import spec_of
    from lake_core.derived.spec import quote

    spec = spec_of(lake.pool(name))
    count = spec.aggregate("count_star", None)
    if count is None:
        return None
    bucket = quote(spec.bucket_name)
    rows = lake.sql(
        f"SELECT {bucket} AS b, CAST(sum({quote(count.name)}) AS BIGINT) AS n "
        f"FROM {quote(name)} GROUP BY 1 ORDER BY 1 DESC LIMIT {HISTOGRAM_BUCKETS}"
    ).fetchall()
    if not rows:
        return None
    peak = max(int(n) for _, n in rows) or 1
    lines = [f"| {spec.bucket_name} | rows | |", "| --- | ---: | --- |"]
    for b, n in reversed(rows):
        lines.append(f"| {b} | {int(n):,} | {'█' * max(1, round(30 * int(n) / peak))} |")
    return "\n".join(lines)


def build_refresh_sensor(
    spec: DerivedPoolSpec, job: Any, partitions: dg.DailyPartitionsDefinition | None = None
) -> dg.SensorDefinition:
    @dg.sensor(
        name=refresh_sensor_name(spec),
        description=f"refresh derived pool {spec.name} when {spec.source}'s main branch moves",
        job=job,
        minimum_interval_seconds=spec.sensor.interval_seconds,
        default_status=(
            dg.DefaultSensorStatus.RUNNING
            if spec.sensor.running
            else dg.DefaultSensorStatus.STOPPED
        ),
    )
    def refresh_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        from lake_core.derived.lineage import reflected

        lk = lake.open()
        try:
            source = lk.pool(spec.source)
        except PoolNotFoundError:
            return dg.SensorResult(skip_reason=f"source pool {spec.source} does not exist yet")
        tip = source.tip("main")
        if tip is None:
            return dg.SensorResult(skip_reason=f"{spec.source} has no commit yet")
        try:
            at = reflected(lk.pool(spec.name))
        except PoolNotFoundError:
            at = None
        if at == tip:
            return dg.SensorResult(skip_reason=f"{spec.name} reflects {tip}", cursor=tip)
        result = request_unless_running(
            context,
            refresh_job_name(spec),
            "refresh",
            f"{spec.asset_name}:refresh:{tip}",
            {"lake/pool": spec.name, "lake/source_commit": tip},
            tip,
        )
        if partitions is not None:
            # A partitioned asset's run names a partition: the last one (its rebuild is one
            # day's buckets; the refresh is the whole pool's either way).
            last = partitions.get_last_partition_key()
            if last is None:
                return dg.SensorResult(skip_reason="no partition yet")
            result = dg.SensorResult(
                run_requests=[
                    dg.RunRequest(run_key=r.run_key, tags=r.tags, partition_key=last)
                    for r in result.run_requests or []
                ],
                cursor=result.cursor,
                skip_reason=result.skip_reason,
            )
        return result

    return refresh_sensor


def build_derived(config: PoolsConfig) -> tuple[list[Any], list[Any], list[Any]]:
    """(assets, jobs, sensors) of the config's derived pools."""
    assets: list[Any] = []
    jobs: list[Any] = []
    sensors: list[Any] = []
    for spec in config.derived:
        assets.append(build_derived_asset(spec, config))
        job = dg.define_asset_job(
            refresh_job_name(spec),
            selection=dg.AssetSelection.assets(derived_asset_key(spec)),
            description=f"refresh derived pool {spec.name} from {spec.source}",
            tags={"lake/pool": spec.name},
        )
        jobs.append(job)
        sensors.append(build_refresh_sensor(spec, job, daily_partitions(config.pool(spec.source))))
    return assets, jobs, sensors


__all__ = [
    "build_derived",
    "build_derived_asset",
    "build_refresh_sensor",
    "derived_asset_key",
    "refresh_job_name",
    "refresh_sensor_name",
]
