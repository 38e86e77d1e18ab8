"""What Dagster records about a pool: materialization and observation metadata.

Every write reports the commit, the rows it added and removed, the live set it produced (rows,
objects, bytes, key range, overlap) and the pool schema as ``dagster/column_schema``. Sizes are
raw bytes in numeric entries and human-readable (``48.3MB``) in text ones. ``dagster/row_count``
is always the row count of the branch at the moment the event is recorded, so the asset's
latest count is current even when an observation reports an older commit. Only lake facts go here — never
resource configuration, so no secret can leak into the event log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import dagster as dg
import pyarrow as pa

from lake_core.commit import Commit
from lake_core.maintenance import fragmentation
from lake_core.maintenance.policy import key_lt
from lake_core.objects import ObjectMeta
from lake_core.pool import Pool
from lake_core.snapshot import Snapshot
from lake_core.units import human_size
from lake_core.upsert import UpsertResult


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
    size = sum(o.size for o in objects)
    otree = pool.config.otree is not None and snap.commit_id is not None
    extra = otree_metadata(pool, snap.commit_id) if otree else {}
    return {
        **extra,
        "dagster/row_count": dg.MetadataValue.int(sum(o.count for o in objects)),
        "lake/objects": dg.MetadataValue.int(len(objects)),
        "lake/bytes": dg.MetadataValue.int(size),
        "lake/size": dg.MetadataValue.text(human_size(size)),
        "lake/key_min": dg.MetadataValue.text(lo),
        "lake/key_max": dg.MetadataValue.text(hi),
    }


def otree_metadata(pool: Pool, ref: str | None) -> dict[str, Any]:
    """Dagster metadata of an OTree pool's tree at ``ref``: revisions, cubes, and a table of
    cubes and rows per depth with a bar of each depth's share (the tree's density)."""
    from lake_core.otree.introspect import cubes_table

    cubes = cubes_table(pool, ref).to_pylist()
    layout = pool.config.otree
    per_depth: dict[Any, list[int]] = {}
    for c in cubes:
        entry = per_depth.setdefault(c["depth"], [0, 0])
        entry[0] += 1
        entry[1] += c["elements"]
    total = sum(n for _, n in per_depth.values()) or 1
    rows = ["| depth | cubes | rows | share |", "| ---: | ---: | ---: | --- |"]
    for depth in sorted(per_depth, key=lambda d: -1 if d is None else d):
        count, n = per_depth[depth]
        bar = "█" * max(1, round(30 * n / total)) if n else ""
        name = "unindexed" if depth is None else str(depth)
        rows.append(f"| {name} | {count} | {n} | {bar} {100 * n / total:.1f}% |")
    return {
        "lake/otree_revisions": len(layout.revisions) if layout is not None else 0,
        "lake/otree_cubes": sum(1 for c in cubes if c["cube"] is not None),
        "lake/otree_depths": dg.MetadataValue.md("\n".join(rows)),
    }


#: The counts an upsert commit records under ``extra["upsert"]`` (lake_core.upsert).
UPSERT_COUNTS = ("inserted", "updated", "deleted")


def change_metadata(commits: Sequence[Commit]) -> dict[str, Any]:
    """What ``commits`` changed, summed: rows in the objects they added and in those they
    removed (a delete by predicate adds the surviving rows of the objects it rewrote, so
    ``rows_removed - rows_added`` is what it deleted), and the net change. Upsert commits
    also give ``lake/inserted``, ``lake/updated`` and ``lake/deleted`` (rows, summed over
    the upserts among ``commits``): ``rows_added``/``rows_removed`` count the rewritten
    objects' rows too, so they are no measure of what an upsert changed."""
    added = sum(c.rows_added for c in commits)
    removed = sum(c.rows_removed or 0 for c in commits)
    md = {
        "lake/rows_added": dg.MetadataValue.int(added),
        "lake/rows_removed": dg.MetadataValue.int(removed),
        "lake/rows_net": dg.MetadataValue.int(added - removed),
        "lake/objects_added": dg.MetadataValue.int(sum(len(c.adds()) for c in commits)),
        "lake/objects_deleted": dg.MetadataValue.int(sum(len(c.deletes()) for c in commits)),
    }
    upserts = [c.extra["upsert"] for c in commits if isinstance(c.extra.get("upsert"), dict)]
    if upserts:
        for what in UPSERT_COUNTS:
            md[f"lake/{what}"] = dg.MetadataValue.int(sum(int(u.get(what, 0)) for u in upserts))
    return md


def upsert_io_metadata(results: Sequence[UpsertResult]) -> dict[str, Any]:
    """What the upserts that committed read and rewrote, summed (nothing when there are
    none): the live objects read because their key range holds an incoming key, those left
    unread, and the stored bytes of the objects replaced and written."""
    if not results:
        return {}
    return {
        "lake/objects_read": dg.MetadataValue.int(sum(r.objects_read for r in results)),
        "lake/objects_skipped": dg.MetadataValue.int(sum(r.objects_skipped for r in results)),
        "lake/bytes_rewritten": dg.MetadataValue.int(sum(r.bytes_rewritten for r in results)),
        "lake/bytes_written": dg.MetadataValue.int(sum(r.bytes_written for r in results)),
    }


def pool_metadata(
    pool: Pool,
    branch: str,
    commit: Commit | None = None,
    partitions: Iterable[str] | None = None,
    changes: Sequence[Commit] | None = None,
) -> dict[str, Any]:
    """Metadata of ``pool``'s branch after ``commit`` (or at its tip). ``changes`` are the
    commits the run made (default: ``commit`` alone)."""
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
    if changes is None and commit is not None:
        changes = [commit]
    if changes:
        md.update(change_metadata(changes))
    if commit is not None:
        md["lake/message"] = dg.MetadataValue.text(commit.message)
    return md


def commit_metadata(pool: Pool, commit: Commit, tip: str | None = None) -> dict[str, Any]:
    """What an observation of one commit made outside Dagster records: the commit's change,
    the rows at that commit (``lake/rows_at_commit``), and as ``dagster/row_count`` the rows
    at ``tip`` (the branch tip when observed; default the commit), so the asset's latest row
    count is never that of an older commit."""
    return {
        "lake/commit": dg.MetadataValue.text(commit.id),
        "lake/author": dg.MetadataValue.text(commit.author),
        "lake/date": dg.MetadataValue.timestamp(commit.date),
        "lake/message": dg.MetadataValue.text(commit.message),
        "lake/kind": dg.MetadataValue.text(str(commit.extra.get("kind", "commit"))),
        **change_metadata([commit]),
        "lake/rows_at_commit": dg.MetadataValue.int(pool.snapshot(commit.id).count),
        "dagster/row_count": dg.MetadataValue.int(pool.snapshot(tip or commit.id).count),
    }
