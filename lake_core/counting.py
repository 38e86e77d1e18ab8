"""Counting the rows of a snapshot, from metadata where it can.

Every commit records each object's row count, so a count without a predicate reads no data.
With a predicate, an object is settled from its statistics when they prove that no row can
match (pruned, as scans prune) or that *every* row matches: the negated predicate cannot be
true for any row (:func:`~lake_core.expr.may_match` is sound), and the predicate cannot be
null for any row (no column it names has a null, or is missing from the object, and it holds
no NULL literal). Only the other objects are read, and only their matching rows are counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import MappingProxyType

import pyarrow as pa

from lake_core.expr import (
    Expr,
    Literal,
    Not,
    columns_of,
    may_match,
    nodes,
    parse_predicate,
)
from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_core.scan import Scan, object_stats
from lake_core.snapshot import Snapshot
from lake_core.stores.base import ObjectStore


@dataclass(frozen=True)
class CountResult:
    """``rows`` matching; how many objects were settled from metadata and how many read."""

    rows: int
    objects_total: int
    objects_from_metadata: int
    objects_read: int

    def to_json(self) -> dict[str, int]:
        return asdict(self)


def count_rows(
    store: ObjectStore, pool_id: str, key: PoolKey, snap: Snapshot, where: str | None = None
) -> CountResult:
    """The number of rows of ``snap`` for which ``where`` is true (all rows without it)."""
    if where is None:  # from the snapshot's arrays: no object's metadata is built
        total = len(snap.objects)
        return CountResult(snap.count, total, total, 0)
    objects = snap.objects
    # A Scan validates the predicate against the schema and prunes exactly as a query does.
    scan = Scan(store, pool_id, key, snap, where)
    expr = parse_predicate(where)
    schema = scan.pool_schema
    whole = 0
    settled = len(objects) - len(scan.objects)
    to_read: dict[str, ObjectMeta] = {}
    for obj in scan.objects:
        if _all_match(expr, obj, schema):
            whole += obj.count
            settled += 1
        else:
            to_read[obj.id] = obj
    rows = whole
    if to_read:
        part = Snapshot(
            snap.commit_id,
            snap.depth,
            MappingProxyType(to_read),
            snap.schema,
            indexes=snap.indexes,  # the second scan prunes row groups by them too
        )
        column = key.fields[0] if key.fields[0] in schema.names else schema.names[0]
        rows += sum(
            b.num_rows for b in Scan(store, pool_id, key, part, where, [column]).batches()
        )
    return CountResult(rows, len(objects), settled, len(to_read))


def _all_match(expr: Expr, obj: ObjectMeta, schema: pa.Schema) -> bool:
    """Whether the object's stats prove ``expr`` true for every one of its rows."""
    for name in columns_of(expr):
        col = obj.columns.get(name)
        if col is None or col.nulls:
            return False
    if _has_null_literal(expr):
        return False
    return not may_match(Not(expr), object_stats(obj, schema), schema)


def _has_null_literal(expr: Expr) -> bool:
    return any(isinstance(n, Literal) and n.value is None for n in nodes(expr))
