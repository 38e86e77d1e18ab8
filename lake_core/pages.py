"""Reading some rows of a row group: the pages that hold them, not the whole group.

Every object lakepool writes has data pages of at most :data:`lake_core.encode.PAGE_ROWS` rows
and Parquet's page index, whose *offset index* gives each page of a column chunk its file
offset, size and first row. When the read planner knows which rows of a row group can match
(an exact index records the row slice of every value: :mod:`lake_core.indexes.kinds`), a reader
here fetches, for each column read, the chunk's dictionary page (if any) and the data pages
that overlap those rows, lays them out as a small Parquet file of one row group — pages copied
as they are, a footer of our own that lists them — and lets pyarrow decode it. pyarrow (Arrow
C++) cannot read part of a row group itself: apache/arrow#45284.

Invariants:

- The rows returned are exactly the wanted rows of the row group, in row order, with the
  values pyarrow's reading of the whole group gives them (tests/core/test_pages.py compares the
  two over every flat type, nulls, dictionary and plain pages, local disk and S3).
- Only flat columns (a top-level field stored as one leaf) are read by pages: a nested column's
  values do not map to rows one to one. :func:`readable_by_pages` says whether a read can be;
  the caller reads the whole group otherwise. So does a file without offset indexes (written
  before page indexes, or by another writer): nothing here guesses where pages are.
- Columns whose pages start at different rows (a dictionary that fell back to plain encoding
  mid-page) are decoded apart, each from its own small file; the rows are aligned by position.
"""

from __future__ import annotations

import base64
import bisect
import functools
import io
import struct
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.thrift_compact import (
    BINARY,
    I32,
    LIST,
    STRUCT,
    StructWriter,
    ThriftError,
    get_varint,
    int_field,
    list_head,
    list_header,
    skip_struct,
    struct_fields,
)

MAGIC = b"PAR1"

# Field ids in parquet.thrift.
_FILE_SCHEMA, _FILE_ROW_GROUPS = 2, 4
_SE_REPETITION, _SE_NUM_CHILDREN = 3, 5
_REPEATED = 2
_RG_COLUMNS, _RG_NUM_ROWS = 1, 3
_CC_META, _CC_OI_OFFSET, _CC_OI_LENGTH = 3, 4, 5
_CM_CODEC, _CM_COMPRESSED, _CM_DATA_PAGE, _CM_DICTIONARY_PAGE = 4, 7, 9, 11
_CM_ENCODING_STATS = 13
_ES_PAGE_TYPE, _ES_ENCODING, _ES_COUNT = 1, 2, 3
_PH_TYPE, _PH_DATA_V1, _PH_DATA_V2 = 1, 5, 8
_V1_ENCODING, _V2_ENCODING = 2, 4
_DATA_PAGE, _DATA_PAGE_V2 = 0, 3
_DICTIONARY_ENCODINGS = (2, 8)  # PLAIN_DICTIONARY, RLE_DICTIONARY
_OI_PAGES = 1
_PL_OFFSET, _PL_SIZE, _PL_FIRST_ROW = 1, 2, 3

#: Ranged reads of one row group's pages at once (on S3 each is a GET; on local disk one
#: thread reads them all).
FETCH_THREADS = 16
#: Walked footers kept in a process (:func:`read_layout`).
LAYOUTS_KEPT = 32


class PageLayoutError(ValueError):
    """A footer or offset index that is not what a page read expects."""


@dataclass(frozen=True)
class PageLocation:
    """One data page of a column chunk: its file offset, size (header included) and first
    row (in its row group)."""

    offset: int
    size: int
    first_row: int


@dataclass(frozen=True)
class ChunkLayout:
    """One column chunk as its footer describes it: where its dictionary page (None: none) and
    first data page start, its size, its offset index (None: none), and the bytes of its
    ColumnMetaData fields 1-4 (type, encodings, path, codec), copied into a small file's
    footer as they are."""

    dictionary_offset: int | None
    data_offset: int
    compressed_size: int
    offset_index: tuple[int, int] | None
    head: bytes
    #: Data pages that refer to the dictionary page, from the chunk's encoding statistics
    #: (None: not recorded). Arrow's writer encodes the first pages with the dictionary and
    #: falls back to plain for the rest once it outgrows its limit, so these are the first
    #: pages: a read predicts from it whether it needs the dictionary (and checks the pages'
    #: headers: :func:`read_rows`).
    dictionary_pages: int | None = None

    @property
    def start(self) -> int:
        return self.dictionary_offset if self.dictionary_offset is not None else self.data_offset


@dataclass(frozen=True)
class GroupLayout:
    rows: int
    chunks: tuple[ChunkLayout, ...]


@dataclass(frozen=True)
class FileLayout:
    """A footer walked for page reads: each row group's chunks (walked when first asked for:
    a lookup reads a few groups of hundreds), and each leaf's schema element (encoded, as
    the file has it) with whether it is a top-level leaf (flat)."""

    groups: Sequence[GroupLayout]
    leaves: tuple[bytes, ...]
    flat: tuple[bool, ...]
    names: tuple[str, ...]

    @functools.cached_property
    def flat_leaves(self) -> dict[str, int]:
        """Each flat leaf's name and index."""
        return {name: i for i, name in enumerate(self.names) if self.flat[i]}


def _chunk(data: bytes, pos: int) -> tuple[ChunkLayout, int]:
    fields, end = struct_fields(data, pos)
    meta = fields.get(_CC_META)
    if meta is None or meta[0] != STRUCT:
        raise PageLayoutError("a column chunk without metadata in the footer")
    inner, _ = struct_fields(data, meta[1])
    codec = inner.get(_CM_CODEC)
    data_offset = int_field(data, inner, _CM_DATA_PAGE)
    size = int_field(data, inner, _CM_COMPRESSED)
    if codec is None or data_offset is None or size is None:
        raise PageLayoutError("a column chunk's metadata lacks its codec, pages or size")
    if list(inner)[:4] != [1, 2, 3, 4]:  # the prefix copied below must be exactly those
        raise PageLayoutError("a column chunk's metadata does not start with its fields 1-4")
    dictionary_pages = None
    stats = inner.get(_CM_ENCODING_STATS)
    if stats is not None and stats[0] == LIST:
        dictionary_pages = 0
        n, _, at = list_head(data, stats[1])
        for _ in range(n):
            entry, at = struct_fields(data, at)
            page_type = int_field(data, entry, _ES_PAGE_TYPE)
            if page_type in (_DATA_PAGE, _DATA_PAGE_V2) and (
                int_field(data, entry, _ES_ENCODING) in _DICTIONARY_ENCODINGS
            ):
                dictionary_pages += int_field(data, entry, _ES_COUNT) or 0
    oi_offset = int_field(data, fields, _CC_OI_OFFSET)
    oi_length = int_field(data, fields, _CC_OI_LENGTH)
    offset_index = None if oi_offset is None or oi_length is None else (oi_offset, oi_length)
    chunk = ChunkLayout(
        int_field(data, inner, _CM_DICTIONARY_PAGE) or None,
        data_offset,
        size,
        offset_index,
        data[meta[1] : codec[2]],  # fields 1-4, in id order: a struct's prefix
        dictionary_pages,
    )
    return chunk, end


@functools.lru_cache(maxsize=LAYOUTS_KEPT)
def read_layout(footer: bytes) -> FileLayout:
    """The layout of a file whose footer (the FileMetaData's bytes) is ``footer``. Raises
    PageLayoutError for bytes that do not walk as one. Kept for the last
    :data:`LAYOUTS_KEPT` footers: finding a footer's row groups walks all of them (a tenth
    of a second for a 128 MiB object of 4 MiB groups), and objects never change, so the same
    bytes always walk the same."""
    try:
        return _read_layout(footer)
    except (IndexError, ThriftError) as e:
        raise PageLayoutError(f"an unreadable footer ({e or 'cut short'})") from None


def _read_layout(data: bytes) -> FileLayout:
    fields, _ = struct_fields(data, 0)
    schema = fields.get(_FILE_SCHEMA)
    groups_at = fields.get(_FILE_ROW_GROUPS)
    if schema is None or groups_at is None:
        raise PageLayoutError("a footer without a schema or row groups")
    count, etype, pos = list_head(data, schema[1])
    elements: list[tuple[bytes, int | None, int | None]] = []
    for _ in range(count):
        element, end = struct_fields(data, pos)
        children = int_field(data, element, _SE_NUM_CHILDREN)
        elements.append((data[pos:end], children, int_field(data, element, _SE_REPETITION)))
        pos = end
    leaves, flat, names = [], [], []
    # Depth-first: the root, then each child with its own children after it.
    stack = [elements[0][1] or 0] if elements else []
    for raw, children, repetition in elements[1:]:
        depth = len(stack)
        stack[-1] -= 1
        if children:
            stack.append(children)
        else:
            leaves.append(raw)
            # A top-level leaf, not repeated: one value (or null) per row.
            flat.append(depth == 1 and repetition != _REPEATED)
            names.append(_name(raw))
        while stack and stack[-1] == 0 and len(stack) > 1:
            stack.pop()
    starts = []
    count, etype, pos = list_head(data, groups_at[1])
    if count and etype != STRUCT:
        raise PageLayoutError("a footer whose row groups are not structs")
    for _ in range(count):
        starts.append(pos)
        pos = skip_struct(data, pos)
    return FileLayout(_Groups(data, starts), tuple(leaves), tuple(flat), tuple(names))


class _Groups(Sequence[GroupLayout]):
    """A footer's row groups, each walked on first use (and kept)."""

    def __init__(self, data: bytes, starts: list[int]) -> None:
        self._data, self._starts = data, starts
        self._walked: dict[int, GroupLayout] = {}

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> GroupLayout: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[GroupLayout]: ...

    def __getitem__(self, index: int | slice) -> GroupLayout | Sequence[GroupLayout]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = range(len(self))[index]  # IndexError past the end, negative from it
        found = self._walked.get(index)
        if found is None:
            try:
                found = self._walked[index] = _group(self._data, self._starts[index])
            except (IndexError, ThriftError) as e:
                raise PageLayoutError(f"an unreadable row group ({e or 'cut short'})") from None
        return found


def _group(data: bytes, pos: int) -> GroupLayout:
    group, _ = struct_fields(data, pos)
    columns = group.get(_RG_COLUMNS)
    rows = int_field(data, group, _RG_NUM_ROWS)
    if columns is None or rows is None:
        raise PageLayoutError("a row group without columns or a row count")
    n, _, at = list_head(data, columns[1])
    chunks = []
    for _ in range(n):
        chunk, at = _chunk(data, at)
        chunks.append(chunk)
    return GroupLayout(rows, tuple(chunks))


def _name(element: bytes) -> str:
    fields, _ = struct_fields(element, 0)
    found = fields.get(4)  # SchemaElement.name
    if found is None or found[0] != BINARY:
        raise PageLayoutError("a schema element without a name")
    _, start = get_varint(element, found[1])
    return element[start : found[2]].decode()


def file_layout(data: bytes) -> FileLayout:
    """:func:`read_layout` of the whole Parquet file ``data``."""
    (length,) = struct.unpack("<I", data[-8:-4])
    return read_layout(bytes(data[len(data) - 8 - length : len(data) - 8]))


def page_locations(offset_index: bytes) -> list[PageLocation]:
    """The pages an OffsetIndex (its Thrift bytes) locates, in order."""
    try:
        fields, _ = struct_fields(offset_index, 0)
        found = fields.get(_OI_PAGES)
        if found is None or found[0] != LIST:
            raise PageLayoutError("an offset index without pages")
        count, etype, pos = list_head(offset_index, found[1])
        if etype != STRUCT:
            raise PageLayoutError("an offset index whose pages are not structs")
        out = []
        for _ in range(count):
            page, pos = struct_fields(offset_index, pos)
            values = [
                int_field(offset_index, page, f) for f in (_PL_OFFSET, _PL_SIZE, _PL_FIRST_ROW)
            ]
            if None in values:
                raise PageLayoutError("a page location without its offset, size or first row")
            out.append(PageLocation(*values))  # type: ignore[arg-type]
        return out
    except (IndexError, ThriftError) as e:
        raise PageLayoutError(f"an unreadable offset index ({e or 'cut short'})") from None


def readable_by_pages(layout: FileLayout, group: int, columns: Sequence[int]) -> bool:
    """Whether ``columns`` (leaf indexes) of row group ``group`` can be read by pages: flat
    leaves whose chunks have offset indexes."""
    chunks = layout.groups[group].chunks
    return all(layout.flat[c] and chunks[c].offset_index is not None for c in columns)


def _spans(pages: list[PageLocation], rows: int, ranges: Sequence[tuple[int, int]]) -> list[int]:
    """Indexes of the pages of a chunk (of a group of ``rows`` rows) that hold a row of
    ``ranges`` (sorted, disjoint ``[start, stop)``)."""
    firsts = np.array([p.first_row for p in pages], dtype=np.int64)
    ends = np.append(firsts[1:], rows)
    picked = np.zeros(len(pages), dtype=bool)
    for start, stop in ranges:
        picked |= (firsts < stop) & (ends > start)
    return [int(i) for i in np.flatnonzero(picked)]


@dataclass
class PageRead:
    """What :func:`read_rows` read: rows decoded, bytes fetched, pages read."""

    bytes_read: int = 0
    pages: int = 0


def read_rows(
    fetch: Callable[[int, int], bytes],
    layout: FileLayout,
    arrow_schema: pa.Schema,
    group: int,
    columns: Sequence[str],
    ranges: Sequence[tuple[int, int]],
    *,
    counts: PageRead | None = None,
    threads: int = FETCH_THREADS,
) -> pa.Table:
    """Rows ``ranges`` (sorted, disjoint ``[start, stop)`` in the group) of ``columns`` of row
    group ``group``, as pyarrow reads them (types of ``arrow_schema``, the file's). ``fetch(offset,
    length)``: the file's bytes there. Raises PageLayoutError where the file cannot be read by
    pages (:func:`readable_by_pages` says so beforehand)."""
    g = layout.groups[group]
    ranges = [(max(0, a), min(g.rows, b)) for a, b in ranges if min(g.rows, b) > max(0, a)]
    leaf = layout.flat_leaves
    missing = [c for c in columns if c not in leaf]
    if missing:
        raise PageLayoutError(f"columns {missing} are not flat leaves of the file")
    indexes = [leaf[c] for c in columns]
    if not readable_by_pages(layout, group, indexes):
        raise PageLayoutError("a column chunk without an offset index")
    wanted = np.concatenate(
        [np.arange(a, b, dtype=np.int64) for a, b in ranges] or [np.empty(0, np.int64)]
    )
    if not len(wanted) or not columns:
        return pa.table({c: pa.array([], arrow_schema.field(c).type) for c in columns})
    counts = counts if counts is not None else PageRead()
    # The offset indexes of one group's chunks lie side by side: one read.
    spans = [g.chunks[i].offset_index for i in indexes]
    lo = min(s[0] for s in spans if s)
    hi = max(s[0] + s[1] for s in spans if s)
    block = fetch(lo, hi - lo)
    counts.bytes_read += hi - lo
    picked: dict[int, tuple[list[PageLocation], list[int]]] = {}
    for i, span in zip(indexes, spans, strict=True):
        assert span is not None
        pages = page_locations(block[span[0] - lo : span[0] - lo + span[1]])
        picked[i] = (pages, _spans(pages, g.rows, ranges))
    # The picked pages, and the dictionary pages they are expected to need; then, from the
    # pages' own headers, any dictionary the expectation missed.
    fetched = _Fetched(fetch, threads)
    needs: dict[int, bool] = {}
    reads: list[tuple[int, int]] = []
    for i in indexes:
        chunk = g.chunks[i]
        pages, chosen = picked[i]
        reads += [(pages[j].offset, pages[j].size) for j in chosen]
        expected = chunk.dictionary_pages
        needs[i] = chunk.dictionary_offset is not None and (
            expected is None or any(j < expected for j in chosen)
        )
        if needs[i]:
            reads.append(_dictionary_span(chunk))
    fetched.add(reads)
    missed = []
    for i in indexes:
        chunk = g.chunks[i]
        pages, chosen = picked[i]
        if chunk.dictionary_offset is None or needs[i]:
            continue
        if any(_page_encoding(fetched.take(pages[j].offset, pages[j].size)) for j in chosen):
            needs[i] = True
            missed.append(_dictionary_span(chunk))
    fetched.add(missed)
    counts.bytes_read += fetched.bytes
    counts.pages += sum(len(picked[i][1]) for i in indexes)
    take = fetched.take

    # Columns whose picked pages cover the same rows decode together.
    by_rows: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for i in indexes:
        pages, chosen = picked[i]
        rows = tuple(
            (pages[j].first_row, pages[j + 1].first_row if j + 1 < len(pages) else g.rows)
            for j in chosen
        )
        by_rows.setdefault(rows, []).append(i)
    decoded: dict[int, pa.ChunkedArray[Any]] = {}
    for rows, members in by_rows.items():
        mini = _small_file(layout, g, members, picked, needs, rows, arrow_schema, take)
        try:
            table = pq.ParquetFile(pa.BufferReader(mini)).read(use_threads=False)
        except (pa.ArrowException, OSError) as e:
            raise PageLayoutError(f"pages that do not decode ({e})") from None
        if table.num_rows != sum(b - a for a, b in rows):
            raise PageLayoutError(f"{table.num_rows} rows in pages that should hold {rows}")
        starts_in = np.array([a for a, _ in rows], dtype=np.int64)
        lengths = np.array([b - a for a, b in rows], dtype=np.int64)
        before = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        k = np.searchsorted(starts_in, wanted, side="right") - 1
        positions = before[k] + (wanted - starts_in[k])
        for n, i in enumerate(members):
            decoded[i] = _take(table.column(n), positions)
    return pa.table([decoded[i] for i in indexes], names=list(columns))


#: View types Arrow's take has no kernel for, and the types it takes them as.
_VIEW_TAKEN_AS: dict[pa.DataType, pa.DataType] = {
    pa.string_view(): pa.large_string(),
    pa.binary_view(): pa.large_binary(),
}


def _take(column: pa.ChunkedArray[Any], positions: np.ndarray[Any, Any]) -> pa.ChunkedArray[Any]:
    """``column``'s values at ``positions``; a view column through its large type."""
    as_type = _VIEW_TAKEN_AS.get(column.type)
    if as_type is None:
        return column.take(positions)
    taken: pa.ChunkedArray[Any] = column.cast(as_type).take(positions)
    return taken.cast(column.type)


def _dictionary_span(chunk: ChunkLayout) -> tuple[int, int]:
    assert chunk.dictionary_offset is not None
    return chunk.dictionary_offset, chunk.data_offset - chunk.dictionary_offset


def _page_encoding(page: bytes) -> bool:
    """Whether the data page ``page`` (its header first) is dictionary-encoded."""
    try:
        header, _ = struct_fields(page, 0)
        for fid, enc in ((_PH_DATA_V1, _V1_ENCODING), (_PH_DATA_V2, _V2_ENCODING)):
            found = header.get(fid)
            if found is not None and found[0] == STRUCT:
                inner, _ = struct_fields(page, found[1])
                return int_field(page, inner, enc) in _DICTIONARY_ENCODINGS
    except (IndexError, ThriftError) as e:
        raise PageLayoutError(f"an unreadable page header ({e or 'cut short'})") from None
    raise PageLayoutError("a page that is not a data page where the offset index has one")


class _Fetched:
    """Byte ranges of a file fetched in rounds (each round's ranges joined where they touch,
    fetched on threads), and read back by offset."""

    def __init__(self, fetch: Callable[[int, int], bytes], threads: int) -> None:
        self._fetch, self._threads = fetch, threads
        self._starts: list[int] = []
        self._blobs: list[tuple[int, bytes]] = []
        self.bytes = 0

    def add(self, reads: Sequence[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for offset, length in sorted(reads):
            if merged and offset <= merged[-1][0] + merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], offset + length - merged[-1][0])
            else:
                merged.append([offset, length])
        if not merged:
            return
        if len(merged) == 1 or self._threads <= 1:
            blobs = [self._fetch(o, n) for o, n in merged]
        else:
            with ThreadPoolExecutor(max_workers=min(self._threads, len(merged))) as ex:
                blobs = list(ex.map(lambda r: self._fetch(r[0], r[1]), merged))
        for (offset, length), blob in zip(merged, blobs, strict=True):
            if len(blob) != length:
                raise PageLayoutError(f"{len(blob)} bytes at {offset}, {length} expected")
            self.bytes += length
            self._blobs.append((offset, blob))
        self._blobs.sort(key=lambda b: b[0])
        self._starts = [o for o, _ in self._blobs]

    def take(self, offset: int, length: int) -> bytes:
        k = bisect.bisect_right(self._starts, offset) - 1
        base, blob = self._blobs[k] if k >= 0 else (0, b"")
        if k < 0 or offset + length > base + len(blob):
            raise PageLayoutError(f"bytes {offset}..{offset + length} were not fetched")
        return blob[offset - base : offset - base + length]


def _small_file(
    layout: FileLayout,
    g: GroupLayout,
    members: list[int],
    picked: dict[int, tuple[list[PageLocation], list[int]]],
    needs: dict[int, bool],
    rows: tuple[tuple[int, int], ...],
    arrow_schema: pa.Schema,
    take: Callable[[int, int], bytes],
) -> bytes:
    """A Parquet file of one row group holding ``rows`` of the leaves ``members``: each
    chunk's dictionary page and picked pages as the object has them, and a footer listing
    them (types, encodings and codecs copied from the object's footer; the Arrow schema of
    those columns, so pyarrow reads the types it wrote)."""
    body = bytearray(MAGIC)
    chunks = bytearray()
    total_rows = sum(b - a for a, b in rows)
    for i in members:
        chunk = g.chunks[i]
        pages, chosen = picked[i]
        start = len(body)
        dictionary_at = None
        if needs[i]:
            dictionary_at = len(body)
            body += take(*_dictionary_span(chunk))
        data_at = len(body)
        for j in chosen:
            body += take(pages[j].offset, pages[j].size)
        size = len(body) - start
        meta = bytearray(chunk.head)
        w = StructWriter(meta)
        w.last = _CM_CODEC
        w.integer(5, total_rows)  # num_values: a flat column has one value (or null) per row
        w.integer(6, size)  # total_uncompressed_size: not used to decode
        w.integer(_CM_COMPRESSED, size)
        w.integer(_CM_DATA_PAGE, data_at)
        if dictionary_at is not None:
            w.integer(_CM_DICTIONARY_PAGE, dictionary_at)
        w.end()
        cc = StructWriter(chunks)
        cc.integer(2, start)  # file_offset
        cc.raw(_CC_META, STRUCT, bytes(meta))
        cc.end()
    names = [layout.names[i] for i in members]
    arrow = pa.schema([arrow_schema.field(n) for n in names])
    footer = bytearray()
    f = StructWriter(footer)
    f.integer(1, 2, I32)  # version
    root = bytearray()
    r = StructWriter(root)
    r.binary(4, b"schema")
    r.integer(_SE_NUM_CHILDREN, len(members), I32)
    r.end()
    schema = list_header(len(members) + 1, STRUCT) + bytes(root)
    schema += b"".join(layout.leaves[i] for i in members)
    f.raw(_FILE_SCHEMA, LIST, schema)
    f.integer(3, total_rows)
    group = bytearray()
    gw = StructWriter(group)
    gw.raw(_RG_COLUMNS, LIST, list_header(len(members), STRUCT) + bytes(chunks))
    gw.integer(2, len(body) - len(MAGIC))  # total_byte_size
    gw.integer(_RG_NUM_ROWS, total_rows)
    gw.end()
    f.raw(_FILE_ROW_GROUPS, LIST, list_header(1, STRUCT) + bytes(group))
    kv = bytearray()
    k = StructWriter(kv)
    k.binary(1, b"ARROW:schema")
    k.binary(2, base64.b64encode(arrow.serialize().to_pybytes()))
    k.end()
    f.raw(5, LIST, list_header(1, STRUCT) + bytes(kv))
    f.end()
    out = io.BytesIO()
    out.write(body)
    out.write(footer)
    out.write(struct.pack("<I", len(footer)))
    out.write(MAGIC)
    return out.getvalue()


def may_read_by_pages(metadata: pq.FileMetaData, group: int, columns: Sequence[str]) -> bool:
    """Whether row group ``group`` of a file (its footer as pyarrow read it) may be read by
    pages for ``columns``, from what pyarrow's metadata tells: top-level columns that are
    leaves, each chunk with an offset index. Checked before the footer is walked
    (:class:`ObjectPages`, which decides for sure)."""
    rg = metadata.row_group(group)
    paths = {rg.column(i).path_in_schema: i for i in range(rg.num_columns)}
    for name in columns:
        i = paths.get(name)
        if i is None or not rg.column(i).has_offset_index:
            return False
    return True


def _written_footer(metadata: pq.FileMetaData) -> bytes:
    """``metadata``'s Thrift bytes, as pyarrow writes them (a ``_metadata`` file: magic,
    footer, its length, magic)."""
    sink = io.BytesIO()
    metadata.write_metadata_file(sink)
    data = sink.getvalue()
    length = struct.unpack("<I", data[-8:-4])[0]
    return data[-8 - length : -8]


class ObjectPages:
    """Page reads of one Parquet object: its footer walked once, then any of its row groups
    read in part (:func:`read_rows`). ``fetch(offset, length)``: the object's bytes there;
    ``size``: its size; ``metadata``: the whole file's footer as pyarrow read it;
    ``threads``: fetches at once (1 on local disk). :attr:`fetched` counts every byte fetched.

    The footer's bytes are pyarrow's ``metadata`` written out again, not fetched: Thrift
    written from what it read is the bytes the file holds (for the writers lakepool uses; so
    a walked footer is found again in :func:`read_layout`'s cache). Where the length differs
    (a writer's fields pyarrow does not keep) the footer is fetched."""

    def __init__(
        self,
        fetch: Callable[[int, int], bytes],
        size: int,
        metadata: pq.FileMetaData,
        threads: int = FETCH_THREADS,
    ) -> None:
        self._fetch, self._threads = fetch, threads
        self.fetched = 0
        length = int(metadata.serialized_size)
        footer = _written_footer(metadata)
        if len(footer) != length:
            tail = fetch(size - 8 - length, length + 8)
            if (
                len(tail) != length + 8
                or tail[-4:] != MAGIC
                or struct.unpack("<I", tail[-8:-4])[0] != length
            ):
                raise PageLayoutError("the footer is not where the file's metadata says")
            self.fetched = length + 8
            footer = bytes(tail[:length])
        self.layout = read_layout(footer)
        self.schema = metadata.schema.to_arrow_schema()

    def readable(self, group: int, columns: Sequence[str]) -> bool:
        """Whether ``columns`` of row group ``group`` can be read by pages."""
        leaf = self.layout.flat_leaves
        if any(c not in leaf for c in columns):
            return False
        return readable_by_pages(self.layout, group, [leaf[c] for c in columns])

    def read(
        self, group: int, columns: Sequence[str], ranges: Sequence[tuple[int, int]]
    ) -> tuple[pa.Table, int]:
        """Rows ``ranges`` of ``columns`` of row group ``group`` and the bytes fetched for them."""
        counts = PageRead()
        table = read_rows(
            self._fetch,
            self.layout,
            self.schema,
            group,
            columns,
            ranges,
            counts=counts,
            threads=self._threads,
        )
        self.fetched += counts.bytes_read
        return table, counts.bytes_read
