"""Thrift's compact protocol, as Parquet's footers and page indexes use it: stepping over values
without building them, reading the few integers a caller needs, and encoding them again.

Plain functions over ``bytes`` (hot Python when an object has many row groups): a reader passes
a buffer and a position and gets back the value and the position after it. Nothing here knows
Parquet's structs; :mod:`lake_core.stitch` and :mod:`lake_core.pages` name the fields they walk.
Bytes that are not what a walk expects raise :class:`ThriftError` (or IndexError when cut
short: callers turn that into their own error).
"""

from __future__ import annotations

# Compact protocol types.
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY = 0, 1, 2, 3, 4, 5, 6, 7, 8
LIST, SET, MAP, STRUCT = 9, 10, 11, 12


class ThriftError(ValueError):
    """Bytes that are not the compact-protocol value a walk expected."""


def get_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``data[pos]`` and the position after it."""
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def get_int(data: bytes, pos: int) -> tuple[int, int]:
    """The zigzag integer (i16, i32 or i64) at ``data[pos]`` and the position after it."""
    n, pos = get_varint(data, pos)
    return (n >> 1) ^ -(n & 1), pos


def skip_varint(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def list_head(data: bytes, pos: int) -> tuple[int, int, int]:
    """(size, element type, position of the first element) of the list header at ``data[pos]``."""
    head = data[pos]
    size, etype = head >> 4, head & 0x0F
    if size == 15:
        size, after = get_varint(data, pos + 1)
        return size, etype, after
    return size, etype, pos + 1


def skip(data: bytes, pos: int, ctype: int) -> int:
    """The position after the value of type ``ctype`` at ``data[pos]``."""
    if I16 <= ctype <= I64:
        return skip_varint(data, pos)
    if ctype == BINARY:
        n, pos = get_varint(data, pos)
        return pos + n
    if ctype == STRUCT:
        return skip_struct(data, pos)
    if ctype in (LIST, SET):
        size, etype, pos = list_head(data, pos)
        if etype in (TRUE, FALSE, BYTE):  # in a collection a bool is one byte
            return pos + size
        if etype == DOUBLE:
            return pos + 8 * size
        if I16 <= etype <= I64:
            # Integers (the level histograms of a footer's size statistics, per column
            # chunk): each ends at a byte below 0x80.
            for _ in range(size):
                while data[pos] & 0x80:
                    pos += 1
                pos += 1
            return pos
        for _ in range(size):
            pos = skip(data, pos, etype)
        return pos
    if ctype == BYTE:
        return pos + 1
    if ctype == DOUBLE:
        return pos + 8
    raise ThriftError(f"unsupported Thrift compact type {ctype}")


def skip_struct(data: bytes, pos: int) -> int:
    while True:
        head = data[pos]
        pos += 1
        ctype = head & 0x0F
        if ctype == STOP:
            return pos
        if not head >> 4:  # a long-form field id follows
            pos = skip_varint(data, pos)
        if ctype > FALSE:  # a bool field's value is its type
            pos = skip(data, pos, ctype)


def field_header(data: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, type, position of its value) of the field header at ``data[pos]``; type
    ``STOP`` at the struct's end (the position is then after it)."""
    head = data[pos]
    pos += 1
    ctype = head & 0x0F
    if ctype == STOP:
        return 0, STOP, pos
    delta = head >> 4
    if delta:
        return last + delta, ctype, pos
    fid, pos = get_int(data, pos)
    return fid, ctype, pos


def struct_fields(data: bytes, pos: int) -> tuple[dict[int, tuple[int, int, int]], int]:
    """{field id: (type, value start, value end)} of the struct at ``data[pos]``, and the
    position after it."""
    fields: dict[int, tuple[int, int, int]] = {}
    last = 0
    while True:
        fid, ctype, pos = field_header(data, pos, last)
        if ctype == STOP:
            return fields, pos
        start = pos
        if ctype > FALSE:
            pos = skip(data, pos, ctype)
        fields[fid] = (ctype, start, pos)
        last = fid


def int_field(data: bytes, fields: dict[int, tuple[int, int, int]], fid: int) -> int | None:
    """The integer field ``fid`` of a struct walked by :func:`struct_fields`, or None."""
    found = fields.get(fid)
    if found is None or not (I16 <= found[0] <= I64):
        return None
    return get_int(data, found[1])[0]


def put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def list_header(size: int, etype: int) -> bytes:
    out = bytearray()
    if size < 15:
        out.append((size << 4) | etype)
    else:
        out.append(0xF0 | etype)
        put_varint(out, size)
    return bytes(out)


def zigzag64(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & 0xFFFF_FFFF_FFFF_FFFF


def zigzag16(v: int) -> int:
    v = ((v + 0x8000) & 0xFFFF) - 0x8000  # an i16, as the C++ writer casts the ordinal
    return ((v << 1) ^ (v >> 15)) & 0xFFFF


def field_head(fid: int, ctype: int, last: int) -> bytes:
    """The compact protocol's header of field ``fid`` of type ``ctype`` after field ``last``."""
    delta = fid - last
    if 0 < delta <= 15:
        return bytes(((delta << 4) | ctype,))
    out = bytearray((ctype,))
    put_varint(out, zigzag16(fid))
    return bytes(out)


class StructWriter:
    """Writes one struct's fields in increasing id order (the compact protocol encodes a field
    id as the difference from the last): :meth:`integer`, :meth:`binary`, :meth:`raw` (a struct
    or list already encoded), then :meth:`end`."""

    def __init__(self, out: bytearray) -> None:
        self.out = out
        self.last = 0

    def _head(self, fid: int, ctype: int) -> None:
        self.out += field_head(fid, ctype, self.last)
        self.last = fid

    def integer(self, fid: int, value: int, ctype: int = I64) -> None:
        self._head(fid, ctype)
        put_varint(self.out, zigzag64(value))

    def binary(self, fid: int, value: bytes) -> None:
        self._head(fid, BINARY)
        put_varint(self.out, len(value))
        self.out += value

    def raw(self, fid: int, ctype: int, encoded: bytes) -> None:
        """A field whose value (a struct, a list) is already encoded."""
        self._head(fid, ctype)
        self.out += encoded

    def end(self) -> None:
        self.out.append(STOP)
