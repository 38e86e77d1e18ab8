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
- fragments must not carry page indexes (they sit between the chunks and the footer, and their
  offsets would need moving too): :func:`stitch` refuses a fragment that has one rather than
  write a file that points into the wrong place;
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

MAGIC = b"PAR1"

# Compact protocol types.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 0, 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12

# Field ids in parquet.thrift (parquet-format 2.x).
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 3, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CC_OFFSET_INDEX_OFFSET, _CC_COLUMN_INDEX_OFFSET = 4, 6
_CM_COMPRESSED_SIZE = 7
_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE = 9, 10, 11
_CM_BLOOM_FILTER, _CM_BLOOM_LENGTH = 14, 15
_MOVED_PAGES = (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE)

# What a cut in a row group's bytes stands for: a file offset (moved by the group's shift), or
# the group's ordinal (replaced by its place in the new file).
_OFFSET, _ORDINAL = 0, 1


def _bytes_view(data: bytes | memoryview) -> memoryview:
    """Unsigned bytes (a pyarrow Buffer exports signed chars: indexing would give -128..127)."""
    view = memoryview(data)
    return view if view.format == "B" else view.cast("B")


class StitchError(ValueError):
    """A fragment cannot be stitched (not Parquet, or it has bytes other than bloom filters
    behind its chunks, or a page index)."""


# The walk below is the hot Python of writing many row groups: plain functions over ``bytes``
# that step over values without building them.


def _get_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``data[pos]`` and the position after it."""
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _get_int(data: bytes, pos: int) -> tuple[int, int]:
    """The zigzag integer (i16, i32 or i64) at ``data[pos]`` and the position after it."""
    n, pos = _get_varint(data, pos)
    return (n >> 1) ^ -(n & 1), pos


def _skip_varint(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def _list_head(data: bytes, pos: int) -> tuple[int, int, int]:
    """(size, element type, position of the first element) of the list header at ``data[pos]``."""
    head = data[pos]
    size, etype = head >> 4, head & 0x0F
    if size == 15:
        size, after = _get_varint(data, pos + 1)
        return size, etype, after
    return size, etype, pos + 1


def _skip(data: bytes, pos: int, ctype: int) -> int:
    """The position after the value of type ``ctype`` at ``data[pos]``."""
    if _I16 <= ctype <= _I64:
        return _skip_varint(data, pos)
    if ctype == _BINARY:
        n, pos = _get_varint(data, pos)
        return pos + n
    if ctype == _STRUCT:
        return _skip_struct(data, pos)
    if ctype in (_LIST, _SET):
        size, etype, pos = _list_head(data, pos)
        if etype in (_TRUE, _FALSE, _BYTE):  # in a collection a bool is one byte
            return pos + size
        if etype == _DOUBLE:
            return pos + 8 * size
        for _ in range(size):
            pos = _skip(data, pos, etype)
        return pos
    if ctype == _BYTE:
        return pos + 1
    if ctype == _DOUBLE:
        return pos + 8
    raise StitchError(f"unsupported Thrift compact type {ctype}")


def _skip_struct(data: bytes, pos: int) -> int:
    while True:
        head = data[pos]
        pos += 1
        ctype = head & 0x0F
        if ctype == _STOP:
            return pos
        if not head >> 4:  # a long-form field id follows
            pos = _skip_varint(data, pos)
        if ctype > _FALSE:  # a bool field's value is its type
            pos = _skip(data, pos, ctype)


def _field_header(data: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, type, position of its value) of the field header at ``data[pos]``; type
    ``_STOP`` at the struct's end (the position is then after it)."""
    head = data[pos]
    pos += 1
    ctype = head & 0x0F
    if ctype == _STOP:
        return 0, _STOP, pos
    delta = head >> 4
    if delta:
        return last + delta, ctype, pos
    fid, pos = _get_int(data, pos)
    return fid, ctype, pos


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _list_header(size: int, etype: int) -> bytes:
    out = bytearray()
    if size < 15:
        out.append((size << 4) | etype)
    else:
        out.append(0xF0 | etype)
        _put_varint(out, size)
    return bytes(out)


def _zigzag64(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & 0xFFFF_FFFF_FFFF_FFFF


def _zigzag16(v: int) -> int:
    v = ((v + 0x8000) & 0xFFFF) - 0x8000  # an i16, as the C++ writer casts the ordinal
    return ((v << 1) ^ (v >> 15)) & 0xFFFF


@dataclass(frozen=True)
class _RowGroup:
    """One row group of a footer: its Thrift bytes cut around the values a move changes.

    ``parts[0] cut[0] parts[1] cut[1] … parts[-1]`` is the group as written, ``cut[i]`` being
    ``(kind, value)``: a file offset (``_OFFSET``) or the ordinal (``_ORDINAL``). ``begin`` and
    ``end``: the file bytes its column chunks span; ``rows``: its row count; ``filters``: the
    file offsets of the bloom filters its footer located (cut out of ``parts``)."""

    parts: tuple[bytes, ...]
    cuts: tuple[tuple[int, int], ...]
    rows: int
    begin: int
    end: int
    filters: tuple[int, ...] = ()

    def moved(self, out: bytearray, shift: int, ordinal: int) -> None:
        """Append the group's bytes with its offsets moved by ``shift`` and ``ordinal`` set."""
        parts = self.parts
        out += parts[0]
        for i, (kind, value) in enumerate(self.cuts, 1):
            _put_varint(out, _zigzag64(value + shift) if kind == _OFFSET else _zigzag16(ordinal))
            out += parts[i]


class _Cutter:
    """Builds a :class:`_RowGroup`'s parts from one pass over its bytes."""

    def __init__(self, data: bytes, start: int) -> None:
        self.data = data
        self.at = start
        self.parts: list[bytes] = []
        self.cuts: list[tuple[int, int]] = []
        self.filters: list[int] = []
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


def _field_head(fid: int, ctype: int, last: int) -> bytes:
    """The compact protocol's header of field ``fid`` of type ``ctype`` after field ``last``."""
    delta = fid - last
    if 0 < delta <= 15:
        return bytes(((delta << 4) | ctype,))
    out = bytearray((ctype,))
    _put_varint(out, _zigzag16(fid))
    return bytes(out)


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
    group = _RowGroup(
        tuple(cutter.parts), tuple(cutter.cuts), rows, begin, end, tuple(cutter.filters)
    )
    return group, pos


def _column_chunk(data: bytes, pos: int, cutter: _Cutter) -> tuple[int, int, int]:
    """Walk a ColumnChunk: (first page offset, chunk end, position after it)."""
    first = chunk_end = -1
    last = 0
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
        elif fid in (_CC_OFFSET_INDEX_OFFSET, _CC_COLUMN_INDEX_OFFSET):
            raise StitchError("row groups with page indexes cannot be moved")
        elif ctype > _FALSE:
            pos = _skip(data, pos, ctype)
        last = fid
    if first < 0:
        raise StitchError("a column chunk has no metadata in the footer")
    return first, chunk_end, pos


@dataclass(frozen=True)
class Footer:
    """A Parquet footer walked once: its bytes, where its row count and row-group list sit in
    them, and each row group cut for moving (:class:`_RowGroup`)."""

    data: bytes
    rows_span: tuple[int, int]  # the file's num_rows value
    groups_span: tuple[int, int]  # the row_groups list, its header included (after rows_span)
    groups: tuple[_RowGroup, ...]

    def with_groups(self, groups: Sequence[_RowGroup], shifts: Sequence[int]) -> bytes:
        """This footer listing ``groups`` (group ``i`` moved by ``shifts[i]``, ordinal ``i``)
        instead of its own, and their rows as the file's."""
        (rows_at, rows_end), (groups_at, groups_end) = self.rows_span, self.groups_span
        out = bytearray(self.data[:rows_at])
        _put_varint(out, _zigzag64(sum(g.rows for g in groups)))
        out += self.data[rows_end:groups_at]
        out += _list_header(len(groups), _STRUCT)
        for i, (group, shift) in enumerate(zip(groups, shifts, strict=True)):
            group.moved(out, shift, i)
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
    footer is cut short or has a row group with a page index (whose offsets a move would have
    to change)."""
    view = _bytes_view(data)
    start = _footer_start(view)
    try:
        return _walk_footer(bytes(view[start : len(view) - 8]))
    except IndexError:
        raise StitchError("a truncated Thrift struct") from None
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
    that it can be stitched (one row group; nothing but bloom filters behind its chunks, and no
    page index)."""
    frag = split_fragment(data)
    frag.footer  # noqa: B018 - walks and checks
    return frag


def _check_fragment(data: bytes | memoryview, start: int) -> Footer:
    footer = read_footer(data)
    if len(footer.groups) != 1:
        raise StitchError("a fragment must hold exactly one row group")
    group = footer.groups[0]
    if group.end != start and not (
        group.filters and all(group.end <= at < start for at in group.filters)
    ):
        raise StitchError(f"a fragment has {start - group.end} bytes between its chunks and footer")
    return footer


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
    encoded = fragments[0].footer.with_groups(groups, shifts)
    pieces += [encoded, struct.pack("<I", len(encoded)), MAGIC]
    return pieces


def copy_row_groups(
    data: bytes | memoryview, first: int, stop: int, footer: Footer | None = None
) -> list[bytes | memoryview]:
    """The pieces of a Parquet file holding row groups ``first`` to ``stop - 1`` of the file
    ``data``, their chunks copied as they are (no decoding): a run of an object kept whole by
    a rewrite (:mod:`lake_core.upsert`). The footer is ``data``'s with only those groups, their
    offsets moved and ordinals renumbered (and no bloom filters: they stay behind); a page
    index raises StitchError, as in :func:`parse_fragment`. ``footer``: ``data``'s, from
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
    encoded = footer.with_groups(chosen, [shift] * len(chosen))
    return [MAGIC, view[begin:end], encoded, struct.pack("<I", len(encoded)), MAGIC]
