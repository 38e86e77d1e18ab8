"""Indexing data objects: build and write the index objects a commit will add.

Every writer's commit goes through :meth:`lake_core.pool.Pool.commit`, which calls
:func:`build_indexes` for the objects it adds under the rules that cover the pool; ``lake index
apply`` calls it for objects already live. An index is built from the data object as written
(its row groups read back, the indexed columns only), so one path serves loads, compaction,
upserts, merges and reverts alike, and the row-group numbers an index records are the file's.

Invariants: an index object is written (put-if-missing, a fresh KSUID name) before the commit
that names it, so a commit never names a missing index; an object without the rule's field, or
whose field has a type indexes do not cover, gets no entry (reads of it are never pruned by
that rule, which is always correct).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.errors import UsageError
from lake_core.ids import new_id
from lake_core.indexes.meta import IndexMeta
from lake_core.layout import PoolLayout
from lake_core.objects import ObjectMeta

if TYPE_CHECKING:
    from lake_core.clock import Clock
    from lake_core.indexes.rules import IndexRule
    from lake_core.stores.base import ObjectStore, SyncBatch

log = logging.getLogger(__name__)

#: Objects indexed at once (each reads its columns back and builds in Arrow/NumPy/DuckDB,
#: which release the GIL).
BUILD_THREADS = 4


def index_key(pool_id: str, meta: IndexMeta) -> str:
    """Where ``meta``'s index object lives."""
    return PoolLayout(pool_id).index(meta.object, meta.rule_id, meta.id)


def build_indexes(
    store: ObjectStore,
    pool_id: str,
    pool_name: str,
    objects: Sequence[ObjectMeta],
    rules: Sequence[IndexRule],
    clock: Clock,
    *,
    batch: SyncBatch | None = None,
    threads: int = BUILD_THREADS,
) -> list[IndexMeta]:
    """Build and write the index of every object in ``objects`` under every rule in ``rules``
    whose field it holds; returns their entries (objects in order, then rules in order).
    ``batch``: write the index objects into it without fsync (the commit's small-commit path
    syncs it before its commit point). Raises what reading the objects raises
    (ObjectNotFoundError, CorruptDataObjectError)."""
    work = [(o, [r for r in rules if r.field in o.columns]) for o in objects]
    work = [(o, rs) for o, rs in work if rs]
    if not work:
        return []
    target = store.deferring(batch) if batch is not None else store

    def one(item: tuple[ObjectMeta, list[IndexRule]]) -> list[IndexMeta]:
        return _index_object(target, store, pool_id, pool_name, item[0], item[1], clock)

    if len(work) == 1:
        return one(work[0])
    with ThreadPoolExecutor(max_workers=min(threads, len(work))) as ex:
        return [m for metas in ex.map(one, work) for m in metas]


def _index_object(
    target: ObjectStore,
    store: ObjectStore,
    pool_id: str,
    pool_name: str,
    obj: ObjectMeta,
    rules: list[IndexRule],
    clock: Clock,
) -> list[IndexMeta]:
    from lake_core.indexes.canonical import check_indexable
    from lake_core.indexes.kinds import build_index
    from lake_core.integrity import open_verified

    opened = open_verified(store, pool_id, obj, pool_name)
    schema = opened.file.schema_arrow
    usable = []
    for rule in rules:
        if rule.field not in schema.names:
            continue
        if pa.types.is_null(schema.field(rule.field).type):
            usable.append(rule)  # all null: an empty index, which answers "no" to every value
            continue
        try:
            check_indexable(schema.field(rule.field))
        except UsageError as e:
            log.warning("index rule %s skips object %s: %s", rule.full_name, obj.id, e)
            continue
        usable.append(rule)
    if not usable:
        return []
    fields = list(dict.fromkeys(r.field for r in usable))
    groups = [
        opened.file.read_row_group(rg, columns=fields)
        for rg in range(opened.metadata.num_row_groups)
    ]
    out = []
    for rule in usable:
        columns: list[Any] = [g.column(rule.field) for g in groups]
        if columns and pa.types.is_null(columns[0].type):
            columns = [pa.array([], pa.int64()) for _ in columns]  # no value in any row group
        try:
            data = build_index(rule.kind, columns, fpp=rule.fpp)
        except (UsageError, ValueError, pa.ArrowException) as e:
            # The object's values, not the store: an entry left out is always correct (the
            # object is read unpruned). Store errors still fail the write, to be retried.
            log.warning("index rule %s skips object %s: %s", rule.full_name, obj.id, e)
            continue
        meta = IndexMeta(
            object=obj.id,
            rule=rule.name,
            rule_id=rule.id,
            kind=rule.kind,
            field=rule.field,
            id=new_id(clock),
            size=len(data),
        )
        # A fresh KSUID key: a retry after a lost answer finds its own bytes (success).
        target.put_if_missing_idempotent(index_key(pool_id, meta), data)
        out.append(meta)
    return out
