"""Git-like changes to a branch: delete (objects or rows), revert, merge.

Each plans against one snapshot and commits through the commit protocol, which re-checks the
plan against the tip it lands on: a concurrent commit that deleted an object this change
deletes makes it fail with a conflict, never lose or resurrect rows. A change that would do
nothing raises EmptyTransactionError and commits nothing.

Revert and merge are row-correct through maintenance: they replay a recorded change by object
id where its objects are still live, and by rows (found again by content, in the objects
compaction moved them to) where not — :mod:`lake_core.history`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.clock import to_iso
from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure, replannable
from lake_core.errors import (
    CommitConflictError,
    DuplicateKeyError,
    EmptyTransactionError,
    HistoryVacatedError,
    NoRowsMatchedError,
    NotFoundError,
    RetriesExhaustedError,
    UsageError,
)
from lake_core.expr import Expr, may_match, parse_predicate, to_arrow_expression
from lake_core.history import ObjectChange, Plan, plan_merge, plan_onto, spans_meet
from lake_core.ids import is_ksuid
from lake_core.inflight import write_window_guard
from lake_core.ingest.schema import conform_to, unify_schema
from lake_core.integrity import read_verified
from lake_core.keyset import KeySet
from lake_core.maintenance.policy import span
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.scan import object_stats
from lake_core.snapshot import Snapshot
from lake_core.stats import encode_value
from lake_core.txn import Txn, pending
from lake_core.units import counted
from lake_core.upsert import check_unique
from lake_core.writer import WriteOptions, write_objects, write_partitioned

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time

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
    EmptyTransactionError), nothing committed.

    The delete is planned from rows, so a commit that lands first and removes an object it
    rewrites (a compaction, another delete) does not fail it: what it wrote is removed and it
    plans again from the new tip (bounded by the pool's retry budget, with backoff). The rows
    deleted are those matching in the snapshot it last planned from (snapshot isolation: a
    load that lands after that plan and before the commit keeps its rows, matching or not).
    RetriesExhaustedError when racing commits win every attempt."""
    expr = parse_predicate(where)
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    retry = pool.lake_config.retry
    for attempt in range(retry.max_attempts):
        snap = pool.snapshot(pool.tip(branch))
        schema = snap.schema or pa.schema([])
        deletes, survivors = _plan_delete(pool, snap, expr, schema)
        if not deletes:
            raise NoRowsMatchedError(f"no rows match {where}")
        adds: list[ObjectMeta] = []
        # Like a load's, its new objects are unreferenced until the commit: it must land within
        # the write window (lake_core.inflight), which cleanup's minimum orphan age covers.
        started = pool.clock.now()
        try:
            with discarding_on_failure(pool, adds):
                for t, partition in survivors:
                    write_objects(
                        pool.store,
                        pool.id,
                        t,
                        pool.config.key.resolve(schema),
                        options,
                        presorted=True,
                        clock=pool.clock,
                        partition=partition,
                        on_object=adds.append,  # each object as it lands: a failure removes all
                    )
                return pool.commit(
                    branch,
                    adds,
                    deletes,
                    author=author,
                    meta=meta,
                    message=message
                    or f"deleted rows where {where} (rewrote {counted(len(deletes), 'object')})",
                    guard=write_window_guard(pool.clock, started),
                )
        except CommitConflictError as e:
            if not replannable(e):
                raise
            pool.backoff(attempt)  # what it wrote is removed: plan again from the new tip
    raise RetriesExhaustedError(f"delete from {pool.name}@{branch}", retry.max_attempts)


def _plan_delete(
    pool: Pool, snap: Snapshot, expr: Expr, schema: pa.Schema
) -> tuple[list[str], list[tuple[pa.Table, str | None]]]:
    """The objects of ``snap`` holding a row that matches ``expr`` (checked against
    ``schema``: ExpressionError), and what each keeps (its stored rows, with its partition:
    objects never straddle partitions, and a partition drop finds its objects by that
    field)."""
    predicate = to_arrow_expression(expr, schema)
    deletes: list[str] = []
    survivors: list[tuple[pa.Table, str | None]] = []
    for obj in snap.objects.values():
        if not may_match(expr, object_stats(obj, schema), schema):
            continue
        stored = read_verified(pool.store, pool.id, obj, pool.name)
        # The predicate sees the rows as the pool's schema reads them; the survivors are the
        # stored rows themselves, so a rewrite never changes a value (int64 in a float64
        # column would round).
        table = conform_to(stored, schema)
        rows = pa.array(range(table.num_rows), pa.int64())
        hit = table.append_column(_ROW, rows).filter(predicate).column(_ROW)
        if len(hit) == 0:
            continue
        deletes.append(obj.id)
        keep = stored.filter(pc.invert(pc.is_in(rows, value_set=hit.combine_chunks())))
        if keep.num_rows:
            survivors.append((_drop_all_null_columns(keep, obj), obj.partition))
    return deletes, survivors


def _drop_all_null_columns(table: pa.Table, obj: ObjectMeta) -> pa.Table:
    """Keep the rewritten object's columns to those the original had."""
    return table.select([n for n in table.schema.names if n in obj.columns])


def _write_plan(
    pool: Pool, plan: Plan, written: list[ObjectMeta], schema: pa.Schema | None
) -> list[ObjectMeta]:
    """Write the plan's new tables (appending each object to ``written`` as it lands, so a
    failure can remove them) and return every object the commit adds. ``schema``: the pool's
    after the commit (a ``this`` key resolves against it)."""
    key = pool.config.key.resolve(schema)
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    for table, partition in plan.tables:
        if partition is None:  # new rows: split by the pool's partitioning, if any
            write_partitioned(
                pool.store,
                pool.id,
                table,
                key,
                options,
                pool.partition_spec,
                clock=pool.clock,
                on_object=written.append,
            )
        else:  # a rewritten object keeps its partition
            write_objects(
                pool.store,
                pool.id,
                table,
                key,
                options,
                clock=pool.clock,
                partition=partition,
                on_object=written.append,
            )
    return [*plan.adds, *written]


def _commit_plan(
    pool: Pool,
    branch: str,
    plan: Plan,
    *,
    author: str | None,
    message: str,
    meta: object,
    schema: pa.Schema | None,
    extra: dict[str, Any],
    prune_columns: bool = False,
    carried_txns: Sequence[Txn] = (),
    key_schema: pa.Schema | None = None,
    target: Snapshot | None = None,
) -> Commit:
    """Write ``plan``'s tables and commit it. On a unique pool (``target``: the snapshot the
    plan was made on) the rows it brings must not repeat a key that stays live
    (:func:`lake_core.upsert.check_unique`, DuplicateKeyError), and the commit is validated
    as an upsert's is, so a racing writer of those keys makes it fail, never duplicate."""
    keys: KeySet | None = None
    read_ids: frozenset[str] = frozenset()
    if pool.config.unique and target is not None:
        what = message.splitlines()[0] if message else "this change"
        keys, read_ids = check_unique(
            pool,
            target,
            key_schema or schema or target.schema or pa.schema([]),
            [t for t, _ in plan.tables],
            plan.adds,
            plan.deletes,
            what,
        )
    written: list[ObjectMeta] = []
    with discarding_on_failure(pool, written):
        adds = _write_plan(pool, plan, written, key_schema or schema)
        return pool.commit(
            branch,
            adds,
            plan.deletes,
            author=author,
            meta=meta,
            message=message,
            incoming_schema=schema if adds else None,
            extra=extra,
            prune_columns=prune_columns,
            carried_txns=carried_txns,
            keys=keys,
            read_ids=tuple(read_ids),
        )


def reverted_by(pool: Pool, tip: str | None, commit: Commit) -> str | None:
    """The revert on the line ending at ``tip`` that currently undoes ``commit`` (None if
    ``commit`` is in effect). A revert of a revert puts the original back in effect."""
    reverts_of: dict[str, list[str]] = {}
    for c in _line(pool, tip):
        if c.id == commit.id or c.date < commit.date:
            break
        target = c.extra.get("reverts")
        if target:
            reverts_of.setdefault(str(target), []).append(c.id)

    def undoer(cid: str, depth: int = 0) -> str | None:
        if depth > 10_000:
            return None
        for r in reverts_of.get(cid, []):
            if undoer(r, depth + 1) is None:
                return r
        return None

    return undoer(commit.id)


def _line(pool: Pool, tip: str | None) -> Iterator[Commit]:
    """Commits from ``tip`` back to the first retained one, newest first."""
    _, tails = pool.vacate_state()
    stop = set(tails.values())
    cid = tip
    while cid is not None:
        c = pool.read_commit(cid)
        yield c
        if cid in stop:
            return
        cid = c.parent


def revert(
    pool: Pool,
    commit_id: str,
    branch: str = MAIN,
    *,
    author: str | None = None,
    message: str = "",
    meta: object = None,
) -> Commit:
    """Undo one commit in a new commit, at the level of rows: the rows it removed come back,
    the rows it added that the branch still holds leave — wherever compaction has moved them
    since (see :mod:`lake_core.history`). Rows it added that a later commit already removed
    stay removed. A commit that only changed the layout, or that is already reverted on this
    branch, has nothing to revert (EmptyTransactionError). Reverting a revert re-applies the
    original; reverting a merge removes what the merge brought in."""
    if not is_ksuid(commit_id) and commit_id not in pool.branches():
        # resolve() would call it a missing branch: the argument names a commit.
        raise NotFoundError("commit", commit_id, f"in pool {pool.name}")
    pool.resolve(commit_id)  # a reclaimed (vacated) id says so, not 'not found'
    target = pool.read_commit(commit_id)
    pool.check_not_vacated(target)
    if target.layout_only:
        raise EmptyTransactionError(
            f"commit {commit_id} only changed the layout "
            f"({target.extra.get('kind', 'layout')}); reverting it would change no rows"
        )
    _, tails = pool.vacate_state()
    if target.parent is not None and target.id in tails.values():
        # The oldest retained commit: what it deleted is referenced by no retained commit,
        # so cleanup may already have reclaimed those files. Restoring them is impossible.
        raise HistoryVacatedError(
            f"commit {commit_id} is the oldest retained commit: the history before it was "
            "vacated, so the rows it removed cannot be restored"
        )
    tip_id = pool.tip(branch)
    undone = reverted_by(pool, tip_id, target)
    if undone is not None:
        raise EmptyTransactionError(f"commit {commit_id} was already reverted by {undone}")
    tip = pool.snapshot(tip_id)
    try:
        before = pool.snapshot(target.parent)
    except NotFoundError:
        raise HistoryVacatedError(
            f"the parent of commit {commit_id} was vacated: its removed rows cannot be restored"
        ) from None
    change = ObjectChange(
        removed=tuple(target.adds()),
        added=tuple(before.objects[i] for i in target.deletes() if i in before.objects),
    )
    schema = _union(tip.schema, before.schema)
    plan = plan_onto(pool, change, tip, schema)
    if plan.empty:
        raise EmptyTransactionError(f"reverting {commit_id} would change nothing")
    return _commit_plan(
        pool,
        branch,
        plan,
        author=author,
        meta=meta,
        message=message or f"reverted commit {commit_id}",
        schema=schema,
        extra={"reverts": commit_id},
        prune_columns=True,
        target=tip,
    )


def _union(a: pa.Schema | None, b: pa.Schema | None) -> pa.Schema:
    if a is None:
        return b if b is not None else pa.schema([])
    if b is None:
        return a
    return unify_schema(a, b, "history")


def _ancestors(pool: Pool, commit_id: str | None) -> tuple[list[Commit], bool]:
    """``commit_id`` and its retained ancestors, newest first, and whether the walk was cut
    by a vacate (older history may already be reclaimed by cleanup) rather than reaching the
    pool's first commit."""
    _, tails = pool.vacate_state()
    stop = set(tails.values())
    out: list[Commit] = []
    while commit_id is not None:
        c = pool.read_commit(commit_id)
        out.append(c)
        if commit_id in stop:
            return out, c.parent is not None
        commit_id = c.parent
    return out, False


def merge_base(pool: Pool, source: str, into: str) -> str | None:
    """The newest commit of ``source``'s line that ``into`` already contains: a common
    ancestor, or a tip an earlier merge applied (either way). Raises HistoryVacatedError when
    vacate cut the history before a common commit was found: never guess a base."""
    src_line, src_cut = _ancestors(pool, pool.tip(source))
    dst_line_commits, dst_cut = _ancestors(pool, pool.tip(into))
    dst_line: set[str] = set()
    for c in dst_line_commits:
        dst_line.add(c.id)
        merged = c.extra.get("merge_source")
        if merged:
            dst_line.add(str(merged))
    for c in src_line:
        if c.id in dst_line:
            return c.id
        merged = c.extra.get("merge_source")
        if merged and merged in dst_line:
            return str(merged)  # source already took in this tip of the target
    if src_cut or dst_cut:
        raise HistoryVacatedError(
            f"merge base of {source} and {into} was vacated: their common history is older "
            "than the vacate cut, so what each side changed cannot be told apart"
        )
    return None


def merge(
    pool: Pool,
    source: str,
    into: str,
    *,
    author: str | None = None,
    message: str = "",
    meta: object = None,
    resolve: str | None = None,
) -> Commit:
    """Apply ``source``'s changes since the merge base to ``into`` in one commit, at the level
    of rows where compaction rewrote objects on either side (see :mod:`lake_core.history`).

    Three-way, per distinct row (see :func:`lake_core.history.plan_merge`): a row only one
    side changed takes that side's version; a row both changed the same way (both deleted
    it, both restored it) is kept once; a row both changed differently (e.g. of two copies,
    the source deleted one and the target both) is a conflict. A conflict fails with
    CommitConflictError naming the rows' key range and a commit on each side, and nothing is
    committed, unless ``resolve`` says which side wins for those rows: ``theirs`` (the
    source's count of each contested row) or ``ours`` (the target's). Compaction on either
    side never conflicts: it changes no rows. The merge commit records the application
    transactions the source recorded since the base (:mod:`lake_core.txn`)."""
    if source == into:
        raise UsageError("cannot merge a branch into itself")
    if resolve not in (None, "ours", "theirs"):
        raise UsageError(f"resolve must be ours or theirs, not {resolve!r}")
    src_tip = pool.tip(source)
    dst_tip = pool.tip(into)
    base = merge_base(pool, source, into)
    base_snap = pool.snapshot(base)
    src = pool.snapshot(src_tip)
    dst = pool.snapshot(dst_tip)
    theirs = _change(base_snap, src)
    if not theirs.removed and not theirs.added:
        raise EmptyTransactionError(f"{source} has nothing to merge into {into}")
    schema = _union(_union(dst.schema, src.schema), base_snap.schema)
    plan, conflicting = plan_merge(pool, theirs, _change(base_snap, dst), dst, schema, resolve)
    if conflicting is not None:
        raise _conflict(pool, conflicting, source, src_tip, into, dst_tip, base)
    if plan.empty:
        raise EmptyTransactionError(f"{source} has nothing to merge into {into}")
    try:
        return _commit_plan(
            pool,
            into,
            plan,
            author=author,
            meta=meta,
            message=message or f"merged {source} into {into}",
            schema=src.schema,
            key_schema=schema,
            extra={"merge_source": src_tip},
            # The source's changes come with the transactions that made them (git-like): a
            # file ingested on the branch is not ingested again on the target after the merge.
            carried_txns=pending(base_snap.txns, [Txn(a, v) for a, v in src.txns.items()]),
            target=dst,
        )
    except DuplicateKeyError as e:
        if resolve is None:
            raise
        # Each side replaced the row of one key with its own version: two different rows, not
        # one row both changed, so --theirs/--ours (which settle rows) leave both.
        raise DuplicateKeyError(
            f"{e.detail}; --{resolve} settles rows both branches changed, not two versions of "
            "one key in a unique pool (or upsert the winning side's rows into the other)"
        ) from None


def _change(before: Snapshot, after: Snapshot) -> ObjectChange:
    """What changed between two snapshots of one pool, as objects."""
    return ObjectChange(
        removed=tuple(o for i, o in before.objects.items() if i not in after.objects),
        added=tuple(o for i, o in after.objects.items() if i not in before.objects),
    )


def _conflict(
    pool: Pool,
    missing: pa.Table,
    source: str,
    src_tip: str | None,
    into: str,
    dst_tip: str | None,
    base: str | None,
) -> CommitConflictError:
    """A conflict error naming the contested rows' key range and the commit on each side
    that changed them."""
    key = pool.config.key
    ordered = missing.take(key.sort_indices(missing)) if key.sort_keys(missing.schema) else missing
    cols = key.key_columns(ordered)
    lo, hi = key.key_at(cols, 0), key.key_at(cols, ordered.num_rows - 1)
    span = (_show(lo), _show(hi))
    if key.descending:
        span = (span[1], span[0])
    rng = span[0] if span[0] == span[1] else f"{span[0]} .. {span[1]}"
    src_c = _changed_by(pool, src_tip, base, lo, hi) or src_tip
    dst_c = _changed_by(pool, dst_tip, base, lo, hi) or dst_tip
    return CommitConflictError(
        f"{source} and {into} both changed {missing.num_rows} row(s) with "
        f"{','.join(key.fields)} {rng} ({source}: commit {src_c}; {into}: commit {dst_c}); "
        "rerun with --theirs or --ours to choose (see lake merge --help)"
    )


def _show(k: tuple[Any, ...]) -> str:
    parts = [to_iso(v) if isinstance(v, datetime) else ("null" if v is None else str(v)) for v in k]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def _changed_by(
    pool: Pool, tip: str | None, base: str | None, lo: tuple[Any, ...], hi: tuple[Any, ...]
) -> str | None:
    """The newest commit since ``base`` on the line to ``tip`` that added rows to, or removed
    rows from, an object whose key range meets [lo, hi] (maintenance that only moved rows
    skipped): the last change to those keys on that side — a load that added another copy as
    well as a delete or an upsert that removed one."""
    fields = pool.config.key.fields
    want = _bounds_span(lo, hi)
    for c in _line(pool, tip):
        if c.id == base:
            return None
        if c.layout_only:
            continue
        if any(spans_meet(span(obj, fields), want) for obj in c.adds()):
            return c.id
        if not c.deletes():
            continue
        before = pool.snapshot(c.parent)
        for oid in c.deletes():
            obj = before.objects.get(oid)
            if obj is not None and spans_meet(span(obj, fields), want):
                return c.id
    return None


def _bounds_span(lo: tuple[Any, ...], hi: tuple[Any, ...]) -> tuple[Any, Any]:
    enc = (
        tuple(encode_value(pa.null(), v) for v in lo),
        tuple(encode_value(pa.null(), v) for v in hi),
    )
    a, b = enc
    try:
        return (a, b) if a <= b else (b, a)
    except TypeError:
        return a, b
