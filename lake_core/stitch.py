"""Parquet objects assembled from row groups encoded separately (so several encode at once).

pyarrow's Parquet writer encodes one file on one thread. A row group's column chunks depend only
on that row group's rows and the writer's properties (each chunk has its own dictionary page),
so row groups can be encoded on several threads at once, each as a one-group *fragment* file,
and the fragments' chunks laid end to end behind one footer make the file that a single writer
would have written.

Invariants:

- :func:`stitch` of fragments written with the same schema and properties is byte for byte the
  file one ``ParquetWriter`` writes for the same row groups (tests/core/test_stitch.py compares
  them): the footer is the first fragment's with every row group listed, each with its file
  offsets moved by where its chunks now start and its ordinal renumbered;
- page indexes move with their row groups: every fragment the writer encodes has them
  (:data:`lake_core.encode.PAGE_ROWS`), behind its chunks, and a stitched file lays them out
  as one writer does — every column index (groups in order, their columns in order), then
  every offset index, each offset index's page offsets moved with its chunks and re-encoded —
  with the footer's fields that locate them set to their new places (:func:`_page_index_pieces`,
  :func:`shift_offset_index`); :func:`copy_row_groups` moves the copied groups' page indexes
  the same way. Both are compared byte for byte with a writer's file in tests/core/test_stitch.py;
- bloom filters are left behind: a walked footer no longer mentions them (the two fields of a
  column's metadata that locate its filter are cut out, and the next field's header re-encoded
  as if they had never been there), and a fragment's chunks end where its filters begin. So a
  fragment written with bloom filters stitches into the file a writer without them writes, byte
  for byte; the index builder takes the filters from the fragment before
  (:mod:`lake_core.indexes.sbbf`), and objects hold none.

The footer is Thrift's compact protocol. It is never decoded into a tree: a footer is walked
once (:func:`read_footer`) and each row group kept as its bytes cut at the few values a move
changes (file offsets, ordinal), so a stitched footer is those bytes joined with the new values
encoded between them. Everything else — schema, statistics, encodings, key-value metadata — is
copied as the writer wrote it, which is what keeps the bytes identical, and walking a footer
without building values is what keeps the many row groups of fine seek strides cheap (a
fragment's footer is walked on the thread that encoded it, while other groups encode).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from lake_core.thrift_compact import FALSE as _FALSE
from lake_core.thrift_compact import I16 as _I16
from lake_core.thrift_compact import I32 as _I32
from lake_core.thrift_compact import I64 as _I64
from lake_core.thrift_compact import LIST as _LIST
from lake_core.thrift_compact import STOP as _STOP
from lake_core.thrift_compact import STRUCT as _STRUCT
from lake_core.thrift_compact import ThriftError
from lake_core.thrift_compact import field_head as _field_head
from lake_core.thrift_compact import field_header as _field_header
from lake_core.thrift_compact import get_int as _get_int
from lake_core.thrift_compact import list_head as _list_head
from lake_core.thrift_compact import list_header as _list_header
from lake_core.thrift_compact import put_varint as _put_varint
from lake_core.thrift_compact import skip as _skip
from lake_core.thrift_compact import skip_varint as _skip_varint
from lake_core.thrift_compact import zigzag16 as _zigzag16
from lake_core.thrift_compact import zigzag64 as _zigzag64

MAGIC = b"PAR1"

# Field ids in parquet.thrift (parquet-format 2.x).
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 3, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CC_OFFSET_INDEX_OFFSET, _CC_OFFSET_INDEX_LENGTH = 4, 5
_CC_COLUMN_INDEX_OFFSET, _CC_COLUMN_INDEX_LENGTH = 6, 7
_CM_COMPRESSED_SIZE = 7
_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE = 9, 10, 11
_CM_BLOOM_FILTER, _CM_BLOOM_LENGTH = 14, 15
_MOVED_PAGES = (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE)

# What a cut in a row group's bytes stands for: a file offset (moved by the group's shift), the
# group's ordinal (replaced by its place in the new file), or where a column's page index now
# is (its offset index's offset and length, its column index's offset: placed by the stitch,
# see :func:`_page_index_pieces`).
_OFFSET, _ORDINAL, _OI_OFFSET, _OI_LENGTH, _CI_OFFSET = 0, 1, 2, 3, 4

# PageLocation's offset (parquet.thrift), in an OffsetIndex's field 1 list.
_OI_PAGE_LOCATIONS, _PL_OFFSET = 1, 1


def _bytes_view(data: bytes | memoryview) -> memoryview:
    """Unsigned bytes (a pyarrow Buffer exports signed chars: indexing would give -128..127)."""
    view = memoryview(data)
    return view if view.format == "B" else view.cast("B")


class StitchError(ThriftError):
    """A fragment cannot be stitched (not Parquet, or it has bytes other than bloom filters and
    page indexes behind its chunks)."""


@dataclass(frozen=True)
class _RowGroup:
    """One row group of a footer: its Thrift bytes cut around the values a move changes.

    ``parts[0] cut[0] parts[1] cut[1] … parts[-1]`` is the group as written, ``cut[i]`` being
    ``(kind, value)``: a file offset (``_OFFSET``), the ordinal (``_ORDINAL``), or a page
    index's place (``_OI_OFFSET``, ``_OI_LENGTH``, ``_CI_OFFSET``; the value the one in this
    file). ``begin`` and ``end``: the file bytes its column chunks span; ``rows``: its row
    count; ``filters``: the file offsets of the bloom filters its footer located (cut out of
    ``parts``); ``page_indexes``: per column, ``(column index offset, its length, offset index
    offset, its length)`` in this file, -1 where the column has none."""

    parts: tuple[bytes, ...]
    cuts: tuple[tuple[int, int], ...]
    rows: int
    begin: int
    end: int
    filters: tuple[int, ...] = ()
    page_indexes: tuple[tuple[int, int, int, int], ...] = ()

    def moved(
        self,
        out: bytearray,
        shift: int,
        ordinal: int,
        placed: dict[int, tuple[int, int]] | None = None,
    ) -> None:
        """Append the group's bytes with its offsets moved by ``shift`` and ``ordinal`` set;
        ``placed``: where each of its page indexes (by offset in this file) now is, and its
        length (see :func:`_page_index_pieces`; None: where they were)."""
        parts = self.parts
        out += parts[0]
        index = (0, 0)
        for i, (kind, value) in enumerate(self.cuts, 1):
            if kind == _OFFSET:
                _put_varint(out, _zigzag64(value + shift))
            elif kind == _ORDINAL:
                _put_varint(out, _zigzag16(ordinal))
            elif placed is None:  # the page indexes stay where they are
                _put_varint(out, _zigzag64(value))
            else:
                if kind != _OI_LENGTH:
                    index = placed[value]
                _put_varint(out, _zigzag64(index[1] if kind == _OI_LENGTH else index[0]))
            out += parts[i]


class _Cutter:
    """Builds a :class:`_RowGroup`'s parts from one pass over its bytes."""

    def __init__(self, data: bytes, start: int) -> None:
        self.data = data
        self.at = start
        self.parts: list[bytes] = []
        self.cuts: list[tuple[int, int]] = []
        self.filters: list[int] = []
        self.page_indexes: list[tuple[int, int, int, int]] = []
        self._pending = b""  # the current part's bytes before ``at``, where some were replaced

    def cut_int(self, pos: int, kind: int) -> tuple[int, int]:
        """Cut at the integer whose value starts at ``pos`` (a file offset, or the ordinal:
        ``kind``): (its value, the position after it)."""
        value, end = _get_int(self.data, pos)
        self.parts.append(self._pending + self.data[self.at : pos])
        self._pending = b""
        self.cuts.append((kind, value))
        self.at = end
        return value, end

    def replace(self, start: int, end: int, new: bytes) -> None:
        """Put ``new`` in place of the bytes ``start`` to ``end`` (at or after the last cut)."""
        self._pending += self.data[self.at : start] + new
        self.at = end

    def finish(self, pos: int) -> None:
        """The last part: the bytes up to ``pos``."""
        self.parts.append(self._pending + self.data[self.at : pos])
        self._pending = b""
        self.at = pos


def _column_meta(data: bytes, pos: int, cutter: _Cutter) -> tuple[int, int, int]:
    """Walk a ColumnMetaData, cutting at its page offsets: (first page offset, chunk end,
    position after it)."""
    pages: dict[int, int] = {}
    size = 0
    last = kept = 0  # the last field read, and the last one left in
    while True:
        head = pos
        fid, ctype, pos = _field_header(data, pos, last)
        if ctype == _STOP:
            break
        if fid in (_CM_BLOOM_FILTER, _CM_BLOOM_LENGTH) and _I16 <= ctype <= _I64:
            # A bloom filter stays behind (see the module docstring): its fields go.
            value, pos = _get_int(data, pos)
            if fid == _CM_BLOOM_FILTER:
                cutter.filters.append(value)
            cutter.replace(head, pos, b"")
            last = fid
            continue
        if kept != last:  # a field was cut out before this one: its header counts from ``kept``
            cutter.replace(head, pos, _field_head(fid, ctype, kept))
        if fid in _MOVED_PAGES and ctype == _I64:
            pages[fid], pos = cutter.cut_int(pos, _OFFSET)
        elif fid == _CM_COMPRESSED_SIZE and ctype == _I64:
            size, pos = _get_int(data, pos)
        elif ctype > _FALSE:
            pos = _skip(data, pos, ctype)
        last = kept = fid
    first = min(
        (v for v in (pages.get(_CM_DICTIONARY_PAGE), pages.get(_CM_DATA_PAGE)) if v), default=0
    )
    return first, first + size, pos


def _row_group(data: bytes, pos: int) -> tuple[_RowGroup, int]:
    """The row group whose struct starts at ``data[pos]``, and the position after it."""
    cutter = _Cutter(data, pos)
    rows = 0
    begin, end = -1, 0
    last = 0
    while True:
        fid, ctype, pos = _field_header(data, pos, last)
        if ctype == _STOP:
            break
        if fid == _RG_COLUMNS and ctype == _LIST:
            count, etype, pos = _list_head(data, pos)
            if etype != _STRUCT:
                raise StitchError("a row group whose column chunks are not structs")
            for _ in range(count):
                first, chunk_end, pos = _column_chunk(data, pos, cutter)
                begin = first if begin < 0 else min(begin, first)
                end = max(end, chunk_end)
        elif fid == _RG_FILE_OFFSET and ctype == _I64:
            _, pos = cutter.cut_int(pos, _OFFSET)
        elif fid == _RG_ORDINAL and ctype == _I16:
            _, pos = cutter.cut_int(pos, _ORDINAL)
        elif fid == _RG_NUM_ROWS and ctype == _I64:
            rows, pos = _get_int(data, pos)
        elif ctype > _FALSE:
            pos = _skip(data, pos, ctype)
        last = fid
    cutter.finish(pos)
    if begin < 0:
        raise StitchError("a row group without column chunks")
    indexes = tuple(cutter.page_indexes) if any(i != (-1,) * 4 for i in cutter.page_indexes) else ()
    group = _RowGroup(
        tuple(cutter.parts), tuple(cutter.cuts), rows, begin, end, tuple(cutter.filters), indexes
    )
    return group, pos


def _column_chunk(data: bytes, pos: int, cutter: _Cutter) -> tuple[int, int, int]:
    """Walk a ColumnChunk: (first page offset, chunk end, position after it)."""
    first = chunk_end = -1
    last = 0
    index = [-1, -1, -1, -1]  # column index offset, length; offset index offset, length
    while True:
        fid, ctype, pos = _field_header(data, pos, last)
        if ctype == _STOP:
            break
        if fid == _CC_FILE_OFFSET and ctype == _I64:
            if _get_int(data, pos)[0]:
                _, pos = cutter.cut_int(pos, _OFFSET)
            else:  # a writer that leaves the deprecated offset 0 keeps it 0
                pos = _skip_varint(data, pos)
        elif fid == _CC_META and ctype == _STRUCT:
            first, chunk_end, pos = _column_meta(data, pos, cutter)
        elif fid == _CC_OFFSET_INDEX_OFFSET and ctype == _I64:
            index[2], pos = cutter.cut_int(pos, _OI_OFFSET)
        elif fid == _CC_OFFSET_INDEX_LENGTH and ctype == _I32:
            if index[2] < 0:  # its place is taken from the offset's (see _RowGroup.moved)
                raise StitchError("an offset index length without its offset")
            index[3], pos = cutter.cut_int(pos, _OI_LENGTH)
        elif fid == _CC_COLUMN_INDEX_OFFSET and ctype == _I64:
            index[0], pos = cutter.cut_int(pos, _CI_OFFSET)
        elif fid == _CC_COLUMN_INDEX_LENGTH and ctype == _I32:
            index[1], pos = _get_int(data, pos)
        elif ctype > _FALSE:
            pos = _skip(data, pos, ctype)
        last = fid
    if first < 0:
        raise StitchError("a column chunk has no metadata in the footer")
    if (index[0] < 0) != (index[1] < 0) or (index[2] < 0) != (index[3] < 0):
        raise StitchError("a page index without its offset or length")
    cutter.page_indexes.append((index[0], index[1], index[2], index[3]))
    return first, chunk_end, pos


@dataclass(frozen=True)
class Footer:
    """A Parquet footer walked once: its bytes, where its row count and row-group list sit in
    them, and each row group cut for moving (:class:`_RowGroup`)."""

    data: bytes
    rows_span: tuple[int, int]  # the file's num_rows value
    groups_span: tuple[int, int]  # the row_groups list, its header included (after rows_span)
    groups: tuple[_RowGroup, ...]

    def with_groups(
        self,
        groups: Sequence[_RowGroup],
        shifts: Sequence[int],
        placed: Sequence[dict[int, tuple[int, int]]] | None = None,
    ) -> bytes:
        """This footer listing ``groups`` (group ``i`` moved by ``shifts[i]``, ordinal ``i``,
        its page indexes where ``placed[i]`` says) instead of its own, and their rows as the
        file's."""
        (rows_at, rows_end), (groups_at, groups_end) = self.rows_span, self.groups_span
        out = bytearray(self.data[:rows_at])
        _put_varint(out, _zigzag64(sum(g.rows for g in groups)))
        out += self.data[rows_end:groups_at]
        out += _list_header(len(groups), _STRUCT)
        for i, (group, shift) in enumerate(zip(groups, shifts, strict=True)):
            group.moved(out, shift, i, placed[i] if placed is not None else None)
        out += self.data[groups_end:]
        return bytes(out)


def _walk_footer(data: bytes) -> Footer:
    rows_span = groups_span = None
    groups: list[_RowGroup] = []
    pos = last = 0
    while True:
        fid, ctype, pos = _field_header(data, pos, last)
        if ctype == _STOP:
            break
        if fid == _FILE_NUM_ROWS and ctype == _I64:
            after = _skip_varint(data, pos)
            rows_span = (pos, after)
            pos = after
        elif fid == _FILE_ROW_GROUPS and ctype == _LIST:
            start = pos
            count, etype, pos = _list_head(data, pos)
            if etype != _STRUCT:
                raise StitchError("a footer whose row groups are not structs")
            for _ in range(count):
                group, pos = _row_group(data, pos)
                groups.append(group)
            groups_span = (start, pos)
        elif ctype > _FALSE:
            pos = _skip(data, pos, ctype)
        last = fid
    if pos != len(data):
        raise StitchError(f"{len(data) - pos} bytes after the footer's struct")
    if rows_span is None or groups_span is None:
        raise StitchError("a footer without a row count or row groups")
    if rows_span[1] > groups_span[0]:  # writers put fields in id order: num_rows first
        raise StitchError("a footer listing its row groups before its row count")
    return Footer(data, rows_span, groups_span, tuple(groups))


def _footer_start(view: memoryview) -> int:
    if len(view) < 12 or view[:4] != MAGIC or view[-4:] != MAGIC:
        raise StitchError("not a Parquet file")
    footer_len: int = struct.unpack("<I", view[-8:-4])[0]
    start = len(view) - 8 - footer_len
    if start < len(MAGIC):
        raise StitchError("a footer longer than its file")
    return start


def read_footer(data: bytes | memoryview) -> Footer:
    """The footer of the Parquet file ``data``, walked (for :func:`copy_row_groups`), without
    its bloom filters' fields. Raises StitchError if ``data`` is not a Parquet file, or its
    footer is cut short or not what a walk expects."""
    view = _bytes_view(data)
    start = _footer_start(view)
    try:
        return _walk_footer(bytes(view[start : len(view) - 8]))
    except IndexError:
        raise StitchError("a truncated Thrift struct") from None
    except StitchError:
        raise
    except ThriftError as e:  # a walk helper's own error: this module's, for callers
        raise StitchError(str(e)) from None
    except RecursionError:  # corrupt bytes read as structs nested thousands deep
        raise StitchError("a Thrift struct nested too deep") from None


class Fragment:
    """One row group encoded as a whole Parquet file: its chunks' bytes and its footer, walked
    on first use (an object of one row group without bloom filters is the fragment as it is:
    :func:`stitch` does not walk its footer, which is most of a small write's Python time)."""

    __slots__ = ("data", "body_end", "_footer")

    def __init__(self, data: bytes | memoryview, body_end: int) -> None:
        self.data = data
        # Where the chunks end: the footer's start until the footer is walked, then the end of
        # the chunks (the two differ by the bloom filters in between, if any).
        self.body_end = body_end
        self._footer: Footer | None = None

    @property
    def body(self) -> memoryview:
        return _bytes_view(self.data)[len(MAGIC) : self.body_end]

    @property
    def footer(self) -> Footer:
        """The walked footer, checked to be stitchable (see :func:`parse_fragment`)."""
        if self._footer is None:
            self._footer = _check_fragment(self.data, self.body_end)
            self.body_end = self._footer.groups[0].end
        return self._footer

    @property
    def filtered(self) -> bool:
        """Whether the fragment's walked footer located bloom filters (False if not walked)."""
        return self._footer is not None and bool(self._footer.groups[0].filters)


def split_fragment(data: bytes | memoryview) -> Fragment:
    """A one-row-group Parquet file as a fragment, its footer walked (and checked) only when
    :func:`stitch` needs it."""
    return Fragment(data, _footer_start(_bytes_view(data)))


def parse_fragment(data: bytes | memoryview) -> Fragment:
    """Split a one-row-group Parquet file into its chunks and its walked footer, checking now
    that it can be stitched (one row group; nothing but bloom filters and page indexes behind
    its chunks)."""
    frag = split_fragment(data)
    frag.footer  # noqa: B018 - walks and checks
    return frag


def _check_fragment(data: bytes | memoryview, start: int) -> Footer:
    footer = read_footer(data)
    if len(footer.groups) != 1:
        raise StitchError("a fragment must hold exactly one row group")
    group = footer.groups[0]
    behind = [(at, at + 1) for at in group.filters] + [
        span
        for ci, ci_len, oi, oi_len in group.page_indexes
        for span in ((ci, ci + ci_len), (oi, oi + oi_len))
        if span[0] >= 0
    ]
    if group.end != start and not (
        behind and all(group.end <= at and end <= start for at, end in behind)
    ):
        raise StitchError(f"a fragment has {start - group.end} bytes between its chunks and footer")
    return footer


def shift_offset_index(data: bytes | memoryview, shift: int) -> bytes:
    """The Thrift OffsetIndex ``data`` with every page's offset moved by ``shift`` (its other
    fields as they were)."""
    data = bytes(data)
    if not shift:
        return data
    out = bytearray()
    at = pos = last = 0
    while True:
        fid, ctype, pos = _field_header(data, pos, last)
        if ctype == _STOP:
            break
        if fid == _OI_PAGE_LOCATIONS and ctype == _LIST:
            count, etype, pos = _list_head(data, pos)
            if etype != _STRUCT:
                raise StitchError("an offset index whose pages are not structs")
            for _ in range(count):
                inner = 0
                while True:
                    pid, ptype, pos = _field_header(data, pos, inner)
                    if ptype == _STOP:
                        break
                    if pid == _PL_OFFSET and ptype == _I64:
                        value, end = _get_int(data, pos)
                        out += data[at:pos]
                        _put_varint(out, _zigzag64(value + shift))
                        at = pos = end
                    elif ptype > _FALSE:
                        pos = _skip(data, pos, ptype)
                    inner = pid
        elif ctype > _FALSE:
            pos = _skip(data, pos, ctype)
        last = fid
    out += data[at:pos]
    if pos != len(data):
        raise StitchError(f"{len(data) - pos} bytes after an offset index")
    return bytes(out)


def _page_index_pieces(
    sources: Sequence[tuple[memoryview, _RowGroup, int]], at: int
) -> tuple[list[bytes | memoryview], list[dict[int, tuple[int, int]]]]:
    """The page indexes of row groups moving into a new file, laid out from ``at`` as one
    Parquet writer lays them out — every column index (groups in order, their columns in
    order), then every offset index — and, per group, where each now is: {offset in its old
    file: (offset in the new, length)}. ``sources``: each group with the bytes of its old
    file and its shift (its offset indexes locate pages, so they move with them)."""
    pieces: list[bytes | memoryview] = []
    placed: list[dict[int, tuple[int, int]]] = [{} for _ in sources]
    for (view, group, _), where in zip(sources, placed, strict=True):
        for ci, ci_len, _, _ in group.page_indexes:
            if ci >= 0:
                where[ci] = (at, ci_len)
                pieces.append(view[ci : ci + ci_len])
                at += ci_len
    for (view, group, shift), where in zip(sources, placed, strict=True):
        for _, _, oi, oi_len in group.page_indexes:
            if oi >= 0:
                moved = shift_offset_index(view[oi : oi + oi_len], shift)
                where[oi] = (at, len(moved))
                pieces.append(moved)
                at += len(moved)
    return pieces, placed


def stitch(fragments: Sequence[Fragment]) -> list[bytes | memoryview]:
    """The pieces of one Parquet file holding the fragments' row groups in order (join them, or
    write them one after another)."""
    if not fragments:
        raise StitchError("nothing to stitch")
    if len(fragments) == 1 and not fragments[0].filtered:
        # One writer writing one row group writes the fragment itself: nothing moves.
        view = _bytes_view(fragments[0].data)
        end = fragments[0].body_end
        return [view[: len(MAGIC)], view[len(MAGIC) : end], view[end:-8], view[-8:-4], view[-4:]]
    pieces: list[bytes | memoryview] = [MAGIC]
    groups, shifts = [], []
    at = len(MAGIC)
    for frag in fragments:
        groups.append(frag.footer.groups[0])
        shifts.append(at - len(MAGIC))
        body = frag.body
        pieces.append(body)
        at += len(body)
    placed = None
    if any(g.page_indexes for g in groups):
        sources = [
            (_bytes_view(f.data), g, shift)
            for f, g, shift in zip(fragments, groups, shifts, strict=True)
        ]
        indexes, placed = _page_index_pieces(sources, at)
        pieces += indexes
    encoded = fragments[0].footer.with_groups(groups, shifts, placed)
    pieces += [encoded, struct.pack("<I", len(encoded)), MAGIC]
    return pieces


def copy_row_groups(
    data: bytes | memoryview, first: int, stop: int, footer: Footer | None = None
) -> list[bytes | memoryview]:
    """The pieces of a Parquet file holding row groups ``first`` to ``stop - 1`` of the file
    ``data``, their chunks copied as they are (no decoding): a run of an object kept whole by
    a rewrite (:mod:`lake_core.upsert`). The footer is ``data``'s with only those groups, their
    offsets moved and ordinals renumbered, their page indexes moved with them (and no bloom
    filters: they stay behind). ``footer``: ``data``'s, from
    :func:`read_footer` (walking it once for several runs of one file)."""
    view = _bytes_view(data)
    if footer is None:
        footer = read_footer(view)
    start = _footer_start(view)
    if not 0 <= first < stop <= len(footer.groups):
        raise StitchError(f"no row groups {first}..{stop - 1} in the file")
    chosen = footer.groups[first:stop]
    begin = min(g.begin for g in chosen)
    end = max(g.end for g in chosen)
    if end <= begin or begin < len(MAGIC) or end > start:
        raise StitchError("row group chunks outside the file's body")
    shift = len(MAGIC) - begin
    pieces: list[bytes | memoryview] = [MAGIC, view[begin:end]]
    placed = None
    if any(g.page_indexes for g in chosen):
        sources = [(view, g, shift) for g in chosen]
        indexes, placed = _page_index_pieces(sources, len(MAGIC) + end - begin)
        pieces += indexes
    encoded = footer.with_groups(chosen, [shift] * len(chosen), placed)
    return [*pieces, encoded, struct.pack("<I", len(encoded)), MAGIC]
