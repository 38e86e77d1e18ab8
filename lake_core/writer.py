"""Writing data objects: sort by the pool key, split near the target size, record metadata.

Invariants:
- every object is sorted by the pool key, nulls last;
- an object is cut only where the key changes, so a run of equal keys never straddles two
  objects (an object may exceed the target size to keep a run whole);
- row groups hold about ``seek_stride`` bytes of uncompressed data, so Parquet's row-group
  statistics act as the seek index for key-range reads;
- objects are written with an atomic put under a fresh KSUID: a writer that dies leaves at most
  an unreferenced object (an orphan for cleanup), never a partial one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lake_core.clock import SYSTEM_CLOCK, Clock
from lake_core.ids import new_id
from lake_core.keys import PoolKey
from lake_core.objects import ObjectMeta, data_key
from lake_core.stats import encode_value, table_meta
from lake_core.stores.base import ObjectStore

DEFAULT_TARGET_SIZE = 128 * 1024 * 1024
DEFAULT_SEEK_STRIDE = 4 * 1024 * 1024
_MIN_ROWS_PER_GROUP = 1024


@dataclass(frozen=True)
class WriteOptions:
    """How objects are laid out. ``target_size`` is compressed bytes, approximate."""

    target_size: int = DEFAULT_TARGET_SIZE
    seek_stride: int = DEFAULT_SEEK_STRIDE
    compression: str = "snappy"


def sort_table(table: pa.Table, key: PoolKey) -> pa.Table:
    """``table`` sorted by the pool key, nulls last (stable)."""
    if table.num_rows == 0 or not key.sort_keys(table.schema):
        return table
    return table.take(key.sort_indices(table))


def _run_end(key_cols: list[pa.ChunkedArray[Any]], start: int, n: int) -> int:
    """First row index >= ``start`` whose key differs from row ``start - 1`` (or ``n``)."""
    if start <= 0 or start >= n:
        return start
    probe = start
    step = 4096
    while probe < n:
        stop = min(n, probe + step)
        same: Any = None
        for col in key_cols:
            prev = col[start - 1]
            part: Any = col.slice(probe, stop - probe)
            eq: Any = (
                pc.is_null(part) if not prev.is_valid else pc.fill_null(pc.equal(part, prev), False)
            )
            same = eq if same is None else pc.and_(same, eq)
        idx = pc.index(same, False).as_py()
        if idx != -1:
            return probe + idx
        probe = stop
        step *= 2
    return n


def _key_bounds(table: pa.Table, key: PoolKey) -> tuple[list[object] | None, list[object] | None]:
    """(min, max) of a sorted table's key, ascending terms, nulls ignored."""
    present = [f for f in key.fields if f in table.schema.names]
    if not present or table.num_rows == 0:
        return None, None
    first = table.column(key.fields[0]) if key.fields[0] in present else None
    if first is None or first.null_count == table.num_rows:
        return None, None
    last_valid = table.num_rows - first.null_count - 1  # nulls sort last
    cols = key.key_columns(table)
    a = [encode_value(c.type, c[0].as_py()) for c in cols]
    b = [encode_value(c.type, c[last_valid].as_py()) for c in cols]
    return (b, a) if key.descending else (a, b)


def write_objects(
    store: ObjectStore,
    pool_id: str,
    table: pa.Table,
    key: PoolKey,
    options: WriteOptions = WriteOptions(),
    *,
    presorted: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    on_object: Callable[[ObjectMeta], None] | None = None,
) -> list[ObjectMeta]:
    """Write ``table`` as one or more sorted objects of pool ``pool_id``; return their metadata.

    ``on_object`` is called after each object lands (progress, and so a caller can remove what
    it wrote if a later step fails).
    """
    if table.num_rows == 0:
        return []
    if not presorted:
        table = sort_table(table, key)
    table = table.combine_chunks()
    n = table.num_rows
    row_bytes = max(1, table.nbytes // n)
    rows_per_group = max(_MIN_ROWS_PER_GROUP, options.seek_stride // row_bytes)
    key_cols = key.key_columns(table)
    metas: list[ObjectMeta] = []
    start = 0
    while start < n:
        sink = pa.BufferOutputStream()
        pos = start
        compression: Any = options.compression
        with pq.ParquetWriter(sink, table.schema, compression=compression) as w:
            while pos < n:
                stop = min(n, pos + rows_per_group)
                w.write_table(table.slice(pos, stop - pos), row_group_size=stop - pos)
                pos = stop
                if sink.tell() >= options.target_size and pos < n:
                    run_end = _run_end(key_cols, pos, n)
                    if run_end > pos:  # keep the run of equal keys whole
                        w.write_table(table.slice(pos, run_end - pos), row_group_size=run_end - pos)
                        pos = run_end
                    break
        part = table.slice(start, pos - start)
        object_id = new_id(clock)
        data = sink.getvalue()
        store.put(data_key(pool_id, object_id), data.to_pybytes())
        lo, hi = _key_bounds(part, key)
        meta = ObjectMeta(
            id=object_id,
            min=lo,
            max=hi,
            count=part.num_rows,
            size=data.size,
            columns=table_meta(part),
        )
        metas.append(meta)
        if on_object is not None:
            on_object(meta)
        start = pos
    return metas
