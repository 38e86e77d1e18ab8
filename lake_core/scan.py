"""Scanning a snapshot: pruning, merge on read, projection, in pool-key order.

Order: records come out sorted by the pool key (or the direction ``order`` asks for; an OTree
pool's only when an ``order`` is asked for, else they stream object by object in cube order), nulls
last, deterministically: objects whose key ranges overlap are read together and merge-sorted
(stable, objects taken in id order), non-overlapping runs are emitted one after another, and
records whose first key field is null come after all others, held back from every run and
sorted at the end by the later key fields (each field's nulls last, as pyarrow's sort with
``null_placement="at_end"`` orders the whole key; equal keys in object id order). Only runs
and those held-back records are held in memory, not the pool. Runs are found from the
objects' recorded bounds, taken in the pool's direction; a scan in the other direction cuts
them before any later key field an object holds nulls in, since those nulls move to the
other end of their group (:meth:`Scan._bounds`).

Pruning is the read planner's (:mod:`lake_core.planning`): it names the objects to open and,
once an object's footer is open, the row groups to read — and, where an exact index knows
them, the rows of a group, which the scan reads by pages (:mod:`lake_core.pages`); the scan
reads exactly those. The reader works on immutable objects named by one snapshot, so commits
landing meanwhile do not affect it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import ObjectNotFoundError, PurgedObjectError, UsageError
from lake_core.expr import columns_of, parse_predicate, to_arrow_expression
from lake_core.ingest.schema import conform_to
from lake_core.integrity import open_verified
from lake_core.objects import ObjectMeta
from lake_core.otree.blocks import revision_of
from lake_core.otree.sampling import and_sample, sample_predicate
from lake_core.otree.settings import OTreeLayout
from lake_core.pages import PageLayoutError
from lake_core.planning import ReadStats, object_stats, plan_read
from lake_core.poolkey import PoolKey
from lake_core.pruners import read_pruners
from lake_core.purge_records import purged_by
from lake_core.snapshot import Snapshot
from lake_core.stores.base import ObjectStore

__all__ = ["Scan", "ScanStats", "object_stats"]

#: The counters ``--stats`` prints; kept under this name for callers of the scan.
ScanStats = ReadStats


class Scan:
    """A planned scan of one snapshot. Iterate :meth:`batches` once; read :attr:`stats` after."""

    #: How errors name the pool (Pool.scan sets it; else the pool id).
    pool_name: str | None = None

    def __init__(
        self,
        store: ObjectStore,
        pool_id: str,
        key: PoolKey,
        snapshot: Snapshot,
        where: str | None = None,
        columns: list[str] | None = None,
        order: str | None = None,
        *,
        sample: float | None = None,
        otree: OTreeLayout | None = None,
        name: str | None = None,
    ) -> None:
        if name is not None:
            self.pool_name = name
        #: An OTree pool's objects are laid out by cube, not by key: without an explicit
        #: ``order`` its records stream object by object, in no key order (docs/otree.md).
        self.unordered = otree is not None and order is None
        self.store, self.pool_id, self.key, self.snapshot = store, pool_id, key, snapshot
        self.pool_schema = snapshot.schema or pa.schema([])
        if order not in (None, "asc", "desc"):
            raise UsageError(f"--order must be asc or desc, not {order!r}")
        self.descending = key.descending if order is None else order == "desc"
        self.expr = parse_predicate(where) if where else None
        if sample is not None:
            # A sample is a predicate on the weight column (lake_core.otree.sampling): read,
            # pruned and filtered like any other, so it equals the brute-force filter.
            self.expr = and_sample(
                self.expr, sample_predicate(otree, sample, self.pool_name or pool_id)
            )
        self.filter: Any
        names = set(self.pool_schema.names)
        if self.expr is not None:
            unknown = sorted(columns_of(self.expr) - names)
            # A pool that never held rows has no columns yet (and yields none): a predicate over
            # the columns its rows will have is not an error, and there is nothing to filter.
            # A pool with columns (holding rows, or all of them deleted) refuses unknown ones.
            if unknown and names:
                raise UsageError(f"unknown column {unknown[0]!r} in --where")
            self.filter = None if unknown else to_arrow_expression(self.expr, self.pool_schema)
        else:
            self.filter = None
        if columns:
            missing = [c for c in columns if c not in names]
            if missing and names:
                raise UsageError(f"unknown column {missing[0]!r} in --columns")
            # The columns a pool that never held rows will have come out typed null (no rows).
            self.out_schema = pa.schema(
                [
                    self.pool_schema.field(c) if c in names else pa.field(c, pa.null())
                    for c in columns
                ]
            )
        else:
            self.out_schema = self.pool_schema
        #: The planner's decision: which objects to open, which row groups to read.
        pruners = read_pruners(
            snapshot, key, self.expr, self.pool_schema, store, pool_id, otree=otree
        )
        self.plan = plan_read(snapshot, key, self.expr, schema=self.pool_schema, pruners=pruners)
        self.stats: ReadStats = self.plan.stats
        self.objects: list[ObjectMeta] = self.plan.objects

    def _runs(self) -> list[list[ObjectMeta]]:
        """Groups of objects whose key ranges overlap, in output order."""
        keyed = [o for o in self.objects if o.min is not None]
        nullkey = sorted((o for o in self.objects if o.min is None), key=lambda o: o.id)
        bounds = {o.id: self._bounds(o) for o in keyed}
        keyed.sort(key=lambda o: (_sortable(bounds[o.id][0]), o.id))
        runs: list[list[ObjectMeta]] = []
        span_max: Any = None
        for o in keyed:
            lo, hi = bounds[o.id]
            if runs and span_max is not None and _sortable(lo) <= span_max:
                runs[-1].append(o)
                span_max = max(span_max, _sortable(hi, upper=True))
            else:
                runs.append([o])
                span_max = _sortable(hi, upper=True)
        if self.descending:
            runs.reverse()
        if nullkey:
            runs.append(nullkey)
        return runs

    def _bounds(self, obj: ObjectMeta) -> tuple[list[Any] | None, list[Any] | None]:
        """``obj``'s key bounds for ordering runs in the scan's direction.

        The recorded ``min``/``max`` are its first and last keys in the *pool's* order, where a
        null in a later key field sorts last: below every value in ascending terms for a
        descending pool, above them for an ascending one. A scan in the other direction puts
        those nulls at the other end, so a row sharing a bound's leading fields but null in a
        later one lies outside the recorded bound there (``(2, null)`` after ``(2, 0)`` in an
        ascending scan of a descending pool whose ``max`` is ``(2, 0)``). The bounds are then
        cut before the first later key field the object may hold a null in (a column it
        lacks, or one with nulls): the prefix still bounds every key (:func:`_sortable`)."""
        if self.descending == self.key.descending:
            return obj.min, obj.max
        names = self.key.names(self.pool_schema)
        width = next(
            (
                i
                for i, name in enumerate(names)
                if i > 0 and (name not in obj.columns or obj.columns[name].nulls > 0)
            ),
            len(names),
        )
        return (
            None if obj.min is None else obj.min[:width],
            None if obj.max is None else obj.max[:width],
        )

    def _read(self, obj: ObjectMeta) -> pa.Table:
        """The object's matching rows, whole."""
        parts = list(self._read_groups(obj, stream=False))
        if not parts:
            return self.pool_schema.empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def _read_groups(self, obj: ObjectMeta, stream: bool = True) -> Iterator[pa.Table]:
        """The object's matching rows, in file order: one table per row group when
        ``stream``, else one table of all the groups (a single read, decoded in parallel)."""
        try:
            opened = open_verified(self.store, self.pool_id, obj, self.pool_name or self.pool_id)
        except ObjectNotFoundError:
            raise PurgedObjectError(obj.id, purged_by(self.store, self.pool_id, obj.id)) from None
        meta = opened.metadata
        file_names = set(opened.file.schema_arrow.names)  # a property that rebuilds the schema
        groups = self.plan.row_groups(obj, meta)
        self.plan.opened()
        if not groups:
            return
        # The key columns order a run's merge (under ``this``: every column).
        wanted = set(self.out_schema.names) | set(self.key.names(self.pool_schema))
        if self.expr is not None:
            wanted |= columns_of(self.expr)
        read_cols = [n for n in opened.file.schema_arrow.names if n in wanted and n in file_names]
        schema = pa.schema(
            [self.pool_schema.field(n) for n in self.pool_schema.names if n in wanted]
        )
        parts, pages = self.plan.page_parts(
            self.store, self.pool_id, obj, meta, groups, read_cols
        )
        for step in [[g] for g in groups] if stream else _steps(groups, parts):
            table = None
            if pages is not None and step[0] in parts:
                try:
                    table, fetched = pages.read(step[0], read_cols, parts[step[0]])
                    self.plan.read_part(table.num_rows, fetched)
                except PageLayoutError:
                    # Pages this reader cannot follow: the group whole, as pyarrow reads it
                    # (an index never makes a read fail).
                    table = None
            if table is None:
                table = opened.file.read_row_groups(step, columns=read_cols)
                self.plan.read(meta, step, read_cols, table.num_rows)
            full = conform_to(table, schema)
            if self.filter is not None:
                full = full.filter(self.filter)
            yield full

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The records, in order, as record batches of ``out_schema``."""
        if self.unordered:
            for obj in self.objects:
                for table in self._read_groups(obj):
                    yield from table.select(self.out_schema.names).to_batches()
            return
        nulls = _NullTail(self.key, self.descending)
        key0 = self.key.names(self.pool_schema)[0]
        # Each object's place in id order: ties between equal keys, in a run and in the tail.
        rank = {o.id: i for i, o in enumerate(sorted(self.objects, key=lambda o: o.id))}
        for run in self._runs():
            if (
                len(run) == 1
                and self.descending == self.key.descending
                and revision_of(run[0]) == 0  # an OTree object is in cube order, not key order
            ):
                # One object, already in the wanted order: stream it a row group at a time,
                # so the first records come out before the object is read.
                source = np.int64(rank[run[0].id])
                for table in self._read_groups(run[0]):
                    yield from self._split_nulls(table, key0, nulls, source)
                continue
            # Overlapping objects (or the reverse order) are merged in memory, per run.
            members = sorted(run, key=lambda o: o.id)
            parts = [(self._read(o), rank[o.id]) for o in members]
            parts = [(p, r) for p, r in parts if p.num_rows]
            if not parts:
                continue
            tables = [p for p, _ in parts]
            table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
            sources = np.repeat(
                np.array([r for _, r in parts], dtype=np.int64), [p.num_rows for p in tables]
            )
            keys = self.key.sort_keys(table.schema, self.descending)
            if keys and table.num_rows > 1:
                order = pc.sort_indices(table, sort_keys=keys)
                table = table.take(order)
                sources = sources[order.to_numpy()]
            yield from self._split_nulls(table, key0, nulls, sources)
        for t in nulls.merged():
            yield from t.select(self.out_schema.names).to_batches()

    def _split_nulls(
        self,
        table: pa.Table,
        key0: str,
        nulls: _NullTail,
        sources: np.ndarray[Any, np.dtype[np.int64]] | np.int64,
    ) -> Iterator[pa.RecordBatch]:
        """``table``'s batches, holding back its rows with a null first key field (sorted
        last within it) for the end of the scan; ``sources``: the rank of the object each row
        came from (one rank for the whole table, or one per row)."""
        if table.num_rows:
            if key0 in table.schema.names:
                nn = table.column(key0).null_count
                if nn:
                    # Null keys sort last in the whole scan, not just in their run.
                    cut = table.num_rows - nn
                    tail = sources if isinstance(sources, np.int64) else sources[cut:]
                    nulls.add(table.slice(cut), tail)
                    table = table.slice(0, cut)
            yield from table.select(self.out_schema.names).to_batches()

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.out_schema, self.batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), schema=self.out_schema)


class _NullTail:
    """The rows whose first key field is null, held back from every run for the end of the
    scan, where they are sorted by the rest of the key (each field's nulls last, as for the
    whole key): rows held back from different runs interleave by their later key fields.
    Equal keys keep object id order, then their order within the object, as in a run."""

    def __init__(self, key: PoolKey, descending: bool) -> None:
        self.key, self.descending = key, descending
        self.tables: list[pa.Table] = []
        self.sources: list[np.ndarray[Any, np.dtype[np.int64]]] = []

    def add(self, table: pa.Table, sources: np.ndarray[Any, np.dtype[np.int64]] | np.int64) -> None:
        self.tables.append(table)
        self.sources.append(np.broadcast_to(sources, (table.num_rows,)).astype(np.int64))

    def merged(self) -> list[pa.Table]:
        if len(self.tables) <= 1:
            return self.tables  # one piece is sorted already (it was the tail of a sort)
        table = pa.concat_tables(self.tables)
        keys = self.key.sort_keys(table.schema, self.descending)
        tie = "source"
        while tie in table.schema.names:
            tie += "_"
        names = [k[0] for k in keys]
        ordering = table.select(names).append_column(tie, pa.array(np.concatenate(self.sources)))
        order = pc.sort_indices(ordering, sort_keys=[*keys, (tie, "ascending")])
        return [table.take(order)]


def _steps(groups: list[int], parts: dict[int, list[tuple[int, int]]]) -> list[list[int]]:
    """``groups`` in order as reads: each group read in part alone, the groups between read
    whole together (one read, decoded in parallel)."""
    out: list[list[int]] = []
    for g in groups:
        if g in parts or not out or out[-1][0] in parts:
            out.append([g])
        else:
            out[-1].append(g)
    return out


def _sortable(bound: list[Any] | None, upper: bool = False) -> tuple[Any, ...]:
    """Encoded key bounds as comparable tuples, cut at the first unknown value (None: a null
    in a secondary key field, or a value stats do not encode): a lower bound keeps the
    prefix, which sorts before every key extending it; an upper bound (``upper``) ends in a
    marker that sorts after them. So bounds shorter than the key (a ``this`` key's objects
    written before a column was added) and nulls group overlapping objects soundly, in either
    direction."""
    out: list[tuple[int, Any]] = []
    for v in bound or ():
        if v is None:
            break
        out.append((0, v))
    if upper:
        out.append((1, 0))
    return tuple(out)
