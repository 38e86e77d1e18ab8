"""Asset checks per pool: the live objects exist with their recorded sizes, no object's
columns conflict with the pool schema, fragmentation is under the policy's threshold, and
every object the pool's index rules cover is indexed.

Each is a lake_core function (:func:`lake_core.integrity.check_presence`,
:func:`lake_core.integrity.schema_conflicts`, :func:`lake_core.maintenance.fragmentation`,
:func:`lake_core.indexes.coverage.unindexed` through :mod:`lake_orchestration.indexing`);
this module only turns their answers into check results. They read the lake only (one listing
of the pool's data objects, Parquet footers only for objects whose recorded types differ from
the pool's), so they are safe to run at any time.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from lake_core.integrity import check_presence, schema_conflicts
from lake_core.maintenance import fragmentation
from lake_core.pool import Pool
from lake_orchestration.assets import asset_key
from lake_orchestration.config import PoolSpec
from lake_orchestration.indexing import check_indexed
from lake_orchestration.resources import LakeResource

OBJECTS_EXIST = "objects_exist"
NO_SCHEMA_CONFLICTS = "no_schema_conflicts"
FRAGMENTATION = "fragmentation_under_threshold"
OBJECTS_INDEXED = "objects_indexed"
_SHOW = 20


def check_objects(pool: Pool, branch: str) -> tuple[bool, dict[str, Any]]:
    """Every live object is in the store with the size its commit recorded."""
    snap = pool.snapshot(pool.tip(branch))
    found = check_presence(pool.store, pool.id, list(snap.objects.values()))
    md: dict[str, Any] = {
        "lake/objects": found.objects,
        "lake/missing": len(found.missing),
        "lake/wrong_size": len(found.wrong_size),
    }
    if found.missing:
        md["lake/missing_ids"] = dg.MetadataValue.json(found.missing[:_SHOW])
    if found.wrong_size:
        md["lake/wrong_size_ids"] = dg.MetadataValue.json(found.wrong_size[:_SHOW])
    return found.ok, md


def check_schema(pool: Pool, branch: str) -> tuple[bool, dict[str, Any]]:
    """No live object has a column whose type conflicts with the pool schema."""
    snap = pool.snapshot(pool.tip(branch))
    conflicts = schema_conflicts(pool.store, pool.id, list(snap.objects.values()), snap.schema)
    md: dict[str, Any] = {
        "lake/columns": len(snap.schema) if snap.schema is not None else 0,
        "lake/conflicts": len(conflicts),
    }
    if conflicts:
        md["lake/conflict_details"] = dg.MetadataValue.json(conflicts[:_SHOW])
    return not conflicts, md


def check_fragmentation(pool: Pool, spec: PoolSpec) -> tuple[bool, dict[str, Any]]:
    """Overlapping and small objects within the compaction policy's thresholds (or nothing the
    policy would compact)."""
    if pool.config.otree is not None:
        # An OTree pool is "fragmented" when lake optimize has work: unindexed objects, older
        # revisions, cubes split over objects.
        from lake_core.otree.optimize import pool_needs_optimize

        reason = pool_needs_optimize(pool, spec.branch)
        return not reason, {"lake/optimize_needed": reason or "no"}
    policy = spec.maintenance.compaction
    frag = fragmentation(pool, spec.branch)
    passed = frag.pending_runs == 0 or (
        frag.overlapping_objects <= policy.max_overlapping_objects
        and frag.small_objects <= policy.max_small_objects
    )
    md: dict[str, Any] = {f"lake/{k}": v for k, v in frag.to_json().items()}
    md["lake/max_overlapping_objects"] = policy.max_overlapping_objects
    md["lake/max_small_objects"] = policy.max_small_objects
    return passed, md


def _run_check(name: str, pool: Pool, spec: PoolSpec) -> tuple[bool, dict[str, Any]]:
    if name == OBJECTS_EXIST:
        return check_objects(pool, spec.branch)
    if name == NO_SCHEMA_CONFLICTS:
        return check_schema(pool, spec.branch)
    if name == OBJECTS_INDEXED:
        return check_indexed(pool, spec.branch)
    return check_fragmentation(pool, spec)


def build_pool_checks(spec: PoolSpec) -> dg.AssetChecksDefinition:
    key = asset_key(spec)
    specs = [
        dg.AssetCheckSpec(
            OBJECTS_EXIST, asset=key, description="every live object exists at its recorded size"
        ),
        dg.AssetCheckSpec(
            NO_SCHEMA_CONFLICTS, asset=key, description="no object conflicts with the pool schema"
        ),
        dg.AssetCheckSpec(
            FRAGMENTATION, asset=key, description="overlap and small objects under the policy"
        ),
        dg.AssetCheckSpec(
            OBJECTS_INDEXED,
            asset=key,
            description="every object the pool's index rules cover is indexed",
        ),
    ]

    @dg.multi_asset_check(specs=specs, name=f"{spec.asset_name}_checks", can_subset=True)
    def pool_checks(
        context: dg.AssetCheckExecutionContext, lake: LakeResource
    ) -> Iterator[dg.AssetCheckResult]:
        pool = lake.pool(spec)
        wanted = {k.name for k in context.selected_asset_check_keys}
        for name in (OBJECTS_EXIST, NO_SCHEMA_CONFLICTS, FRAGMENTATION, OBJECTS_INDEXED):
            if name not in wanted:
                continue
            if pool is None:
                yield dg.AssetCheckResult(
                    asset_key=key,
                    check_name=name,
                    passed=True,
                    description=f"pool {spec.name} does not exist yet",
                )
                continue
            passed, md = _run_check(name, pool, spec)
            yield dg.AssetCheckResult(
                asset_key=key,
                check_name=name,
                passed=passed,
                metadata=md,
                # Fragmentation and unindexed objects slow reads; they lose no data.
                severity=dg.AssetCheckSeverity.WARN
                if name in (FRAGMENTATION, OBJECTS_INDEXED)
                else dg.AssetCheckSeverity.ERROR,
            )

    return pool_checks
