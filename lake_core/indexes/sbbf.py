"""Parquet's split-block bloom filters (SBBF): the filters of a ``bloom`` index (version 2).

pyarrow's Parquet writer builds a column chunk's SBBF in C++, on the thread that encodes the
chunk, when asked (``bloom_filter_options``; it sizes each filter for the chunk's distinct
values at the rate asked). lakepool asks for them on the columns its bloom rules cover, takes
each row group's filter out of the fragment the writer made (:func:`filters_in`), and the
stitcher leaves them out of the object (:mod:`lake_core.stitch`): the index object holds them.
:func:`column_filters` makes them for an object already written, by writing the column alone.

The filter, as the Parquet format defines it (parquet-format, ``BloomFilter.md``): ``z``
blocks of eight little-endian 32-bit words. A value's hash ``h`` is xxHash64 (seed 0) of its
plain encoding; its block is ``((h >> 32) * z) >> 32``; in that block, word ``i`` has bit
``((h mod 2**32) * SALT[i] mod 2**32) >> 27`` set. The plain encoding of the types whose
filters lakepool uses (:func:`physical`):

=============================================  =========  ==================================
Arrow type (or a dictionary of it)             physical   plain encoding of a value
=============================================  =========  ==================================
int8/16/32, uint8/16/32, date32                ``int32``  4 bytes, little-endian (a uint32
                                                          by its bit pattern)
int64, uint64                                  ``int64``  8 bytes, little-endian (likewise)
string, binary (any width, views), fixed-size  ``bytes``  the bytes themselves (UTF-8)
=============================================  =========  ==================================

Other indexable types (floats, whose filter tells ``0.0`` from ``-0.0``; booleans, which get
no filter; times and timestamps, whose stored unit can differ from the Arrow one; date64,
stored as days) keep the version 1 filters of :mod:`lake_core.indexes.kinds`.

Invariant: :func:`may_contain` is True for every value the row group holds (a filter has no
false negatives); for an absent value it is True with about the rate the filter was sized for.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.indexes.canonical import is_binary_type, is_string_type

#: The eight salts of the format's block insert and check.
SALT = (
    0x47B6137B,
    0x44974D91,
    0x8824AD5B,
    0xA2B7289D,
    0x705495C7,
    0x2DF1424B,
    0x9EFC4947,
    0x5C6BFB31,
)
BLOCK_BYTES = 32
_SALTS = np.array(SALT, dtype=np.uint64)
_WORDS = struct.Struct("<8I")
_INT32 = struct.Struct("<I")
_INT64 = struct.Struct("<Q")


def physical(t: pa.DataType) -> str | None:
    """How a column of type ``t`` is stored, for hashing (``int32``, ``int64`` or ``bytes``;
    see the module docstring), or None where lakepool does not use Parquet's filter."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_int64(t) or pa.types.is_uint64(t):
        return "int64"
    if pa.types.is_integer(t) or pa.types.is_date32(t):
        return "int32"
    if is_string_type(t) or is_binary_type(t):
        return "bytes"
    return None


def writer_options(columns: dict[str, float], rows: int) -> dict[str, dict[str, float]]:
    """``bloom_filter_options`` asking the Parquet writer for a filter of each of ``columns``
    (name: false-positive rate) in row groups of at most ``rows`` rows. pyarrow starts each
    filter at the size for ``ndv`` distinct values and folds it down to the size the chunk's
    distinct values need; ``ndv`` is the row count, which no chunk exceeds. Left out, ``ndv``
    is a million, and folding a filter that large took 60 ms per 24,000-row group here,
    against 1-2 ms (and the same bits)."""
    ndv = max(1, rows)
    return {name: {"ndv": ndv, "fpp": fpp} for name, fpp in columns.items()}


def filter_bits(raw: bytes | memoryview) -> bytes:
    """The bitset of a serialized filter (its Thrift ``BloomFilterHeader`` then the bits).
    ValueError unless the header says: block algorithm, xxHash, uncompressed, and a size that
    is a positive multiple of a block matching the bytes after it."""
    data = bytes(raw)
    if not data or data[0] != 0x15:  # field 1 (numBytes), an i32
        raise ValueError("not a Parquet bloom filter header")
    n = shift = 0
    pos = 1
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    size = (n >> 1) ^ -(n & 1)
    # Fields 2-4 (algorithm, hash, compression) are unions whose only member is field 1, an
    # empty struct: BLOCK, XXHASH, UNCOMPRESSED. Each is 1C 1C 00 00 (delta 1, struct; member
    # 1, struct; its end; the union's end), then the header's end.
    expected = bytes.fromhex("1c1c0000" * 3) + b"\x00"
    if data[pos : pos + len(expected)] != expected:
        raise ValueError("a bloom filter of another algorithm, hash or compression")
    bits = data[pos + len(expected) :]
    if size <= 0 or size % BLOCK_BYTES or len(bits) != size:
        raise ValueError(f"a bloom filter of {len(bits)} bytes says it has {size}")
    return bits


def filters_in(data: bytes | memoryview, meta: pq.FileMetaData, column: int) -> list[bytes | None]:
    """The bitset of leaf column ``column``'s filter in each row group of the Parquet file
    ``data`` whose footer is ``meta`` (None where a row group has none)."""
    view = memoryview(data)
    out: list[bytes | None] = []
    for g in range(meta.num_row_groups):
        chunk = meta.row_group(g).column(column)
        # pyarrow 26 has these; its type stubs do not yet.
        at = chunk.bloom_filter_offset  # type: ignore[attr-defined]
        length = chunk.bloom_filter_length  # type: ignore[attr-defined]
        out.append(None if at is None or not length else filter_bits(view[at : at + length]))
    return out


def column_filters(
    columns: Sequence[pa.Array[Any] | pa.ChunkedArray[Any]], fpp: float
) -> list[bytes]:
    """The filters of consecutive row groups holding ``columns`` (one array each, the
    column's own type): the column written alone, one row group each, with filters at ``fpp``.
    pyarrow gives a row group without a non-null value a filter of one empty block. ValueError
    if the writer left a filter out of a row group that holds values (a filter missing must
    never read as "holds nothing")."""
    if not columns:
        return []
    field = pa.field("v", columns[0].type)
    sink = io.BytesIO()
    blooms = writer_options({"v": fpp}, max(len(c) for c in columns))
    with pq.ParquetWriter(sink, pa.schema([field]), bloom_filter_options=blooms) as w:
        for values in columns:
            chunk = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
            w.write_table(pa.table({"v": chunk}), row_group_size=max(1, len(values)))
    data = sink.getvalue()
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    filters = filters_in(data, meta, 0)
    for bits, values in zip(filters, columns, strict=True):
        if bits is None and len(values) > values.null_count:
            raise ValueError("the Parquet writer left out the bloom filter of a row group")
    return [b"" if f is None else f for f in filters]


def hash_of(value: Any, kind: str) -> int:
    """xxHash64 of the plain encoding of ``value`` (canonical: an int for ``int32`` and
    ``int64``, str or bytes for ``bytes``) as a column stored ``kind`` holds it."""
    import xxhash  # deferred: a write imports this module, and only lookups hash

    if kind == "int32":
        return xxhash.xxh64_intdigest(_INT32.pack(int(value) & 0xFFFF_FFFF))
    if kind == "int64":
        return xxhash.xxh64_intdigest(_INT64.pack(int(value) & 0xFFFF_FFFF_FFFF_FFFF))
    if kind == "bytes":
        return xxhash.xxh64_intdigest(value.encode() if isinstance(value, str) else bytes(value))
    raise ValueError(f"no plain encoding {kind!r}")


def block_of(h: int, blocks: int) -> int:
    """The block of hash ``h`` in a filter of ``blocks`` blocks."""
    return ((h >> 32) * blocks) >> 32


def bucket_blocks(blocks: int, bucket_bits: int, bucket: int) -> tuple[int, int]:
    """The blocks ``[first, end)`` of a filter of ``blocks`` blocks that the hashes whose top
    ``bucket_bits`` bits are ``bucket`` can fall in (exactly a ``2**bucket_bits``-th when
    ``blocks`` is a power of two at least that large; neighbours share a block otherwise)."""
    first = (bucket * blocks) >> bucket_bits
    end = ((bucket + 1) * blocks + (1 << bucket_bits) - 1) >> bucket_bits
    return first, max(end, first + 1) if blocks else first


def may_contain_all(
    bits: bytes, first: int, blocks: int, hashes: np.ndarray[Any, np.dtype[np.uint64]]
) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """:func:`may_contain` of each of ``hashes`` at once (long IN lists)."""
    if blocks == 0 or len(hashes) == 0:
        return np.zeros(len(hashes), dtype=bool)
    words = np.frombuffer(bits, dtype="<u4").reshape(-1, 8)
    # (h >> 32) * blocks < 2**64: exact in uint64.
    block = ((hashes >> np.uint64(32)) * np.uint64(blocks)) >> np.uint64(32)
    at = block.astype(np.int64) - first
    if len(at) and (at.min() < 0 or at.max() >= len(words)):
        raise ValueError("a hash outside the blocks of its bucket")
    low = hashes & np.uint64(0xFFFF_FFFF)
    shifts = ((low[:, None] * _SALTS[None, :]) & np.uint64(0xFFFF_FFFF)) >> np.uint64(27)
    chosen = words[at].astype(np.uint64)
    found: np.ndarray[Any, np.dtype[np.bool_]] = np.all((chosen >> shifts) & np.uint64(1), axis=1)
    return found


def may_contain(bits: bytes | memoryview, first: int, blocks: int, h: int) -> bool:
    """Whether the filter of ``blocks`` blocks, of which ``bits`` holds blocks ``first`` on,
    may hold the value of hash ``h`` (False: certainly not)."""
    if blocks == 0:
        return False
    at = (block_of(h, blocks) - first) * BLOCK_BYTES
    if at < 0 or at + BLOCK_BYTES > len(bits):
        raise ValueError("a hash outside the blocks of its bucket")
    words = _WORDS.unpack_from(bits, at)
    low = h & 0xFFFF_FFFF
    for word, salt in zip(words, SALT, strict=True):
        if not (word >> (((low * salt) & 0xFFFF_FFFF) >> 27)) & 1:
            return False
    return True
