"""Row weights of an OTree pool: Spark's ``hash()``, bit for bit, vectorised with numpy.

A row's weight is Spark SQL's ``hash(c1, …, cn)`` of the indexed columns — Murmur3 x86_32
with seed 42, *chained* (the hash of column ``i`` seeds column ``i+1``; a null leaves the running
hash unchanged) — as Qbeast computes it, so a Spark job and this module give every row the same
weight. Per type, as Spark's ``Murmur3HashFunction``: booleans, 8/16/32-bit integers and dates
(days) hash as an int; 64-bit integers and timestamps (microseconds) as a long; floats by their
IEEE bits (``-0.0`` as ``0``, every NaN as Java's canonical NaN); decimals of precision <= 18 by
their unscaled long; strings and binaries by Spark's ``hashUnsafeBytes``, which is *not* plain
Murmur3 on the last ``len % 4`` bytes: each is mixed alone as a sign-extended int.

The weight is stored in the column :data:`WEIGHT_COLUMN` (int32) of every object, so readers
never recompute it: a type widened later, or a salted weight (chained with a random number per
row, :func:`salted`), stays what it was when the row was loaded.

A sample of fraction ``f`` is the rows with ``MIN_WEIGHT <= w < weight_cut(f)``
(:func:`sample_range`); ``weight_cut`` truncates toward zero as Qbeast's ``toInt`` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import UsageError

WEIGHT_COLUMN = "_lake_weight"
SEED = 42
MIN_WEIGHT = -(2**31)
MAX_WEIGHT = 2**31 - 1

_U32 = np.uint32
_C1 = _U32(0xCC9E2D51)
_C2 = _U32(0x1B873593)
_N = _U32(0xE6546B64)
_F1 = _U32(0x85EBCA6B)
_F2 = _U32(0xC2B2AE35)
_FLOAT_NAN_BITS = 0x7FC00000
_DOUBLE_NAN_BITS = 0x7FF8000000000000


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    out: np.ndarray = (x << _U32(r)) | (x >> _U32(32 - r))
    return out


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    k1 = k1 * _C1
    k1 = _rotl(k1, 15)
    out: np.ndarray = k1 * _C2
    return out


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    h1 = h1 ^ k1
    h1 = _rotl(h1, 13)
    out: np.ndarray = h1 * _U32(5) + _N
    return out


def _fmix(h1: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    h1 = h1 ^ np.asarray(length).astype(_U32)
    h1 = h1 ^ (h1 >> _U32(16))
    h1 = h1 * _F1
    h1 = h1 ^ (h1 >> _U32(13))
    h1 = h1 * _F2
    out: np.ndarray = h1 ^ (h1 >> _U32(16))
    return out


def _hash_int(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Murmur3 ``hashInt`` of int32 ``values`` (as uint32 bits), per-row seeds (uint32)."""
    return _fmix(_mix_h1(seeds, _mix_k1(values.astype(np.int32).view(_U32))), 4)


def _hash_long_bits(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    bits = values.astype(np.int64).view(np.uint64)
    low = (bits & np.uint64(0xFFFFFFFF)).astype(_U32)
    high = (bits >> np.uint64(32)).astype(_U32)
    h1 = _mix_h1(seeds, _mix_k1(low))
    h1 = _mix_h1(h1, _mix_k1(high))
    return _fmix(h1, 8)


def hash_long(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Spark's ``hashLong`` of int64 ``values`` with int32 ``seeds`` (one per value): int32."""
    seeds32 = np.asarray(seeds).astype(np.int32).view(_U32)
    out: np.ndarray = _hash_long_bits(np.asarray(values), seeds32).view(np.int32)
    return out


def _hash_bytes(
    data: np.ndarray, offsets: np.ndarray, rows: np.ndarray, seeds: np.ndarray
) -> np.ndarray:
    """Spark's ``hashUnsafeBytes`` of the byte strings ``data[offsets[r]:offsets[r+1]]`` for
    ``rows``, seeded per row (uint32): whole little-endian words, then each tail byte alone,
    sign-extended."""
    starts = offsets[rows].astype(np.int64)
    lengths = offsets[rows + 1].astype(np.int64) - starts
    h1 = seeds.copy()
    words = lengths // 4
    if len(rows):
        for j in range(int(words.max(initial=0))):
            live = np.flatnonzero(words > j)
            at = starts[live] + 4 * j
            word = (
                data[at].astype(_U32)
                | (data[at + 1].astype(_U32) << _U32(8))
                | (data[at + 2].astype(_U32) << _U32(16))
                | (data[at + 3].astype(_U32) << _U32(24))
            )
            h1[live] = _mix_h1(h1[live], _mix_k1(word))
        tails = lengths % 4
        for k in range(3):
            live = np.flatnonzero(tails > k)
            if not len(live):
                break
            byte = data[starts[live] + 4 * words[live] + k].view(np.int8).astype(np.int32)
            h1[live] = _mix_h1(h1[live], _mix_k1(byte.view(_U32)))
    return _fmix(h1, lengths)


def is_bytes(t: pa.DataType) -> bool:
    """Whether Spark hashes a column of type ``t`` as bytes (strings and binaries)."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
    )


def _flat(column: pa.Array[Any] | pa.ChunkedArray[Any]) -> pa.Array[Any]:
    array: Any = column
    if isinstance(column, pa.ChunkedArray):
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    out: pa.Array[Any] = array
    return out


def _type_error(t: pa.DataType) -> UsageError:
    return UsageError(f"an OTree cannot hash a column of type {t} (Spark's hash() has no match)")


def _hash_column(column: pa.Array[Any], h: np.ndarray) -> np.ndarray:
    """``h`` (uint32, per row) after hashing ``column`` into it, nulls leaving it as it was."""
    t = column.type
    n = len(column)
    if pa.types.is_null(t) or n == 0:
        return h
    valid = (
        np.ones(n, dtype=bool)
        if column.null_count == 0
        else column.is_valid().to_numpy(zero_copy_only=False)
    )
    rows = np.flatnonzero(valid)
    seeds = h[rows]
    if pa.types.is_boolean(t):
        values = column.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
        new = _hash_int(values[rows], seeds)
    elif pa.types.is_integer(t):
        if pa.types.is_unsigned_integer(t):
            raise _type_error(t)
        values = column.fill_null(0).to_numpy(zero_copy_only=False)
        if pa.types.is_int64(t):
            new = _hash_long_bits(values[rows].astype(np.int64), seeds)
        else:
            new = _hash_int(values[rows].astype(np.int64), seeds)
    elif pa.types.is_float32(t):
        values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float32)[rows]
        bits = values.view(np.int32).copy()
        bits[values == 0] = 0  # -0.0 hashes as 0.0
        bits[np.isnan(values)] = _FLOAT_NAN_BITS
        new = _hash_int(bits, seeds)
    elif pa.types.is_float64(t) or pa.types.is_float16(t):
        values = column.fill_null(0).cast(pa.float64()).to_numpy(zero_copy_only=False)[rows]
        bits64 = values.view(np.int64).copy()
        bits64[values == 0] = 0
        bits64[np.isnan(values)] = _DOUBLE_NAN_BITS
        new = _hash_long_bits(bits64, seeds)
    elif pa.types.is_date32(t):
        values = column.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
        new = _hash_int(values[rows], seeds)
    elif pa.types.is_date64(t):
        days = pc.cast(column, pa.date32()).cast(pa.int32()).fill_null(0)
        new = _hash_int(days.to_numpy(zero_copy_only=False)[rows], seeds)
    elif pa.types.is_timestamp(t):
        # Spark keeps microseconds: coarser units scale up, nanoseconds are floored to them.
        raw = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)[rows]
        if t.unit == "ns":
            micros = np.floor_divide(raw, 1000)
        else:
            micros = raw * {"s": 1_000_000, "ms": 1_000, "us": 1}[t.unit]
        new = _hash_long_bits(micros, seeds)
    elif pa.types.is_decimal(t):
        if t.precision > 18:
            raise UsageError(
                f"an OTree cannot hash decimal({t.precision}, {t.scale}): "
                "decimals of more than 18 digits are not supported"
            )
        # The unscaled value of precision <= 18 fits the low 64 bits of each little-endian
        # two's-complement slot (16 bytes for decimal128, 32 for decimal256).
        width = t.byte_width // 8
        slots = np.frombuffer(column.buffers()[1], dtype=np.int64)  # type: ignore[call-overload]
        unscaled = slots[column.offset * width : (column.offset + n) * width : width]
        new = _hash_long_bits(unscaled[rows], seeds)
    elif is_bytes(t):
        if pa.types.is_string_view(t):
            column = column.cast(pa.large_string())
        elif pa.types.is_binary_view(t):
            column = column.cast(pa.large_binary())
        large = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
        buffers = column.buffers()
        offset_type = np.int64 if large else np.int32
        offsets = np.frombuffer(
            buffers[1], dtype=offset_type
        )[  # type: ignore[call-overload]
            column.offset : column.offset + n + 1
        ]
        data = (
            np.frombuffer(buffers[2], dtype=np.uint8)  # type: ignore[call-overload]
            if buffers[2] is not None
            else np.zeros(0, np.uint8)
        )
        new = _hash_bytes(data, offsets, rows, seeds)
    else:
        raise _type_error(t)
    out = h.copy()
    out[rows] = new
    return out


def spark_hash(
    columns: Sequence[pa.Array[Any] | pa.ChunkedArray[Any]], seed: int = SEED
) -> np.ndarray:
    """Spark SQL's ``hash(c1, …, cn)`` with ``seed`` (int32; negative allowed) per row."""
    if not columns:
        raise UsageError("hash() of no column")
    n = len(columns[0])
    h = np.full(n, np.int64(seed) & 0xFFFFFFFF, dtype=np.uint64).astype(_U32)
    with np.errstate(over="ignore"):
        for column in columns:
            h = _hash_column(_flat(column), h)
    out: np.ndarray = h.view(np.int32)
    return out


def weight_cut(fraction: float) -> int:
    """``W(f)``: the weight below which a fraction ``f`` of uniform weights lies."""
    return int(fraction * (2**32 - 1) - 2**31)


def sample_range(fraction: float) -> tuple[int, int] | None:
    """The weights ``lo <= w < hi`` of a ``fraction`` sample; None for the whole pool
    (``fraction`` 1). Raises UsageError for a fraction outside ``(0, 1]`` or not a number."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or math.isnan(fraction)
        or not 0 < fraction <= 1
    ):
        raise UsageError(f"a sample fraction is a number in (0, 1], not {fraction!r}")
    if fraction >= 1:
        return None
    return MIN_WEIGHT, weight_cut(fraction)


def salted(hashes: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """``hashes`` chained with a random int64 per row (Spark's hashLong): int32 weights that
    do not repeat with repeated values."""
    rng = rng or np.random.default_rng()
    salts = rng.integers(
        np.iinfo(np.int64).min, np.iinfo(np.int64).max, len(hashes), dtype=np.int64
    )
    with np.errstate(over="ignore"):
        return hash_long(salts, hashes)


def weights_for(
    table: pa.Table, columns: Sequence[str], mode: str, rng: np.random.Generator | None = None
) -> pa.Array[Any]:
    """The weight column (int32, no nulls) of ``table`` for indexed ``columns``: ``hash``
    (Spark's hash of the columns; a column the table lacks is null: it changes nothing) or
    ``salted`` (its salts drawn from ``rng``: a seeded one gives the same weights again)."""
    present = [table.column(c) for c in columns if c in table.schema.names]
    hashes = spark_hash(present) if present else np.full(table.num_rows, SEED, dtype=np.int32)
    if mode == "salted":
        hashes = salted(hashes, rng)
    elif mode != "hash":
        raise UsageError(f"unknown OTree weight {mode!r}")
    return pa.array(hashes, pa.int32())


__all__ = [
    "MAX_WEIGHT",
    "MIN_WEIGHT",
    "SEED",
    "WEIGHT_COLUMN",
    "hash_long",
    "is_bytes",
    "salted",
    "sample_range",
    "spark_hash",
    "weight_cut",
    "weights_for",
]
