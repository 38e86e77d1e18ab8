"""The live object set of a snapshot, held as Arrow arrays and materialized lazily.

A cached snapshot (format version 2, see :mod:`lake_core.snapshot`) stores one row per live
object: ``id``, ``count``, ``size``, ``partition``, ``checksum``, ``tags`` (JSON), the key
bounds (``min_n``/``max_n``: the length of ``min``/``max``, null for None; ``min.<i>``/``max.<i>``
the i-th value) and the per-column stats (``stat:type:<col>`` null where the object lacks the
column, ``stat:min:<col>``, ``stat:max:<col>``, ``stat:nulls:<col>``).

Value columns (key bounds, stat min/max) are typed (int64, float64, string, bool, null) when
every value in them has one exact Python type, so they decode to exactly the values the JSON
encoding held; otherwise they hold each value JSON-encoded (field metadata ``enc: json``).
Encoding then decoding an :class:`ObjectMeta` gives an equal one.

:class:`LiveObjects` is the ``Snapshot.objects`` mapping. Invariants:

- It is a base (a table or a list of ObjectMeta, whichever came first; the other is derived
  on demand and kept) plus an overlay of the commits applied since (``removed`` base ids and
  ``added`` objects). The base is shared, never mutated in meaning, between the snapshots of
  one lineage, so replaying a chain copies only the overlay.
- Iterating ids, ``len``, membership, ids/sizes/counts and key-range pruning use the arrays;
  ObjectMeta are built only when values are asked for (all at once, then kept).
- Order: base rows in order, then added objects in the order they were added.
"""

from __future__ import annotations

import json
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.objects import ObjectMeta
from lake_core.stats import ColumnMeta, encode_value

_JSON_ENC = {b"enc": b"json"}
_STAT = "stat:"
#: Single-row lookups before a base materializes every row at once (``dict(live)`` and
#: friends look rows up one by one).
_LOOKUPS_BEFORE_FULL = 32


def _value_array(values: list[Any]) -> tuple[pa.Array[Any], bool]:
    """``values`` as a typed array when they share one exact Python type; else JSON text.
    Returns (array, is_json)."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pa.nulls(len(values)), False
    if len(kinds) == 1:
        kind = next(iter(kinds))
        arrow = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
        if kind in arrow:
            try:
                return pa.array(values, arrow[kind]), False
            except (pa.ArrowException, OverflowError):
                pass  # an int beyond int64: JSON keeps it exactly
    return pa.array([None if v is None else json.dumps(v) for v in values], pa.string()), True


def _values(column: pa.ChunkedArray[Any], field: pa.Field[Any]) -> list[Any]:
    raw = column.to_pylist()
    if field.metadata and field.metadata.get(b"enc") == b"json":
        return [None if v is None else json.loads(v) for v in raw]
    return raw


def encode_objects(objects: Iterable[ObjectMeta]) -> pa.Table:
    """One row per object, in order (see the module docstring)."""
    objs = list(objects)
    cols: dict[str, pa.Array[Any]] = {}
    meta: dict[str, dict[bytes, bytes] | None] = {}

    def put(name: str, arr: pa.Array[Any], is_json: bool = False) -> None:
        cols[name] = arr
        meta[name] = _JSON_ENC if is_json else None

    put("id", pa.array([o.id for o in objs], pa.string()))
    put("count", pa.array([o.count for o in objs], pa.int64()))
    put("size", pa.array([o.size for o in objs], pa.int64()))
    put("partition", pa.array([o.partition for o in objs], pa.string()))
    put("checksum", pa.array([o.checksum for o in objs], pa.string()))
    put("tags", pa.array([json.dumps(o.tags) if o.tags else None for o in objs], pa.string()))
    for which in ("min", "max"):
        bounds = [o.min if which == "min" else o.max for o in objs]
        put(f"{which}_n", pa.array([None if b is None else len(b) for b in bounds], pa.int32()))
        width = max((len(b) for b in bounds if b is not None), default=0)
        for i in range(width):
            vals = [b[i] if b is not None and i < len(b) else None for b in bounds]
            put(f"{which}.{i}", *_value_array(vals))
    names: dict[str, None] = {}
    for o in objs:
        names.update(dict.fromkeys(o.columns))
    for name in names:
        stats = [o.columns.get(name) for o in objs]
        put(f"{_STAT}type:{name}", pa.array([s and s.type for s in stats], pa.string()))
        put(f"{_STAT}min:{name}", *_value_array([s and s.min for s in stats]))
        put(f"{_STAT}max:{name}", *_value_array([s and s.max for s in stats]))
        put(f"{_STAT}nulls:{name}", pa.array([s and s.nulls for s in stats], pa.int64()))
    fields = [pa.field(n, a.type, metadata=meta[n]) for n, a in cols.items()]
    return pa.Table.from_arrays(list(cols.values()), schema=pa.schema(fields))


def decode_objects(table: pa.Table) -> list[ObjectMeta]:
    """The ObjectMeta of every row of an :func:`encode_objects` table, in order. Raises
    KeyError/TypeError/ValueError on a malformed table."""
    schema = table.schema

    def col(name: str) -> list[Any]:
        return _values(table.column(name), schema.field(name))

    n = table.num_rows
    ids, counts, sizes = col("id"), col("count"), col("size")
    parts, sums, tags = col("partition"), col("checksum"), col("tags")
    bounds: dict[str, list[list[Any] | None]] = {}
    for which in ("min", "max"):
        lens = col(f"{which}_n")
        width = max((x for x in lens if x is not None), default=0)
        vals = [col(f"{which}.{i}") for i in range(width)]
        bounds[which] = [
            None if k is None else [vals[i][r] for i in range(k)] for r, k in enumerate(lens)
        ]
    stat_names = [
        f.name[len(_STAT) + len("type:") :] for f in schema if f.name.startswith(f"{_STAT}type:")
    ]
    stat_cols = [
        (
            name,
            col(f"{_STAT}type:{name}"),
            col(f"{_STAT}min:{name}"),
            col(f"{_STAT}max:{name}"),
            col(f"{_STAT}nulls:{name}"),
        )
        for name in stat_names
    ]
    out = []
    for r in range(n):
        if ids[r] is None or counts[r] is None or sizes[r] is None:
            raise ValueError("an object row without id, count or size")
        columns = {
            name: ColumnMeta(t[r], lo[r], hi[r], int(nu[r]))
            for name, t, lo, hi, nu in stat_cols
            if t[r] is not None
        }
        out.append(
            ObjectMeta(
                id=ids[r],
                min=bounds["min"][r],
                max=bounds["max"][r],
                count=counts[r],
                size=sizes[r],
                columns=columns,
                partition=parts[r],
                tags=json.loads(tags[r]) if tags[r] is not None else {},
                checksum=sums[r],
            )
        )
    return out


#: Chunks a folded base may hold before they are combined: each fold appends one.
_MAX_CHUNKS = 16


def _few_chunks(table: pa.Table) -> pa.Table:
    """``table``, its columns combined into one chunk once folds have split them into many."""
    if table.num_columns and table.column(0).num_chunks > _MAX_CHUNKS:
        return table.combine_chunks()
    return table


def _concat_exact(a: pa.Table, b: pa.Table) -> pa.Table | None:
    """``a`` then ``b`` as one table when every shared column has one type (a column only one
    side has, or that is all-null on one side, is filled with nulls); None otherwise, so no
    value is ever cast (an int bound must not come back a float)."""
    if a.schema.equals(b.schema, check_metadata=True):
        return pa.concat_tables([a, b])
    in_a = {f.name: (i, f) for i, f in enumerate(a.schema)}
    in_b = {f.name: (i, f) for i, f in enumerate(b.schema)}
    fields, left, right = [], [], []
    for name in dict.fromkeys([*in_a, *in_b]):
        ia, fa = in_a.get(name, (-1, None))
        ib, fb = in_b.get(name, (-1, None))
        if fa is not None and fb is not None and fa.type != fb.type:
            if pa.types.is_null(fa.type):
                fa = None
            elif pa.types.is_null(fb.type):
                fb = None
            else:
                return None
        if fa is not None and fb is not None and fa.metadata != fb.metadata:
            return None
        f = fa if fa is not None else fb
        assert f is not None
        fields.append(f)
        left.append(a.column(ia) if fa is not None else pa.nulls(a.num_rows, f.type))
        right.append(b.column(ib) if fb is not None else pa.nulls(b.num_rows, f.type))
    schema = pa.schema(fields)
    return pa.concat_tables(
        [pa.Table.from_arrays(left, schema=schema), pa.Table.from_arrays(right, schema=schema)]
    )


class _Base:
    """Rows shared by the snapshots of one lineage: a table, a list of ObjectMeta, or both."""

    def __init__(self, table: pa.Table | None = None, metas: list[ObjectMeta] | None = None):
        assert table is not None or metas is not None
        self._table = table
        self._metas = metas
        self._ids: list[str] | None = None
        self._index: dict[str, int] | None = None
        self._rows: dict[int, ObjectMeta] = {}

    def __len__(self) -> int:
        return len(self._metas) if self._metas is not None else self.table().num_rows

    def table(self) -> pa.Table:
        if self._table is None:
            assert self._metas is not None
            self._table = encode_objects(self._metas)
        return self._table

    def ids(self) -> list[str]:
        if self._ids is None:
            if self._metas is not None:
                self._ids = [o.id for o in self._metas]
            else:
                raw: list[Any] = self.table().column("id").to_pylist()
                self._ids = raw  # strings: decoding checked the column has no nulls
        return self._ids

    def index(self) -> dict[str, int]:
        if self._index is None:
            ids = self.ids()
            self._index = dict(zip(ids, range(len(ids)), strict=True))
        return self._index

    def metas(self) -> list[ObjectMeta]:
        if self._metas is None:
            self._metas = decode_objects(self.table())
            self._rows.clear()
        return self._metas

    def row(self, i: int) -> ObjectMeta:
        if self._metas is not None:
            return self._metas[i]
        got = self._rows.get(i)
        if got is None:
            if len(self._rows) >= _LOOKUPS_BEFORE_FULL:
                return self.metas()[i]
            got = self._rows[i] = decode_objects(self.table().slice(i, 1))[0]
        return got


class LiveObjects(Mapping[str, ObjectMeta]):
    """Object id -> ObjectMeta of a snapshot's live set; see the module docstring."""

    __slots__ = ("_added", "_base", "_removed")

    def __init__(
        self,
        base: _Base | None = None,
        removed: frozenset[str] = frozenset(),
        added: Mapping[str, ObjectMeta] | None = None,
    ) -> None:
        self._base = base if base is not None else _Base(metas=[])
        self._removed = removed
        self._added: Mapping[str, ObjectMeta] = added if added is not None else {}

    @classmethod
    def from_table(cls, table: pa.Table) -> LiveObjects:
        return cls(_Base(table=table))

    @classmethod
    def from_objects(cls, objects: Iterable[ObjectMeta]) -> LiveObjects:
        return cls(_Base(metas=list(objects)))

    @classmethod
    def of(cls, objects: Mapping[str, ObjectMeta]) -> LiveObjects:
        return objects if isinstance(objects, LiveObjects) else cls.from_objects(objects.values())

    # -- Mapping ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._base) - len(self._removed) + len(self._added)

    def __contains__(self, key: object) -> bool:
        if key in self._added:
            return True
        return key not in self._removed and key in self._base.index()

    def __getitem__(self, key: str) -> ObjectMeta:
        got = self._added.get(key)
        if got is not None:
            return got
        if key in self._removed:
            raise KeyError(key)
        return self._base.row(self._base.index()[key])

    def __iter__(self) -> Iterator[str]:
        removed = self._removed
        if removed:
            yield from (i for i in self._base.ids() if i not in removed)
        else:
            yield from self._base.ids()
        yield from self._added

    def values(self) -> _Values:
        return _Values(self)

    def items(self) -> _Items:
        return _Items(self)

    def iter_values(self) -> Iterator[ObjectMeta]:
        removed = self._removed
        metas = self._base.metas() if len(self._base) else []
        if removed:
            yield from (o for o in metas if o.id not in removed)
        else:
            yield from metas
        yield from self._added.values()

    # -- commits -----------------------------------------------------------------------------

    def applied(self, deletes: Iterable[str], adds: Iterable[ObjectMeta]) -> LiveObjects:
        """The set after deleting ``deletes`` then adding ``adds``; the caller has checked
        that every delete is live and no add is. Copies only the overlay."""
        removed = set(self._removed)
        added = dict(self._added)
        for i in deletes:
            if added.pop(i, None) is None:
                removed.add(i)
        for o in adds:
            added[o.id] = o
        return LiveObjects(self._base, frozenset(removed), added)

    def compacted(self) -> LiveObjects:
        """The same set with the overlay folded into a new base (bounds the overlay a long
        run of commits in one process builds up)."""
        if not self._removed and not self._added:
            return self
        base = self._base
        if base._table is not None:
            # The base is encoded already (a decoded snapshot, or the last checkpoint this
            # process wrote): extend that encoding by the overlay's rows, so the next
            # checkpoint encodes the commits since this one, not every live object again.
            table = _few_chunks(self.table())
            metas = list(self.iter_values()) if base._metas is not None else None
            return LiveObjects(_Base(table=table, metas=metas))
        return LiveObjects(_Base(metas=list(self.iter_values())))

    # -- columnar ----------------------------------------------------------------------------

    def table(self) -> pa.Table:
        """One row per live object, in order (the snapshot's encoding)."""
        if not self._removed and not self._added:
            return self._base.table()
        base = self._base.table()
        if self._removed:
            mask = pc.invert(pc.is_in(base.column("id"), pa.array(list(self._removed))))
            base = base.filter(mask)
        if not self._added:
            return base
        joined = _concat_exact(base, encode_objects(self._added.values()))
        if joined is not None:
            return joined
        return encode_objects(self.iter_values())

    def ids(self) -> list[str]:
        return list(self)

    @property
    def count(self) -> int:
        """Rows across the live objects."""
        return self._sum("count")

    @property
    def size(self) -> int:
        """Bytes across the live objects."""
        return self._sum("size")

    def _sum(self, column: str) -> int:
        if self._base._metas is not None or len(self._base) == 0:
            return sum(getattr(o, column) for o in self.iter_values())
        base = self._base.table()
        total = int(pc.sum(base.column(column)).as_py() or 0)
        if self._removed:
            gone = pc.is_in(base.column("id"), pa.array(list(self._removed)))
            total -= int(pc.sum(base.filter(gone).column(column)).as_py() or 0)
        return total + sum(int(getattr(o, column)) for o in self._added.values())

    def within(
        self, column: str, lo: Any, lo_inclusive: bool, hi: Any, hi_inclusive: bool
    ) -> list[ObjectMeta] | None:
        """The live objects whose stats of ``column`` do not prove every value outside
        ``[lo, hi]`` (a None bound is open), in order; objects without usable stats for it
        are kept. Vectorised over the base's stat columns. None when the stats cannot be
        compared that way (the caller then tests each object)."""
        base = self._base
        if base._table is None or len(base) == 0:
            return None
        table = base.table()
        names = (f"{_STAT}min:{column}", f"{_STAT}max:{column}")
        if not all(n in table.schema.names for n in names):
            return None
        fmin, fmax = (table.schema.field(n) for n in names)
        if fmin.metadata or fmax.metadata:
            return None  # JSON-encoded values: no single type to compare in
        # Integers (timestamps and dates are encoded as integers too) and strings only: float
        # stats leave NaN out, and a NaN row can match a negated comparison.
        ok = (pa.types.is_integer, pa.types.is_string)
        if not any(t(fmin.type) for t in ok) or not any(t(fmax.type) for t in ok):
            return None
        mins, maxs = table.column(names[0]), table.column(names[1])
        drop: Any = None  # rows whose stats prove every value outside the range
        try:
            if hi is not None:
                v = pa.scalar(encode_value(pa.null(), hi))
                drop = pc.greater(mins, v) if hi_inclusive else pc.greater_equal(mins, v)
            if lo is not None:
                v = pa.scalar(encode_value(pa.null(), lo))
                low = pc.less(maxs, v) if lo_inclusive else pc.less_equal(maxs, v)
                drop = low if drop is None else pc.or_kleene(drop, low)
        except (pa.ArrowException, TypeError):
            return None
        if drop is None:
            rows: list[int] = list(range(len(base)))
        else:
            # Unknown (null) stats prove nothing: such rows stay.
            rows = pc.indices_nonzero(pc.invert(pc.fill_null(drop, False))).to_pylist()
        removed = self._removed
        if base._metas is not None:
            picked = [base._metas[i] for i in rows]
        else:  # decode only the rows picked
            picked = decode_objects(table.take(pa.array(rows, pa.int64()))) if rows else []
        out = [o for o in picked if o.id not in removed] if removed else picked
        # Added objects are few (at most a chain's worth); the caller tests them one by one.
        out.extend(self._added.values())
        return out


class _Values(ValuesView[ObjectMeta]):
    """``LiveObjects.values()``: materializes the base once instead of row by row."""

    _mapping: LiveObjects

    def __iter__(self) -> Iterator[ObjectMeta]:
        return self._mapping.iter_values()


class _Items(ItemsView[str, ObjectMeta]):
    _mapping: LiveObjects

    def __iter__(self) -> Iterator[tuple[str, ObjectMeta]]:
        return ((o.id, o) for o in self._mapping.iter_values())
