"""Applying a recorded change to another snapshot, row-correct whatever maintenance ran since.

A change (one commit's actions, or a branch's changes since a merge base) is recorded as
objects: some left the live set, others joined it. Replaying it on a later snapshot by object
id works only while those objects are still live there; a layout-only commit (compaction)
replaces them with objects holding the *same rows*, and a replay by id would then resurrect
(revert) or refuse (merge) rows that are in fact still there.

:func:`plan_onto` therefore works per *component*: the change's objects grouped by
overlapping key ranges (a rewritten object always overlaps what it was rewritten from).

* A component whose removed objects are all still live in the target applies by id: delete
  them, add its added objects. Nothing is read. This is every change no maintenance touched.
* Any other component applies by rows. Its net change is computed by content —
  ``rows(removed) − rows(added)`` leave, ``rows(added) − rows(removed)`` join (multiset
  differences, :mod:`lake_core.rowsets`; rows a rewrite kept cancel out) — and the leaving
  rows are found again in the target's objects whose key range can hold them (pruned by the
  objects' min/max), which are rewritten without them. Rows to leave that the target no longer
  holds are reported as ``missing``: the caller decides whether that is a conflict (merge) or
  already done (revert).

Invariant: for every component, the target's rows afterwards equal its rows before, minus the
component's net removed rows that it holds, plus its net added rows — whatever layout the
target has. Object-level application is the special case where that needs no reading.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import CorruptObjectError
from lake_core.ingest.schema import conform_to
from lake_core.integrity import read_verified
from lake_core.maintenance.policy import SpanOrder, key_lt, span
from lake_core.objects import ObjectMeta
from lake_core.rowsets import cancel, group_rows, pair_rows
from lake_core.snapshot import Snapshot

if TYPE_CHECKING:  # the pool module imports nothing from here; only changes does
    from lake_core.pool import Pool


@dataclass(frozen=True)
class ObjectChange:
    """A change as objects: ``removed`` left the live set and ``added`` joined it."""

    removed: tuple[ObjectMeta, ...]
    added: tuple[ObjectMeta, ...]


@dataclass
class Plan:
    """What applying a change to a target needs: ``deletes`` (ids live in the target),
    ``adds`` (existing objects to add by id) and ``tables`` to write as new objects, each
    with the partition it belongs to (None: split by the pool's partition spec). ``missing``
    holds rows the change removes that the target no longer has. ``rows_added`` and
    ``rows_removed`` are the net rows joining and leaving (rows a rewrite keeps not counted,
    except in by-id components, where a rewritten object counts whole)."""

    deletes: list[str] = field(default_factory=list)
    adds: list[ObjectMeta] = field(default_factory=list)
    tables: list[tuple[pa.Table, str | None]] = field(default_factory=list)
    rows_added: int = 0
    rows_removed: int = 0
    missing: pa.Table | None = None

    @property
    def empty(self) -> bool:
        return not self.deletes and not self.adds and not self.tables


def spans_meet(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Closed key spans overlap (TOP, the null-key end, overlaps TOP)."""
    return not key_lt(a[1], b[0]) and not key_lt(b[1], a[0])


def _components(objects: list[ObjectMeta], fields: tuple[str, ...]) -> list[list[ObjectMeta]]:
    """Maximal groups of objects whose key spans overlap (transitively)."""
    spans = {o.id: span(o, fields) for o in objects}
    ordered = sorted(objects, key=lambda o: (SpanOrder(spans[o.id][0]), o.id))
    out: list[list[ObjectMeta]] = []
    end: Any = None
    for o in ordered:
        lo, hi = spans[o.id]
        if out and not key_lt(end, lo):
            out[-1].append(o)
            end = hi if key_lt(end, hi) else end
        else:
            out.append([o])
            end = hi
    return out


def read_rows(pool: Pool, objects: Iterable[ObjectMeta], schema: pa.Schema) -> pa.Table:
    """The rows of ``objects``, conformed to ``schema`` (one table, in the given order).
    Lossless: these rows are compared and rewritten, so a value the pool's type would round
    raises LossyRewriteError rather than being written back changed."""
    tables = [
        conform_to(read_verified(pool.store, pool.id, o, pool.name), schema, lossless=True)
        for o in objects
    ]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def keep_columns(
    table: pa.Table, key_fields: tuple[str, ...], columns: Iterable[str] | None
) -> pa.Table:
    """``table`` restricted to ``columns`` (an object's own columns) or, when None, to the
    columns holding a value (an object never carries a column it has no value for) and the
    key fields."""
    if columns is not None:
        wanted = set(columns)
        return table.select([n for n in table.schema.names if n in wanted])
    keep = [
        n
        for n in table.schema.names
        if n in key_fields or table.column(n).null_count < table.num_rows
    ]
    return table.select(keep)


def plan_onto(
    pool: Pool,
    change: ObjectChange,
    target: Snapshot,
    schema: pa.Schema,
) -> Plan:
    """Plan applying ``change`` to ``target`` (see the module docstring). ``schema`` covers
    every column of the change and of the target. Reads only by-rows components and the
    target objects whose key range meets them; writes nothing."""
    fields = pool.config.key.names(schema)  # ``this``: the pool's columns
    plan = Plan()
    by_rows: list[list[ObjectMeta]] = []
    removed_ids = {o.id for o in change.removed}
    for comp in _components([*change.removed, *change.added], fields):
        gone = [o for o in comp if o.id in removed_ids]
        # An added object already live (restored earlier) cannot be added again by id: its
        # rows are written anew, by rows.
        if all(o.id in target.objects for o in gone) and not any(
            o.id in target.objects for o in comp if o.id not in removed_ids
        ):
            plan.deletes += [o.id for o in gone]
            plan.adds += [o for o in comp if o.id not in removed_ids]
            plan.rows_removed += sum(o.count for o in gone)
            plan.rows_added += sum(o.count for o in comp if o.id not in removed_ids)
        else:
            by_rows.append(comp)
    if not by_rows:
        return plan
    leaving: list[pa.Table] = []
    joining: list[tuple[list[ObjectMeta], pa.Table]] = []
    spans: list[tuple[Any, Any]] = []
    for comp in by_rows:
        gone = [o for o in comp if o.id in removed_ids]
        new = [o for o in comp if o.id not in removed_ids]
        minus, plus = cancel(read_rows(pool, gone, schema), read_rows(pool, new, schema))
        spans += [span(o, fields) for o in comp]
        if minus.num_rows:
            leaving.append(minus)
        if plus.num_rows:
            joining.append((new, plus))
    to_remove = pa.concat_tables(leaving) if leaving else schema.empty_table()
    if to_remove.num_rows:
        _plan_removal(pool, plan, target, to_remove, spans, schema, fields)
    for new, plus in joining:
        if plus.num_rows == sum(o.count for o in new) and not any(
            o.id in target.objects for o in new
        ):
            plan.adds += new  # nothing of them cancelled: add them as they are, no rewrite
        else:
            plan.tables.append((keep_columns(plus, fields, None), None))
        plan.rows_added += plus.num_rows
    return plan


def _plan_removal(
    pool: Pool,
    plan: Plan,
    target: Snapshot,
    to_remove: pa.Table,
    spans: list[tuple[Any, Any]],
    schema: pa.Schema,
    fields: tuple[str, ...],
) -> None:
    """Find ``to_remove`` in the target's objects whose key range meets ``spans`` and plan
    their rewrite without those rows (each row removed once); what is not found is missing."""
    taken = set(plan.deletes)
    candidates = [
        o
        for o in target.objects.values()
        if o.id not in taken and any(spans_meet(span(o, fields), s) for s in spans)
    ]
    remaining = to_remove
    for obj in candidates:
        if remaining.num_rows == 0:
            break
        rows = read_rows(pool, [obj], schema)
        pairing = pair_rows(rows, remaining)
        if len(pairing.left) == 0:
            continue
        plan.deletes.append(obj.id)
        plan.rows_removed += len(pairing.left)
        keep = rows.filter(pc.invert(pairing.left_mask(rows.num_rows)))
        if keep.num_rows:
            plan.tables.append((keep_columns(keep, fields, obj.columns), obj.partition))
        remaining = remaining.filter(pc.invert(pairing.right_mask(remaining.num_rows)))
    plan.missing = remaining if remaining.num_rows else None


def plan_merge(
    pool: Pool,
    theirs: ObjectChange,
    ours: ObjectChange,
    target: Snapshot,
    schema: pa.Schema,
    resolve: str | None = None,
) -> tuple[Plan, pa.Table | None]:
    """Plan a three-way merge: ``theirs`` (the source's change since the merge base) onto
    ``target``, whose own change since the base is ``ours``. Returns the plan and the
    conflicting rows (None when there are none, or ``resolve`` settled them).

    The rule, per distinct row value (its count in the base b, in the source s, in the target
    t), is git's per line: s = b → keep t; t = b → take s; s = t → both made the same change,
    keep it once; otherwise both changed that row differently — a conflict, which ``resolve``
    settles as ``theirs`` (count s) or ``ours`` (count t). Only counts' *differences* from
    the base are needed, and those come from each side's changed objects (a rewrite that kept
    a row cancels out), so layout-only commits on either side never matter.

    A key range of the source's change that the target did not touch since the base (no
    object of ``ours`` meets it) applies by object id without reading anything."""
    fields = pool.config.key.names(schema)  # ``this``: the pool's columns
    plan = Plan()
    our_spans = [span(o, fields) for o in (*ours.removed, *ours.added)]
    removed_ids = {o.id for o in theirs.removed}
    by_rows: list[list[ObjectMeta]] = []
    for comp in _components([*theirs.removed, *theirs.added], fields):
        spans = [span(o, fields) for o in comp]
        if any(spans_meet(a, b) for a in our_spans for b in spans):
            by_rows.append(comp)
            continue
        gone = [o for o in comp if o.id in removed_ids]
        new = [o for o in comp if o.id not in removed_ids]
        plan.deletes += [o.id for o in gone]
        plan.adds += new
        plan.rows_removed += sum(o.count for o in gone)
        plan.rows_added += sum(o.count for o in new)
    if not by_rows:
        return plan, None
    spans = [span(o, fields) for comp in by_rows for o in comp]

    def meets(o: ObjectMeta) -> bool:
        return any(spans_meet(span(o, fields), s) for s in spans)

    members = [o for comp in by_rows for o in comp]
    tables = [
        read_rows(pool, [o for o in members if o.id in removed_ids], schema),
        read_rows(pool, [o for o in members if o.id not in removed_ids], schema),
        read_rows(pool, [o for o in ours.removed if meets(o)], schema),
        read_rows(pool, [o for o in ours.added if meets(o)], schema),
    ]
    groups = group_rows(tables)
    n = 1 + max((int(g.max()) for g in groups if len(g)), default=-1)
    counts = [np.bincount(g, minlength=n) for g in groups]
    d_theirs = counts[1] - counts[0]
    d_ours = counts[3] - counts[2]
    touched = d_theirs != 0
    conflict = touched & (d_ours != 0) & (d_ours != d_theirs)
    delta = np.where(touched & (d_ours == 0), d_theirs, 0)
    if resolve == "theirs":
        delta = np.where(conflict, d_theirs - d_ours, delta)
    every = pa.concat_tables(tables)
    first = np.full(n, -1, dtype=np.int64)
    flat = np.concatenate(groups)
    first[flat[::-1]] = np.arange(len(flat) - 1, -1, -1)  # first occurrence of each value

    def copies(mask: np.ndarray, how_many: np.ndarray) -> pa.Table:
        ids = np.nonzero(mask)[0]
        return every.take(pa.array(np.repeat(first[ids], how_many[ids]), pa.int64()))

    conflicting = copies(conflict, np.ones(n, dtype=np.int64)) if conflict.any() else None
    if conflicting is not None and resolve is None:
        return plan, conflicting
    to_remove = copies(delta < 0, -delta)
    to_add = copies(delta > 0, delta)
    if to_remove.num_rows:
        _plan_removal(pool, plan, target, to_remove, spans, schema, fields)
        if plan.missing is not None:
            raise CorruptObjectError(
                pool.layout.root,
                f"merge expected {plan.missing.num_rows} row(s) on the target that are not there",
            )
    if to_add.num_rows:
        plan.tables.append((keep_columns(to_add, fields, None), None))
        plan.rows_added += to_add.num_rows
    return plan, None
