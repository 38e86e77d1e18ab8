"""Pools as assets: one asset per entry of the pools config.

Materializing an unpartitioned pool ingests landing files into one commit: the files a sensor
named in the run config, or else every landing file the pool holds no commit of. A pool with
``mode: upsert`` upserts them by the pool key instead of appending (``delete_when`` rows delete
their key); the commit records the inserted/updated/deleted counts. Each file is
an application transaction recorded in the commit (:func:`lake_core.landing.ingest_once`), so
a retried, manual or racing run commits no file twice (the sensor's run keys are the first
guard; the transactions are the one that holds under any concurrency).

A day-partitioned pool is a daily-partitioned asset. Materializing partition D replaces the
pool's partition D, atomically, with the rows of the landing files of day D
(``rewrite_partition``): re-running it gives the same rows, so backfills are idempotent. It holds
the pool's maintenance lock (partition rewrites are maintenance) and the pool's Dagster
concurrency pool. ``BackfillPolicy.single_run()`` lets one run cover a range of days
(``dagster asset materialize --select POOL --partition-range A...B``).
"""

import warnings
from collections.abc import Sequence
from typing import Any

import dagster as dg

from lake_core.commit import Commit
from lake_core.landing import (
    LANDING_META,
    LandingZone,
    files_by_day,
    ingest_once,
    split_by_retention,
)
from lake_core.loading import Source
from lake_core.maintenance import rewrite_partition
from lake_core.txn import Txn
from lake_core.upsert import UpsertResult
from lake_orchestration.config import PoolSpec
from lake_orchestration.engine import load_sources, upsert_sources
from lake_orchestration.metadata import pool_metadata, upsert_io_metadata
from lake_orchestration.resources import LakeResource

GROUP = "lake_pools"
KIND = "lakepool"


class IngestConfig(dg.Config):
    """Which landing files to ingest (paths relative to the landing zone). Empty: every
    landing file the pool does not hold yet."""

    files: list[str] = []


def asset_key(spec: PoolSpec) -> dg.AssetKey:
    return dg.AssetKey([spec.asset_name])


def daily_partitions(spec: PoolSpec) -> dg.DailyPartitionsDefinition | None:
    if not spec.daily or spec.partitions is None:
        return None
    end = spec.partitions.end
    return dg.DailyPartitionsDefinition(
        start_date=spec.partitions.start.isoformat(),
        end_date=end.isoformat() if end else None,
    )


def _run_meta(context: dg.AssetExecutionContext, zone: LandingZone, files: Sequence[str]) -> Any:
    return {
        LANDING_META: zone.meta(files),
        "dagster": {"run_id": context.run.run_id, "asset": context.asset_key.to_user_string()},
    }


def _sources(lake: LakeResource, zone: LandingZone, files: Sequence[str]) -> list[Source]:
    if lake.engine == "spark":
        return [zone.uri(f) for f in files]  # Spark reads them itself, local or S3
    return [zone.source(f) for f in files]


def _description(spec: PoolSpec) -> str:
    where = f"landing zone {spec.landing}" if spec.landing else "no landing zone"
    part = f", partitioned by {spec.partition_by}" if spec.partition_by else ""
    how = "upserted by key" if spec.mode == "upsert" else "fed"
    text = f"lake pool {spec.name} (key {spec.pool_key}{part}), {how} from {where}"
    return f"{spec.description}\n\n{text}" if spec.description else text


def _definition_metadata(spec: PoolSpec) -> dict[str, Any]:
    return {
        "lake/pool": spec.name,
        "lake/key": str(spec.pool_key),
        "lake/partition_by": spec.partition_by or "",
        "lake/landing": spec.landing or "",
        "lake/formats": ", ".join(spec.formats),
        "lake/mode": spec.mode,
        "lake/delete_when": spec.delete_when or "",
    }


def build_pool_asset(spec: PoolSpec) -> dg.AssetsDefinition:
    """The asset of one pool: daily-partitioned for a day-partitioned pool."""
    if spec.daily:
        return _build_daily_asset(spec)

    @dg.asset(
        key=asset_key(spec),
        group_name=GROUP,
        kinds={KIND},
        description=_description(spec),
        metadata=_definition_metadata(spec),
        # Two upserts of the same key do not commute (the last commit wins): in the pool's
        # concurrency pool (limit 1 in deploy/dagster.yaml) the runs a sensor requested
        # apply one at a time, in the order Dagster starts them.
        pool=spec.concurrency_pool if spec.mode == "upsert" else None,
    )
    def pool_asset(
        context: dg.AssetExecutionContext, config: IngestConfig, lake: LakeResource
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        pool = lake.pool(spec, create=True)
        assert pool is not None
        zone = lake.landing(spec)
        if zone is None:
            raise dg.Failure(f"pool {spec.name} has no landing zone to ingest from")
        if config.files:
            wanted = list(config.files)
        else:
            # Not files whose transaction record may have expired: they could be ingested
            # twice. The sensor names its files, so this only guards whole-zone runs.
            recent, old = split_by_retention(
                zone.files(), pool.config.txn_retention, pool.clock.now()
            )
            if old:
                context.log.warning(
                    f"left {len(old)} landing files older than {spec.name}'s txn_retention "
                    f"({', '.join(f.path for f in old[:5])}{', …' if len(old) > 5 else ''}): "
                    "they may be ingested already with their record expired; archive them, "
                    "or name them in the run config (files: [...]) to ingest them"
                )
            wanted = [f.path for f in recent]

        upserts: list[UpsertResult] = []

        def load_files(files: Sequence[str], txns: Sequence[Txn]) -> Commit | None:
            verb = "upserted" if spec.mode == "upsert" else "ingested"
            message = f"{verb} {len(files)} landing files (dagster run {context.run.run_id[:8]})"
            meta = _run_meta(context, zone, files)
            if spec.mode == "load":
                return load_sources(
                    lake,
                    pool,
                    _sources(lake, zone, files),
                    branch=spec.branch,
                    message=message,
                    meta=meta,
                    txn=txns,
                )
            result = upsert_sources(
                lake,
                pool,
                _sources(lake, zone, files),
                branch=spec.branch,
                delete_when=spec.delete_when,
                message=message,
                meta=meta,
                txn=txns,
            )
            upserts.append(result)
            context.log.info(
                f"upsert: {result.inserted} inserted, {result.updated} updated, "
                f"{result.deleted} deleted; read {result.objects_read} objects, skipped "
                f"{result.objects_skipped}, rewrote {result.objects_rewritten}"
            )
            return result.commit  # None: nothing to commit

        done = ingest_once(pool, zone, wanted, load_files, spec.branch)
        if done.skipped:
            context.log.info(f"skipping {len(done.skipped)} files already in {spec.name}")
        if done.unchanged:
            context.log.warning(
                f"{len(done.unchanged)} files changed nothing in {spec.name} and no commit "
                f"records them, so a later run takes them again; archive them: "
                f"{', '.join(done.unchanged[:5])}"
            )
        if not done.commits:
            if not done.unchanged:
                context.log.info("no new landing files: nothing to ingest")
            return dg.MaterializeResult(
                metadata={
                    **pool_metadata(pool, spec.branch),
                    "lake/files": 0,
                    "lake/unchanged_files": len(done.unchanged),
                }
            )
        commits = [c for c, _ in done.commits]
        commit = commits[-1]
        for c, files in done.commits:
            context.log.info(f"{c.id} committed: {len(files)} files into {spec.name}")
        return dg.MaterializeResult(
            metadata={
                **pool_metadata(pool, spec.branch, commit, changes=commits),
                "lake/files": len(done.files),
                "lake/landing_files": dg.MetadataValue.json(done.files[:100]),
                **upsert_io_metadata([u for u in upserts if u.commit is not None]),
            },
            data_version=dg.DataVersion(commit.id),
        )

    return pool_asset


def _build_daily_asset(spec: PoolSpec) -> dg.AssetsDefinition:
    with warnings.catch_warnings():
        # backfill_policy is marked beta in 1.13; single-run range backfills need it.
        warnings.simplefilter("ignore", dg.BetaWarning)

        @dg.asset(
            key=asset_key(spec),
            group_name=GROUP,
            kinds={KIND},
            description=_description(spec),
            metadata=_definition_metadata(spec),
            partitions_def=daily_partitions(spec),
            backfill_policy=dg.BackfillPolicy.single_run(),
            pool=spec.concurrency_pool,
        )
        def pool_asset(
            context: dg.AssetExecutionContext, lake: LakeResource
        ) -> dg.MaterializeResult:  # type: ignore[type-arg]
            pool = lake.pool(spec, create=True)
            assert pool is not None
            zone = lake.landing(spec)
            if zone is None:
                raise dg.Failure(f"pool {spec.name} has no landing zone to ingest from")
            days = list(context.partition_keys)
            by_day = files_by_day(zone.files())
            commits: dict[str, str] = {}
            made: list[Any] = []
            last = None
            timeout = spec.maintenance.lock_timeout.total_seconds()
            with lake.maintenance_lock(pool, timeout) as held:
                for day in days:
                    files = [f.path for f in by_day.get(day, [])]
                    if not files:
                        # No input is not "empty the partition": files may have been archived.
                        context.log.warning(f"partition {day}: no landing files; left as it is")
                        continue
                    last = rewrite_partition(
                        pool,
                        day,
                        [zone.source(f) for f in files],
                        spec.branch,
                        guard=held.check,
                        author=lake.user,
                        meta=_run_meta(context, zone, files),
                        message=f"rewrote partition {day} from {len(files)} landing files "
                        f"(dagster run {context.run.run_id[:8]})",
                    )
                    commits[day] = last.id
                    made.append(last)
                    context.log.info(f"{last.id} committed: partition {day} <- {files}")
            md = pool_metadata(pool, spec.branch, last, partitions=days, changes=made)
            md["lake/partition_commits"] = dg.MetadataValue.json(commits)
            return dg.MaterializeResult(
                metadata=md,
                data_version=dg.DataVersion(last.id) if last is not None else None,
            )

    return pool_asset
