"""Encoding one row group as a Parquet fragment, with its stats read from the writer's footer.

A fragment is the row group written as a whole one-group file (:mod:`lake_core.stitch` lays
fragments end to end into an object), so row groups can be encoded on several threads at
once: pyarrow's writer releases the GIL while it encodes.

Column stats come from the statistics the Parquet writer computed anyway, not from a second
pass over the rows, for the types where they are exactly what :func:`lake_core.stats.column_meta`
computes: signed integers, booleans, strings, dates and timestamps of second to microsecond
units (of the unit the file records). The writer leaves out min/max that are longer than its statistics limit (4 KiB by
default) rather than shortening them — tests/core/test_encode.py checks that with long
strings, since pruning is only sound when min/max bound every value (see
:mod:`lake_core.expr.prune`). Every other column, and any column whose footer lacks min/max
or the null count, is computed from the rows: floats (NaN and signed zero are ordered
differently there), unsigned integers (their physical stats are signed), nanosecond
timestamps, nested and binary columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.stats import ColumnMeta, column_meta
from lake_core.stitch import Fragment, split_fragment

if TYPE_CHECKING:
    from lake_core.objects import ObjectMeta

#: Rows per data page: Parquet's page index (written with every object, see
#: :class:`EncodeOptions`) locates each page, so a reader that knows which rows it wants (an
#: exact index's lookup, :mod:`lake_core.pages`) reads a page of each column rather than the
#: row group. 2,048 rows is about a twelfth of a 4 MiB stride's row group of TPC-H lineitem,
#: for 1.5% more bytes than pages cut at pyarrow's 1 MiB (measured in docs/benchmarks.md).
PAGE_ROWS = 2048

#: Microseconds per unit of a Parquet timestamp (pyarrow writes Arrow seconds as milliseconds:
#: the unit is read from the file's logical type, not from the Arrow type).
_MICROS = {"timeUnit=milliseconds": 1_000, "timeUnit=microseconds": 1}


@dataclass(frozen=True)
class EncodeOptions:
    """Parquet writer properties shared by every fragment of a write (fragments stitch into
    one file only when written alike)."""

    compression: str
    dictionary_pagesize_limit: int
    #: Dictionary-encode columns (pyarrow's default); off for a write of a few rows, where a
    #: dictionary page per column costs more to write than it saves.
    dictionary: bool = True
    #: Rows per data page at most, every page located by a page index (None: pyarrow's
    #: default pages and no page index).
    page_rows: int | None = PAGE_ROWS

    def page_options(self) -> dict[str, Any]:
        """The Parquet writer options of :attr:`page_rows`."""
        if self.page_rows is None:
            return {}
        return {"max_rows_per_page": self.page_rows, "write_page_index": True}


class GroupTap(Protocol):
    """Something a write shows its rows as it encodes them (the index builder,
    :class:`lake_core.indexes.building.IndexInputs`): :meth:`writer_options` adds Parquet
    writer options for a row group of ``rows`` rows of ``schema`` (the index builder asks for
    bloom filters; anything the writer puts behind a fragment's chunks stays out of the object,
    see :mod:`lake_core.stitch`); :meth:`group` sees each row group on the thread that encodes
    it, with the fragment written (its bytes and footer); :meth:`landed` each object while it
    is put (on a thread of its own; the write waits for it; objects one at a time, in order),
    with what :meth:`group` returned for its row groups, in the object's row-group order."""

    def writer_options(self, schema: pa.Schema, rows: int) -> dict[str, Any]: ...

    def group(self, rows: pa.Table, data: memoryview, meta: pq.FileMetaData) -> Any: ...

    def landed(self, meta: ObjectMeta, groups: list[Any]) -> None: ...


@dataclass(frozen=True)
class EncodedGroup:
    """A row group encoded: its fragment, row count, stats and key columns, and what a
    :class:`GroupTap` made of its rows."""

    fragment: Fragment
    rows: int
    stats: dict[str, ColumnMeta]
    keys: pa.Table
    tapped: Any = None

    @property
    def size(self) -> int:
        """Bytes its column chunks take in an object."""
        return len(self.fragment.body)


def encode_group(
    group: pa.Table,
    schema: pa.Schema,
    options: EncodeOptions,
    key_names: list[str],
    tap: GroupTap | None = None,
) -> EncodedGroup:
    """``group`` (of ``schema``) written as a one-group Parquet fragment; ``tap`` sees it
    (and may add writer options: :class:`GroupTap`)."""
    sink = pa.BufferOutputStream()
    compression: Any = options.compression
    extra = _asked(tap, schema, group.num_rows)
    with pq.ParquetWriter(
        sink,
        schema,
        compression=compression,
        use_dictionary=options.dictionary,
        dictionary_pagesize_limit=options.dictionary_pagesize_limit,
        **{**options.page_options(), **extra},
    ) as w:
        w.write_table(group, row_group_size=max(1, group.num_rows))
    meta = w.writer.metadata
    data = memoryview(sink.getvalue())
    fragment = split_fragment(data)
    if extra:
        # Walked now: its chunks end where what the tap added (bloom filters) begins.
        fragment.footer  # noqa: B018
    return EncodedGroup(
        fragment,
        group.num_rows,
        group_stats(group, meta),
        group.select(key_names),
        tap.group(group, data, meta) if tap is not None else None,
    )


def _asked(tap: GroupTap | None, schema: pa.Schema, rows: int) -> dict[str, Any]:
    """The writer options ``tap`` asks for ({} if it fails: they only save the index build a
    read-back, never a reason for a write to fail)."""
    if tap is None:
        return {}
    try:
        return tap.writer_options(schema, rows)
    except Exception:  # noqa: BLE001 - see the docstring
        return {}


def _footer_min_max(t: pa.DataType, st: Any) -> tuple[Any, Any] | None:
    """(min, max) encoded as :mod:`lake_core.stats` encodes them, from Parquet statistics, or
    None where those are not exactly what computing them from the rows gives."""
    if pa.types.is_timestamp(t):
        logical = str(st.logical_type)
        factor = next((f for unit, f in _MICROS.items() if unit in logical), None)
        if factor is None or st.physical_type != "INT64":
            return None
        return int(st.min_raw) * factor, int(st.max_raw) * factor
    if pa.types.is_date32(t):
        return int(st.min_raw), int(st.max_raw)
    if pa.types.is_signed_integer(t):
        return int(st.min_raw), int(st.max_raw)
    if pa.types.is_boolean(t):
        return bool(st.min), bool(st.max)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        lo, hi = st.min, st.max
        if isinstance(lo, str) and isinstance(hi, str):
            return lo, hi
    return None


def group_stats(group: pa.Table, meta: pq.FileMetaData) -> dict[str, ColumnMeta]:
    """:func:`lake_core.stats.table_meta` of ``group``, read from the footer ``meta`` of the
    one-group file it was written as where that is exact, computed elsewhere."""
    rows = group.num_rows
    by_path: dict[str, Any] = {}
    if meta.num_row_groups == 1:
        rg = meta.row_group(0)
        for i in range(rg.num_columns):
            col = rg.column(i)
            by_path[col.path_in_schema] = col.statistics
    out: dict[str, ColumnMeta] = {}
    for field in group.schema:
        name, t = field.name, field.type
        st = by_path.get(name)
        found: ColumnMeta | None = None
        if st is not None and st.has_null_count:
            nulls = int(st.null_count)
            if nulls == rows:
                found = ColumnMeta(str(t), None, None, nulls)
            elif st.has_min_max:
                bounds = _footer_min_max(t, st)
                if bounds is not None:
                    found = ColumnMeta(str(t), bounds[0], bounds[1], nulls)
        out[name] = found if found is not None else column_meta(group.column(name))
    return out
