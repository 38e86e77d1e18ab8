"""Dedupe: remove duplicate keys from a pool in one commit (``lake dedupe -p POOL``).

For a pool that was loaded without upserts (or a unique pool given duplicates through the raw
commit path, ``Pool.commit`` of objects written elsewhere): afterwards no two live rows share
a key. Per key the row kept is the one of the
**last commit** — objects in a snapshot are in the order they were added — and within one
object the last in object order (the writer's sort is stable, so that is the last in input
order): the row an upsert would have left. "Last commit" is resolved from history by content
when snapshot order cannot tell (see below). Key equality is :meth:`PoolKey.same_as_next`: a
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
- of groups that hold a duplicate, under a named key, the rows of the duplicate keys are
  read (:func:`live_duplicates`); a key whose live rows all are identical needs no choice.
  A key whose rows differ is decided from history (:func:`lake_core.recency.resolve_recency`:
  the newest commit that net-added one of them, by content, so a rewrite that carried an old
  row after newer objects does not make it win); keys history cannot decide (vacated, cleaned
  up) fall back to snapshot order (``resolved_from_snapshot_order``). Under ``this`` a key
  is the whole record, so its duplicates are always identical and nothing is walked;
- those groups are read whole, merged in snapshot order, the losing rows of decided keys
  removed, then every key's older duplicates dropped (:class:`~lake_core.merge.KeepLast`:
  the copies left of a decided key are identical), and written back as new sorted objects
  (by partition); the commit deletes the group's objects and adds the new ones.

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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.errors import CommitConflictError
from lake_core.ingest.schema import conform_to
from lake_core.integrity import open_verified, read_verified
from lake_core.maintenance.compact import merge_run, run_schema
from lake_core.maintenance.policy import CompactionRun, SpanOrder, key_lt, key_span, span
from lake_core.merge import KeepLast, merge_sorted
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.otree.settings import refuse_key_sorted
from lake_core.poolkey import PoolKey
from lake_core.recency import Recency, key_positions, resolve_recency, rows_with_keys
from lake_core.rowsets import pair_rows
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
    #: Keys whose live duplicates differ, decided from history / left to snapshot order.
    resolved_from_history: int = 0
    resolved_from_snapshot_order: int = 0
    #: What deciding them read: commit records visited, data objects read (live and past).
    recency_commits_read: int = 0
    recency_objects_read: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit.id if self.commit is not None else None,
            "rows_removed": self.rows_removed,
            "objects_examined": self.objects_examined,
            "objects_skipped": self.objects_skipped,
            "objects_rewritten": self.objects_rewritten,
            "objects_written": self.objects_written,
            "attempts": self.attempts,
            "resolved_from_history": self.resolved_from_history,
            "resolved_from_snapshot_order": self.resolved_from_snapshot_order,
            "recency_commits_read": self.recency_commits_read,
            "recency_objects_read": self.recency_objects_read,
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
    return duplicate_keys(pool, group, schema, key)[0]


def duplicate_keys(
    pool: Pool, group: Sequence[ObjectMeta], schema: pa.Schema, key: PoolKey
) -> tuple[int, pa.Table]:
    """(rows of ``group`` that are older duplicates of a key, the key columns of those rows
    — each duplicate key at least once), from its key columns only."""
    key_schema = _key_schema(schema, key)
    if len(key_schema) == 0:
        return 0, key_schema.empty_table()  # no key field was ever loaded: every key is null
    removed = 0
    keys: list[pa.Table] = []
    carry: pa.Table | None = None
    sources = [_read_keys(pool, o, key_schema) for o in group]
    for piece in merge_sorted(sources, key, key_schema):
        if piece.num_rows == 0:
            continue
        table = piece if carry is None else pa.concat_tables([carry, piece])
        same = key.same_as_next(table)
        if same.any():
            removed += int(same.sum())
            keys.append(table.slice(0, table.num_rows - 1).filter(pa.array(same)))
        carry = table.slice(table.num_rows - 1)
    return removed, (pa.concat_tables(keys) if keys else key_schema.empty_table())


def live_duplicates(
    pool: Pool,
    groups: Sequence[tuple[Sequence[ObjectMeta], pa.Table]],
    schema: pa.Schema,
    names: tuple[str, ...],
) -> pa.Table:
    """The live rows of each group whose named key is in that group's duplicate keys,
    conformed to ``schema``."""
    parts = []
    for group, keys in groups:
        for o in group:
            rows = read_verified(pool.store, pool.id, o, pool.name)
            parts.append(conform_to(rows_with_keys(rows, keys, names), schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _without(
    pieces: Iterator[pa.Table], losers: pa.Table, names: tuple[str, ...]
) -> Iterator[pa.Table]:
    """``pieces`` less the rows of ``losers`` (a multiset: each loser row removed once).
    Only a piece's rows holding a loser's key are compared whole."""
    remaining: pa.Table | None = None
    for piece in pieces:
        if remaining is None:
            remaining = conform_to(losers, piece.schema)  # every piece has the run's schema
        if remaining.num_rows:
            at = key_positions(piece, remaining, names)
            pairing = pair_rows(piece.take(at), remaining) if len(at) else None
            if pairing is not None and len(pairing.left):
                drop = np.zeros(piece.num_rows, dtype=bool)
                drop[at.to_numpy()[pairing.left]] = True
                piece = piece.filter(pa.array(~drop))
                remaining = remaining.filter(pc.invert(pairing.right_mask(remaining.num_rows)))
        yield piece


def _rewrite(
    pool: Pool,
    group: Sequence[ObjectMeta],
    schema: pa.Schema,
    key: PoolKey,
    on_object: Callable[[ObjectMeta], None],
    losers: pa.Table,
) -> int:
    """Write ``group``'s rows back without ``losers`` and older duplicates; return the rows
    dropped."""
    partitions = {o.partition for o in group}
    run = CompactionRun(next(iter(partitions)) if len(partitions) == 1 else None, tuple(group))
    drop = KeepLast(key)
    merged = merge_run(pool, run, schema)
    rows = drop(_without(merged, losers, key.names(schema)) if losers.num_rows else merged)
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
    refuse_key_sorted(pool.config.otree, pool.name, "dedupe")
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
    found = [(g, duplicate_keys(pool, g, schema, key)) for g in plan.groups]
    dirty = [g for g, (n, _) in found if n]
    dirty_keys = [k for _, (n, k) in found if n]
    if not dirty:
        return DedupeResult(None, 0, examined, plan.skipped, attempts=attempt)
    recency = Recency(schema.empty_table())
    if not key.is_this:  # under ``this`` duplicates are identical records: nothing to choose
        names = key.names(schema)
        live = live_duplicates(pool, list(zip(dirty, dirty_keys, strict=True)), schema, names)
        recency = resolve_recency(pool, snap.commit_id, live, names)
        recency = Recency(
            recency.losers,
            recency.resolved,
            recency.fallback,
            recency.commits_read,
            recency.objects_read + sum(len(g) for g in dirty),
        )
    written: list[ObjectMeta] = []
    removed = 0
    with discarding_on_failure(pool, written):
        for group, keys in zip(dirty, dirty_keys, strict=True):
            # Each group pairs only its own losers (groups hold disjoint keys).
            losers = recency.losers
            if losers.num_rows and len(dirty) > 1:
                losers = rows_with_keys(losers, keys, key.names(schema))
            removed += _rewrite(pool, group, schema, key, written.append, losers)
        removed += recency.losers.num_rows
        deletes = [o.id for g in dirty for o in g]
        stats = {
            "rows_removed": removed,
            "objects_examined": examined,
            "objects_rewritten": len(deletes),
            "objects_written": len(written),
            "resolved_from_history": recency.resolved,
            "resolved_from_snapshot_order": recency.fallback,
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
        commit,
        removed,
        examined,
        plan.skipped,
        len(deletes),
        len(written),
        attempt,
        recency.resolved,
        recency.fallback,
        recency.commits_read,
        recency.objects_read,
    )


__all__ = [
    "ATTEMPTS",
    "DedupePlan",
    "DedupeResult",
    "count_duplicates",
    "dedupe",
    "duplicate_keys",
    "live_duplicates",
    "plan_dedupe",
]
