"""Dedupe: remove duplicate keys from a pool in one commit (``lake dedupe -p POOL``).

For a pool that was loaded without upserts (or a unique pool given duplicates through the raw
commit path, ``Pool.commit`` of objects written elsewhere): afterwards no two live rows share
a key. Per key the row kept is the one of the
**last commit** — objects in a snapshot are in the order they were added — and within one
object the last in object order (the writer's sort is stable, so that is the last in input
order): the row an upsert would have left. Key equality is :meth:`PoolKey.same_as_next`: a
named key with a null in any field equals nothing (such rows all stay); under ``this`` nulls
are values, so identical records are one.

What is read (:func:`plan_dedupe`, pure, from the recorded key bounds):

- objects are grouped by overlapping key spans (:func:`~lake_core.maintenance.policy.span`,
  over the whole pool: a key is unique pool-wide, across partitions). A group of two or more
  objects may hold a key twice across them; so may a lone object of two or more rows, within
  itself. Everything else — a lone object of one row, or whose keys are all null under a
  named key — is never read;
- of each candidate group, only the *key columns* are read first (a k-way merge in key
  order, :func:`~lake_core.merge.merge_sorted`; duplicates are adjacent), to count its
  duplicates. Under ``this`` the key columns are every column;
- only groups that hold a duplicate are read whole, merged in snapshot order, their older
  duplicates dropped (:class:`~lake_core.merge.KeepLast`), and written back as new sorted
  objects (by partition); the commit deletes the group's objects and adds the new ones.

One commit (``kind: dedupe``, ``meta.dedupe`` with the counts), or none when no group holds
a duplicate. Run it under the pool's maintenance lock (``Pool.dedupe`` takes it), so no
compaction moves rows meanwhile; ``guard`` is the lock's check at the commit point. A commit
refused because a racing commit deleted an object it rewrites (an upsert, a delete, a revert)
removes what it wrote and re-plans from the new tip, up to :data:`ATTEMPTS` times. Loads
landing meanwhile are not deduplicated against (a later dedupe does): the operation removes
the duplicates present at the snapshot it commits on, never a row of a newer commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.errors import CommitConflictError
from lake_core.ingest.schema import conform_to
from lake_core.integrity import open_verified
from lake_core.maintenance.compact import merge_run, run_schema
from lake_core.maintenance.policy import CompactionRun, SpanOrder, key_lt, key_span, span
from lake_core.merge import KeepLast, merge_sorted
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_core.snapshot import Snapshot
from lake_core.writer import WriteOptions, write_partitioned, write_sorted

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time

#: Plans tried when racing commits delete what a dedupe rewrites.
ATTEMPTS = 3
_KEY_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class DedupePlan:
    """Candidate groups (each in snapshot order) and how many live objects are never read."""

    groups: tuple[tuple[ObjectMeta, ...], ...]
    skipped: int


@dataclass(frozen=True)
class DedupeResult:
    """What a dedupe did; ``commit`` is None when no duplicate was found."""

    commit: Commit | None
    rows_removed: int = 0
    #: Objects whose key columns were read (every object of a candidate group).
    objects_examined: int = 0
    #: Objects never read.
    objects_skipped: int = 0
    #: Objects the commit deletes (read whole and written back without duplicates).
    objects_rewritten: int = 0
    objects_written: int = 0
    attempts: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit.id if self.commit is not None else None,
            "rows_removed": self.rows_removed,
            "objects_examined": self.objects_examined,
            "objects_skipped": self.objects_skipped,
            "objects_rewritten": self.objects_rewritten,
            "objects_written": self.objects_written,
            "attempts": self.attempts,
        }


def _dedupe_span(obj: ObjectMeta, key: PoolKey, names: tuple[str, ...]) -> tuple[Any, Any] | None:
    """The span of keys in ``obj`` that can equal another's; None when none can. A named
    key's null keys equal nothing, so they do not widen it; under ``this`` they do."""
    if key.is_this:
        return span(obj, names, key.descending)
    return key_span(obj, names, key.descending)


def plan_dedupe(snapshot: Snapshot, key: PoolKey) -> DedupePlan:
    """The groups of live objects that may hold a key twice (see the module docstring)."""
    names = key.names(snapshot.schema)
    objects = list(snapshot.objects.values())
    position = {o.id: i for i, o in enumerate(objects)}
    spans = [(o, _dedupe_span(o, key, names)) for o in objects]
    keyed = sorted(
        ((o, s) for o, s in spans if s is not None),
        key=lambda p: (SpanOrder(p[1][0]), position[p[0].id]),
    )
    components: list[list[ObjectMeta]] = []
    end: Any = None
    for o, (lo, hi) in keyed:
        if components and not key_lt(end, lo):
            components[-1].append(o)
            end = hi if key_lt(end, hi) else end
        else:
            components.append([o])
            end = hi
    groups = tuple(
        tuple(sorted(c, key=lambda o: position[o.id]))
        for c in components
        if len(c) >= 2 or c[0].count >= 2
    )
    read = sum(len(g) for g in groups)
    return DedupePlan(groups, len(objects) - read)


def _key_schema(schema: pa.Schema, key: PoolKey) -> pa.Schema:
    names = set(key.names(schema))
    return pa.schema([f for f in schema if f.name in names])


def _read_keys(pool: Pool, obj: ObjectMeta, key_schema: pa.Schema) -> Iterator[pa.Table]:
    """The key columns of ``obj``, in its (key) order, a batch at a time."""
    opened = open_verified(pool.store, pool.id, obj, pool.name)
    present = set(opened.file.schema_arrow.names)
    columns = [n for n in key_schema.names if n in present]
    for batch in opened.file.iter_batches(
        batch_size=_KEY_BATCH_ROWS, columns=columns, use_threads=False
    ):
        yield conform_to(pa.Table.from_batches([batch]), key_schema)


def count_duplicates(
    pool: Pool, group: Sequence[ObjectMeta], schema: pa.Schema, key: PoolKey
) -> int:
    """Rows of ``group`` that are older duplicates of a key, from its key columns only."""
    key_schema = _key_schema(schema, key)
    if len(key_schema) == 0:
        return 0  # no key field was ever loaded: every key is null
    drop = KeepLast(key)
    sources = [_read_keys(pool, o, key_schema) for o in group]
    for _ in drop(merge_sorted(sources, key, key_schema)):
        pass
    return drop.removed


def _rewrite(
    pool: Pool,
    group: Sequence[ObjectMeta],
    schema: pa.Schema,
    key: PoolKey,
    on_object: Callable[[ObjectMeta], None],
) -> int:
    """Write ``group``'s rows back without older duplicates; return the rows dropped."""
    partitions = {o.partition for o in group}
    run = CompactionRun(next(iter(partitions)) if len(partitions) == 1 else None, tuple(group))
    drop = KeepLast(key)
    rows = drop(merge_run(pool, run, schema))
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    if len(partitions) == 1:
        write_sorted(
            pool.store,
            pool.id,
            rows,
            run_schema(run, schema),
            key,
            options,
            clock=pool.clock,
            partition=run.partition,
            on_object=on_object,
        )
    else:
        # A key's rows may lie in several partitions: gather the group, then split it again.
        pieces = list(rows)
        table = pa.concat_tables(pieces) if pieces else run_schema(run, schema).empty_table()
        write_partitioned(
            pool.store,
            pool.id,
            table,
            key,
            options,
            pool.partition_spec,
            clock=pool.clock,
            on_object=on_object,
        )
    return drop.removed


def dedupe(
    pool: Pool,
    branch: str = MAIN,
    *,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
    message: str = "",
) -> DedupeResult:
    """Remove duplicate keys from ``branch`` in one commit (see the module docstring)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _attempt(pool, branch, guard, author, message, attempt)
        except CommitConflictError:
            if attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _attempt(
    pool: Pool,
    branch: str,
    guard: Callable[[], None] | None,
    author: str | None,
    message: str,
    attempt: int,
) -> DedupeResult:
    snap = pool.snapshot(pool.tip(branch))
    plan = plan_dedupe(snap, pool.config.key)
    examined = sum(len(g) for g in plan.groups)
    schema = snap.schema or pa.schema([])
    key = pool.config.key.resolve(schema)
    dirty = [g for g in plan.groups if count_duplicates(pool, g, schema, key)]
    if not dirty:
        return DedupeResult(None, 0, examined, plan.skipped, attempts=attempt)
    written: list[ObjectMeta] = []
    removed = 0
    with discarding_on_failure(pool, written):
        for group in dirty:
            removed += _rewrite(pool, group, schema, key, written.append)
        deletes = [o.id for g in dirty for o in g]
        stats = {
            "rows_removed": removed,
            "objects_examined": examined,
            "objects_rewritten": len(deletes),
            "objects_written": len(written),
        }
        commit = pool.commit(
            branch,
            written,
            deletes,
            author=author,
            guard=guard,
            message=message or f"removed {removed} duplicate row{'' if removed == 1 else 's'}",
            meta={"dedupe": stats},
            extra={"kind": "dedupe"},
        )
    return DedupeResult(
        commit, removed, examined, plan.skipped, len(deletes), len(written), attempt
    )


__all__ = ["ATTEMPTS", "DedupePlan", "DedupeResult", "count_duplicates", "dedupe", "plan_dedupe"]
