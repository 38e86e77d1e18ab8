"""The bytes of index objects, and lookups in them: the ``exact`` and ``bloom`` kinds.

An index object is one Parquet file describing one data object's indexed column, row group by
row group (the data object's own row groups: a lookup answers which of them may hold a value).
Its schema metadata holds ``lakepool.index``: JSON with ``format`` (``lakepool.index``),
``version`` (1; 2 for bloom indexes of Parquet's filters, below), ``kind``, ``row_groups`` (of
the data object), ``entries`` and, for bloom, ``fpp`` and the hash ``fingerprint``
(:mod:`lake_core.indexes.hashing`).

``exact``: one row per distinct (canonical value, row group) pair, columns ``value`` and ``rg``
(int32), sorted by value then row group, in index row groups of :data:`EXACT_GROUP_ROWS` entries
with Parquet statistics: a lookup reads the footer, then only the index row groups whose
min/max can hold one of the values (an index row group without statistics is always read).
Its answer is exact: the row groups holding the value, no more.

``bloom``: the values of a row group are split into ``2**b`` buckets by the top ``b`` bits of
their 64-bit hash (``bucket_bits`` in the header, chosen by the object's size:
:func:`bloom_bucket_bits`); one row per (bucket, data row group), one Parquet row group per
bucket: ``bucket``, ``rg`` (int32), ``k`` (int32, hash functions), ``m`` (int64, bits) and
``bits`` (large_binary, little-endian bit order, uncompressed), a standard Bloom filter over the
hashes of the row group's distinct non-null canonical values in that bucket, sized for their
count at the rule's false-positive rate ``p`` with the fewest hash functions ``k`` whose size
``m = ceil(-k n / ln(1 - p^(1/k)))`` (the size at which ``k`` functions give rate ``p``) is
within :data:`BLOOM_SIZE_SLACK` of the smallest filter's ``-n ln p / ln² 2``, rounded up to a
multiple of 64 (at 1%: 4 functions and 10.5 bits a value, where the smallest filter takes 7
and 9.6: setting the bits is most of a bloom build). Lookups read each filter's ``k`` and ``m``
from its row, so filters sized either way answer alike; bit ``i`` of a value with hash ``h`` is
``(h1 + i·h2) mod m`` with ``h1`` the low 32 bits of ``h`` and ``h2`` the high 32 bits, odd.
A lookup reads the footer and the Parquet row groups of its values' buckets only.
"No" is certain; "maybe" is wrong for an absent value with probability about ``p`` per row group.
A row group without a non-null value has ``m = 0`` and answers "no".

``bloom``, version 2 (:data:`SBBF_VERSION`; the columns :func:`lake_core.indexes.sbbf.physical`
covers: integers, date32, strings and binaries): the filters are Parquet's split-block bloom
filters, built by the Parquet writer as it encodes the data object (or by writing the column
alone: :func:`~lake_core.indexes.sbbf.column_filters`), one per data row group, and hashed as
:mod:`lake_core.indexes.sbbf` says (xxHash64 of the plain encoding: no fingerprint). The
header adds ``filter`` (``sbbf``), ``physical`` (how the column is stored: ``int32``,
``int64`` or ``bytes``) and ``bucket_bits``; ``entries`` counts the non-null values. Each
filter is cut into ``2**b`` buckets by the top ``b`` bits of the hash, which pick its blocks
(:func:`~lake_core.indexes.sbbf.bucket_blocks`): one row per (bucket, data row group),
``bucket``, ``rg``, ``first`` (the bucket's first block), ``blocks`` (the whole filter's)
and ``bits`` (the bucket's blocks), one Parquet row group per bucket, as in version 1.
Version 1 bloom indexes still answer.

Invariant of both: :func:`index_row_groups` never omits a row group that holds one of the
values; when it cannot answer (another hash fingerprint, a newer version, another kind) it
returns None and the caller reads the object unpruned.
"""

from __future__ import annotations

import bisect
import functools
import io
import json
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lake_core.encode import PAGE_ROWS
from lake_core.errors import CorruptObjectError, UsageError
from lake_core.indexes import sbbf
from lake_core.indexes.canonical import canonical
from lake_core.indexes.hashing import fingerprint, hash64
from lake_core.indexes.rules import BLOOM, DEFAULT_FPP, EXACT, KINDS

INDEX_FORMAT = "lakepool.index"
INDEX_VERSION = 1
#: The version of bloom indexes made of Parquet's split-block bloom filters, and of exact
#: indexes that record each value's row slices.
SBBF_VERSION = 2
EXACT_VERSION = 2
#: Rows per slice of an exact index of version 2: the rows of a data object's pages
#: (:data:`lake_core.encode.PAGE_ROWS`), so a slice is read as a page of each column.
SLICE_ROWS = PAGE_ROWS
#: A version 2 bloom index cuts filters into buckets of about this many blocks or more.
SBBF_BUCKET_BLOCKS = 32
_META = INDEX_FORMAT.encode()
#: Entries per index row group of an exact index: small enough that a lookup of one value
#: reads little, large enough that the footer stays small.
EXACT_GROUP_ROWS = 32 * 1024
#: A bloom index splits its values into 2**b buckets by the top b bits of their hash, one
#: Parquet row group per bucket, with about this many values or more per bucket and row group:
#: a lookup reads only its values' buckets (a 64th of the filters of a large object).
BLOOM_BUCKET_VALUES = 1024
MAX_BUCKET_BITS = 6
#: How much larger than the smallest filter for its rate a bloom filter may be to need fewer
#: hash functions (each is one more bit to set per value, and to test per lookup).
BLOOM_SIZE_SLACK = 0.10
#: A bloom index over more values than this is built on two threads (hashing and sorting
#: half the row groups each, then setting half the filters each; DuckDB and NumPy release the
#: GIL): the end of a load waits for its last object's index while the encoding threads idle.
PARALLEL_BLOOM_VALUES = 1 << 18
#: Filters of fewer bits than this are filled with uint32 positions (see ``_filter_run``).
_UINT32_BITS = 2**31
#: :func:`_int_pairs` decodes row group and slice numbers in 32 bits when their codes fit.
_TAIL32_BITS = 32

__all__ = [
    "BLOOM",
    "DEFAULT_FPP",
    "EXACT",
    "EXACT_GROUP_ROWS",
    "KINDS",
    "IndexInfo",
    "bloom_answers",
    "build_index",
    "build_sbbf",
    "describe",
    "IndexHits",
    "index_lookup",
    "index_row_groups",
]


@dataclass(frozen=True)
class IndexInfo:
    """What an index object's header says."""

    kind: str
    version: int
    row_groups: int
    entries: int
    fpp: float | None = None
    fingerprint: str | None = None


def _write(table: pa.Table, header: dict[str, Any], row_group_size: int, stats: list[str]) -> bytes:
    table = table.replace_schema_metadata({_META: json.dumps(header).encode()})
    options: dict[str, Any] = {
        # Filter bits are random: zstd spends time on them for nothing.
        "compression": {c: "none" if c == "bits" else "zstd" for c in table.column_names},
    }
    encodings: dict[str, str] = {}
    if header["kind"] == EXACT:
        # An exact index has about a row per data row, so its write is a large part of its
        # build. Fixed-width columns are split into byte streams: the high bytes of row group
        # and slice numbers, and of sorted values, are runs that zstd takes in passing, as
        # small as dictionaries of row groups were, in half the time (no hashing).
        encodings = {
            c.name: "BYTE_STREAM_SPLIT"
            for c in table.schema
            if pa.types.is_integer(c.type) or pa.types.is_floating(c.type)
        }
        options["use_dictionary"] = False
    else:
        # Dictionaries only where values repeat (row group numbers).
        options["use_dictionary"] = [c for c in ("rg",) if c in table.column_names]
    value_type = table.schema.field("value").type if "value" in table.column_names else None
    if value_type is not None and (
        pa.types.is_large_string(value_type) or pa.types.is_large_binary(value_type)
    ):
        # Sorted text shares prefixes: front coding stores each value's new suffix only.
        encodings["value"] = "DELTA_BYTE_ARRAY"
    if encodings:
        options["column_encoding"] = encodings
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        row_group_size=max(1, row_group_size),
        write_statistics=stats,  # only where a lookup uses them: the filters' bytes have none
        store_schema=True,
        **options,
    )
    return sink.getvalue()


def build_index(
    kind: str,
    row_groups: Sequence[pa.Array[Any] | pa.ChunkedArray[Any]],
    *,
    fpp: float = DEFAULT_FPP,
    version: int | None = None,
) -> bytes:
    """The index object of a data object whose indexed column holds ``row_groups[i]`` in its
    row group ``i`` (see the module docstring; a bloom index of a column Parquet's filters
    cover is version 2 unless ``version`` asks for 1, as earlier releases wrote). Raises
    UsageError for an unknown kind, a bloom rate outside (0, 0.5) or a type indexes do not
    cover."""
    check_build(kind, fpp)
    stored = sbbf.physical(row_groups[0].type) if row_groups and version != INDEX_VERSION else None
    if kind == BLOOM and stored:
        values = sum(len(c) - c.null_count for c in row_groups)
        return build_sbbf(sbbf.column_filters(row_groups, fpp), stored, fpp, values)
    slices = None
    if kind == EXACT and version != INDEX_VERSION:
        slices = [row_slices(column) for column in row_groups]
    return build_prepared(kind, prepare(kind, row_groups, slices), fpp=fpp)


def build_sbbf(filters: Sequence[bytes], stored: str, fpp: float, values: int) -> bytes:
    """The version 2 bloom index of a data object whose row group ``i`` has the split-block
    filter ``filters[i]`` (its bitset), for a column stored as ``stored``
    (:func:`lake_core.indexes.sbbf.physical`) holding ``values`` non-null values."""
    blocks = [len(f) // sbbf.BLOCK_BYTES for f in filters]
    if any(len(f) % sbbf.BLOCK_BYTES for f in filters):
        raise ValueError("a split-block filter that is not whole blocks")
    typical = sorted(blocks)[len(blocks) // 2] if blocks else 0
    bits = max(0, min(MAX_BUCKET_BITS, (typical // SBBF_BUCKET_BLOCKS).bit_length() - 1))
    cols: dict[str, list[Any]] = {"bucket": [], "rg": [], "first": [], "blocks": [], "bits": []}
    for bucket in range(1 << bits):
        for rg, (bitset, z) in enumerate(zip(filters, blocks, strict=True)):
            first, end = sbbf.bucket_blocks(z, bits, bucket)
            cols["bucket"].append(bucket)
            cols["rg"].append(rg)
            cols["first"].append(first)
            cols["blocks"].append(z)
            cols["bits"].append(bitset[first * sbbf.BLOCK_BYTES : end * sbbf.BLOCK_BYTES])
    table = pa.table(
        {
            "bucket": pa.array(cols["bucket"], pa.int32()),
            "rg": pa.array(cols["rg"], pa.int32()),
            "first": pa.array(cols["first"], pa.int32()),
            "blocks": pa.array(cols["blocks"], pa.int32()),
            "bits": pa.array(cols["bits"], pa.large_binary()),
        }
    )
    header = {
        "format": INDEX_FORMAT,
        "version": SBBF_VERSION,
        "kind": BLOOM,
        "row_groups": len(filters),
        "entries": values,
        "fpp": fpp,
        "filter": "sbbf",
        "physical": stored,
        "bucket_bits": bits,
    }
    return _write(table, header, max(1, len(filters)), ["bucket", "rg"])


def check_build(kind: str, fpp: float) -> None:
    """UsageError unless ``kind`` is an index kind (and, for bloom, ``fpp`` a usable rate)."""
    if kind not in KINDS:
        raise UsageError(f"index kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == BLOOM and not (0.0 < fpp < 0.5):
        raise UsageError(f"a bloom index's false-positive rate is between 0 and 0.5, not {fpp}")


def prepare(
    kind: str,
    row_groups: Sequence[pa.Array[Any] | pa.ChunkedArray[Any]],
    slices: Sequence[np.ndarray[Any, Any]] | None = None,
) -> list[Any]:
    """What :func:`build_prepared` needs of each of ``row_groups`` (the indexed column's values
    in consecutive row groups of one object): :func:`prepare_canonical` of their
    :func:`canonical_rows` (and ``slices``, their :func:`row_slices`, for an exact index of
    version 2). Raises UsageError for a type indexes do not cover."""
    return prepare_canonical(kind, [canonical_rows(column) for column in row_groups], slices)


def row_slices(column: pa.Array[Any] | pa.ChunkedArray[Any]) -> np.ndarray[Any, Any]:
    """The slice (row // :data:`SLICE_ROWS`) of each non-null value of ``column`` (the values
    of one row group, in row order), as :func:`canonical_rows` keeps them. Read-only: without
    nulls, a view of one array shared by every call."""
    slices = _slice_numbers(len(column))
    if column.null_count:
        valid = pc.is_valid(column)
        if isinstance(valid, pa.ChunkedArray):
            valid = valid.combine_chunks()
        slices = slices[valid.to_numpy(zero_copy_only=False)]
    return slices


_SLICE_NUMBERS = np.zeros(0, np.uint32)
_SLICE_NUMBERS_LOCK = threading.Lock()
#: Row groups of more rows than this get slice numbers of their own, not kept (4 bytes a row).
_SHARED_SLICE_ROWS = 1 << 22


def _slice_numbers(rows: int) -> np.ndarray[Any, Any]:
    """``row // SLICE_ROWS`` for rows ``0 .. rows - 1``: a read-only view of a module-wide
    array, grown (under a lock, replaced whole: a reader holds an old array or a new one, both
    right) when a row group is larger than any before: a load asks this of every row group."""
    global _SLICE_NUMBERS
    numbers = _SLICE_NUMBERS
    if len(numbers) >= rows:
        return numbers[:rows]
    grown = np.repeat(np.arange(-(-rows // SLICE_ROWS), dtype=np.uint32), SLICE_ROWS)
    grown.flags.writeable = False
    if rows <= _SHARED_SLICE_ROWS:
        with _SLICE_NUMBERS_LOCK:
            if len(_SLICE_NUMBERS) < len(grown):  # never replaced by a shorter one
                _SLICE_NUMBERS = grown
    return grown[:rows]


def canonical_rows(column: pa.Array[Any] | pa.ChunkedArray[Any]) -> pa.Array[Any]:
    """The canonical form of ``column``'s values, nulls left out (never indexed)."""
    c = canonical(column)
    return c.drop_null() if c.null_count else c


def prepare_canonical(
    kind: str,
    values: Sequence[pa.Array[Any]],
    slices: Sequence[np.ndarray[Any, Any]] | None = None,
) -> list[Any]:
    """:func:`prepare` of row groups already in canonical form without nulls: for ``exact``
    the values (distinct, except int64, which the build deduplicates by sorting) — with
    ``slices`` (each value's :func:`row_slices`), tables of ``value`` and ``slice`` (distinct
    pairs, int64 again left to the build), for version 2; for ``bloom`` each row group's
    distinct hashes, sorted. Row groups prepared apart give what they give prepared
    together."""
    if kind == EXACT and slices is not None:
        return [_value_slices(v, s) for v, s in zip(values, slices, strict=True)]
    if kind == EXACT:
        return [v if pa.types.is_int64(v.type) else pc.unique(v) for v in values]
    if kind == BLOOM:
        if len(values) < 2 or sum(len(v) for v in values) <= PARALLEL_BLOOM_VALUES:
            return _bloom_inputs(values)
        # A large object's row groups in two halves on two threads (each hash call on its
        # thread's own DuckDB connection): the end of a load waits for its last object's index.
        half = len(values) // 2
        first, second = _halves(_bloom_inputs, (values[:half],), (values[half:],))
        return [*first, *second]
    raise UsageError(f"index kind must be one of {', '.join(KINDS)}, not {kind!r}")


def _halves(
    fn: Callable[..., Any], first: tuple[Any, ...], second: tuple[Any, ...]
) -> tuple[Any, Any]:
    """``fn(*first)`` on a thread of its own while this one runs ``fn(*second)``. The thread
    lives for this call only: one kept for the process would keep its DuckDB connection open,
    and a process that forks later (Spark's JVM launcher, in the test suite) crashed once with
    such threads alive."""
    with ThreadPoolExecutor(1, thread_name_prefix="lake-bloom") as ex:
        started = ex.submit(fn, *first)
        other = fn(*second)
        return started.result(), other


def _bloom_inputs(values: Sequence[pa.Array[Any]]) -> list[np.ndarray[Any, Any]]:
    """Each row group's distinct hashes, sorted. Distinct hashes stand for distinct values:
    the bits a filter sets depend on the hashes only (two values differ here only if they
    share all 64 bits, and then set the same bits anyway). One hash call for them all:
    DuckDB's per-call cost is paid once. Sorted, a row group's hashes are grouped by bucket
    (their top bits) already."""
    sizes = np.cumsum([0, *(len(v) for v in values)])
    every = hash64(values)
    return [_sorted_distinct(every[sizes[i] : sizes[i + 1]]) for i in range(len(values))]


def build_prepared(kind: str, prepared: Sequence[Any], *, fpp: float = DEFAULT_FPP) -> bytes:
    """The index object of a data object whose row groups were prepared (:func:`prepare`)
    into ``prepared``, one per row group, in order."""
    check_build(kind, fpp)
    if kind == EXACT:
        return _build_exact(list(prepared))
    return _build_bloom(list(prepared), fpp)


def _value_slices(values: pa.Array[Any], slices: np.ndarray[Any, Any]) -> pa.Table:
    """A row group's values with their slices: every pair for int64 (the build sorts and
    deduplicates them as codes), else the distinct pairs."""
    if len(values) != len(slices):
        raise ValueError(f"{len(values)} values and {len(slices)} slices")
    table = pa.table({"value": values, "slice": pa.array(slices, pa.uint32())})
    if pa.types.is_int64(values.type):
        return table
    return table.group_by(["value", "slice"], use_threads=False).aggregate([])


def _build_exact(parts: list[Any]) -> bytes:
    """The exact index of prepared ``parts``: arrays (version 1) or tables of value and slice
    (version 2)."""
    sliced = bool(parts) and isinstance(parts[0], pa.Table)
    if parts:
        table = _int_pairs(parts)
        if table is None:
            table = _sorted_pairs(parts)
    else:
        table = pa.table({"value": pa.array([], pa.null()), "rg": pa.array([], pa.int32())})
    header: dict[str, Any] = {
        "format": INDEX_FORMAT,
        "version": EXACT_VERSION if sliced else INDEX_VERSION,
        "kind": EXACT,
        "row_groups": len(parts),
        "entries": table.num_rows,
    }
    if sliced:
        header["slice_rows"] = SLICE_ROWS
    return _write(table, header, EXACT_GROUP_ROWS, ["value"])


def _int_pairs(parts: list[Any]) -> pa.Table | None:
    """The rows of an exact index over canonical int64 ``parts`` (one per row group, nulls
    left out; arrays, or tables of value and slice): the distinct (value, row group) pairs —
    (value, row group, slice) triples — sorted by value, then row group (then slice). None
    when the values are not int64 or their range is too wide for the coding below.

    Each pair is coded as one int64, ``(value - min) << b | rg`` (``2**b`` at least the
    number of row groups; a triple ``((value - min) << b | rg) << s | slice``), so that one
    unstable sort of integers both orders the pairs and, with a neighbour comparison,
    deduplicates them: about a third of the time of hashing each row group's values and
    stable-sorting every pair by value (:func:`_sorted_pairs`)."""
    sliced = bool(parts) and isinstance(parts[0], pa.Table)
    arrays = [p.column("value").combine_chunks() if sliced else p for p in parts]
    if not all(pa.types.is_int64(p.type) for p in arrays):
        return None
    values = [a.to_numpy() for a in arrays]  # no nulls: views, not copies
    slices = [p.column("slice").to_numpy() for p in parts] if sliced else []
    filled = [v for v in values if len(v)]
    if not filled:
        return None
    lo = min(int(v.min()) for v in filled)
    hi = max(int(v.max()) for v in filled)
    slice_shift = max(1, max(int(s.max()) for s in slices if len(s))).bit_length() if sliced else 0
    shift = max(1, len(parts) - 1).bit_length() + slice_shift
    width = (hi - lo).bit_length() + shift
    if width > 63:
        return None
    # Codes of up to 32 bits (value ranges of ids and keys below some millions) are sorted as
    # uint32: every pass over them, the sort's too, moves half the memory.
    code_type: Any = np.uint32 if width <= 32 else np.int64
    # Coded row group by row group into one array (each group's pass stays in the cache):
    # value - lo lies in [0, 2**(width - b)), exact even where the int64 subtraction wraps.
    codes: Any = np.empty(sum(len(v) for v in values), code_type)
    at = 0
    for i, v in enumerate(values):
        out = codes[at : at + len(v)]
        at += len(v)
        np.subtract(v, np.int64(lo), out=out, casting="unsafe")
        out <<= code_type(shift)
        out |= code_type(i << slice_shift)
        if sliced:
            out |= slices[i]
    codes.sort()
    keep = np.empty(len(codes), dtype=bool)
    keep[0] = True
    np.not_equal(codes[1:], codes[:-1], out=keep[1:])
    if not keep.all():
        codes = codes[keep]
    # The low bits (rg << s | slice) in 32 bits where they fit (they do up to some hundred
    # thousand row groups): half the memory to pass over.
    narrow: Any = np.uint32 if shift <= _TAIL32_BITS else np.uint64
    tail: Any = codes.astype(narrow)  # the low 32 (or 64) bits: the value's are cleared below
    tail &= narrow((1 << shift) - 1)
    codes >>= code_type(shift)
    value = codes.astype(np.int64, copy=False)
    value += np.int64(lo)
    columns = {
        "value": pa.array(value, pa.int64()),
        "rg": pa.array((tail >> narrow(slice_shift)).astype(np.int32), pa.int32()),
    }
    if sliced:
        tail &= narrow((1 << slice_shift) - 1)
        columns["slice"] = pa.array(tail.astype(np.uint32, copy=False), pa.uint32())
    return pa.table(columns)


def _sorted_pairs(parts: list[Any]) -> pa.Table:
    """:func:`_int_pairs` for any canonical type: each row group's distinct values (or
    value-slice pairs, sorted), then a stable sort by value (the pairs arrive in row-group
    order, so that orders them by (value, row group): a third of the time of a two-key sort).
    NumPy's sort for floats (NaN last); Arrow's sort_indices, stable too, for strings and
    bytes."""
    tables = []
    for i, part in enumerate(parts):
        if isinstance(part, pa.Table):
            # Distinct pairs (int64 parts arrive with every pair: the range was too wide
            # for :func:`_int_pairs`).
            pairs = part.group_by(["value", "slice"], use_threads=False).aggregate([])
            pairs = pairs.take(
                pc.sort_indices(pairs, [("value", "ascending"), ("slice", "ascending")])
            )
            rg = pa.array(np.full(pairs.num_rows, i, np.int32))
            tables.append(
                pa.table({"value": pairs.column("value"), "rg": rg, "slice": pairs.column("slice")})
            )
            continue
        distinct = pc.unique(part).drop_null()
        tables.append(
            pa.table({"value": distinct, "rg": pa.array(np.full(len(distinct), i, np.int32))})
        )
    table = pa.concat_tables(tables).combine_chunks()
    column = table.column("value")
    if pa.types.is_int64(column.type) or pa.types.is_float64(column.type):
        order: Any = np.argsort(column.to_numpy(), kind="stable")
    else:
        order = pc.sort_indices(column)
    return table.take(order)


def _bloom_size(n: int, fpp: float) -> tuple[int, int]:
    """(m bits, k hashes) for ``n`` distinct values at ``fpp``: the fewest hash functions whose
    filter is within :data:`BLOOM_SIZE_SLACK` of the smallest (see the module docstring)."""
    if n == 0:
        return 0, 0
    k, bits_per_value = _hashes_and_bits(fpp)
    m = math.ceil(n * bits_per_value)
    return max(64, -(-m // 64) * 64), k


@functools.cache
def _hashes_and_bits(fpp: float) -> tuple[int, float]:
    """(k, bits per value) of :func:`_bloom_size` at ``fpp``. With ``k`` functions and ``m/n``
    bits a value the rate is ``(1 - e^(-k n/m))^k``; solved for ``m/n`` at rate ``fpp``."""
    sizes = [(k, -k / math.log1p(-(fpp ** (1 / k)))) for k in range(1, 64)]
    # The smallest filter over whole numbers of functions (at high rates, above about 0.6,
    # no whole k comes within the slack of the real-valued optimum -ln p / ln² 2).
    smallest = min(bits for _, bits in sizes)
    return next((k, bits) for k, bits in sizes if bits <= smallest * (1 + BLOOM_SIZE_SLACK))


def _positions(hashes: np.ndarray[Any, Any], m: int, k: int) -> np.ndarray[Any, Any]:
    """The k bit positions of each hash, shape (len(hashes), k)."""
    h1 = (hashes & np.uint64(0xFFFFFFFF)).astype(np.uint64)
    h2 = ((hashes >> np.uint64(32)) | np.uint64(1)).astype(np.uint64)
    steps = np.arange(k, dtype=np.uint64)
    # h1 + i*h2 < 2**32 + k * 2**32: no overflow for any k a sane rate asks for.
    return (h1[:, None] + steps[None, :] * h2[:, None]) % np.uint64(m)


def bloom_bucket_bits(distinct_per_row_group: float) -> int:
    """How many top hash bits pick a value's bucket: enough that a lookup reads a small part
    of the filters, few enough that each bucket's filter per row group holds about
    :data:`BLOOM_BUCKET_VALUES` values or more (0: one bucket, small objects)."""
    buckets = int(distinct_per_row_group // BLOOM_BUCKET_VALUES)
    return 0 if buckets < 2 else min(MAX_BUCKET_BITS, buckets.bit_length() - 1)


def _bucket_of(hashes: np.ndarray[Any, Any], bits: int) -> np.ndarray[Any, Any]:
    if bits == 0:
        return np.zeros(len(hashes), dtype=np.int64)
    return (hashes >> np.uint64(64 - bits)).astype(np.int64)


def _sorted_distinct(hashes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``hashes`` sorted, each once."""
    out = np.sort(hashes)
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def _bucket_counts(sorted_hashes: np.ndarray[Any, Any], bits: int) -> np.ndarray[Any, Any]:
    """How many of ``sorted_hashes`` fall in each of the ``2**bits`` buckets (top bits)."""
    if bits == 0:
        return np.array([len(sorted_hashes)], dtype=np.int64)
    firsts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(64 - bits)
    return np.diff(np.searchsorted(sorted_hashes, firsts), append=len(sorted_hashes))


def _filters(
    hashes: np.ndarray[Any, Any],
    counts: np.ndarray[Any, Any],
    m: np.ndarray[Any, Any],
    k: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """The bloom filters of consecutive segments of ``hashes`` (``counts[s]`` hashes, ``m[s]``
    bits, a multiple of 64, and ``k[s]`` hash functions each), packed little-endian and laid
    end to end: segment ``s`` is bytes ``sum(m[:s]) // 8`` on. A large object's segments are
    split in two runs (each a whole number of bytes, since every m is a multiple of 64),
    filled on two threads and joined."""
    if len(hashes) <= PARALLEL_BLOOM_VALUES or len(counts) < 2:
        return _filter_run(hashes, counts, m, k)
    ends = np.cumsum(counts)
    half = int(np.searchsorted(ends, ends[-1] // 2)) + 1
    half = min(half, len(counts) - 1)
    cut = int(ends[half - 1])
    first, second = _halves(
        _filter_run,
        (hashes[:cut], counts[:half], m[:half], k[:half]),
        (hashes[cut:], counts[half:], m[half:], k[half:]),
    )
    return np.concatenate([first, second])


def _filter_run(
    hashes: np.ndarray[Any, Any],
    counts: np.ndarray[Any, Any],
    m: np.ndarray[Any, Any],
    k: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """:func:`_filters` on one thread. Bit ``i`` of a hash is ``(h1 + i·h2) mod m``
    (:func:`_positions`), computed for every segment at once as ``(h1 mod m) + i·(h2 mod m)``,
    reduced by a subtraction per step instead of a division."""
    total = int(m.sum())
    if total == 0:
        return np.zeros(0, np.uint8)
    # Positions are uint32 where every segment's m is below 2**31 (so that pos + step, both
    # below m, cannot wrap; a segment would need some 200 million values to exceed it):
    # a third of the time of uint64 arithmetic per step.
    unsigned = np.uint32 if int(m.max()) < _UINT32_BITS else np.uint64
    seg_m = np.repeat(m.astype(unsigned), counts)
    offset = np.repeat(np.concatenate(([0], np.cumsum(m)[:-1])), counts)
    pos: Any = (hashes & np.uint64(0xFFFFFFFF)).astype(unsigned) % seg_m
    step: Any = ((hashes >> np.uint64(32)) | np.uint64(1)).astype(unsigned) % seg_m
    filt = np.zeros(total, dtype=bool)
    used = k[counts > 0]
    every = int(used.min()) if len(used) else 0  # the hash functions every value has: no mask
    # Each value's k, needed only where segments differ in k (one rate, one k: not usually).
    seg_k = np.repeat(k, counts) if every < int(k.max()) else None
    at = np.empty(len(hashes), np.int64)
    wrapped = np.empty_like(pos)
    for i in range(int(k.max())):
        np.add(offset, pos, out=at, casting="unsafe")  # both below 2**63: exact
        filt[at if seg_k is None or i < every else at[seg_k > i]] = True
        pos += step
        # pos - m wraps around (unsigned) unless pos >= m: the smaller of the two is pos mod m.
        np.subtract(pos, seg_m, out=wrapped)
        np.minimum(pos, wrapped, out=pos)
    return np.packbits(filt, bitorder="little")


def _build_bloom(distinct: list[np.ndarray[Any, Any]], fpp: float) -> bytes:
    counts = [len(d) for d in distinct]
    bits_for_bucket = bloom_bucket_bits(sum(counts) / max(1, len(counts)))
    nbuckets = 1 << bits_for_bucket
    # Segment (rg, bucket): the row group's hashes in that bucket, in that order in ``hashes``.
    per_segment = np.array(
        [_bucket_counts(d, bits_for_bucket) for d in distinct], dtype=np.int64
    ).reshape(len(distinct), nbuckets)
    hashes = np.concatenate(distinct) if distinct else np.zeros(0, np.uint64)
    sized = [_bloom_size(int(n), fpp) for n in per_segment.ravel()]
    m = np.array([mk[0] for mk in sized], dtype=np.int64)
    k = np.array([mk[1] for mk in sized], dtype=np.int64)
    packed = _filters(hashes, per_segment.ravel(), m, k)
    starts = np.concatenate(([0], np.cumsum(m // 8)))
    cols: dict[str, list[Any]] = {"bucket": [], "rg": [], "k": [], "m": [], "bits": []}
    for bucket in range(nbuckets):
        for rg in range(len(distinct)):
            seg = rg * nbuckets + bucket
            cols["bucket"].append(bucket)
            cols["rg"].append(rg)
            cols["k"].append(int(k[seg]))
            cols["m"].append(int(m[seg]))
            cols["bits"].append(packed[starts[seg] : starts[seg + 1]].tobytes())
    table = pa.table(
        {
            "bucket": pa.array(cols["bucket"], pa.int32()),
            "rg": pa.array(cols["rg"], pa.int32()),
            "k": pa.array(cols["k"], pa.int32()),
            "m": pa.array(cols["m"], pa.int64()),
            "bits": pa.array(cols["bits"], pa.large_binary()),
        }
    )
    header = {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "kind": BLOOM,
        "row_groups": len(distinct),
        "entries": sum(counts),
        "fpp": fpp,
        "fingerprint": fingerprint(),
        "bucket_bits": bits_for_bucket,
    }
    # One Parquet row group per bucket: a lookup reads the footer and its values' buckets.
    return _write(table, header, max(1, len(counts)), ["bucket", "rg"])


def _open(source: pa.NativeFile | bytes) -> tuple[pq.ParquetFile, dict[str, Any]]:
    try:
        pf = pq.ParquetFile(pa.BufferReader(source) if isinstance(source, bytes) else source)
        raw = (pf.schema_arrow.metadata or {}).get(_META)
        if raw is None:
            raise CorruptObjectError("index", "a Parquet file without an index header")
        header = json.loads(raw)
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise CorruptObjectError("index", f"not an index object ({e})") from None
    if not isinstance(header, dict) or header.get("format") != INDEX_FORMAT:
        raise CorruptObjectError("index", "not an index header")
    return pf, header


def describe(source: pa.NativeFile | bytes) -> IndexInfo:
    """The header of an index object; CorruptObjectError for bytes that are not one."""
    _, h = _open(source)
    try:
        return IndexInfo(
            kind=str(h["kind"]),
            version=int(h["version"]),
            row_groups=int(h["row_groups"]),
            entries=int(h["entries"]),
            fpp=float(h["fpp"]) if h.get("fpp") is not None else None,
            fingerprint=h.get("fingerprint"),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptObjectError("index", f"malformed index header ({e})") from None


def _bytes_of(pf: pq.ParquetFile, groups: Sequence[int]) -> int:
    """The bytes a reader fetches for ``groups`` of ``pf``: their column chunks and the footer."""
    meta = pf.metadata
    chunks = sum(
        meta.row_group(g).column(c).total_compressed_size
        for g in groups
        for c in range(meta.num_columns)
    )
    return chunks + meta.serialized_size + 8


@dataclass(frozen=True)
class IndexHits:
    """A lookup's answer: the data row groups that may hold a value, and — from an exact index
    of version 2 — the row slices of each of them that do (slice ``k`` is rows ``k *
    slice_rows`` up to ``(k + 1) * slice_rows``); ``slices`` None: whole row groups."""

    groups: frozenset[int]
    slices: dict[int, frozenset[int]] | None = None
    slice_rows: int = 0

    def row_ranges(self, group: int) -> list[tuple[int, int]] | None:
        """The rows of data row group ``group`` that may hold a value, as sorted ``[start,
        stop)`` ranges (past the group's end for its last slice), or None: all of them."""
        if self.slices is None:
            return None
        found = sorted(self.slices.get(group, ()))
        out: list[tuple[int, int]] = []
        for k in found:
            start, stop = k * self.slice_rows, (k + 1) * self.slice_rows
            if out and out[-1][1] == start:
                out[-1] = (out[-1][0], stop)
            else:
                out.append((start, stop))
        return out


def index_row_groups(
    kind: str,
    source: pa.NativeFile | bytes,
    values: pa.Array[Any],
    *,
    read: list[int] | None = None,
) -> frozenset[int] | None:
    """:func:`index_lookup`'s row groups."""
    hits = index_lookup(kind, source, values, read=read)
    return None if hits is None else hits.groups


def index_lookup(
    kind: str,
    source: pa.NativeFile | bytes,
    values: pa.Array[Any],
    *,
    read: list[int] | None = None,
) -> IndexHits | None:
    """The data row groups (and, where the index records them, row slices) that may hold one
    of ``values`` (literals already cast to the column's type; nulls ignored: ``=`` and IN
    never match a null), or None when this index cannot answer (another kind or hash
    fingerprint, a newer version). Reads as little of ``source`` as it can; ``read`` (if
    given) gets the bytes it needed appended (the footer and the column chunks of the index
    row groups read). CorruptObjectError for bytes that are not an index object."""
    pf, header = _open(source)
    if read is not None:
        read.append(pf.metadata.serialized_size + 8)
    version = header.get("version")
    if header.get("kind") != kind or not (
        version == INDEX_VERSION
        or (kind == BLOOM and version == SBBF_VERSION)
        or (kind == EXACT and version == EXACT_VERSION)
    ):
        return None
    wanted = pc.unique(canonical(values)).drop_null()
    if pa.types.is_floating(wanted.type) and pc.any(pc.is_nan(wanted)).as_py():
        # Parquet statistics leave NaN out, so an exact lookup of NaN could skip the index
        # row group holding it: NaN is never decided (the caller reads unpruned).
        return None
    sliced = kind == EXACT and version == EXACT_VERSION
    try:
        slice_rows = int(header["slice_rows"]) if sliced else 0
        if sliced and slice_rows < 1:
            raise ValueError(f"slices of {slice_rows} rows")
        if len(wanted) == 0:
            return IndexHits(frozenset(), {} if sliced else None, slice_rows)
        if kind == EXACT:
            return _lookup_exact(pf, wanted, read, slice_rows)
        if kind == BLOOM:
            if version == INDEX_VERSION and header.get("fingerprint") != fingerprint():
                return None
            return IndexHits(_lookup_bloom(pf, wanted, header, read))
    except ImportError:  # the hash's library missing (xxhash, DuckDB): cannot tell
        return None
    except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise CorruptObjectError("index", f"malformed index object ({e})") from None
    return None


def _lookup_exact(
    pf: pq.ParquetFile, wanted: pa.Array[Any], read: list[int] | None = None, slice_rows: int = 0
) -> IndexHits:
    meta = pf.metadata
    if meta.num_rows == 0:
        return IndexHits(frozenset(), {} if slice_rows else None, slice_rows)
    value_type = pf.schema_arrow.field("value").type
    if value_type != wanted.type:
        try:
            wanted = wanted.cast(value_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise ValueError(f"index values are {value_type}, lookups {wanted.type}") from None
    keys: list[Any] = sorted(v for v in wanted.to_pylist() if v is not None)
    groups = []
    for g in range(meta.num_row_groups):
        st = meta.row_group(g).column(0).statistics
        if st is None or not st.has_min_max:
            groups.append(g)
            continue
        lo: Any = st.min
        hi: Any = st.max
        if isinstance(lo, bytes) and keys and isinstance(keys[0], str):
            lo, hi = lo.decode(), hi.decode()
        i = bisect.bisect_left(keys, lo)  # the smallest key >= lo: O(log n) for long IN lists
        if i < len(keys) and keys[i] <= hi:
            groups.append(g)
    if not groups:
        return IndexHits(frozenset(), {} if slice_rows else None, slice_rows)
    if read is not None:
        read.append(_bytes_of(pf, groups) - pf.metadata.serialized_size - 8)
    columns = ["value", "rg", "slice"] if slice_rows else ["value", "rg"]
    table = pf.read_row_groups(groups, columns=columns)
    hits = table.filter(pc.is_in(table.column("value"), value_set=wanted))
    rgs: list[Any] = hits.column("rg").to_pylist()
    if not slice_rows:
        return IndexHits(frozenset(int(x) for x in rgs))
    slices: dict[int, set[int]] = {}
    for rg, k in zip(rgs, hits.column("slice").to_pylist(), strict=True):
        if rg is None or k is None:
            raise ValueError("an exact index entry without its row group or slice")
        slices.setdefault(int(rg), set()).add(int(k))
    return IndexHits(frozenset(slices), {g: frozenset(v) for g, v in slices.items()}, slice_rows)


def _lookup_bloom(
    pf: pq.ParquetFile,
    wanted: pa.Array[Any],
    header: dict[str, Any],
    read: list[int] | None = None,
) -> frozenset[int]:
    rgs, maybe = _bloom_matrix(pf, wanted, header, read)
    hits: list[bool] = np.asarray(maybe.any(axis=0), dtype=bool).tolist()
    return frozenset(rg for rg, hit in zip(rgs, hits, strict=True) if hit)


def _bloom_matrix(
    pf: pq.ParquetFile, wanted: pa.Array[Any], header: dict[str, Any], read: list[int] | None = None
) -> tuple[list[int], np.ndarray[Any, Any]]:
    """The data row groups of a bloom index, and for each of ``wanted`` (canonical) and each
    row group whether the filter of the value's bucket says "maybe": shape (len(wanted),
    row groups). Reads only the Parquet row groups of the buckets the values fall in."""
    n_rgs = int(header["row_groups"])
    maybe = np.zeros((len(wanted), n_rgs), dtype=bool)
    if n_rgs == 0 or len(wanted) == 0:
        return [], maybe
    if header.get("version") == SBBF_VERSION:
        return _sbbf_matrix(pf, wanted, header, maybe, read)
    hashes = hash64(wanted)
    buckets = _bucket_of(hashes, int(header.get("bucket_bits", 0)))
    for bucket in sorted({int(b) for b in buckets}):
        if bucket >= pf.metadata.num_row_groups:
            raise ValueError(f"bucket {bucket} of {pf.metadata.num_row_groups}")
        part = pf.read_row_group(bucket, columns=["rg", "k", "m", "bits"])
        if read is not None:
            read.append(_bytes_of(pf, [bucket]) - pf.metadata.serialized_size - 8)
        rows = np.flatnonzero(buckets == bucket)
        for rg, k, m, blob in zip(
            part.column("rg").to_pylist(),
            part.column("k").to_pylist(),
            part.column("m").to_pylist(),
            part.column("bits").to_pylist(),
            strict=True,
        ):
            if not m or rg is None or k is None or blob is None:
                if m is None or rg is None:
                    raise ValueError("a bloom filter row without its size or row group")
                continue
            packed = np.frombuffer(blob, dtype=np.uint8)
            pos = _positions(hashes[rows], int(m), int(k))
            set_bits = (packed[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1
            maybe[rows, int(rg)] = np.all(set_bits == 1, axis=1)
    return list(range(n_rgs)), maybe


def _sbbf_matrix(
    pf: pq.ParquetFile,
    wanted: pa.Array[Any],
    header: dict[str, Any],
    maybe: np.ndarray[Any, Any],
    read: list[int] | None = None,
) -> tuple[list[int], np.ndarray[Any, Any]]:
    """:func:`_bloom_matrix` of a version 2 index, filling ``maybe``."""
    stored = str(header["physical"])
    bits = int(header["bucket_bits"])
    hashes = np.array([sbbf.hash_of(v, stored) for v in wanted.to_pylist()], dtype=np.uint64)
    buckets = _bucket_of(hashes, bits)
    for bucket in sorted({int(b) for b in buckets}):
        if bucket >= pf.metadata.num_row_groups:
            raise ValueError(f"bucket {bucket} of {pf.metadata.num_row_groups}")
        part = pf.read_row_group(bucket, columns=["rg", "first", "blocks", "bits"])
        if read is not None:
            read.append(_bytes_of(pf, [bucket]) - pf.metadata.serialized_size - 8)
        rows = np.flatnonzero(buckets == bucket)
        for rg, first, blocks, blob in zip(
            part.column("rg").to_pylist(),
            part.column("first").to_pylist(),
            part.column("blocks").to_pylist(),
            part.column("bits").to_pylist(),
            strict=True,
        ):
            if rg is None or first is None or blocks is None or blob is None:
                raise ValueError("a bloom filter row without its blocks or row group")
            if len(blob) % sbbf.BLOCK_BYTES:
                raise ValueError("a bloom filter row that is not whole blocks")
            maybe[rows, int(rg)] = sbbf.may_contain_all(blob, int(first), int(blocks), hashes[rows])
    return list(range(maybe.shape[1])), maybe


def bloom_answers(source: pa.NativeFile | bytes, values: pa.Array[Any]) -> np.ndarray[Any, Any]:
    """For each of ``values`` (the column's type, no nulls) and each data row group, whether a
    bloom index says "maybe": a matrix (len(values), row groups), for measuring its
    false-positive rate. CorruptObjectError for bytes that are not a bloom index this release
    can read (version 2, or version 1 of this hash fingerprint)."""
    pf, header = _open(source)
    if header.get("kind") != BLOOM or (
        header.get("version") != SBBF_VERSION and header.get("fingerprint") != fingerprint()
    ):
        raise CorruptObjectError("index", "not a bloom index of this lakepool's hash")
    return _bloom_matrix(pf, canonical(values), header)[1]
