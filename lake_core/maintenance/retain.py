"""Retain: commit the removal of data older than a cut time (``lake retain --older-than 90d``).

Retention that users mean expires *data*, not history. The time a row carries is the pool's
*time column*: the column of a ``day(…)``, ``month(…)`` or ``year(…)`` partitioning when the
pool has one, else the first pool key field when it is a timestamp (or date). Any other pool
cannot be retained by time: UsageError, nothing changes.

One commit, planned from each object's recorded column statistics (pure, see
:func:`plan_retain`):

- an object whose rows all lie before the cut (max < cut, no nulls) is deleted —
  **metadata-only**: nothing is read or written. With time partitioning this is every object of
  every partition wholly before the cut;
- an object straddling the cut (min < cut ≤ max, or all before it but holding rows without a
  time) is **rewritten**: its rows at or after the cut, and rows lacking the time (records
  lacking the key are kept, as everywhere in the lake), are written back in key order into the
  same partition, and the object is deleted in the same commit;
- everything else is untouched.

Rows are removed exactly when their time is before the cut. The commit records the rows it
removed (``extra.rows``) and ``kind: retain``, so ``lake log`` shows it and history operations
treat it as an ordinary change (revert brings the rows back). The files stay until a vacate
cuts the history that references them and cleanup reclaims them.

Run it under the pool's maintenance lock (like compaction it reads the live set and commits a
change to it); ``guard`` is the lock's ``check`` at the commit point. A commit whose outcome is
unknown keeps its objects; any other failure removes what was written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.clock import to_iso
from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.errors import UsageError
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.reader import open_object
from lake_core.snapshot import Snapshot
from lake_core.units import counted
from lake_core.writer import WriteOptions, write_objects

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time

_TIME_TRANSFORMS = ("day", "month", "year")


@dataclass(frozen=True)
class TimeColumn:
    """Which column carries a row's time, and why (``key`` or ``partition``)."""

    name: str
    by: str


@dataclass(frozen=True)
class RetainPlan:
    """Objects wholly before the cut (dropped) and objects straddling it (rewritten)."""

    column: TimeColumn
    cut: datetime
    drop: tuple[ObjectMeta, ...] = ()
    rewrite: tuple[ObjectMeta, ...] = ()


@dataclass(frozen=True)
class RetainResult:
    """What a retain committed (``commit`` is None when nothing was older than the cut)."""

    commit: Commit | None
    cut: datetime
    column: str
    by: str
    dropped: int = 0
    rewritten: int = 0
    written: int = 0
    rows_removed: int = 0
    rows_kept: int = 0
    partitions_dropped: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit.id if self.commit is not None else None,
            "cut": to_iso(self.cut),
            "column": self.column,
            "by": self.by,
            "objects_dropped": self.dropped,
            "objects_rewritten": self.rewritten,
            "objects_written": self.written,
            "rows_removed": self.rows_removed,
            "rows_kept_in_rewrites": self.rows_kept,
            "partitions_dropped": list(self.partitions_dropped),
        }


def time_column(pool: Pool, schema: pa.Schema | None) -> TimeColumn:
    """The pool's time column; UsageError naming the key and its type when it has none."""
    spec = pool.partition_spec
    if spec is not None and spec.transform in _TIME_TRANSFORMS:
        return TimeColumn(spec.column, "partition")
    first = pool.config.key.names(schema)[0]
    kind = "missing"
    if schema is not None and first in schema.names:
        t = schema.field(first).type
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            return TimeColumn(first, "key")
        kind = str(t)
    raise UsageError(
        f"pool {pool.name} cannot be retained by time: its first key field {first!r} is "
        f"{kind}, not a timestamp, and it is not partitioned by day(), month() or year() "
        "of a timestamp"
    )


def _bound(obj: ObjectMeta, column: str, which: str) -> Any:
    meta = obj.columns.get(column)
    if meta is None:
        return None
    return meta.decoded_min() if which == "min" else meta.decoded_max()


def _before(value: Any, cut: datetime) -> bool:
    """``value`` (a decoded stat: datetime or date) lies before ``cut``."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)) < cut
    if isinstance(value, date):
        return value < cut.date()
    return False


def plan_retain(snapshot: Snapshot, column: TimeColumn, cut: datetime) -> RetainPlan:
    """Pure: which live objects go whole and which are rewritten, from recorded stats."""
    drop: list[ObjectMeta] = []
    rewrite: list[ObjectMeta] = []
    for obj in sorted(snapshot.objects.values(), key=lambda o: o.id):
        meta = obj.columns.get(column.name)
        if meta is None or meta.nulls >= obj.count:
            continue  # no row carries a time: records lacking it are kept
        lo, hi = _bound(obj, column.name, "min"), _bound(obj, column.name, "max")
        if lo is None or hi is None:
            rewrite.append(obj)  # no usable stats: read it to decide
        elif not _before(lo, cut):
            continue
        elif _before(hi, cut) and meta.nulls == 0:
            drop.append(obj)
        else:
            rewrite.append(obj)
    return RetainPlan(column, cut, tuple(drop), tuple(rewrite))


def _kept_rows(table: pa.Table, column: str, cut: datetime) -> pa.Table:
    """Rows at or after ``cut``, and rows without a time, in their order."""
    if column not in table.schema.names:
        return table
    col = table.column(column)
    t = col.type
    scalar: Any
    if pa.types.is_timestamp(t):
        bound = cut if t.tz is not None else cut.astimezone(UTC).replace(tzinfo=None)
        scalar = pa.scalar(bound, type=t)
    elif pa.types.is_date(t):
        scalar = pa.scalar(cut.date(), type=t)
    else:
        return table
    # Null times compare to null; or_kleene with is_null makes them true (kept).
    keep: Any = pc.or_kleene(pc.greater_equal(col, scalar), pc.is_null(col))
    return table.filter(keep)


def retain(
    pool: Pool,
    older_than: timedelta,
    branch: str = MAIN,
    *,
    now: datetime | None = None,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
) -> RetainResult:
    """Remove the rows of ``branch`` whose time is before ``now - older_than`` in one commit;
    see the module docstring. Raises UsageError (nothing changed) for a pool without a time
    column or a negative duration."""
    if older_than < timedelta(0):
        raise UsageError(f"--older-than must not be negative, not {older_than}")
    now = now or pool.clock.now()
    cut = (now if now.tzinfo else now.replace(tzinfo=UTC)) - older_than
    snap = pool.snapshot(pool.tip(branch))
    column = time_column(pool, snap.schema)
    plan = plan_retain(snap, column, cut)
    if not plan.drop and not plan.rewrite:
        return RetainResult(None, cut, column.name, column.by)

    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    adds: list[ObjectMeta] = []
    deletes = [o.id for o in plan.drop]
    rows_removed = sum(o.count for o in plan.drop)
    rows_kept = rewritten = 0
    # ``adds`` grows as each object lands, so a failure midway removes all that was written.
    with discarding_on_failure(pool, adds):
        for obj in plan.rewrite:
            table = open_object(pool.store, pool.layout.data(obj.id), obj.size).file.read()
            kept = _kept_rows(table, column.name, cut)
            if kept.num_rows == table.num_rows:
                continue  # stats were unusable and nothing is old after all
            deletes.append(obj.id)
            rewritten += 1
            rows_removed += table.num_rows - kept.num_rows
            rows_kept += kept.num_rows
            if kept.num_rows:
                write_objects(
                    pool.store,
                    pool.id,
                    kept,
                    pool.config.key.resolve(snap.schema),
                    options,
                    presorted=True,  # a filter keeps the object's key order
                    clock=pool.clock,
                    partition=obj.partition,
                    on_object=adds.append,
                )
        if not deletes:
            return RetainResult(None, cut, column.name, column.by)
        commit = pool.commit(
            branch,
            adds,
            deletes,
            author=author,
            guard=guard,
            message=f"retained rows at or after {to_iso(cut)}: removed {counted(rows_removed, 'row')}",
            meta={"retain": {"cut": to_iso(cut), "column": column.name, "by": column.by}},
            extra={"kind": "retain"},
        )
    dropped_parts = _partitions_dropped(snap, set(deletes), {o.partition for o in adds})
    return RetainResult(
        commit,
        cut,
        column.name,
        column.by,
        dropped=len(plan.drop),
        rewritten=rewritten,
        written=len(adds),
        rows_removed=rows_removed,
        rows_kept=rows_kept,
        partitions_dropped=dropped_parts,
    )


def _partitions_dropped(
    snap: Snapshot, deleted: set[str], refilled: set[str | None]
) -> tuple[str, ...]:
    """Partitions every object of which the commit deleted, and into which it wrote nothing."""
    by_part: dict[str, bool] = {}
    for o in snap.objects.values():
        if o.partition is None:
            continue
        by_part[o.partition] = by_part.get(o.partition, True) and o.id in deleted
    return tuple(sorted(p for p, gone in by_part.items() if gone and p not in refilled))


__all__ = ["RetainPlan", "RetainResult", "TimeColumn", "plan_retain", "retain", "time_column"]
