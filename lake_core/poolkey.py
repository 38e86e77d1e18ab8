"""The pool key: which fields order a pool's records, and in which direction.

Invariants: records are sorted by the key fields in order, all ascending or all descending;
a null (missing) key sorts last in both directions; key-range predicates exclude nulls.

The whole record as the key (seed 001's ``this``): ``PoolKey(("this",))``, created with
``--orderby this[:asc|:desc]``. Its fields are not stored: they are *resolved* against a
schema (:meth:`PoolKey.resolve`) to that schema's columns in schema order. The pool schema
only ever grows at the end (:func:`~lake_core.ingest.schema.unify_schema` appends new
columns), and a column an object lacks is null there, sorting last — so the order an older
object was written in (by the pool's columns of its day) is a prefix of today's order, and
its recorded ``min``/``max`` (one value per column of its day) are a prefix of today's
bounds (:func:`lake_core.maintenance.policy.span` compares such prefixes soundly). Writers
resolve the key against the *pool* schema (not an input's own column order) before writing;
a writer handed an unresolved ``this`` key refuses (:meth:`PoolKey.require_resolved`).
``this`` is therefore a reserved name: no column named ``this`` can be a key field.

Key equality (duplicates, upserts): :meth:`PoolKey.same_as_next` — a row whose named key
holds a null in any field equals nothing (SQL semantics: nulls never match); under ``this``
a null is a value like any other, so identical records are equal whatever they lack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import KeyTypeError, UsageError
from lake_core.names import validate_name

ORDERS = ("asc", "desc")
#: The key name that stands for the whole record.
THIS = "this"


@dataclass(frozen=True)
class PoolKey:
    """``fields`` in significance order; ``order`` is ``asc`` or ``desc``."""

    fields: tuple[str, ...] = ("ts",)
    order: str = "desc"
    #: True for a key resolved from ``this`` (:meth:`resolve`): its fields are the pool's
    #: columns, and the writer lays a table's columns out in that order.
    whole: bool = False

    def __post_init__(self) -> None:
        if not self.fields:
            raise UsageError("a pool key needs at least one field")
        if self.order not in ORDERS:
            raise UsageError(f"order must be asc or desc, not {self.order!r}")
        if THIS in self.fields and len(self.fields) > 1 and not self.whole:
            raise UsageError("the whole-record key 'this' cannot be combined with fields")

    @classmethod
    def parse(cls, text: str) -> PoolKey:
        """``KEY[,KEY…][:asc|:desc]``, as ``lake create --orderby`` takes it (default desc).

        Key field names follow the name rules (:func:`~lake_core.names.validate_name`: not
        empty, at most 64 bytes, no whitespace, control characters, ``.``, ``@`` or ``/``;
        ``,`` and ``:`` separate fields and the order) and are distinct. A key field may be
        missing from the data: such records have a null key. ``this`` alone is the whole
        record; it cannot be combined with fields."""
        spec, colon, order = text.partition(":")
        order = order.strip().lower() if colon else "desc"
        if order not in ORDERS:
            raise UsageError(f"--orderby order must be asc or desc, not {order!r}")
        fields = tuple(f.strip() for f in spec.split(","))
        if THIS in fields and len(fields) > 1:
            raise UsageError("--orderby this (the whole record) cannot be combined with fields")
        for f in fields:
            validate_name(f, "key field")
        dup = next((f for i, f in enumerate(fields) if f in fields[:i]), None)
        if dup is not None:
            raise UsageError(f"--orderby names key field {dup!r} twice")
        return cls(fields, order)

    def __str__(self) -> str:
        return f"{','.join(self.fields)}:{self.order}"

    @property
    def descending(self) -> bool:
        return self.order == "desc"

    @property
    def is_this(self) -> bool:
        """Whether this is the unresolved whole-record key (``this``)."""
        return self.fields == (THIS,)

    def names(self, schema: pa.Schema | None) -> tuple[str, ...]:
        """The key fields, ``this`` resolved to ``schema``'s columns (in its order)."""
        if self.is_this and schema is not None and len(schema) > 0:
            return tuple(schema.names)
        return self.fields

    def resolve(self, schema: pa.Schema | None) -> PoolKey:
        """The key with ``this`` resolved against ``schema`` (the *pool* schema, whose column
        order is the key order); a named key is returned as it is."""
        if not self.is_this or schema is None or len(schema) == 0:
            return self
        return PoolKey(tuple(schema.names), self.order, whole=True)

    def require_resolved(self) -> None:
        """Raise ValueError for an unresolved ``this`` key (a writer needs the pool's column
        order to sort and to record bounds comparable across objects)."""
        if self.is_this:
            raise ValueError(
                "the whole-record key 'this' must be resolved against the pool schema "
                "(PoolKey.resolve) before writing"
            )

    def layout(self, table: pa.Table) -> pa.Table:
        """``table`` with its columns in key order when the key is a resolved ``this`` (the
        table keeps only its own columns); any other key leaves it as it is."""
        if not self.whole:
            return table
        order = {n: i for i, n in enumerate(self.fields)}
        names = sorted(table.schema.names, key=lambda n: (order.get(n, len(order)), n))
        return table if names == table.schema.names else table.select(names)

    def sort_keys(self, schema: pa.Schema, descending: bool | None = None) -> list[Any]:
        """pyarrow sort keys (nulls last) for the key fields present in ``schema`` (``this``:
        every column of ``schema``, in its order)."""
        desc = self.descending if descending is None else descending
        direction = "descending" if desc else "ascending"
        return [(f, direction, "at_end") for f in self.names(schema) if f in schema.names]

    def check_types(self, schema: pa.Schema) -> None:
        """Raise KeyTypeError if a key field present in ``schema`` has a type records cannot
        be ordered by (lists, maps, unions, or structs holding them). Under ``this`` every
        column is a key field."""
        for f in self.names(schema):
            if f in schema.names and not _orderable(schema.field(f).type):
                raise KeyTypeError(f, str(schema.field(f).type))

    def sort_indices(self, table: pa.Table) -> pa.Array[Any]:
        """Stable sort order of ``table`` by the key, nulls last. Raises KeyTypeError for a key
        field that cannot be ordered."""
        self.check_types(table.schema)
        keys = self.sort_keys(table.schema)
        if not keys or table.num_rows == 0:
            return pa.array(range(table.num_rows), pa.int64())
        return pc.sort_indices(table, sort_keys=keys)

    def key_columns(
        self, table: pa.Table, schema: pa.Schema | None = None
    ) -> list[pa.ChunkedArray[Any]]:
        """The key columns of ``table``; a field the table lacks is all null. ``this`` is
        resolved against ``schema`` (default: the table's own; pass the pool schema to compare
        keys of tables holding different columns)."""
        out = []
        for f in self.names(schema if schema is not None else table.schema):
            if f in table.schema.names:
                out.append(table.column(f))
            else:
                out.append(pa.chunked_array([pa.nulls(table.num_rows)]))
        return out

    def key_at(self, columns: list[pa.ChunkedArray[Any]], row: int) -> tuple[Any, ...]:
        return tuple(c[row].as_py() for c in columns)

    @property
    def nulls_match(self) -> bool:
        """Whether a null key value equals a null (the whole record: a null is a value like
        any other); a named key with a null field equals nothing."""
        return self.is_this or self.whole

    def match_columns(
        self, table: pa.Table, schema: pa.Schema | None = None
    ) -> list[pa.ChunkedArray[Any]]:
        """Columns an equality join on the key can use (:meth:`key_columns` for a named key).
        Under ``this`` (nulls match), every leaf of the key — struct fields flattened —
        becomes its validity and its values with nulls filled by a fixed value of the type,
        so two equal records join whatever they lack. Tables joined with each other must
        hold the same key columns and types (conform them to the pool schema first)."""
        columns = self.key_columns(table, schema)
        if not self.nulls_match:
            return columns
        out: list[pa.ChunkedArray[Any]] = []
        for column in columns:
            for part in _comparable(column.combine_chunks()):
                out.append(pa.chunked_array([part.is_valid()]))
                if not pa.types.is_null(part.type):
                    filled: Any = pc.fill_null(part, _filler(part.type))
                    out.append(pa.chunked_array([filled]))
        return out

    def same_as_next(
        self, table: pa.Table, schema: pa.Schema | None = None
    ) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """For each row of ``table`` but the last, whether the next row has an equal key
        (length ``num_rows - 1``); in a table sorted by the key, equal keys are adjacent.
        A named key with a null in any field equals nothing; under ``this`` (or a resolved
        ``this``) nulls are values: equal records are equal whatever they lack. Struct
        columns compare field by field; ``schema`` resolves ``this`` (see
        :meth:`key_columns`)."""
        n = table.num_rows
        if n < 2:
            return np.zeros(max(0, n - 1), dtype=np.bool_)
        nulls_match = self.nulls_match
        same = np.ones(n - 1, dtype=np.bool_)
        for column in self.key_columns(table, schema):
            for part in _comparable(column.combine_chunks()):
                if pa.types.is_null(part.type):  # all null: equal under ``this`` only
                    if not nulls_match:
                        same[:] = False
                    continue
                a, b = part.slice(0, n - 1), part.slice(1)
                eq: Any = pc.equal(a, b)
                if nulls_match:
                    both = pc.and_(pc.is_null(a), pc.is_null(b))
                    eq = pc.or_(pc.fill_null(eq, False), both)
                else:
                    eq = pc.fill_null(eq, False)
                same &= eq.to_numpy(zero_copy_only=False)
        return same


def _filler(t: pa.DataType) -> pa.Scalar[Any]:
    """Some value of type ``t`` (which one does not matter: validity tells nulls apart)."""
    for seed in (0, "", False):
        try:
            return pa.scalar(seed).cast(t)
        except (pa.ArrowException, ValueError, TypeError):
            continue
    raise KeyTypeError("this", str(t))


def _comparable(column: pa.Array[Any]) -> list[pa.Array[Any]]:
    """``column`` as arrays ``pc.equal`` compares: a struct becomes its validity and its
    fields (recursively; a null struct's fields are null), a dictionary its values."""
    t = column.type
    if pa.types.is_dictionary(t):
        return _comparable(column.cast(t.value_type))
    if pa.types.is_struct(t):
        assert isinstance(column, pa.StructArray)
        out: list[pa.Array[Any]] = [column.is_valid()]
        for child in column.flatten():
            out += _comparable(child)
        return out
    return [column]


def _orderable(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _orderable(t.value_type)
    if pa.types.is_struct(t):
        return all(_orderable(t.field(i).type) for i in range(t.num_fields))
    return not (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_map(t)
        or pa.types.is_union(t)
    )
