"""What Dagster records about a pool: materialization and observation metadata.

Every write reports the commit, the live set it produced (rows, objects, bytes, key range,
overlap) and the pool schema as ``dagster/column_schema``. Only lake facts go here — never
resource configuration, so no secret can leak into the event log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import dagster as dg
import pyarrow as pa

from lake_core.commit import Commit
from lake_core.maintenance import fragmentation
from lake_core.maintenance.policy import key_lt
from lake_core.objects import ObjectMeta
from lake_core.pool import Pool
from lake_core.snapshot import Snapshot


def column_schema(schema: pa.Schema | None) -> dg.TableSchema:
    fields = list(schema) if schema is not None else []
    return dg.TableSchema(
        columns=[
            dg.TableColumn(f.name, str(f.type), constraints=dg.TableColumnConstraints(f.nullable))
            for f in fields
        ]
    )


def key_range(objects: Iterable[ObjectMeta], key_fields: tuple[str, ...]) -> tuple[str, str]:
    """The smallest and largest key of ``objects`` as text ("" when there is none)."""
    lo: ObjectMeta | None = None
    hi: ObjectMeta | None = None
    for o in objects:
        if o.min is not None and (lo is None or key_lt(tuple(o.min), tuple(lo.min or ()))):
            lo = o
        if o.max is not None and (hi is None or key_lt(tuple(hi.max or ()), tuple(o.max))):
            hi = o

    def text(obj: ObjectMeta | None, which: str) -> str:
        bound = obj.decoded_bound(key_fields, which) if obj is not None else None
        if not bound:
            return ""
        return ", ".join(v.isoformat() if hasattr(v, "isoformat") else str(v) for v in bound)

    return text(lo, "min"), text(hi, "max")


def live_metadata(
    pool: Pool, snap: Snapshot, partitions: Iterable[str] | None = None
) -> dict[str, Any]:
    """Rows, objects, bytes and key range of the live set (of ``partitions`` only, if given)."""
    objects = list(snap.objects.values())
    if partitions is not None:
        wanted = set(partitions)
        objects = [o for o in objects if o.partition in wanted]
    lo, hi = key_range(objects, pool.config.key.fields)
    return {
        "dagster/row_count": dg.MetadataValue.int(sum(o.count for o in objects)),
        "lake/objects": dg.MetadataValue.int(len(objects)),
        "lake/bytes": dg.MetadataValue.int(sum(o.size for o in objects)),
        "lake/key_min": dg.MetadataValue.text(lo),
        "lake/key_max": dg.MetadataValue.text(hi),
    }


def pool_metadata(
    pool: Pool,
    branch: str,
    commit: Commit | None = None,
    partitions: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Metadata of ``pool``'s branch after ``commit`` (or at its tip)."""
    tip = commit.id if commit is not None else pool.tip(branch)
    snap = pool.snapshot(tip)
    frag = fragmentation(pool, branch)
    md: dict[str, Any] = {
        "lake/pool": dg.MetadataValue.text(pool.name),
        "lake/branch": dg.MetadataValue.text(branch),
        "lake/commit": dg.MetadataValue.text(tip or ""),
        **live_metadata(pool, snap, partitions),
        "lake/pool_rows": dg.MetadataValue.int(snap.count),
        "lake/pool_objects": dg.MetadataValue.int(len(snap.objects)),
        "lake/overlapping_objects": dg.MetadataValue.int(frag.overlapping_objects),
        "lake/small_objects": dg.MetadataValue.int(frag.small_objects),
        "dagster/column_schema": column_schema(snap.schema),
    }
    if commit is not None:
        md["lake/rows_added"] = dg.MetadataValue.int(sum(o.count for o in commit.adds()))
        md["lake/objects_added"] = dg.MetadataValue.int(len(commit.adds()))
        md["lake/objects_deleted"] = dg.MetadataValue.int(len(commit.deletes()))
        md["lake/message"] = dg.MetadataValue.text(commit.message)
    return md


def commit_metadata(pool: Pool, commit: Commit) -> dict[str, Any]:
    """What an observation of one commit made outside Dagster records."""
    return {
        "lake/commit": dg.MetadataValue.text(commit.id),
        "lake/author": dg.MetadataValue.text(commit.author),
        "lake/date": dg.MetadataValue.timestamp(commit.date),
        "lake/message": dg.MetadataValue.text(commit.message),
        "lake/kind": dg.MetadataValue.text(str(commit.extra.get("kind", "commit"))),
        "lake/rows_added": dg.MetadataValue.int(sum(o.count for o in commit.adds())),
        "lake/objects_added": dg.MetadataValue.int(len(commit.adds())),
        "lake/objects_deleted": dg.MetadataValue.int(len(commit.deletes())),
        "dagster/row_count": dg.MetadataValue.int(pool.snapshot(commit.id).count),
    }
