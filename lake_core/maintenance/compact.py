"""LSM compaction: merge-sort runs of objects into non-overlapping objects near the target size,
and commit the new objects and the deletes of the sources in one commit.

Run it under the pool's maintenance lock and plan *after* taking the lock (a compaction that
waited must not act on a stale plan). The commit re-checks that every source is still live: a
concurrent delete (or revert, or a compaction that slipped past a lost lock) makes it fail with
a conflict and remove the objects it wrote, so rows are never resurrected or duplicated. Loads
racing a compaction never conflict: they only add objects.

A run's objects are merged in snapshot order (the order they were added: oldest first), so
equal keys come out oldest first. On a unique pool (``PoolConfig.unique``) the merge then
keeps only the last row of each key (:class:`~lake_core.merge.KeepLast`): the newest, as an
upsert would have left it. Upserts leave no duplicate keys and merges or reverts that would
are refused, but objects committed as they are (``Pool.commit`` of objects written
elsewhere) can bring some; compaction then never resurrects the replaced row. Such a commit
removed rows, so it is recorded as ``kind: dedupe`` (not a layout-only compaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.errors import NotFoundError
from lake_core.ingest.schema import conform_to
from lake_core.integrity import open_checked
from lake_core.maintenance.policy import (
    PLAN_SIZE_TAG,
    CompactionRun,
    SpanOrder,
    key_lt,
    plan_compaction,
    planned_size,
    span,
)
from lake_core.merge import DEFAULT_WINDOW_BYTES, KeepLast, batch_rows, merge_sorted, read_ahead
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.otree.settings import refuse_key_sorted
from lake_core.units import counted
from lake_core.writer import WriteOptions, write_sorted

if TYPE_CHECKING:
    from lake_core.indexes.meta import IndexMeta
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did; ``commit`` is None when there was nothing to compact."""

    commit: Commit | None
    runs: int = 0
    objects_in: int = 0
    objects_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    #: Rows dropped as older duplicates of a key (unique pools only).
    duplicates_removed: int = 0


def _explicit_runs(pool: Pool, snap_objects: Any, ids: list[str]) -> list[CompactionRun]:
    missing = [i for i in ids if i not in snap_objects]
    if missing:
        raise NotFoundError("object", missing[0], f"not live in pool {pool.name}")
    by_partition: dict[str | None, list[ObjectMeta]] = {}
    wanted = set(ids)
    for i in (i for i in snap_objects if i in wanted):  # snapshot order
        o = snap_objects[i]
        by_partition.setdefault(o.partition, []).append(o)
    runs = [CompactionRun(p, tuple(objs)) for p, objs in by_partition.items() if len(objs) >= 2]
    return runs


def run_schema(run: CompactionRun, schema: pa.Schema) -> pa.Schema:
    """The pool's columns that some object of ``run`` has, in the pool's order."""
    names = {n for o in run.objects for n in o.columns}
    return pa.schema([f for f in schema if f.name in names])


def merge_run(
    pool: Pool, run: CompactionRun, schema: pa.Schema, *, window_bytes: int = DEFAULT_WINDOW_BYTES
) -> Iterator[pa.Table]:
    """The rows of ``run``'s objects in pool-key order (ties in the run's object order — the
    snapshot's, oldest first, as :func:`plan_runs` gives it — then row order), streamed as
    sorted tables of :func:`run_schema`: a k-way merge of the objects,
    which are each sorted already (the writer's invariant), reading about ``window_bytes`` (as Parquet's
    uncompressed size) at a time over all objects, a batch ahead on a few threads."""
    fitted = run_schema(run, schema)
    ordered = list(run.objects)

    def read(o: ObjectMeta) -> Iterator[pa.Table]:
        # Every byte is fetched anyway: check it is the object the commit recorded.
        file = open_checked(pool.store, pool.id, o, pool.name)
        meta = file.metadata
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        # A batch is at most a row group's worth (the seek stride), however few the sources.
        window = min(window_bytes, len(ordered) * pool.config.seek_stride)
        rows = batch_rows(decoded / max(1, meta.num_rows), len(ordered), window)
        for batch in file.iter_batches(batch_size=rows, use_threads=False):
            # Lossless: a layout-only commit must not change a row, so an int64 value the
            # pool's float64 would round stops the compaction instead.
            yield conform_to(pa.Table.from_batches([batch]), fitted, lossless=True)

    return merge_sorted([read(o) for o in ordered], pool.config.key.resolve(schema), fitted)


def plan_runs(
    pool: Pool, objects: Any, object_ids: list[str] | None, schema: pa.Schema | None = None
) -> list[CompactionRun]:
    """The runs to compact: ``object_ids`` merged together per partition, or the policy's
    (``schema``: the pool's, which a ``this`` key resolves against). Each run's objects are
    in snapshot order (oldest first), which a unique pool's merge takes as recency. Raises
    UsageError for an OTree pool (see :func:`lake_core.otree.settings.refuse_key_sorted`)."""
    refuse_key_sorted(pool.config.otree, pool.name, "compaction")
    if object_ids:
        return _explicit_runs(pool, objects, object_ids)
    key = pool.config.key
    runs = plan_compaction(
        list(objects.values()), key.names(schema), pool.config.target_size, key.descending
    )
    position = {oid: i for i, oid in enumerate(objects)}
    return [
        CompactionRun(r.partition, tuple(sorted(r.objects, key=lambda o: position[o.id])))
        for r in runs
    ]


def write_run(
    pool: Pool,
    run: CompactionRun,
    schema: pa.Schema,
    on_object: Callable[[ObjectMeta], None] | None = None,
) -> list[ObjectMeta]:
    """Merge one run and write it as objects near the target size, tagged with the size
    each output stands for so the policy sees the same sums next time and reaches a fixpoint
    (see policy.py). Not committed. Runs on the driver or inside a Spark task alike."""
    target = pool.config.target_size
    merged = merge_run(pool, run, schema)
    if pool.config.unique:
        merged = KeepLast(pool.config.key.resolve(schema))(merged)
    # The merge runs on a thread a piece ahead, so it overlaps the encoding of the last piece.
    # Closed here, on this thread, when the write fails: left to the garbage collector, its
    # close (which stops and joins the merge thread) ran wherever a collection happened, once
    # inside another merge's ThreadPoolExecutor.submit holding the lock the first merge
    # thread needed to finish: a deadlock (seen in the suite after an injected encode failure).
    with closing(read_ahead(merged, depth=1)) as pieces:
        written = write_sorted(
            pool.store,
            pool.id,
            pieces,
            run_schema(run, schema),
            pool.config.key.resolve(schema),
            WriteOptions(target, pool.config.seek_stride),
            clock=pool.clock,
            partition=run.partition,
            on_object=on_object,
        )
    plan = run.size if len(written) == 1 else target
    return [replace(o, tags={**o.tags, PLAN_SIZE_TAG: str(plan)}) for o in written]


def commit_compaction(
    pool: Pool,
    branch: str,
    runs: list[CompactionRun],
    adds: list[ObjectMeta],
    *,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
    message: str = "",
    index_adds: Sequence[IndexMeta] | None = None,
) -> CompactionResult:
    """One commit adding ``adds`` and deleting every source of ``runs``; ``index_adds``: the
    outputs' index entries when the caller built them (Spark's tasks), else the commit builds
    them (:meth:`~lake_core.pool.Pool.commit`). On any failure
    (a source deleted meanwhile is a conflict) the written objects are removed — except when
    the commit's outcome is unknown (CommitStateUnknownError): then it may be the tip."""
    deletes = [o.id for r in runs for o in r.objects]
    bytes_in = sum(o.size for r in runs for o in r.objects)
    bytes_out = sum(o.size for o in adds)
    # Only a unique pool's merge drops rows (older duplicates of a key).
    removed = sum(o.count for r in runs for o in r.objects) - sum(o.count for o in adds)
    stats = {
        "runs": len(runs),
        "objects_in": len(deletes),
        "objects_out": len(adds),
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
    }
    text = f"compacted {len(deletes)} objects into {len(adds)}"
    if removed:
        stats["duplicates_removed"] = removed
        text += f", removed {counted(removed, 'duplicate row')}"
    with discarding_on_failure(pool, adds):
        commit = pool.commit(
            branch,
            adds,
            deletes,
            author=author,
            guard=guard,
            message=message or text,
            meta={"compaction": stats},
            # Rows removed: not a layout-only commit (history treats it as a change).
            extra={"kind": "dedupe" if removed else "compaction"},
            index_adds=index_adds or (),
            index=index_adds is None,
        )
    return CompactionResult(
        commit, len(runs), len(deletes), len(adds), bytes_in, bytes_out, removed
    )


def compact(
    pool: Pool,
    branch: str = MAIN,
    object_ids: list[str] | None = None,
    *,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
    message: str = "",
    on_run: Callable[[int, int, CompactionRun], None] | None = None,
) -> CompactionResult:
    """Compact ``object_ids`` (merged together per partition), or what the policy picks."""
    snap = pool.snapshot(pool.tip(branch))
    runs = plan_runs(pool, snap.objects, object_ids, snap.schema)
    if not runs:
        return CompactionResult(None)
    schema = snap.schema or pa.schema([])
    adds: list[ObjectMeta] = []
    written: list[ObjectMeta] = []  # everything that landed, even from a run that then failed
    with discarding_on_failure(pool, written):
        for i, run in enumerate(runs):
            if on_run is not None:
                on_run(i, len(runs), run)
            adds += write_run(pool, run, schema, on_object=written.append)
    return commit_compaction(pool, branch, runs, adds, guard=guard, author=author, message=message)


@dataclass(frozen=True)
class Fragmentation:
    """How far a branch is from compacted: what the policy would do, and what it cost so far."""

    objects: int
    overlapping_objects: int
    small_objects: int
    pending_runs: int
    write_amplification: float

    def to_json(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "overlapping_objects": self.overlapping_objects,
            "small_objects": self.small_objects,
            "pending_runs": self.pending_runs,
            "write_amplification": round(self.write_amplification, 3),
        }


def fragmentation(pool: Pool, branch: str = MAIN) -> Fragmentation:
    """Overlap and small-object counts of the live set (an object is small below half the
    target), the runs a compaction would do, and write amplification over the retained log
    (bytes written by loads and compactions ÷ bytes loaded)."""
    snap = pool.snapshot(pool.tip(branch))
    objs = list(snap.objects.values())
    fields = pool.config.key.names(snap.schema)
    desc = pool.config.key.descending
    overlapping = set()
    by_partition: dict[str | None, list[ObjectMeta]] = {}
    for o in objs:
        by_partition.setdefault(o.partition, []).append(o)
    for group in by_partition.values():
        spans = sorted(
            ((span(o, fields, desc), o.id) for o in group), key=lambda s: SpanOrder(s[0][0])
        )
        end: Any = None
        prev_id = None
        for (lo, hi), oid in spans:
            if prev_id is not None and not key_lt(end, lo):
                overlapping.update({oid, prev_id})
            end = hi if end is None or key_lt(end, hi) else end
            prev_id = oid
    small = sum(1 for o in objs if planned_size(o) < pool.config.target_size // 2)
    runs = plan_compaction(objs, fields, pool.config.target_size, desc)
    loaded = rewritten = 0
    for c in pool.log(branch):
        added = sum(o.size for o in c.adds())
        if c.extra.get("kind") == "compaction":
            rewritten += added
        else:
            loaded += added
    wa = (loaded + rewritten) / loaded if loaded else 1.0
    return Fragmentation(len(objs), len(overlapping), small, len(runs), wa)
