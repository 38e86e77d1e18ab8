"""Scanning a snapshot: pruning, merge on read, projection, in pool-key order.

Order: records come out sorted by the pool key (or the direction ``order`` asks for), nulls
last, deterministically: objects whose key ranges overlap are read together and merge-sorted
(stable, objects taken in id order), non-overlapping runs are emitted one after another, and
records with a null key come after all others. Only runs are held in memory, not the pool.

Pruning: an object is skipped when its recorded stats prove no row can match ``where``; within
an object, row groups are skipped the same way from Parquet's statistics. The reader works on
immutable objects named by one snapshot, so commits landing meanwhile do not affect it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import ObjectNotFoundError, PurgedObjectError, UsageError
from lake_core.expr import (
    ColumnStats,
    ExpressionError,
    columns_of,
    key_range,
    may_match,
    parse_predicate,
    to_arrow_expression,
)
from lake_core.ingest.schema import conform_to
from lake_core.integrity import open_verified
from lake_core.live import LiveObjects
from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_core.purge_records import purged_by
from lake_core.reader import row_group_stats
from lake_core.snapshot import Snapshot
from lake_core.stores.base import ObjectStore


@dataclass
class ScanStats:
    """What a scan read, as ``lake query --stats`` prints it."""

    objects_total: int = 0
    objects_read: int = 0
    row_groups_read: int = 0
    rows_read: int = 0
    bytes_read: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)


def _utc(v: Any) -> Any:
    if isinstance(v, datetime) and v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    return v


def object_stats(obj: ObjectMeta, schema: pa.Schema) -> dict[str, ColumnStats]:
    """Pruning stats for every pool column; a column the object lacks is all null."""
    out: dict[str, ColumnStats] = {}
    for name in schema.names:
        col = obj.columns.get(name)
        if col is None:
            out[name] = ColumnStats(None, None, obj.count, obj.count)
        else:
            out[name] = ColumnStats(col.decoded_min(), col.decoded_max(), col.nulls, obj.count)
    return out


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
    ) -> None:
        self.store, self.pool_id, self.key, self.snapshot = store, pool_id, key, snapshot
        self.pool_schema = snapshot.schema or pa.schema([])
        if order not in (None, "asc", "desc"):
            raise UsageError(f"--order must be asc or desc, not {order!r}")
        self.descending = key.descending if order is None else order == "desc"
        self.expr = parse_predicate(where) if where else None
        self.filter: Any
        names = set(self.pool_schema.names)
        if self.expr is not None:
            unknown = sorted(columns_of(self.expr) - names)
            if unknown and self.snapshot.objects:
                raise UsageError(f"unknown column {unknown[0]!r} in --where")
            self.filter = to_arrow_expression(self.expr, self.pool_schema)
        else:
            self.filter = None
        if columns:
            missing = [c for c in columns if c not in names]
            if missing and self.snapshot.objects:
                raise UsageError(f"unknown column {missing[0]!r} in --columns")
            self.out_schema = pa.schema([self.pool_schema.field(c) for c in columns])
        else:
            self.out_schema = self.pool_schema
        self.stats = ScanStats(objects_total=len(snapshot.objects))
        self.objects = [o for o in self._candidates() if self._may_match(o)]

    def _candidates(self) -> Iterable[ObjectMeta]:
        """The snapshot's objects, less those the key range of ``where`` excludes by their
        stats (vectorised over the snapshot's arrays). Only a pre-filter: each candidate is
        still tested by ``_may_match``, and anything it drops ``_may_match`` would drop too,
        so the result is the same as testing every object."""
        objects = self.snapshot.objects
        if self.expr is None or not isinstance(objects, LiveObjects):
            return objects.values()
        column = self.key.fields[0]
        if column not in self.pool_schema.names:
            return objects.values()
        try:
            interval = key_range(self.expr, column, self.pool_schema)
        except ExpressionError:
            return objects.values()  # _may_match raises it, as before, if any object is live
        if interval is None:
            return objects.values()
        picked = objects.within(column, *interval)
        return objects.values() if picked is None else picked

    def _may_match(self, obj: ObjectMeta) -> bool:
        if self.expr is None:
            return True
        return may_match(self.expr, object_stats(obj, self.pool_schema), self.pool_schema)

    def _runs(self) -> list[list[ObjectMeta]]:
        """Groups of objects whose key ranges overlap, in output order."""
        keyed = [o for o in self.objects if o.min is not None]
        nullkey = sorted((o for o in self.objects if o.min is None), key=lambda o: o.id)
        keyed.sort(key=lambda o: (_sortable(o.min), o.id))
        runs: list[list[ObjectMeta]] = []
        span_max: Any = None
        for o in keyed:
            if runs and span_max is not None and _sortable(o.min) <= span_max:
                runs[-1].append(o)
                span_max = max(span_max, _sortable(o.max))
            else:
                runs.append([o])
                span_max = _sortable(o.max)
        if self.descending:
            runs.reverse()
        if nullkey:
            runs.append(nullkey)
        return runs

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
        groups = []
        for rg in range(meta.num_row_groups):
            if self.expr is not None:
                raw = row_group_stats(meta, rg)
                stats = {
                    name: ColumnStats(_utc(lo), _utc(hi), nulls, rows)
                    for name, (lo, hi, nulls, rows) in raw.items()
                }
                for name in self.pool_schema.names:
                    if name not in file_names:
                        rows = meta.row_group(rg).num_rows
                        stats[name] = ColumnStats(None, None, rows, rows)
                if not may_match(self.expr, stats, self.pool_schema):
                    continue
            groups.append(rg)
        self.stats.objects_read += 1
        if not groups:
            return
        wanted = set(self.out_schema.names) | set(self.key.fields)
        if self.expr is not None:
            wanted |= columns_of(self.expr)
        read_cols = [n for n in opened.file.schema_arrow.names if n in wanted and n in file_names]
        schema = pa.schema(
            [self.pool_schema.field(n) for n in self.pool_schema.names if n in wanted]
        )
        for step in [[g] for g in groups] if stream else [groups]:
            table = opened.file.read_row_groups(step, columns=read_cols)
            self.stats.row_groups_read += len(step)
            self.stats.rows_read += table.num_rows
            self.stats.bytes_read += sum(
                meta.row_group(rg).column(i).total_compressed_size
                for rg in step
                for i in range(meta.num_columns)
                if meta.row_group(rg).column(i).path_in_schema.split(".")[0] in read_cols
            )
            full = conform_to(table, schema)
            if self.filter is not None:
                full = full.filter(self.filter)
            yield full

    def _sort(self, table: pa.Table) -> pa.Table:
        keys = self.key.sort_keys(table.schema, self.descending)
        if not keys or table.num_rows <= 1:
            return table
        return table.take(pc.sort_indices(table, sort_keys=keys))

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The records, in order, as record batches of ``out_schema``."""
        nulls: list[pa.Table] = []
        key0 = self.key.fields[0]
        for run in self._runs():
            pieces: Iterator[pa.Table]
            if len(run) == 1 and self.descending == self.key.descending:
                # One object, already in the wanted order: stream it a row group at a time,
                # so the first records come out before the object is read.
                pieces = self._read_groups(run[0])
            else:
                # Overlapping objects (or the reverse order) are merged in memory, per run.
                parts = [self._read(o) for o in sorted(run, key=lambda o: o.id)]
                parts = [p for p in parts if p.num_rows]
                if not parts:
                    continue
                table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
                pieces = iter([self._sort(table)])
            for table in pieces:
                yield from self._split_nulls(table, key0, nulls)
        for t in nulls:
            yield from t.select(self.out_schema.names).to_batches()

    def _split_nulls(
        self, table: pa.Table, key0: str, nulls: list[pa.Table]
    ) -> Iterator[pa.RecordBatch]:
        """``table``'s batches, holding back its null-key rows (sorted last within it) for
        the end of the scan."""
        if table.num_rows:
            if key0 in table.schema.names:
                nn = table.column(key0).null_count
                if nn:
                    # Null keys sort last in the whole scan, not just in their run.
                    nulls.append(table.slice(table.num_rows - nn))
                    table = table.slice(0, table.num_rows - nn)
            yield from table.select(self.out_schema.names).to_batches()

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.out_schema, self.batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), schema=self.out_schema)


def _sortable(bound: list[Any] | None) -> tuple[Any, ...]:
    """Encoded key bounds as comparable tuples: each field becomes (is null, value), so a null
    in a secondary key field sorts last instead of failing to compare with a value."""
    return tuple((v is None, v if v is not None else 0) for v in (bound or ()))
