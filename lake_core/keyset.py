"""The keys an upsert changes, and the one overlap test its planning and its validation share.

A :class:`KeySet` holds the distinct keys of an upsert's input that can match a row: keys
with a null in any key field never match (SQL equality), so they are left out. Each key is a
tuple with one value per key field, encoded as object bounds are (:func:`lake_core.stats.
encode_value`: timestamps as integer microseconds, dates as days), sorted ascending.

An object *meets* the set when its key span ``[min, max]`` (ascending terms, nulls ignored:
:mod:`lake_core.objects`) contains one of the keys. Invariant (soundness): an object holding
a row whose key is in the set always meets it; meeting is allowed to be a false positive (the
span only bounds the object's keys), never a false negative. So anything that cannot be
compared — a key type the stats do not encode (decimals, binary), bounds of another type or
length — counts as meeting: the object is read, never wrongly skipped.

Whole-record keys (``--orderby this``, :meth:`KeySet.of_whole`): a null is a value there, so
a key holding nulls matches an equal record. Such a key is kept as its *prefix* (the fields
before its first null): a row equal to it has that prefix, so only an object whose span's
first fields can hold the prefix meets it. A key whose first field is null meets every object
holding rows with a null first field (those sort past ``max``; ``min`` is None when all do).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.objects import ObjectMeta
from lake_core.stats import encode_value


def _plain(t: pa.DataType) -> bool:
    """Integers and strings: their stats encoding is the value itself."""
    return bool(pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t))


def _encoded(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> list[Any]:
    """The column's values encoded as object bounds are; None for null (or unencodable)."""
    t = column.type
    raw = column.to_pylist()
    if _plain(t):
        return raw  # their own encoding: skip the per-value call
    return [None if v is None else encode_value(t, v) for v in raw]


@dataclass(frozen=True)
class KeySet:
    """Sorted distinct encoded keys (see the module docstring). ``opaque``: some key could not
    be encoded or ordered, so every object with a non-null key meets the set."""

    keys: tuple[tuple[Any, ...], ...] = ()
    width: int = 1
    opaque: bool = False
    #: Every object meets the set (even one whose first key field is null in every row).
    everything: bool = False
    #: Whole-record keys holding a null, as (prefix length, sorted distinct encoded prefixes).
    prefixes: tuple[tuple[int, tuple[tuple[Any, ...], ...]], ...] = ()
    #: The first key field, when some whole-record key has it null (see the module docstring).
    null_first: str | None = None

    @classmethod
    def of_whole(
        cls, columns: Sequence[pa.ChunkedArray[Any] | pa.Array[Any]], names: Sequence[str]
    ) -> KeySet:
        """The set of whole-record keys (``columns``: one per pool column ``names``, in key
        order), nulls being values: keys without a null as :meth:`of_columns` keeps them,
        the others as prefixes (see the module docstring)."""
        if not columns:
            return cls()
        width = len(columns)
        chunked = [pa.chunked_array([c]) if isinstance(c, pa.Array) else c for c in columns]
        nulls = np.column_stack(
            [pc.is_null(c).to_numpy(zero_copy_only=False) for c in chunked]
        )
        holed: Any = nulls.any(axis=1)
        whole = cls.of_columns([c.filter(pa.array(~holed)) for c in chunked])
        if not holed.any():
            return whole
        first_null = nulls.argmax(axis=1)
        prefixes = []
        opaque = whole.opaque
        null_first = None
        for length in sorted({int(i) for i in first_null[holed]}):
            mask: Any = holed & (first_null == length)
            picked = pa.array(mask)
            if length == 0:
                null_first = str(names[0])
                continue
            part = cls.of_columns([c.filter(picked) for c in chunked[:length]])
            opaque = opaque or part.opaque
            prefixes.append((length, part.keys))
        return cls(whole.keys, width, opaque, prefixes=tuple(prefixes), null_first=null_first)

    @classmethod
    def of_columns(cls, columns: Sequence[pa.ChunkedArray[Any] | pa.Array[Any]]) -> KeySet:
        """The set of the rows' keys; ``columns``: one per key field, in key order."""
        if not columns:
            return cls()
        width = len(columns)
        names = [f"k{i}" for i in range(width)]
        table = pa.Table.from_arrays(
            [pa.chunked_array([c]) if isinstance(c, pa.Array) else c for c in columns], names
        )
        valid = None
        for c in table.columns:
            if c.null_count:
                ok = pc.is_valid(c)
                valid = ok if valid is None else pc.and_(valid, ok)
        if valid is not None:
            table = table.filter(valid)  # a null key field: never matches a row
        if table.num_rows == 0:
            return cls((), width)
        grouped = True
        try:
            table = table.group_by(names, use_threads=False).aggregate([])
        except pa.ArrowNotImplementedError:
            grouped = False  # a type Arrow cannot group (structs): the set below dedupes
        if grouped and all(_plain(c.type) for c in table.columns):
            # Integers and strings are their own encoding, never None once nulls are gone,
            # and Arrow orders them as Python does (strings by code point, as UTF-8 bytes
            # sort): the distinct rows sorted by Arrow are the set, no Python sort or check.
            distinct = table.sort_by([(n, "ascending") for n in names])
            columns_ = [c.to_pylist() for c in distinct.columns]
            return cls(tuple(zip(*columns_, strict=True)), width)
        encoded = [_encoded(c) for c in table.columns]
        keys = set(zip(*encoded, strict=True))
        opaque = any(v is None for k in keys for v in k)  # a value the stats cannot encode
        if opaque:
            keys = {k for k in keys if not any(v is None for v in k)}
        try:
            ordered = tuple(sorted(keys))
        except TypeError:
            ordered, opaque = tuple(keys), True
        return cls(ordered, width, opaque)

    @classmethod
    def of_table(cls, table: pa.Table, fields: Iterable[str]) -> KeySet:
        """The set of ``table``'s keys over ``fields`` (a field it lacks is null: no key)."""
        names = list(fields)
        if any(f not in table.schema.names for f in names):
            return cls((), len(names))
        return cls.of_columns([table.column(f) for f in names])

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(
            self.keys or self.opaque or self.everything or self.prefixes or self.null_first
        )

    def spans(self, lo: Sequence[Any] | None, hi: Sequence[Any] | None) -> bool:
        """Whether the closed span ``[lo, hi]`` (ascending terms) contains one of the keys."""
        if self.everything:
            return True
        if lo is None or hi is None:
            return False  # the object's first key field is null in every row: no key matches
        if self.opaque:
            return True
        for length, prefixes in self.prefixes:
            if _holds(prefixes, tuple(lo[:length]), tuple(hi[:length])):
                return True
        if not self.keys:
            return False
        if len(lo) != self.width or len(hi) != self.width:
            return True  # bounds of another key shape: not comparable, so read it
        return _holds(self.keys, tuple(lo), tuple(hi))

    def meets(self, obj: ObjectMeta) -> bool:
        """Whether ``obj``'s key span contains one of the keys (see the module docstring)."""
        if self.null_first is not None:
            col = obj.columns.get(self.null_first)
            if obj.min is None or col is None or col.nulls > 0:
                return True  # it holds rows whose first key field is null
        return self.spans(obj.min, obj.max)

    @property
    def bounds(self) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
        """(smallest, largest) key, or None when empty or opaque."""
        if self.opaque or not self.keys or self.prefixes or self.null_first:
            return None
        return self.keys[0], self.keys[-1]


def _holds(keys: Sequence[tuple[Any, ...]], lo: tuple[Any, ...], hi: tuple[Any, ...]) -> bool:
    """Whether sorted ``keys`` has one in the closed span [lo, hi] (True when the bounds do
    not compare: a None or another type, so the object is read)."""
    try:
        i = bisect_left(keys, lo)
        return i < len(keys) and not hi < keys[i]
    except TypeError:
        return True


__all__ = ["KeySet"]
