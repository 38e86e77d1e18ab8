"""A pool snapshot as a Polars LazyFrame whose filters prune objects and row groups.

How pruning reaches Polars: the frame is ``polars.scan_pyarrow_dataset`` over a pyarrow
``FileSystemDataset`` with one fragment per live object, and each fragment carries what the
commit recorded about its object as a *guarantee* (pyarrow's partition expression): for every
column with exact stats, ``min <= col <= max``, or ``col IS NULL`` for a column the object
lacks or holds only nulls in. Polars pushes a frame's filters down to pyarrow as a filter
expression; pyarrow simplifies it against each fragment's guarantee and never opens an object
the guarantee rules out, then skips row groups by the Parquet statistics of the objects it
opens. So ``lf.filter(pl.col("ts") >= day).collect()`` opens only the objects whose key range
reaches that day, without reading the others' footers (tests/core/test_polars_scan.py counts
the files opened).

Chosen over a Polars IO plugin (``register_io_source``): a plugin receives a Polars
expression, which would need a translator into the lake's predicate before the lake's planner
could use it; pyarrow's expression is what Polars already produces for pyarrow datasets, and
the guarantees are the same min/max/null facts the planner prunes with.

Invariants (why a guarantee is never wrong):
- Stats are exact (``lake_core.stats`` computes them with ``min_max`` over the whole column;
  NaN bounds are dropped), so every row satisfies its object's guarantee.
- A column with nulls gets ``(col >= min OR col IS NULL) AND (col <= max OR col IS NULL)``:
  pyarrow reads a bare inequality guarantee as "not null" (so ``IS NULL`` would wrongly prune),
  and of the nullable forms it only simplifies with this one (``(min <= col <= max) OR col IS
  NULL`` prunes nothing: measured with pyarrow 26).
- Only types whose stats round-trip exactly are used (integers, strings, booleans, dates,
  timestamps of at most microsecond precision), and only when the object's column type is the
  pool's; floats are left out (a NaN row compares false to both bounds). A column without a
  guarantee is simply not pruned on.

The frame is unordered, like any dataset scan: sort by the pool key if order matters. Polars
is imported here only, when a frame is asked for, so ``import lake_core`` does not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import polars as pl
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from lake_core.objects import ObjectMeta
    from lake_core.scan import Scan
    from lake_core.stores.base import ObjectStore


def _exact_stats(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return bool(t.unit != "ns")  # stats are kept in microseconds
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date32(t)
    )


def guarantee(obj: ObjectMeta, schema: pa.Schema) -> pc.Expression:
    """What every row of ``obj`` satisfies, as a pyarrow expression over ``schema``'s columns
    (``True`` when nothing is known)."""
    import pyarrow.compute as pc

    parts: list[pc.Expression] = []
    for field in schema:
        col = obj.columns.get(field.name)
        ref = pc.field(field.name)
        if col is None or (obj.count and col.nulls == obj.count):
            parts.append(ref.is_null())
            continue
        if not _exact_stats(field.type) or col.type != str(field.type):
            continue
        lo, hi = col.decoded_min(), col.decoded_max()
        if lo is None or hi is None:
            continue
        try:
            low, high = ref >= pa.scalar(lo, field.type), ref <= pa.scalar(hi, field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            continue  # a bound that does not convert: no guarantee on this column
        if col.nulls:  # each bound "or null": the one nullable form pyarrow prunes with
            low, high = low | ref.is_null(), high | ref.is_null()
        parts.append(low & high)
    if not parts:
        return pc.scalar(True)
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def guaranteed_dataset(store: ObjectStore, object_keys: list[str], scan: Scan) -> ds.Dataset:
    """A pyarrow dataset over ``scan``'s objects (whose store keys are ``object_keys``, in the
    same order), with the pool's schema and one guarantee per fragment."""
    import pyarrow.dataset as ds

    schema = scan.pool_schema
    if not scan.objects:
        return ds.dataset(schema.empty_table())
    fs, first = store.arrow_location(object_keys[0])
    # One filesystem for all (an S3 filesystem is built from credentials per call); every
    # key sits under the same root, so its path is that root plus the key.
    root = first[: len(first) - len(object_keys[0])]
    return ds.FileSystemDataset.from_paths(
        [root + k for k in object_keys],
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=fs,
        partitions=[guarantee(o, schema) for o in scan.objects],
    )


def lazy_frame(dataset: ds.Dataset) -> pl.LazyFrame:
    """``dataset`` as a Polars LazyFrame that hands its filters to pyarrow."""
    import polars as pl

    return pl.scan_pyarrow_dataset(dataset)
