"""Asset checks per pool: the live objects exist with their recorded sizes, no object's
columns conflict with the pool schema, and fragmentation is under the policy's threshold.

They read the lake only (one listing of the pool's data prefix, Parquet footers only for
objects whose recorded types differ from the pool's), so they are safe to run at any time.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa

from lake_core.errors import LakeError, SchemaConflictError
from lake_core.ingest.schema import unify_schema
from lake_core.maintenance import fragmentation
from lake_core.objects import ObjectMeta, data_key
from lake_core.pool import Pool
from lake_core.reader import open_object
from lake_orchestration.assets import asset_key
from lake_orchestration.config import PoolSpec
from lake_orchestration.resources import LakeResource

OBJECTS_EXIST = "objects_exist"
NO_SCHEMA_CONFLICTS = "no_schema_conflicts"
FRAGMENTATION = "fragmentation_under_threshold"
_SHOW = 20


def check_objects(pool: Pool, branch: str) -> tuple[bool, dict[str, Any]]:
    """Every live object is in the store with the size its commit recorded."""
    snap = pool.snapshot(pool.tip(branch))
    prefix = f"pools/{pool.id}/data/"
    sizes = {i.key: i.size for i in pool.store.list(prefix)}
    missing: list[str] = []
    wrong: list[str] = []
    for o in snap.objects.values():
        size = sizes.get(data_key(pool.id, o.id))
        if size is None:
            missing.append(o.id)
        elif size != o.size:
            wrong.append(f"{o.id}: {size} bytes, recorded {o.size}")
    md: dict[str, Any] = {
        "lake/objects": len(snap.objects),
        "lake/missing": len(missing),
        "lake/wrong_size": len(wrong),
    }
    if missing:
        md["lake/missing_ids"] = dg.MetadataValue.json(missing[:_SHOW])
    if wrong:
        md["lake/wrong_size_ids"] = dg.MetadataValue.json(wrong[:_SHOW])
    return not missing and not wrong, md


def _recorded_ok(obj_type: str, pool_type: str) -> bool | None:
    """Whether a recorded column type fits the pool's by the schema rules; None: nested types,
    decided from the object's Parquet schema."""
    if obj_type in (pool_type, "null") or (obj_type == "int64" and pool_type == "double"):
        return True
    if obj_type.startswith(("struct<", "list<", "large_list<", "map<")):
        return None
    return False


def _object_conflicts(pool: Pool, o: ObjectMeta, schema: pa.Schema) -> Iterator[str]:
    pool_types = {f.name: f for f in schema}
    footer: pa.Schema | None = None
    for name, col in o.columns.items():
        field = pool_types.get(name)
        if field is None:
            yield f"{o.id}: column {name} is not in the pool schema"
            continue
        ok = _recorded_ok(col.type, str(field.type))
        if ok is None:
            if footer is None:
                footer = open_object(pool.store, data_key(pool.id, o.id), o.size).file.schema_arrow
            try:
                merged = unify_schema(pa.schema([field]), pa.schema([footer.field(name)]), o.id)
                ok = merged.field(name).type.equals(field.type)
            except (SchemaConflictError, KeyError):
                ok = False
        if not ok:
            yield f"{o.id}: column {name} is {col.type}, the pool has {field.type}"


def check_schema(pool: Pool, branch: str) -> tuple[bool, dict[str, Any]]:
    """No live object has a column whose type conflicts with the pool schema."""
    snap = pool.snapshot(pool.tip(branch))
    conflicts: list[str] = []
    if snap.objects and snap.schema is None:
        conflicts.append("the pool has objects but no schema")
    elif snap.schema is not None:
        for o in snap.objects.values():
            try:
                conflicts.extend(_object_conflicts(pool, o, snap.schema))
            except LakeError as e:
                conflicts.append(f"{o.id}: {e}")
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
    ]

    @dg.multi_asset_check(specs=specs, name=f"{spec.asset_name}_checks", can_subset=True)
    def pool_checks(
        context: dg.AssetCheckExecutionContext, lake: LakeResource
    ) -> Iterator[dg.AssetCheckResult]:
        pool = lake.pool(spec)
        wanted = {k.name for k in context.selected_asset_check_keys}
        for name in (OBJECTS_EXIST, NO_SCHEMA_CONFLICTS, FRAGMENTATION):
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
                severity=dg.AssetCheckSeverity.WARN
                if name == FRAGMENTATION
                else dg.AssetCheckSeverity.ERROR,
            )

    return pool_checks
