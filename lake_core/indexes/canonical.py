"""The canonical form of indexed values: what index objects store, hash and compare.

Building an index and looking values up both pass values through :func:`canonical`, so equal
values of a column's type map to equal canonical values. A lookup first casts its literals to
the column's type (``pa.array([v]).cast(column_type)``), then canonicalizes.

=====================================================  =========================================
column type                                            canonical form
=====================================================  =========================================
integers (any width, signed or not), bool              int64; uint64 above 2**63 - 1 keeps its
                                                       bit pattern (a NumPy view), so it reads as
                                                       a negative int64: still one-to-one within
                                                       the column, which is all an index needs
float16/32/64                                          float64, -0.0 made 0.0 (equal in SQL);
                                                       NaN stays NaN (indexes skip it, see kinds)
string, large_string, string_view                      large_string
binary, large_binary, binary_view, fixed_size_binary   large_binary
date32/64, time32/64, timestamp (any unit, any tz),    int64: the integer the column stores, in
duration                                               the column's own unit (UTC for timestamps)
dictionary of any of these                             its decoded values' form
=====================================================  =========================================

Nulls stay null. Nested types, decimals, null-typed and extension columns are not indexable
(:func:`check_indexable`).

Canonical values of two column types are only comparable when the types share a *domain*
(:func:`domain`): every integer width but uint64 shares ``int``, so an index built while a
column was int32 still answers after it widened to int64; a timestamp's domain names its unit,
so a millisecond index is never asked about microseconds. An index records the domain it was
built for, and a lookup in another domain cannot be decided.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import UsageError

#: What :func:`check_indexable` accepts, for messages and docs.
INDEXABLE = (
    "integers, bool, floats, strings, binary, dates, times, timestamps and durations "
    "(or dictionaries of them)"
)


def _value_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return t.value_type  # type: ignore[no-any-return]
    return t


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_binary(t: pa.DataType) -> bool:
    return (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    )


def domain(t: pa.DataType) -> str | None:
    """The domain of type ``t``'s canonical values (see the module docstring), or None when
    ``t`` is not indexable. Two types whose equal values must be found by one index share a
    domain; types whose canonical integers mean different things (a date and a timestamp, two
    timestamp units, uint64 and int64) do not."""
    t = _value_type(t)
    if pa.types.is_uint64(t):
        return "uint64"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_floating(t):
        return "float"
    if _is_string(t):
        return "string"
    if _is_binary(t):
        return "binary"
    if pa.types.is_date32(t):
        return "date32"
    if pa.types.is_date64(t):
        return "date64"
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return f"time[{t.unit}]"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}]"
    if pa.types.is_duration(t):
        return f"duration[{t.unit}]"
    return None


def check_indexable(field: pa.Field[Any]) -> None:
    """Raise UsageError unless ``field``'s type is one indexes cover (see :data:`INDEXABLE`)."""
    if domain(field.type) is None:
        raise UsageError(
            f"field {field.name!r} has type {field.type}, which cannot be indexed: indexes "
            f"cover {INDEXABLE}"
        )


def canonical(values: pa.Array[Any] | pa.ChunkedArray[Any]) -> pa.Array[Any]:
    """``values`` in canonical form (see the module docstring), one array, nulls kept.
    Raises UsageError for a type indexes do not cover."""
    arr: Any = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    if domain(t) is None:
        raise UsageError(f"values of type {t} cannot be indexed: indexes cover {INDEXABLE}")
    if pa.types.is_uint64(t):
        # A zero-copy reinterpretation of the bits (as NumPy's ``view``): no overflow.
        return arr.view(pa.int64())  # type: ignore[no-any-return]
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return arr.cast(pa.int64())  # type: ignore[no-any-return]
    if pa.types.is_floating(t):
        # x + 0.0 is x for every float but -0.0, which becomes 0.0 (IEEE round-to-nearest):
        # one vectorised pass, nulls and NaN untouched.
        return pc.add(arr.cast(pa.float64()), pa.scalar(0.0))  # type: ignore[no-any-return]
    if _is_string(t):
        return arr.cast(pa.large_string())  # type: ignore[no-any-return]
    if _is_binary(t):
        return arr.cast(pa.large_binary())  # type: ignore[no-any-return]
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arr.view(pa.int32()).cast(pa.int64())  # type: ignore[no-any-return]
    return arr.view(pa.int64())  # type: ignore[no-any-return]
