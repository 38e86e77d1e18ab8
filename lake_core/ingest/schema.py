"""A pool's accumulated schema: union of columns and the type-conflict rules.

Owns :func:`unify_schema` (pool schema + incoming schema -> new pool schema, or a
:class:`~lake_core.errors.SchemaConflictError`) and :func:`conform_to` (fit a table to a schema:
an incoming table to the pool's types where the rules widen it, or an object's rows to exactly
the pool's columns when read).

Rules, applied to normalized types (:mod:`lake_core.ingest.types`):
- The pool schema is the union of the columns it has seen: existing columns keep their place,
  new columns are appended in the order the input has them. Struct fields unify the same way,
  recursively; list elements and map items unify recursively.
- Equal types unify. A ``null`` column (every value null in a JSON or CSV file) unifies with any
  type and never conflicts; a ``null`` pool column takes the first real type that arrives.
- Incoming ``int64`` into a pool ``float64`` column is accepted; :func:`conform_to` casts it
  (integers beyond 2**53 round to the nearest float). The reverse, incoming ``float64`` into a
  pool ``int64`` column, is a conflict: widening the pool would mean rewriting every object
  already written, and objects are never rewritten to change a schema.
- Anything else is a conflict. The error names the column (a dotted path such as ``a.b`` for a
  struct field) and both types as Arrow type strings. A conflict between list element types is
  reported on the list column with the two list types.

Invariants: :func:`unify_schema` never changes a type the pool already has except a ``null``
one (nor a column's position), is idempotent, and ignores the order in which compatible columns
arrive; it returns schemas without metadata.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lake_core.errors import LossyRewriteError, SchemaConflictError
from lake_core.ingest.memo import SchemaMemo
from lake_core.ingest.types import normalize_type
from lake_core.otree.weights import WEIGHT_COLUMN


def unify_schema(pool: pa.Schema | None, incoming: pa.Schema, source: str) -> pa.Schema:
    """The pool's schema after accepting ``incoming``; ``source`` names the input in errors."""
    found, unified = _UNIFIED.get(pool, incoming)
    if not found:
        unified = _unify_schema(pool, incoming, source)
        _UNIFIED.put((pool, incoming), unified)
    return unified  # type: ignore[no-any-return]


#: The unified schemas of the (pool, incoming) pairs seen lately.
_UNIFIED = SchemaMemo()


def _unify_schema(pool: pa.Schema | None, incoming: pa.Schema, source: str) -> pa.Schema:
    fields = [] if pool is None else [pa.field(f.name, f.type) for f in pool]
    position = {field.name: i for i, field in enumerate(fields)}
    for field in incoming:
        # The OTree weight stays int32 (its hash's width, and what Spark's hash() gives):
        # the one column the lake does not widen to int64 (docs/otree.md).
        keep = field.name == WEIGHT_COLUMN and pa.types.is_int32(field.type)
        dtype = field.type if keep else normalize_type(field.type)
        if field.name in position:
            i = position[field.name]
            fields[i] = pa.field(field.name, _unify_type(fields[i].type, dtype, field.name, source))
        else:
            position[field.name] = len(fields)
            fields.append(pa.field(field.name, dtype))
    return pa.schema(fields)


def conform_to(
    table: pa.Table, schema: pa.Schema, *, exact: bool = True, lossless: bool = False
) -> pa.Table:
    """``table`` made to fit ``schema``: the one way a table is fitted to a pool's schema, on
    the read path and the write path alike.

    Each column ``schema`` knows takes ``schema``'s type where the rules allow it (equal types;
    a ``null`` column takes any type; ``int64`` becomes ``float64``, integers beyond 2**53
    rounding; struct fields, list elements and map items by the same rules, recursively);
    anything else raises SchemaConflictError naming the column (call :func:`unify_schema`
    first to have the input named too).

    ``exact`` (reading an object as the pool's schema): the result has exactly ``schema``'s
    columns, in its order; columns and struct fields the table lacks are null, columns
    ``schema`` lacks are dropped. Not ``exact`` (an input about to be written): the table keeps
    its own columns, their order and the struct fields it has; only types change, since an
    object never carries a column it has no value for.

    ``lossless`` (rows about to be rewritten into new objects): a value the cast would round
    raises LossyRewriteError instead, since a rewrite must never change a stored value."""
    if exact:
        if table.schema.equals(schema, check_metadata=True):
            # Already what the loop below would build (a merge's every batch, a read of an
            # object of the pool's own schema): rebuilding and validating it cost a
            # compaction of 200 objects about 0.3 CPU-s.
            return table
        columns: list[pa.ChunkedArray[Any] | pa.Array[Any]] = []
        present = set(table.schema.names)
        for field in schema:
            if field.name not in present:
                columns.append(pa.nulls(table.num_rows, field.type))
                continue
            column = table.column(field.name)
            if column.type != field.type:
                _conform_type(column.type, field.type, field.name)  # the rules, or a conflict
                column = _cast(column, field.type, field.name, lossless)
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=schema)
    found, plan = _CONFORMED.get(table.schema, schema)
    if not found:
        plan = _conform_plan(table.schema, schema)
        _CONFORMED.put((table.schema, schema), plan)
    out, casts = plan
    if not casts and table.schema.metadata is None:
        return table
    kept = list(table.columns)
    for i in casts:
        # Unsafe only to let int64 -> float64 round large integers; the other casts (from
        # null, into equal types) cannot lose anything.
        kept[i] = _cast(kept[i], out.field(i).type, out.field(i).name, lossless)
    return pa.Table.from_arrays(kept, schema=out)


#: For the (table schema, pool schema) pairs seen lately: the schema a table is conformed to
#: (not ``exact``) and which of its columns change type.
_CONFORMED = SchemaMemo(check_metadata=True)  # the uncast fields keep their own metadata


def _conform_plan(table: pa.Schema, schema: pa.Schema) -> tuple[pa.Schema, list[int]]:
    """What :func:`conform_to` (not ``exact``) does to a table of schema ``table``: the schema
    it gets and the columns cast to get it. Raises SchemaConflictError."""
    fields: list[pa.Field[Any]] = []
    casts: list[int] = []
    pool_names = set(schema.names)
    for i, field in enumerate(table):
        if field.name in pool_names:
            target = _conform_type(field.type, schema.field(field.name).type, field.name)
            if target != field.type:
                casts.append(i)
                field = pa.field(field.name, target)
        fields.append(field)
    return pa.schema(fields), casts


def _cast(column: Any, target: pa.DataType, name: str, lossless: bool) -> Any:
    """``column`` cast to ``target`` by the rules: int64 into float64 rounds beyond 2**53,
    unless ``lossless``, where such a value raises LossyRewriteError (a safe cast refuses
    exactly the values float64 cannot hold)."""
    if not lossless:
        return column.cast(target, safe=False)
    try:
        return column.cast(target, safe=True)
    except pa.ArrowInvalid:
        raise LossyRewriteError(name, str(column.type), str(target)) from None


def _unify_type(pool: pa.DataType, new: pa.DataType, path: str, source: str) -> pa.DataType:
    if pool == new or pa.types.is_null(new):
        return pool
    if pa.types.is_null(pool):
        return new
    if pa.types.is_float64(pool) and pa.types.is_int64(new):
        return pool
    if pa.types.is_struct(pool) and pa.types.is_struct(new):
        fields = [pa.field(f.name, f.type) for f in pool]
        position = {f.name: i for i, f in enumerate(fields)}
        for field in new:
            if field.name in position:
                i = position[field.name]
                dtype = _unify_type(fields[i].type, field.type, f"{path}.{field.name}", source)
                fields[i] = pa.field(field.name, dtype)
            else:
                position[field.name] = len(fields)
                fields.append(pa.field(field.name, field.type))
        return pa.struct(fields)
    if pa.types.is_list(pool) and pa.types.is_list(new):
        return pa.list_(_unify_element(pool, new, pool.value_type, new.value_type, path, source))
    if pa.types.is_map(pool) and pa.types.is_map(new):
        key = _unify_element(pool, new, pool.key_type, new.key_type, path, source)
        item = _unify_element(pool, new, pool.item_type, new.item_type, path, source)
        return pa.map_(key, item)
    raise SchemaConflictError(path, str(pool), str(new), source)


def _unify_element(
    pool: pa.DataType,
    new: pa.DataType,
    pool_element: pa.DataType,
    new_element: pa.DataType,
    path: str,
    source: str,
) -> pa.DataType:
    """Unify the element types of two containers; a conflict of the elements themselves is
    reported with the containers' types, one inside a struct element with its dotted path."""
    try:
        return _unify_type(pool_element, new_element, path, source)
    except SchemaConflictError as err:
        if err.column != path:
            raise
        raise SchemaConflictError(path, str(pool), str(new), source) from None


def _conform_type(dtype: pa.DataType, pool: pa.DataType, path: str) -> pa.DataType:
    """The type a column of ``dtype`` takes in a pool column of type ``pool``."""
    if dtype == pool:
        return dtype
    if pa.types.is_null(dtype):
        return pool
    if pa.types.is_int64(dtype) and pa.types.is_float64(pool):
        return pool
    if pa.types.is_struct(dtype) and pa.types.is_struct(pool):
        pool_fields = {f.name: f.type for f in pool}
        return pa.struct(
            [
                pa.field(f.name, _conform_type(f.type, pool_fields[f.name], f"{path}.{f.name}"))
                if f.name in pool_fields
                else pa.field(f.name, f.type)
                for f in dtype
            ]
        )
    if pa.types.is_list(dtype) and pa.types.is_list(pool):
        return pa.list_(_conform_type(dtype.value_type, pool.value_type, path))
    if pa.types.is_map(dtype) and pa.types.is_map(pool):
        key = _conform_type(dtype.key_type, pool.key_type, path)
        return pa.map_(key, _conform_type(dtype.item_type, pool.item_type, path))
    raise SchemaConflictError(path, str(pool), str(dtype))
