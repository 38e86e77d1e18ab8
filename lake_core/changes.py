"""Git-like changes to a branch: delete (objects or rows), revert, merge.

Each plans against one snapshot and commits through the commit protocol, which re-checks the
plan against the tip it lands on: a concurrent commit that deleted an object this change
deletes makes it fail with a conflict, never lose or resurrect rows. A change that would do
nothing raises EmptyTransactionError and commits nothing.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.commit import Commit
from lake_core.errors import (
    CommitConflictError,
    EmptyTransactionError,
    NoRowsMatchedError,
    NotFoundError,
    UsageError,
)
from lake_core.expr import may_match, parse_predicate, to_arrow_expression
from lake_core.objects import ObjectMeta, data_key
from lake_core.pool import MAIN, Pool
from lake_core.reader import open_object
from lake_core.scan import _conform, object_stats
from lake_core.writer import WriteOptions, write_objects

_ROW = "__lakepool_row__"


def delete_objects(
    pool: Pool,
    ids: list[str],
    branch: str = MAIN,
    *,
    author: str | None = None,
    message: str = "",
    meta: object = None,
) -> Commit:
    """Remove objects from the live set in one commit. Unknown ids fail, naming the id."""
    if not ids:
        raise EmptyTransactionError("no object ids given")
    snap = pool.snapshot(pool.tip(branch))
    for i in ids:
        if i not in snap.objects:
            raise NotFoundError("object", i, f"not live on {pool.name}@{branch}")
    return pool.commit(
        branch,
        [],
        list(dict.fromkeys(ids)),
        author=author,
        meta=meta,
        message=message or f"deleted {len(ids)} data objects",
    )


def delete_where(
    pool: Pool,
    where: str,
    branch: str = MAIN,
    *,
    author: str | None = None,
    message: str = "",
    meta: object = None,
) -> Commit:
    """Delete the rows matching ``where`` by rewriting only the objects that hold them; rows
    where the predicate is false or null are kept. No matching row: NoRowsMatchedError (an
    EmptyTransactionError), nothing committed."""
    snap = pool.snapshot(pool.tip(branch))
    schema = snap.schema or pa.schema([])
    expr = parse_predicate(where)
    predicate = to_arrow_expression(expr, schema)
    deletes: list[str] = []
    survivors: list[pa.Table] = []
    for obj in snap.objects.values():
        if not may_match(expr, object_stats(obj, schema), schema):
            continue
        table = _conform(
            open_object(pool.store, data_key(pool.id, obj.id), obj.size).file.read(), schema
        )
        rows = pa.array(range(table.num_rows), pa.int64())
        hit = table.append_column(_ROW, rows).filter(predicate).column(_ROW)
        if len(hit) == 0:
            continue
        deletes.append(obj.id)
        keep = table.filter(pc.invert(pc.is_in(rows, value_set=hit.combine_chunks())))
        if keep.num_rows:
            survivors.append(_drop_all_null_columns(keep, obj))
    if not deletes:
        raise NoRowsMatchedError(f"no rows match {where}")
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    adds: list[ObjectMeta] = []
    try:
        for t in survivors:
            adds += write_objects(
                pool.store, pool.id, t, pool.config.key, options, presorted=True, clock=pool.clock
            )
        return pool.commit(
            branch,
            adds,
            deletes,
            author=author,
            meta=meta,
            message=message or f"deleted rows where {where} (rewrote {len(deletes)} objects)",
        )
    except BaseException:
        pool.discard_objects(adds)
        raise


def _drop_all_null_columns(table: pa.Table, obj: ObjectMeta) -> pa.Table:
    """Keep the rewritten object's columns to those the original had."""
    return table.select([n for n in table.schema.names if n in obj.columns])


def revert(
    pool: Pool,
    commit_id: str,
    branch: str = MAIN,
    *,
    author: str | None = None,
    message: str = "",
    meta: object = None,
) -> Commit:
    """Undo one commit's actions in a new commit: its adds still live are deleted, its deletes
    no longer live are re-added."""
    target = pool.read_commit(commit_id)
    tip = pool.snapshot(pool.tip(branch))
    before = pool.snapshot(target.parent)
    deletes = [o.id for o in target.adds() if o.id in tip.objects]
    adds = [
        before.objects[i] for i in target.deletes() if i not in tip.objects and i in before.objects
    ]
    if not adds and not deletes:
        raise EmptyTransactionError(f"reverting {commit_id} would change nothing")
    return pool.commit(
        branch,
        adds,
        deletes,
        author=author,
        meta=meta,
        message=message or f"reverted commit {commit_id}",
        incoming_schema=before.schema if adds else None,
    )


def _ancestors(pool: Pool, commit_id: str | None) -> list[str]:
    """``commit_id`` and its retained ancestors, newest first: the walk stops at a vacate tail
    (older history may already be reclaimed by cleanup)."""
    _, tails = pool.vacate_state()
    stop = set(tails.values())
    out = []
    while commit_id is not None:
        out.append(commit_id)
        if commit_id in stop:
            break
        commit_id = pool.read_commit(commit_id).parent
    return out


def merge(
    pool: Pool,
    source: str,
    into: str,
    *,
    author: str | None = None,
    message: str = "",
    meta: object = None,
) -> Commit:
    """Apply ``source``'s changes since the common ancestor to ``into`` in one commit."""
    if source == into:
        raise UsageError("cannot merge a branch into itself")
    src_tip = pool.tip(source)
    dst_tip = pool.tip(into)
    # The target's line includes the source tips earlier merges applied, so merging again
    # starts from the last merge instead of re-applying (and re-deleting) old changes.
    dst_line: set[str] = set()
    for cid in _ancestors(pool, dst_tip):
        dst_line.add(cid)
        merged = pool.read_commit(cid).extra.get("merge_source")
        if merged:
            dst_line.add(merged)
    base = next((c for c in _ancestors(pool, src_tip) if c in dst_line), None)
    base_snap = pool.snapshot(base)
    src = pool.snapshot(src_tip)
    dst = pool.snapshot(dst_tip)
    src_added = [o for i, o in src.objects.items() if i not in base_snap.objects]
    src_deleted = [i for i in base_snap.objects if i not in src.objects]
    both = [i for i in src_deleted if i not in dst.objects]
    if both:
        raise CommitConflictError(f"both {source} and {into} deleted object {both[0]}")
    adds = [o for o in src_added if o.id not in dst.objects]
    if not adds and not src_deleted:
        raise EmptyTransactionError(f"{source} has nothing to merge into {into}")
    return pool.commit(
        into,
        adds,
        src_deleted,
        author=author,
        meta=meta,
        message=message or f"merged {source} into {into}",
        extra={"merge_source": src_tip},
        incoming_schema=src.schema,
    )
