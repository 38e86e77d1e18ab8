"""The canonical form of indexed values: what index objects store and hash.

Building an index and looking a value up both pass values through :func:`canonical`, so equal
values of a column's type map to equal canonical values. A lookup first casts its literals to
the column's type (:func:`lake_core.indexes.pruner.lookup_values`), then canonicalizes.

=====================================================  =========================================
column type                                            canonical form
=====================================================  =========================================
integers (any width), bool                             int64 (uint64 above 2**63 - 1 by its bit
                                                       pattern: a view, so still one-to-one)
float16/32/64                                          float64, with -0.0 made 0.0 (equal in SQL)
string, large_string, string_view                      large_string
binary, large_binary, binary_view, fixed_size_binary   large_binary
date32/64, time32/64, timestamp (any unit, tz), dur.   int64: the integer the column stores, in
                                                       the column's own unit (seconds of a time
                                                       or timestamp as milliseconds: Parquet
                                                       stores them so)
dictionary of any of these                             the decoded values' form
=====================================================  =========================================

Nested types and decimals are not indexable (:func:`check_indexable`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import UsageError

INDEXABLE = (
    "integers, bool, floats, strings, binary, dates, times, timestamps and durations "
    "(or dictionaries of them)"
)


def _value_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def is_string_type(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def is_binary_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    )


def indexable(t: pa.DataType) -> bool:
    t = _value_type(t)
    return (
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_floating(t)
        or is_string_type(t)
        or is_binary_type(t)
        or pa.types.is_temporal(t)
    )


def check_indexable(field: pa.Field[Any]) -> None:
    """UsageError unless ``field``'s type is one indexes cover."""
    if not indexable(field.type):
        raise UsageError(
            f"field {field.name!r} is of type {field.type}: indexes cover {INDEXABLE}"
        )


def canonical(values: pa.Array[Any] | pa.ChunkedArray[Any]) -> pa.Array[Any]:
    """``values`` in canonical form (see the module docstring); nulls stay null. Raises
    UsageError for a type indexes do not cover."""
    arr: Any = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    if pa.types.is_int64(t):
        return arr  # type: ignore[no-any-return]  # most indexed columns: nothing to do
    if pa.types.is_uint64(t):
        return arr.view(pa.int64())  # type: ignore[no-any-return]
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return arr.cast(pa.int64())  # type: ignore[no-any-return]
    if pa.types.is_floating(t):
        as64 = arr.cast(pa.float64())
        # -0.0 == 0.0: one canonical zero (NaN stays NaN; no lookup pins NaN).
        zero = pa.scalar(0.0)
        return pc.if_else(pc.equal(as64, zero), zero, as64)  # type: ignore[no-any-return]
    if is_string_type(t):
        return arr.cast(pa.large_string())  # type: ignore[no-any-return]
    if is_binary_type(t):
        return arr.cast(pa.large_binary())  # type: ignore[no-any-return]
    # Parquet has no unit of seconds for times and timestamps: such a column reads back in
    # milliseconds. Seconds are counted in milliseconds here, so a value has one canonical
    # form whether the index is built from the rows as written or read back.
    if pa.types.is_time32(t) and t.unit == "s":
        arr, t = arr.cast(pa.time32("ms")), pa.time32("ms")
    if pa.types.is_timestamp(t) and t.unit == "s":
        arr = arr.cast(pa.timestamp("ms", t.tz))
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arr.view(pa.int32()).cast(pa.int64())  # type: ignore[no-any-return]
    if pa.types.is_temporal(t):
        return arr.view(pa.int64())  # type: ignore[no-any-return]
    raise UsageError(f"values of type {t} cannot be indexed: indexes cover {INDEXABLE}")
