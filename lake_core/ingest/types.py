"""Type normalization: the small set of Arrow types a pool stores.

Owns :func:`normalize_type` (type -> normalized type), :func:`normalize_table` (cast a table to
its normalized schema) and :func:`coerce_text_timestamps` (ISO 8601 text -> timestamps, for
tables read from JSON and CSV only).

The normalized types, and the decisions behind them:
- Integers of every width and sign are ``int64``. A ``uint64`` value above the int64 maximum
  is a :class:`~lake_core.errors.MalformedInputError` naming the column; it is never wrapped.
- Floats of every width are ``float64``; ``bool``, ``null``, decimals, ``date32``, times,
  durations, intervals and fixed-size binary pass through unchanged. ``date64`` is ``date32``;
  ``time32`` of seconds is ``time32`` of milliseconds (Parquet stores it so, and an object
  read back must match the pool's type).
- Timestamps are ``timestamp("us", tz="UTC")``. A naive timestamp is taken as UTC; a timestamp
  with another zone keeps its instant (Arrow stores instants as UTC already). Seconds and
  milliseconds widen exactly; nanoseconds are truncated (toward zero, as Arrow's unsafe cast
  does) to whole microseconds, on purpose: the lake promises microseconds, not nanoseconds.
- ``string``, ``large_string`` and ``string_view`` are ``string``; ``binary``, ``large_binary``
  and ``binary_view`` are ``binary``. Dictionary and run-end encoded columns are their
  (normalized) value type.
- Nested types are kept with their children normalized: every list kind (``large_list``,
  ``list_view``, ``fixed_size_list`` ...) is ``list``; structs and maps keep their shape.
- Every field, nested ones included, is nullable and carries no metadata; schema metadata (such
  as pandas' ``pandas`` key in Parquet files) is dropped, because it describes the source file,
  not the pool.

Text timestamps (JSON and CSV only; Parquet and Arrow columns are typed by their writer):
- A string column whose every non-null value is an ISO 8601 date-time (``2026-01-05T10:00:00Z``,
  ``2026-01-05 10:00:00``, fractional seconds, offsets ``Z``, ``+02``, ``+0200``, ``+02:00``)
  becomes ``timestamp(us, UTC)`` with offsets applied; values without an offset are UTC.
  Fractional seconds beyond microseconds are truncated.
- A pure date (``2026-01-05``) is an ISO 8601 string too, so it becomes a timestamp at midnight
  UTC, and a ``date32`` column that the CSV reader inferred from such text does the same. A pool
  therefore sees one type for dates whether they come from JSON or CSV.
- One value that does not parse (``2026-02-30``, ``hello``) keeps the whole column a string.
- The rule applies to top-level columns, to struct fields (recursively) and to list elements.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import MalformedInputError
from lake_core.ingest.memo import SchemaMemo

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
INT64_MAX = 2**63 - 1

_TIME = r"[T ]\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
_ZONE = r"(?:Z|[+-]\d{2}(?::?\d{2})?)"
_ISO_DATETIME = rf"^\d{{4}}-\d{{2}}-\d{{2}}(?:{_TIME}{_ZONE}?)?$"
_ISO_ZONED = rf"{_TIME}{_ZONE}$"


def normalize_type(dtype: pa.DataType) -> pa.DataType:
    """The normalized form of ``dtype`` (see the module docstring); idempotent."""
    if pa.types.is_dictionary(dtype):
        return normalize_type(dtype.value_type)
    if pa.types.is_run_end_encoded(dtype):
        return normalize_type(dtype.value_type)
    if pa.types.is_integer(dtype):
        return pa.int64()
    if pa.types.is_floating(dtype):
        return pa.float64()
    if pa.types.is_timestamp(dtype):
        return TIMESTAMP_TYPE
    if pa.types.is_date64(dtype):
        return pa.date32()
    if pa.types.is_time32(dtype) and dtype.unit == "s":
        # Parquet has no seconds unit for times: stored as milliseconds, read back as such.
        return pa.time32("ms")
    if (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
    ):
        return pa.string()
    if (
        pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_binary_view(dtype)
    ):
        return pa.binary()
    if pa.types.is_map(dtype):
        return pa.map_(normalize_type(dtype.key_type), normalize_type(dtype.item_type))
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, normalize_type(f.type)) for f in dtype])
    element = _list_value_type(dtype)
    return dtype if element is None else pa.list_(normalize_type(element))


def normalize_table(table: pa.Table, source: str) -> pa.Table:
    """``table`` cast to its normalized schema; ``source`` names the input in errors.

    Raises MalformedInputError for duplicate column names, for uint64 values that do not fit
    int64, and for columns of a type the lake cannot store.
    """
    found, plan = _NORMALIZED.get(table.schema)
    if not found:
        duplicates = [name for name, n in Counter(table.column_names).items() if n > 1]
        if duplicates:
            raise MalformedInputError(source, "", f"duplicate column name {duplicates[0]!r}")
        fields = [pa.field(f.name, normalize_type(f.type)) for f in table.schema]
        casts = [
            i for i, (f, g) in enumerate(zip(table.schema, fields, strict=True)) if f.type != g.type
        ]
        plan = (pa.schema(fields), casts)
        _NORMALIZED.put((table.schema,), plan)
    schema, casts = plan
    if not casts and table.schema.equals(schema, check_metadata=True):
        return table
    columns = list(table.columns)
    for i in casts:
        field = schema.field(i)
        columns[i] = _cast_column(columns[i], field.type, field.name, source)
    return pa.Table.from_arrays(columns, schema=schema)


#: The normalized schema of the inputs seen lately, and which of their columns it casts.
_NORMALIZED = SchemaMemo()


def coerce_text_timestamps(table: pa.Table) -> pa.Table:
    """ISO 8601 string columns (and text-inferred ``date32`` columns) as UTC timestamps.

    Only for tables read from text formats (JSON, CSV); see the module docstring.
    """
    columns: list[pa.ChunkedArray[Any]] = []
    for column in table.columns:
        if _is_text(column.type):
            parsed = _parse_iso(column)
            columns.append(column if parsed is None else parsed)
        elif pa.types.is_date32(column.type):
            columns.append(column.cast(TIMESTAMP_TYPE))
        elif _has_text(column.type):
            combined = column.combine_chunks()
            columns.append(pa.chunked_array([_coerce_nested(combined)]))
        else:
            columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _cast_column(
    column: pa.ChunkedArray[Any], target: pa.DataType, name: str, source: str
) -> pa.ChunkedArray[Any]:
    if _has_views(column.type):
        column = pa.chunked_array(
            [_decode_views(chunk) for chunk in column.chunks],
            _decoded_type(column.type),  # type: ignore[call-overload]
        )
    try:
        return column.cast(target, safe=True)
    except pa.ArrowInvalid:
        # Safe casting refuses lossy steps; the only ones the lake accepts are the timestamp
        # truncations documented above, so reject overflowing uint64 first and then allow them.
        _check_uint64_range(column, name, source)
        return column.cast(target, safe=False)
    except pa.ArrowNotImplementedError as err:
        raise MalformedInputError(
            source, "", f"column {name!r} of type {column.type} cannot be loaded: {err}"
        ) from None


def _check_uint64_range(column: pa.ChunkedArray[Any], name: str, source: str) -> None:
    for chunk in column.chunks:
        for path, leaf in _leaves(chunk, name):
            if not pa.types.is_uint64(leaf.type):
                continue
            largest = pc.max(leaf).as_py()
            if largest is not None and largest > INT64_MAX:
                raise MalformedInputError(
                    source, "", f"column {path!r}: value {largest} does not fit int64"
                )


def _leaves(array: pa.Array[Any], path: str) -> Iterator[tuple[str, pa.Array[Any]]]:
    if isinstance(array, pa.DictionaryArray):
        yield from _leaves(array.dictionary, path)
    elif isinstance(array, pa.StructArray):
        for field, child in zip(array.type, array.flatten(), strict=True):
            yield from _leaves(child, f"{path}.{field.name}")
    elif isinstance(array, pa.MapArray):
        yield from _leaves(array.keys, path)
        yield from _leaves(array.items, path)
    elif _list_value_type(array.type) is not None:
        yield from _leaves(pc.list_flatten(array), path)
    else:
        yield path, array


def _has_views(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` holds a type that Arrow's cast cannot turn into its normalized form.

    Casting ``list_view`` produces invalid arrays (pyarrow 26) and run-end encoded arrays do not
    cast at all, so both are decoded by hand first.
    """
    if _is_list_view(dtype) or pa.types.is_run_end_encoded(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_has_views(f.type) for f in dtype)
    if pa.types.is_map(dtype):
        return _has_views(dtype.key_type) or _has_views(dtype.item_type)
    element = _list_value_type(dtype)
    return element is not None and _has_views(element)


def _decoded_type(dtype: pa.DataType) -> pa.DataType:
    """The type :func:`_decode_views` gives an array of type ``dtype``."""
    if not _has_views(dtype):
        return dtype
    if pa.types.is_run_end_encoded(dtype):
        return _decoded_type(dtype.value_type)
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, _decoded_type(f.type)) for f in dtype])
    if pa.types.is_map(dtype):
        return pa.map_(_decoded_type(dtype.key_type), _decoded_type(dtype.item_type))
    element = _list_value_type(dtype)
    assert element is not None, f"{dtype} has views but is no list"
    return pa.large_list(_decoded_type(element))


def _decode_views(array: pa.Array[Any]) -> pa.Array[Any]:
    """``array`` with list views and run-end encodings rewritten as plain Arrow layouts."""
    dtype = array.type
    if not _has_views(dtype):
        return array
    if pa.types.is_run_end_encoded(dtype):
        return _decode_views(pc.run_end_decode(array))  # type: ignore[attr-defined]
    if pa.types.is_map(dtype):
        # Maps of list views are too rare to earn a vectorized path.
        return pa.array(array.to_pylist(), type=_decoded_type(dtype))
    mask = array.is_null() if array.null_count else None
    if isinstance(array, pa.StructArray):
        children = [_decode_views(child) for child in array.flatten()]
        fields = [pa.field(f.name, c.type) for f, c in zip(array.type, children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    # Every list kind: the flattened values (which honour views, slices and nulls) plus offsets
    # rebuilt from the lengths; 64-bit offsets, because views may repeat values.
    lengths = pc.fill_null(pc.list_value_length(array), 0).cast(pa.int64())
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(lengths)])
    values = _decode_views(pc.list_flatten(array))
    return pa.LargeListArray.from_arrays(offsets, values, mask=mask)


def _parse_iso(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any] | None:
    """``column`` (strings) as UTC timestamps, or None when some value is not ISO 8601."""
    present = len(column) - column.null_count
    if present == 0:
        return None
    if not pc.all(pc.match_substring_regex(column, _ISO_DATETIME)).as_py():
        return None
    zoned = pc.sum(pc.match_substring_regex(column, _ISO_ZONED).cast(pa.int64())).as_py() or 0
    try:
        if zoned == present:
            return column.cast(TIMESTAMP_TYPE)
        if zoned == 0:
            return column.cast(pa.timestamp("us")).cast(TIMESTAMP_TYPE)
    except pa.ArrowInvalid:
        pass  # e.g. more than six fractional digits, an invalid date: parse one by one below
    return _parse_iso_slowly(column)


def _parse_iso_slowly(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any] | None:
    values: list[datetime | None] = []
    for text in column.to_pylist():
        if text is None:
            values.append(None)
            continue
        try:
            moment = datetime.fromisoformat(text)
            moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        except (ValueError, OverflowError):
            return None
        values.append(moment)
    return pa.chunked_array([pa.array(values, TIMESTAMP_TYPE)])


def _coerce_nested(array: pa.Array[Any]) -> pa.Array[Any]:
    dtype = array.type
    if _is_text(dtype):
        parsed = _parse_iso(pa.chunked_array([array]))
        return array if parsed is None else parsed.combine_chunks()
    if not _has_text(dtype):
        return array
    mask = array.is_null() if array.null_count else None
    if isinstance(array, pa.StructArray):
        children = [_coerce_nested(child) for child in array.flatten()]
        fields = [pa.field(f.name, c.type) for f, c in zip(array.type, children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if isinstance(array, pa.ListArray):
        values = _coerce_nested(array.values)
        return pa.ListArray.from_arrays(array.offsets, values, mask=mask)
    return array


def _has_text(dtype: pa.DataType) -> bool:
    if _is_text(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_has_text(f.type) for f in dtype)
    if pa.types.is_list(dtype):
        return _has_text(dtype.value_type)
    return False


def _is_text(dtype: pa.DataType) -> bool:
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)


def _list_value_type(dtype: pa.DataType) -> pa.DataType | None:
    """The element type of any list kind (list, large, fixed-size, view), else None."""
    element: pa.DataType | None = None
    if (
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
        or pa.types.is_list_view(dtype)
        or pa.types.is_large_list_view(dtype)
    ):
        element = dtype.value_type
    return element


def _is_list_view(dtype: pa.DataType) -> bool:
    return pa.types.is_list_view(dtype) or pa.types.is_large_list_view(dtype)
