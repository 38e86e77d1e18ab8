"""The pool key: which fields order a pool's records, and in which direction.

Invariants: records are sorted by the key fields in order, all ascending or all descending;
a null (missing) key sorts last in both directions; key-range predicates exclude nulls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import KeyTypeError, UsageError
from lake_core.names import validate_name

ORDERS = ("asc", "desc")


@dataclass(frozen=True)
class PoolKey:
    """``fields`` in significance order; ``order`` is ``asc`` or ``desc``."""

    fields: tuple[str, ...] = ("ts",)
    order: str = "desc"

    def __post_init__(self) -> None:
        if not self.fields:
            raise UsageError("a pool key needs at least one field")
        if self.order not in ORDERS:
            raise UsageError(f"order must be asc or desc, not {self.order!r}")

    @classmethod
    def parse(cls, text: str) -> PoolKey:
        """``KEY[,KEY…][:asc|:desc]``, as ``lake create --orderby`` takes it (default desc).

        Key field names follow the name rules (:func:`~lake_core.names.validate_name`: not
        empty, at most 64 bytes, no whitespace, control characters, ``.``, ``@`` or ``/``;
        ``,`` and ``:`` separate fields and the order) and are distinct. A key field may be
        missing from the data: such records have a null key."""
        spec, colon, order = text.partition(":")
        order = order.strip().lower() if colon else "desc"
        if order not in ORDERS:
            raise UsageError(f"--orderby order must be asc or desc, not {order!r}")
        fields = tuple(f.strip() for f in spec.split(","))
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

    def sort_keys(self, schema: pa.Schema, descending: bool | None = None) -> list[Any]:
        """pyarrow sort keys (nulls last) for the key fields present in ``schema``."""
        desc = self.descending if descending is None else descending
        direction = "descending" if desc else "ascending"
        return [(f, direction, "at_end") for f in self.fields if f in schema.names]

    def check_types(self, schema: pa.Schema) -> None:
        """Raise KeyTypeError if a key field present in ``schema`` has a type records cannot
        be ordered by (lists, maps, unions, or structs holding them)."""
        for f in self.fields:
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

    def key_columns(self, table: pa.Table) -> list[pa.ChunkedArray[Any]]:
        """The key columns of ``table``; a field the table lacks is all null."""
        out = []
        for f in self.fields:
            if f in table.schema.names:
                out.append(table.column(f))
            else:
                out.append(pa.chunked_array([pa.nulls(table.num_rows)]))
        return out

    def key_at(self, columns: list[pa.ChunkedArray[Any]], row: int) -> tuple[Any, ...]:
        return tuple(c[row].as_py() for c in columns)


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
