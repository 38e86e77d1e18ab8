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
- fragments must not carry page indexes or bloom filters (they sit between the chunks and the
  footer, and their offsets would need moving too): :func:`stitch` refuses a fragment that has
  bytes there rather than write a file that points into the wrong place.

The footer is Thrift's compact protocol. It is decoded into a generic tree — a struct is a
list of ``(field id, compact type, value)`` — and encoded back the way the C++ writer encodes
it, so only the offsets change.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

MAGIC = b"PAR1"

# Compact protocol types.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 0, 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12

# Field ids in parquet.thrift (parquet-format 2.x).
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CC_OFFSET_INDEX_OFFSET, _CC_COLUMN_INDEX_OFFSET = 4, 6
_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE, _CM_BLOOM_FILTER = 9, 10, 11, 14

Field = tuple[int, int, Any]


def _bytes_view(data: bytes | memoryview) -> memoryview:
    """Unsigned bytes (a pyarrow Buffer exports signed chars: indexing would give -128..127)."""
    view = memoryview(data)
    return view if view.format == "B" else view.cast("B")


class StitchError(ValueError):
    """A fragment cannot be stitched (not Parquet, or it has bytes behind its chunks)."""


# The codec below is the hot Python of writing many row groups (each fragment's footer is
# decoded, and an object's footer encoded): plain functions over ``bytes``, a call per value
# rather than a reader object's method call per byte (a third less time to decode a footer of
# lineitem's 16 columns, a fifth less to encode it, the same trees and bytes).


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


def _decode_struct(data: bytes, pos: int) -> tuple[list[Field], int]:
    """The struct starting at ``data[pos]`` and the position after it."""
    fields: list[Field] = []
    last = 0
    while True:
        head = data[pos]
        pos += 1
        ctype = head & 0x0F
        if ctype == _STOP:
            return fields, pos
        delta = head >> 4
        if delta:
            fid = last + delta
        else:
            n, pos = _get_varint(data, pos)
            fid = (n >> 1) ^ -(n & 1)
        if ctype in (_TRUE, _FALSE):
            fields.append((fid, ctype, ctype == _TRUE))
        else:
            value, pos = _decode_value(data, pos, ctype)
            fields.append((fid, ctype, value))
        last = fid


def _decode_value(data: bytes, pos: int, ctype: int) -> tuple[Any, int]:
    if ctype in (_I16, _I32, _I64):
        n, pos = _get_varint(data, pos)
        return (n >> 1) ^ -(n & 1), pos
    if ctype == _STRUCT:
        return _decode_struct(data, pos)
    if ctype == _BINARY:
        n, pos = _get_varint(data, pos)
        return data[pos : pos + n], pos + n
    if ctype in (_LIST, _SET):
        head = data[pos]
        pos += 1
        size, etype = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _get_varint(data, pos)
        items = []
        for _ in range(size):
            item, pos = _decode_value(data, pos, etype)
            items.append(item)
        return (etype, items), pos
    if ctype in (_TRUE, _FALSE):  # in a collection: one byte
        return data[pos] == _TRUE, pos + 1
    if ctype == _BYTE:
        return data[pos], pos + 1
    if ctype == _DOUBLE:
        return data[pos : pos + 8], pos + 8
    raise StitchError(f"unsupported Thrift compact type {ctype}")


def _decode(data: bytes | memoryview) -> list[Field]:
    """The Thrift struct that is the whole of ``data`` (a footer)."""
    try:
        fields, _ = _decode_struct(bytes(data), 0)
    except IndexError:
        raise StitchError("a truncated Thrift struct") from None
    return fields


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


_ZIGZAG_MASK = {_I16: (1 << 16) - 1, _I32: (1 << 32) - 1, _I64: (1 << 64) - 1}


def _encode_value(out: bytearray, ctype: int, v: Any) -> None:
    if ctype in (_I16, _I32, _I64):
        # zigzag: (n << 1) ^ (n >> (bits - 1)), in the field's width
        _put_varint(out, ((v << 1) ^ (v >> 63)) & _ZIGZAG_MASK[ctype])
    elif ctype == _STRUCT:
        _encode_struct(out, v)
    elif ctype == _BINARY:
        _put_varint(out, len(v))
        out += v
    elif ctype in (_LIST, _SET):
        etype, items = v
        if len(items) < 15:
            out.append((len(items) << 4) | etype)
        else:
            out.append(0xF0 | etype)
            _put_varint(out, len(items))
        for item in items:
            _encode_value(out, etype, item)
    elif ctype in (_TRUE, _FALSE):
        out.append(_TRUE if v else _FALSE)
    elif ctype == _BYTE:
        out.append(v & 0xFF)
    elif ctype == _DOUBLE:
        out += v
    else:
        raise StitchError(f"unsupported Thrift compact type {ctype}")


def _encode_struct(out: bytearray, fields: list[Field]) -> None:
    last = 0
    for fid, ctype, v in fields:
        bool_field = ctype in (_TRUE, _FALSE)
        wire = (_TRUE if v else _FALSE) if bool_field else ctype
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | wire)
        else:
            out.append(wire)
            _put_varint(out, ((fid << 1) ^ (fid >> 15)) & 0xFFFF)
        if not bool_field:
            _encode_value(out, ctype, v)
        last = fid
    out.append(_STOP)


def _encode(fields: list[Field]) -> bytes:
    out = bytearray()
    _encode_struct(out, fields)
    return bytes(out)


def _get(fields: list[Field], fid: int) -> Any:
    return next((v for f, _, v in fields if f == fid), None)


def _shifted(fields: list[Field], shifts: dict[int, int]) -> list[Field]:
    """``fields`` with the i64 fields named in ``shifts`` moved by their amount."""
    return [(f, t, v + shifts[f]) if f in shifts else (f, t, v) for f, t, v in fields]


class Fragment:
    """One row group encoded as a whole Parquet file: its chunks' bytes and its footer, decoded
    on first use (an object of one row group is the fragment as it is: :func:`stitch` does not
    decode its footer, which is most of a small write's Python time)."""

    __slots__ = ("data", "body_end", "_footer")

    def __init__(self, data: bytes | memoryview, body_end: int) -> None:
        self.data = data
        self.body_end = body_end  # where the chunks end (the footer starts)
        self._footer: list[Field] | None = None

    @property
    def body(self) -> memoryview:
        return _bytes_view(self.data)[len(MAGIC) : self.body_end]

    @property
    def footer(self) -> list[Field]:
        """The decoded footer, checked to be stitchable (see :func:`parse_fragment`)."""
        if self._footer is None:
            self._footer = _check_fragment(self.data, self.body_end)
        return self._footer


def _footer_start(view: memoryview) -> int:
    if len(view) < 12 or view[:4] != MAGIC or view[-4:] != MAGIC:
        raise StitchError("not a Parquet file")
    footer_len: int = struct.unpack("<I", view[-8:-4])[0]
    return len(view) - 8 - footer_len


def split_fragment(data: bytes | memoryview) -> Fragment:
    """A one-row-group Parquet file as a fragment, its footer decoded (and checked) only when
    :func:`stitch` needs it."""
    return Fragment(data, _footer_start(_bytes_view(data)))


def parse_fragment(data: bytes | memoryview) -> Fragment:
    """Split a one-row-group Parquet file into its chunks and its decoded footer, checking now
    that it can be stitched (one row group; no page index or bloom filter behind its chunks)."""
    frag = split_fragment(data)
    frag.footer  # noqa: B018 - decodes and checks
    return frag


def _check_fragment(data: bytes | memoryview, start: int) -> list[Field]:
    view = _bytes_view(data)
    footer = _decode(view[start : len(view) - 8])
    groups = _get(footer, _FILE_ROW_GROUPS)
    if groups is None or len(groups[1]) != 1:
        raise StitchError("a fragment must hold exactly one row group")
    ends = []
    for chunk in _get(groups[1][0], _RG_COLUMNS)[1]:
        meta = _get(chunk, _CC_META)
        if meta is None:
            raise StitchError("a column chunk has no metadata in the footer")
        if any(
            _get(chunk, f) is not None for f in (_CC_OFFSET_INDEX_OFFSET, _CC_COLUMN_INDEX_OFFSET)
        ):
            raise StitchError("fragments must be written without page indexes")
        if _get(meta, _CM_BLOOM_FILTER) is not None:
            raise StitchError("fragments must be written without bloom filters")
        first = min(v for v in (_get(meta, _CM_DICTIONARY_PAGE), _get(meta, _CM_DATA_PAGE)) if v)
        ends.append(first + _get(meta, 7))  # 7: total_compressed_size
    body_end = max(ends, default=len(MAGIC))
    if body_end != start:
        raise StitchError(f"a fragment has {start - body_end} bytes between its chunks and footer")
    return footer


def _move_group(group: list[Field], shift: int, ordinal: int) -> list[Field]:
    out: list[Field] = []
    for fid, ctype, v in group:
        if fid == _RG_COLUMNS:
            etype, chunks = v
            moved = []
            for chunk in chunks:
                c = _shifted(
                    chunk, {_CC_FILE_OFFSET: shift} if _get(chunk, _CC_FILE_OFFSET) else {}
                )
                moved.append(
                    [
                        (
                            f,
                            t,
                            _shifted(
                                m,
                                {
                                    k: shift
                                    for k in (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE)
                                },
                            ),
                        )
                        if f == _CC_META
                        else (f, t, m)
                        for f, t, m in c
                    ]
                )
            out.append((fid, ctype, (etype, moved)))
        elif fid == _RG_FILE_OFFSET:
            out.append((fid, ctype, v + shift))
        elif fid == _RG_ORDINAL:
            out.append((fid, ctype, ordinal))
        else:
            out.append((fid, ctype, v))
    return out


def stitch(fragments: Sequence[Fragment]) -> list[bytes | memoryview]:
    """The pieces of one Parquet file holding the fragments' row groups in order (join them, or
    write them one after another)."""
    if not fragments:
        raise StitchError("nothing to stitch")
    if len(fragments) == 1:
        # One writer writing one row group writes the fragment itself: nothing moves.
        view = _bytes_view(fragments[0].data)
        end = fragments[0].body_end
        return [view[: len(MAGIC)], view[len(MAGIC) : end], view[end:-8], view[-8:-4], view[-4:]]
    pieces: list[bytes | memoryview] = [MAGIC]
    groups = []
    rows = 0
    at = len(MAGIC)
    for i, frag in enumerate(fragments):
        group = _get(frag.footer, _FILE_ROW_GROUPS)[1][0]
        groups.append(_move_group(group, at - len(MAGIC), i))
        rows += _get(frag.footer, _FILE_NUM_ROWS)
        body = frag.body
        pieces.append(body)
        at += len(body)
    first = fragments[0].footer
    footer: list[Field] = []
    for fid, ctype, v in first:
        if fid == _FILE_NUM_ROWS:
            footer.append((fid, ctype, rows))
        elif fid == _FILE_ROW_GROUPS:
            footer.append((fid, ctype, (v[0], groups)))
        else:
            footer.append((fid, ctype, v))
    encoded = _encode(footer)
    pieces += [encoded, struct.pack("<I", len(encoded)), MAGIC]
    return pieces


_RG_NUM_ROWS = 3


def read_footer(data: bytes | memoryview) -> list[Field]:
    """The decoded footer of the Parquet file ``data`` (for :func:`copy_row_groups`)."""
    view = _bytes_view(data)
    if len(view) < 12 or view[:4] != MAGIC or view[-4:] != MAGIC:
        raise StitchError("not a Parquet file")
    (footer_len,) = struct.unpack("<I", view[-8:-4])
    start = len(view) - 8 - footer_len
    return _decode(view[start : len(view) - 8])


def copy_row_groups(
    data: bytes | memoryview, first: int, stop: int, footer: list[Field] | None = None
) -> list[bytes | memoryview]:
    """The pieces of a Parquet file holding row groups ``first`` to ``stop - 1`` of the file
    ``data``, their chunks copied as they are (no decoding): a run of an object kept whole by
    a rewrite (:mod:`lake_core.upsert`). The footer is ``data``'s with only those groups, their
    offsets moved and ordinals renumbered; the same limits as :func:`parse_fragment` (no page
    indexes, no bloom filters) raise StitchError. ``footer``: ``data``'s, from
    :func:`read_footer` (decoding it once for several runs of one file)."""
    view = _bytes_view(data)
    if footer is None:
        footer = read_footer(view)
    (footer_len,) = struct.unpack("<I", view[-8:-4])
    start = len(view) - 8 - footer_len
    listed = _get(footer, _FILE_ROW_GROUPS)
    if listed is None or not 0 <= first < stop <= len(listed[1]):
        raise StitchError(f"no row groups {first}..{stop - 1} in the file")
    chosen = listed[1][first:stop]
    begin, end = len(view), 0
    for group in chosen:
        for chunk in _get(group, _RG_COLUMNS)[1]:
            meta = _get(chunk, _CC_META)
            if meta is None:
                raise StitchError("a column chunk has no metadata in the footer")
            if (
                any(
                    _get(chunk, f) is not None
                    for f in (_CC_OFFSET_INDEX_OFFSET, _CC_COLUMN_INDEX_OFFSET)
                )
                or _get(meta, _CM_BLOOM_FILTER) is not None
            ):
                raise StitchError("row groups with page indexes or bloom filters")
            at = min(v for v in (_get(meta, _CM_DICTIONARY_PAGE), _get(meta, _CM_DATA_PAGE)) if v)
            begin, end = min(begin, at), max(end, at + _get(meta, 7))  # 7: compressed size
    if end <= begin or end > start:
        raise StitchError("row group chunks outside the file's body")
    shift = len(MAGIC) - begin
    groups = [_move_group(g, shift, i) for i, g in enumerate(chosen)]
    rows = sum(_get(g, _RG_NUM_ROWS) for g in chosen)
    out: list[Field] = []
    for fid, ctype, v in footer:
        if fid == _FILE_NUM_ROWS:
            out.append((fid, ctype, rows))
        elif fid == _FILE_ROW_GROUPS:
            out.append((fid, ctype, (v[0], groups)))
        else:
            out.append((fid, ctype, v))
    encoded = _encode(out)
    return [MAGIC, view[begin:end], encoded, struct.pack("<I", len(encoded)), MAGIC]
