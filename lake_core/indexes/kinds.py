"""Index objects' bytes, and lookups in them: the ``exact`` and ``bloom`` kinds.

An index object describes one column of one data object, row group by row group (the data
object's own row groups: a lookup answers which of them may hold a value). It is one Parquet
file whose key-value metadata ``lakepool.index`` holds JSON: ``format`` (``lakepool.index``),
``version`` (1), ``kind``, ``row_groups`` (of the data object), ``entries``, ``domain``
(:func:`lake_core.indexes.canonical.domain` of the column's type) and, for bloom, ``fpp`` and
the hash ``fingerprint`` (:mod:`lake_core.indexes.hashing`); ``null`` where a kind has none.

``exact``: one row per distinct (canonical value, row group) pair, columns ``value`` (the
canonical type) and ``rg`` (int32), sorted by value then row group, in index row groups of
:data:`EXACT_GROUP_ROWS` entries with Parquet statistics, zstd. A lookup reads the footer, then
only the index row groups whose min/max can hold a looked-up value (about one per value; an
index row group without statistics is always read). Its answer is exact: the row groups that
hold a value, no more.

``bloom``: one row per data row group, columns ``rg`` (int32), ``k`` (int32: hash functions),
``m`` (int64: bits) and ``bits`` (large_binary; bit ``j`` is bit ``j % 8`` of byte ``j // 8``),
a standard Bloom filter over the 64-bit hashes of the row group's distinct non-null canonical
values (distinct by hash: the same set), sized for their number ``n`` at the rate ``p``:
``m = ceil(-n ln p / ln² 2)`` rounded up to a multiple of 64, ``k = max(1, round(m/n · ln 2))``;
a value with hash ``h`` sets bits ``(h1 + i·h2) mod m`` for ``i < k``, ``h1`` the low 32 bits
of ``h``, ``h2`` the high 32 bits with the lowest bit set. "No" is certain. For a value a row
group does not hold, "maybe" comes with probability about ``(1 - e^(-kn/m))^k ≈ p`` (the
rounding of ``m`` up only lowers it; measured 0.9–1.0 % at p = 0.01, see
``bench/index_kinds_bench.py``); a lookup of ``v`` values over ``g`` row groups reads about
``g·v·p`` row groups needlessly. A row group without a non-null value has ``m = 0``: "no".

NaN is in no index (``=`` never pins it the same way in every engine): a lookup of NaN cannot
be decided. Nulls are in no index either, and a lookup ignores null literals (``=`` and ``IN``
never match a null).

Invariant of both kinds: :func:`index_row_groups` never omits a row group that holds one of
the values. When it cannot decide (another kind, domain or hash fingerprint, an unknown
version, a NaN) it returns None and the caller reads the object unpruned; bytes that are not
an index object raise :class:`~lake_core.errors.CorruptObjectError`.
"""

from __future__ import annotations

import bisect
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lake_core.errors import CorruptObjectError, LakeError, UsageError
from lake_core.indexes.canonical import INDEXABLE, canonical, domain
from lake_core.indexes.hashing import fingerprint, hash64

EXACT = "exact"
BLOOM = "bloom"
KINDS = (EXACT, BLOOM)
DEFAULT_FPP = 0.01

INDEX_FORMAT = "lakepool.index"
INDEX_VERSION = 1
#: The key-value metadata key of an index object's header.
HEADER_KEY = b"lakepool.index"
#: Entries per index row group of an exact index: a lookup of one value reads about one such
#: group (~100–300 KB for text), and the footer stays small (one statistics entry per group).
EXACT_GROUP_ROWS = 32 * 1024
#: Values hashed per DuckDB call when building a bloom index (bounds the copy it needs).
HASH_BATCH = 1 << 20

__all__ = [
    "BLOOM",
    "DEFAULT_FPP",
    "EXACT",
    "EXACT_GROUP_ROWS",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "KINDS",
    "IndexInfo",
    "bloom_size",
    "build_index",
    "describe",
    "index_row_groups",
]

if TYPE_CHECKING:
    from typing import TypeAlias

    #: Where an index object's bytes come from: an open file (read in ranges) or the bytes.
    Source: TypeAlias = pa.NativeFile | bytes | bytearray | memoryview | pa.Buffer
    #: One row group's values of the indexed column.
    Column: TypeAlias = pa.Array[Any] | pa.ChunkedArray[Any]


@dataclass(frozen=True)
class IndexInfo:
    """What an index object's header says. ``fpp`` and ``fingerprint`` are None for exact;
    ``domain`` is None for an index of an object without row groups."""

    kind: str
    version: int
    row_groups: int
    entries: int
    fpp: float | None
    fingerprint: str | None
    domain: str | None


# --- building ---------------------------------------------------------------------------------


def build_index(kind: str, row_groups: Sequence[Column], *, fpp: float = DEFAULT_FPP) -> bytes:
    """The index object (Parquet bytes) of a data object whose indexed column holds
    ``row_groups[i]`` in its row group ``i``. Raises UsageError for an unknown kind, a rate
    outside (0, 1), or values of a type indexes do not cover (or of two domains)."""
    if kind not in KINDS:
        raise UsageError(f"index kind must be one of {', '.join(KINDS)}, not {kind!r}")
    dom = _domain_of(row_groups)
    if kind == EXACT:
        return _build_exact(row_groups, dom)
    if not 0.0 < fpp < 1.0:
        raise UsageError(f"a bloom index's false-positive rate must be in (0, 1), not {fpp}")
    return _build_bloom(row_groups, dom, fpp)


def _domain_of(row_groups: Sequence[Column]) -> str | None:
    domains = {domain(values.type) for values in row_groups}
    if None in domains:
        bad = next(v.type for v in row_groups if domain(v.type) is None)
        raise UsageError(f"values of type {bad} cannot be indexed: indexes cover {INDEXABLE}")
    if len(domains) > 1:
        raise UsageError(f"an index covers values of one type, not {sorted(map(str, domains))}")
    return next(iter(domains), None)


def _value_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return t.value_type  # type: ignore[no-any-return]
    return t


def _indexed(values: Column) -> pa.Array[Any]:
    """``values``' canonical form without nulls and NaN (what an index holds)."""
    arr = canonical(values)
    if pa.types.is_floating(arr.type):
        arr = arr.filter(pc.invert(pc.is_nan(arr)), null_selection_behavior="drop")
    elif arr.null_count:
        arr = arr.drop_null()
    return arr


def _build_exact(row_groups: Sequence[Column], dom: str | None) -> bytes:
    values, rgs = [], []
    for i, group in enumerate(row_groups):
        distinct = pc.unique(_indexed(group))
        values.append(distinct)
        rgs.append(np.full(len(distinct), i, dtype=np.int32))
    if values:
        value = pa.concat_arrays(values)
        # Stable: the row groups are already ascending, so this orders by (value, rg).
        order = pc.sort_indices(value)
        table = pa.table(
            {
                "value": value.take(order),
                "rg": pa.array(np.concatenate(rgs)[order.to_numpy()], pa.int32()),
            }
        )
    else:
        table = pa.table({"value": pa.array([], pa.int64()), "rg": pa.array([], pa.int32())})
    if row_groups and table.num_rows == 0:
        empty = canonical(pa.array([], _value_type(row_groups[0].type)))
        table = pa.table({"value": empty, "rg": pa.array([], pa.int32())})
    header = _header(EXACT, len(row_groups), table.num_rows, dom, None, None)
    return _write(table, header, EXACT_GROUP_ROWS, dictionary=["rg"])


def bloom_size(n: int, fpp: float) -> tuple[int, int]:
    """(m bits, k hash functions) of a bloom filter for ``n`` distinct values at ``fpp``."""
    if n == 0:
        return 0, 0
    m = math.ceil(-n * math.log(fpp) / math.log(2) ** 2)
    m = -(-m // 64) * 64
    return m, max(1, round(m / n * math.log(2)))


def _positions(hashes: np.ndarray[Any, Any], m: int, k: int) -> np.ndarray[Any, Any]:
    """The ``k`` bit positions of each hash, shape ``(len(hashes), k)``."""
    h1 = hashes & np.uint64(0xFFFFFFFF)
    h2 = (hashes >> np.uint64(32)) | np.uint64(1)
    steps = np.arange(k, dtype=np.uint64)
    # h1 + i·h2 < 2**32 · (k + 1): no uint64 overflow for any k below 2**31.
    return (h1[:, None] + steps[None, :] * h2[:, None]) % np.uint64(m)


def _distinct_hashes(row_groups: Sequence[Column]) -> Iterator[np.ndarray[Any, Any]]:
    """Per row group, the distinct hashes of its indexed values; hashed in batches of about
    :data:`HASH_BATCH` values so DuckDB's per-call cost is paid rarely."""
    pending: list[pa.Array[Any]] = []
    size = 0

    def flush() -> Iterator[np.ndarray[Any, Any]]:
        nonlocal size
        lengths = [len(p) for p in pending]
        nonempty = [p for p in pending if len(p)]
        hashes = hash64(pa.concat_arrays(nonempty)) if nonempty else np.zeros(0, np.uint64)
        start = 0
        for n in lengths:
            yield np.unique(hashes[start : start + n])
            start += n
        pending.clear()
        size = 0

    for group in row_groups:
        arr = _indexed(group)
        pending.append(arr)
        size += len(arr)
        if size >= HASH_BATCH:
            yield from flush()
    if pending:
        yield from flush()


def _build_bloom(row_groups: Sequence[Column], dom: str | None, fpp: float) -> bytes:
    ks, ms, blobs = [], [], []
    entries = 0
    for hashes in _distinct_hashes(row_groups):
        m, k = bloom_size(len(hashes), fpp)
        bits = np.zeros(m, dtype=bool)
        if m:
            bits[_positions(hashes, m, k).ravel()] = True
        ks.append(k)
        ms.append(m)
        blobs.append(np.packbits(bits, bitorder="little").tobytes())
        entries += len(hashes)
    table = pa.table(
        {
            "rg": pa.array(np.arange(len(ks), dtype=np.int32)),
            "k": pa.array(ks, pa.int32()),
            "m": pa.array(ms, pa.int64()),
            "bits": pa.array(blobs, pa.large_binary()),
        }
    )
    header = _header(BLOOM, len(row_groups), entries, dom, fpp, fingerprint())
    # Filter bits are random: compressing them gains nothing; one index row group holds all.
    return _write(
        table, header, max(1, table.num_rows), dictionary=False, compression={"bits": "none"}
    )


def _header(
    kind: str, row_groups: int, entries: int, dom: str | None, fpp: float | None, fp: str | None
) -> dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "kind": kind,
        "row_groups": row_groups,
        "entries": entries,
        "domain": dom,
        "fpp": fpp,
        "fingerprint": fp,
    }


def _write(
    table: pa.Table,
    header: dict[str, Any],
    group_rows: int,
    *,
    dictionary: bool | list[str],
    compression: dict[str, str] | None = None,
) -> bytes:
    table = table.replace_schema_metadata({HEADER_KEY: json.dumps(header).encode()})
    codecs = {name: "zstd" for name in table.column_names}
    codecs.update(compression or {})
    # (Per-column codecs and dictionaries are documented; pyarrow's stubs know only one.)
    options: dict[str, Any] = {"compression": codecs, "use_dictionary": dictionary}
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=group_rows, write_statistics=True, **options)
    return sink.getvalue()


# --- reading ----------------------------------------------------------------------------------


def _open(source: Source, key: str) -> tuple[pq.ParquetFile, dict[str, Any]]:
    """The Parquet file (footer read) and its index header; CorruptObjectError otherwise."""
    if not isinstance(source, pa.NativeFile):
        source = pa.BufferReader(source)
    try:
        pf = pq.ParquetFile(source)
        raw = (pf.metadata.metadata or {}).get(HEADER_KEY)
    except LakeError:
        raise  # the store failed under the file: not a verdict on its bytes
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptObjectError(key, f"not an index object (not Parquet: {e})") from None
    if raw is None:
        raise CorruptObjectError(key, "not an index object (no lakepool.index header)")
    try:
        header = json.loads(raw)
    except ValueError as e:
        raise CorruptObjectError(key, f"unreadable index header ({e})") from None
    if not isinstance(header, dict) or header.get("format") != INDEX_FORMAT:
        raise CorruptObjectError(key, "not an index object (no lakepool.index format)")
    if not isinstance(header.get("version"), int) or not isinstance(header.get("kind"), str):
        raise CorruptObjectError(key, "index header without a version or kind")
    return pf, header


def _info(header: dict[str, Any], key: str) -> IndexInfo:
    try:
        row_groups, entries = header["row_groups"], header["entries"]
        fpp, fp, dom = header.get("fpp"), header.get("fingerprint"), header.get("domain")
        if (
            not (isinstance(row_groups, int) and isinstance(entries, int))
            or min(row_groups, entries) < 0
        ):
            raise ValueError("row_groups and entries must be counts")
        if fpp is not None and not (isinstance(fpp, float) and 0.0 < fpp < 1.0):
            raise ValueError(f"bad fpp {fpp!r}")
        if not (fp is None or isinstance(fp, str)) or not (dom is None or isinstance(dom, str)):
            raise ValueError("fingerprint and domain must be strings")
    except (KeyError, ValueError) as e:
        raise CorruptObjectError(key, f"malformed index header ({e})") from None
    return IndexInfo(
        kind=header["kind"],
        version=header["version"],
        row_groups=row_groups,
        entries=entries,
        fpp=fpp,
        fingerprint=fp,
        domain=dom,
    )


def describe(source: Source, *, key: str = "index") -> IndexInfo:
    """What index object ``source`` says of itself (reads its footer only); raises
    CorruptObjectError (naming ``key``) for bytes that are not an index object."""
    _, header = _open(source, key)
    return _info(header, key)


def index_row_groups(
    kind: str, source: Source, values: Column, *, key: str = "index"
) -> frozenset[int] | None:
    """The row groups of the indexed data object that may hold one of ``values`` (literals
    already cast to the column's type; nulls ignored), or None when this index cannot decide
    (another kind, domain or hash fingerprint, an unknown version, a NaN literal). Never omits
    a row group that holds a value; exact answers hold no others. Reads as little of
    ``source`` as it can (exact: the footer, then the index row groups whose statistics admit
    a value; bloom: the footer and the filters). Raises CorruptObjectError (naming ``key``)
    for bytes that are not an index object or contradict their header."""
    pf, header = _open(source, key)
    if header["version"] != INDEX_VERSION or header["kind"] != kind or kind not in KINDS:
        return None
    info = _info(header, key)
    if info.row_groups == 0:
        return frozenset()
    if domain(values.type) != info.domain:
        return None
    wanted = canonical(values).drop_null()
    if pa.types.is_floating(wanted.type) and pc.any(pc.is_nan(wanted)).as_py():
        return None
    wanted = pc.unique(wanted)
    if len(wanted) == 0:
        return frozenset()
    try:
        if kind == EXACT:
            found = _lookup_exact(pf, wanted)
        else:
            if info.fingerprint != fingerprint():
                return None
            found = _lookup_bloom(pf, wanted, info.row_groups)
    except LakeError:
        raise
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as e:
        raise CorruptObjectError(key, f"unreadable index object ({e})") from None
    if any(g < 0 or g >= info.row_groups for g in found):
        raise CorruptObjectError(key, f"index names a row group beyond {info.row_groups}")
    return found


def _lookup_exact(pf: pq.ParquetFile, wanted: pa.Array[Any]) -> frozenset[int]:
    meta = pf.metadata
    column = pf.schema_arrow.get_field_index("value")
    if column < 0 or pf.schema_arrow.get_field_index("rg") < 0:
        raise ValueError("an exact index has columns value and rg")
    keys: list[Any] = sorted(wanted.to_pylist())
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            groups.append(g)  # no statistics: it may hold anything
            continue
        lo: Any = stats.min
        hi: Any = stats.max
        if isinstance(keys[0], str) and isinstance(lo, bytes):
            lo, hi = lo.decode(), hi.decode()
        i = bisect.bisect_left(keys, lo)
        if i < len(keys) and keys[i] <= hi:
            groups.append(g)
    if not groups:
        return frozenset()
    table = pf.read_row_groups(groups, columns=["value", "rg"])
    value = table.column("value")
    if value.type != wanted.type:
        value = value.cast(wanted.type)
    hits = table.column("rg").filter(pc.is_in(value, value_set=wanted))
    return frozenset(int(g) for g in np.unique(hits.to_numpy()))


def _lookup_bloom(pf: pq.ParquetFile, wanted: pa.Array[Any], row_groups: int) -> frozenset[int]:
    table = pf.read(columns=["rg", "k", "m", "bits"])
    rgs = table.column("rg").to_numpy()
    if len(rgs) != row_groups or not np.array_equal(rgs, np.arange(row_groups)):
        raise ValueError(f"a bloom index has one filter per row group, 0..{row_groups - 1}")
    hashes = hash64(wanted)
    if table.column("k").null_count or table.column("m").null_count:
        raise ValueError("a bloom filter without k or m")
    ks = table.column("k").to_numpy().astype(np.int64)
    ms = table.column("m").to_numpy().astype(np.int64)
    blobs = table.column("bits").combine_chunks()
    out = []
    for g in range(row_groups):
        m, k = int(ms[g]), int(ks[g])
        if m == 0:
            continue  # no non-null value in this row group
        packed = np.frombuffer(blobs[g].as_buffer(), dtype=np.uint8)
        if m < 0 or k < 1 or len(packed) * 8 != m:
            raise ValueError(f"filter {g} has {len(packed)} bytes for m={m}, k={k}")
        pos = _positions(hashes, m, k)
        bit = (packed[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1
        if bit.all(axis=1).any():
            out.append(g)
    return frozenset(out)
