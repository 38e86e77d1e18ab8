"""Maintenance jobs per pool: compaction, and retention (retain old data, vacate, cleanup).

Every maintenance op holds the pool's maintenance lock for its whole run (ZooKeeper when the
lake resource has one) and passes the lock's ``check`` as the commit guard, and runs in the
pool's Dagster concurrency pool (``lake/NS.NAME``; the instance limits each to one slot). The
lock is what makes it safe — it also excludes the CLI and other deployments; the concurrency
pool keeps Dagster from starting work that would only wait for the lock.

Each op reports what it did as an observation of the pool's asset.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

from lake_core.clock import parse_iso, to_iso
from lake_core.errors import UsageError
from lake_core.maintenance import fragmentation, retain, vacate
from lake_core.pool import Pool
from lake_core.units import human_size
from lake_orchestration.assets import asset_key
from lake_orchestration.config import PoolSpec
from lake_orchestration.engine import cleanup_pool, compact_pool
from lake_orchestration.metadata import live_metadata, otree_metadata
from lake_orchestration.resources import LakeResource


class CompactConfig(dg.Config):
    """Seconds to wait for the pool's maintenance lock (default: the pool's policy)."""

    lock_timeout: float | None = None


class RetainConfig(dg.Config):
    """Remove rows older than ``now`` (ISO 8601; empty: the clock) minus the policy's
    ``data_older_than`` (or ``older_than_seconds``); nothing when neither is set."""

    now: str = ""
    older_than_seconds: float | None = None
    lock_timeout: float | None = None


class VacateConfig(dg.Config):
    """Cut history before ``before`` (ISO 8601); empty: now minus the policy's ``keep``."""

    before: str = ""
    lock_timeout: float | None = None


class CleanupConfig(dg.Config):
    """Grace period in seconds (default: the policy's); ``dry_run`` only reports."""

    grace_seconds: float | None = None
    dry_run: bool = False
    lock_timeout: float | None = None


def compact_job_name(spec: PoolSpec) -> str:
    return f"compact_{spec.asset_name}"


def retention_job_name(spec: PoolSpec) -> str:
    return f"retention_{spec.asset_name}"


def compact_op_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_compact"


def retain_op_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_retain"


def vacate_op_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_vacate"


def cleanup_op_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_cleanup"


def _open(lake: LakeResource, spec: PoolSpec) -> Pool:
    pool = lake.pool(spec)
    if pool is None:
        raise dg.Failure(f"pool {spec.name} does not exist yet (materialize its asset first)")
    return pool


def _timeout(spec: PoolSpec, override: float | None) -> float:
    return override if override is not None else spec.maintenance.lock_timeout.total_seconds()


def _tags(what: str) -> dict[str, str]:
    return {"lake/maintenance": what}


def build_compact_job(spec: PoolSpec) -> dg.JobDefinition:
    key = asset_key(spec)

    @dg.op(name=compact_op_name(spec), pool=spec.concurrency_pool, tags={"kind": "lakepool"})
    def compact_op(
        context: dg.OpExecutionContext, config: CompactConfig, lake: LakeResource
    ) -> dg.Output[Any]:
        pool = _open(lake, spec)
        if pool.config.otree is not None:
            return _optimize(context, lake, pool, spec, key, config)
        with lake.maintenance_lock(pool, _timeout(spec, config.lock_timeout)) as held:
            # Plan only once the lock is held: a compaction that waited must not use a stale plan.
            snap = pool.snapshot(pool.tip(spec.branch))
            before = live_metadata(pool, snap)
            result = compact_pool(lake, pool, branch=spec.branch, guard=held.check)
        if result.commit is None:
            context.log.info(f"{spec.name}: nothing to compact")
            return dg.Output(None, metadata={"lake/commit": ""})
        after = live_metadata(pool, pool.snapshot(result.commit.id))
        md: dict[str, Any] = {
            "lake/commit": dg.MetadataValue.text(result.commit.id),
            "lake/runs": result.runs,
            "lake/objects_before": before["lake/objects"],
            "lake/objects_after": after["lake/objects"],
            "lake/bytes_in": result.bytes_in,
            "lake/bytes_out": result.bytes_out,
            "lake/size_in": dg.MetadataValue.text(human_size(result.bytes_in)),
            "lake/size_out": dg.MetadataValue.text(human_size(result.bytes_out)),
            # Compaction moves rows and never changes them: the rows it read are those it wrote.
            "lake/rows_compacted": result.commit.rows_removed or 0,
            "dagster/row_count": after["dagster/row_count"],
            "lake/overlapping_objects": fragmentation(pool, spec.branch).overlapping_objects,
        }
        context.log_event(
            dg.AssetObservation(key, description="compaction", metadata=md, tags=_tags("compact"))
        )
        context.log.info(
            f"{result.commit.id} committed: {result.objects_in} objects "
            f"({human_size(result.bytes_in)}) into {result.objects_out} "
            f"({human_size(result.bytes_out)})"
        )
        return dg.Output(result.commit.id, metadata=md)

    @dg.job(
        name=compact_job_name(spec),
        description=f"LSM compaction of pool {spec.name} under its maintenance lock",
        tags={"lake/pool": spec.name},
    )
    def compact_job() -> None:
        compact_op()

    return compact_job


def _optimize(
    context: dg.OpExecutionContext,
    lake: LakeResource,
    pool: Pool,
    spec: PoolSpec,
    key: dg.AssetKey,
    config: CompactConfig,
) -> dg.Output[Any]:
    """An OTree pool's maintenance: ``lake optimize`` (key-order compaction would undo its
    layout), observed with the tree's shape: revisions, cubes and rows per depth."""
    with lake.maintenance_lock(pool, _timeout(spec, config.lock_timeout)) as held:
        result = pool.optimize(spec.branch, guard=held.check, author=lake.user)
    if result.commit is None:
        context.log.info(f"{spec.name}: nothing to optimize")
        return dg.Output(None, metadata={"lake/commit": ""})
    md: dict[str, Any] = {
        "lake/commit": dg.MetadataValue.text(result.commit.id),
        "lake/optimized_because": dg.MetadataValue.text(result.reason),
        "lake/objects_before": result.objects_in,
        "lake/objects_after": result.objects_out,
        "lake/bytes_in": result.bytes_in,
        "lake/bytes_out": result.bytes_out,
        "lake/revision": result.revision,
        "dagster/row_count": result.rows,
        **otree_metadata(pool, result.commit.id),
    }
    context.log_event(
        dg.AssetObservation(key, description="optimize", metadata=md, tags=_tags("compact"))
    )
    context.log.info(
        f"{result.commit.id} committed: optimized {result.objects_in} objects into "
        f"{result.objects_out} (revision {result.revision}; had {result.reason})"
    )
    return dg.Output(result.commit.id, metadata=md)


def build_retention_job(spec: PoolSpec) -> dg.JobDefinition:
    key = asset_key(spec)
    policy = spec.maintenance.retention

    @dg.op(name=retain_op_name(spec), pool=spec.concurrency_pool, tags={"kind": "lakepool"})
    def retain_op(
        context: dg.OpExecutionContext, config: RetainConfig, lake: LakeResource
    ) -> dg.Output[Any]:
        older_than = (
            timedelta(seconds=config.older_than_seconds)
            if config.older_than_seconds is not None
            else policy.data_older_than
        )
        if older_than is None:
            context.log.info(f"{spec.name}: no data_older_than: all data is kept")
            return dg.Output(None, metadata={"lake/commit": ""})
        now = parse_iso(config.now) if config.now else None
        pool = _open(lake, spec)
        with lake.maintenance_lock(pool, _timeout(spec, config.lock_timeout)) as held:
            try:
                result = retain(
                    pool, older_than, spec.branch, now=now, guard=held.check, author=lake.user
                )
            except UsageError as e:  # no time column: a configuration error, said plainly
                raise dg.Failure(str(e)) from None
        if result.commit is None:
            context.log.info(f"{spec.name}: nothing to retain before {to_iso(result.cut)}")
            return dg.Output(None, metadata={"lake/commit": "", "lake/cut": to_iso(result.cut)})
        after = live_metadata(pool, pool.snapshot(result.commit.id))
        md: dict[str, Any] = {
            "lake/commit": dg.MetadataValue.text(result.commit.id),
            "lake/cut": to_iso(result.cut),
            "lake/rows_removed": result.rows_removed,
            "lake/objects_dropped": result.dropped,
            "lake/objects_rewritten": result.rewritten,
            "lake/partitions_dropped": ", ".join(result.partitions_dropped),
            "dagster/row_count": after["dagster/row_count"],
        }
        context.log_event(
            dg.AssetObservation(key, description="retain", metadata=md, tags=_tags("retain"))
        )
        context.log.info(
            f"{result.commit.id} committed: removed {result.rows_removed} rows before "
            f"{to_iso(result.cut)}"
        )
        return dg.Output(result.commit.id, metadata=md)

    @dg.op(name=vacate_op_name(spec), pool=spec.concurrency_pool)
    def vacate_op(
        context: dg.OpExecutionContext, config: VacateConfig, lake: LakeResource, retained: Any
    ) -> dg.Output[str]:
        before = parse_iso(config.before) if config.before else datetime.now(UTC) - policy.keep
        pool = _open(lake, spec)
        with lake.maintenance_lock(pool, _timeout(spec, config.lock_timeout)) as held:
            result = vacate(pool, before, guard=held.check)
        md: dict[str, Any] = {
            "lake/vacated_before": to_iso(before),
            "lake/tails": dg.MetadataValue.json({k: v for k, v in result.tails.items()}),
        }
        context.log_event(
            dg.AssetObservation(key, description="vacate", metadata=md, tags=_tags("vacate"))
        )
        context.log.info(f"{spec.name}: history before {to_iso(before)} vacated: {result.tails}")
        return dg.Output(to_iso(before), metadata=md)

    @dg.op(name=cleanup_op_name(spec), pool=spec.concurrency_pool)
    def cleanup_op(
        context: dg.OpExecutionContext, config: CleanupConfig, lake: LakeResource, vacated: str
    ) -> dg.Output[Any]:
        grace = (
            policy.grace
            if config.grace_seconds is None
            else timedelta(seconds=config.grace_seconds)
        )
        pool = _open(lake, spec)
        with lake.maintenance_lock(pool, _timeout(spec, config.lock_timeout)) as held:
            result = cleanup_pool(lake, pool, grace, dry_run=config.dry_run, guard=held.check)
        report = result.to_json()
        md: dict[str, Any] = {
            f"lake/{k}": v for k, v in report.items() if isinstance(v, int | float | str)
        }
        md["lake/reclaimed"] = f"{result.files} files, {human_size(result.bytes)}"
        context.log_event(
            dg.AssetObservation(key, description="cleanup", metadata=md, tags=_tags("cleanup"))
        )
        context.log.info(f"{spec.name}: cleanup removed {md['lake/reclaimed']}")
        return dg.Output(report, metadata=md)

    expire = f"remove data older than {policy.data_older_than}, " if policy.data_older_than else ""

    @dg.job(
        name=retention_job_name(spec),
        description=(
            f"Retention of pool {spec.name}: {expire}vacate history older than {policy.keep}, "
            f"then clean up files tombstoned longer than {policy.grace}"
        ),
        tags={"lake/pool": spec.name},
    )
    def retention_job() -> None:
        cleanup_op(vacate_op(retain_op()))

    return retention_job
