"""The read planner's index rule: skip objects and row groups an index proves hold none of the
values a predicate pins a field to.

:func:`lake_core.pruners.read_pruners` puts it in the one list of pruning rules every read
engine plans with, after the stats rule, when the snapshot holds index entries for a field the
predicate pins (:mod:`lake_core.indexes.values`).

Soundness (the planner's invariant): an object or row group is vetoed only when an index of
this snapshot answers that it holds none of the pinned values. Whenever an index cannot answer
— its file is missing or unreadable, it was built by another hash (:mod:`.hashing`), the
object's stored type of the field differs from the pool's (a widened column), the literal does
not cast exactly to the field's type — the object is read as if unindexed. So a read never
fails, and never loses rows, because of an index.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.errors import LakeError
from lake_core.expr import Expr, ExpressionError
from lake_core.expr.arrow import coerce_literal, resolve_column
from lake_core.expr.ast import Column
from lake_core.indexes.building import index_key
from lake_core.indexes.meta import IndexMeta
from lake_core.indexes.values import pinned_values
from lake_core.objects import ObjectMeta
from lake_core.planning import Pruner, RowGroupView
from lake_core.reader import open_counted

if TYPE_CHECKING:
    from lake_core.indexes.kinds import IndexHits
    from lake_core.stores.base import ObjectStore

log = logging.getLogger(__name__)

#: Index lookups at once (on S3 each is a footer read and a ranged GET or two).
LOOKUP_THREADS = 16
#: Read-ahead of an index object on S3.
INDEX_READ_AHEAD = 16 * 1024
#: An index object up to this size is fetched whole, in one request, from a remote store.
INDEX_WHOLE_READ = 64 * 1024


def lookup_values(predicate: Expr, field: str, schema: pa.Schema) -> pa.Array[Any] | None:
    """The values ``predicate`` pins ``field`` to, as an array of the field's type in
    ``schema``; None when it pins none, or a literal does not convert exactly."""
    pinned = pinned_values(predicate, field)
    if pinned is None or field not in schema.names:
        return None
    target_type = schema.field(field).type
    try:
        target = resolve_column(Column((field,)), schema)
        scalars = [coerce_literal(lit, target) for lit in pinned]
        parts = [pa.array([s.as_py()], type=s.type).cast(target_type) for s in scalars]
    except (ExpressionError, pa.ArrowException, TypeError, ValueError, OverflowError):
        return None  # the stats rule reports a predicate that does not fit the schema
    if not parts:
        empty: pa.Array[Any] = pa.array([], type=target_type)
        return empty
    joined: pa.Array[Any] = pa.concat_arrays(parts)
    return joined


class IndexPruner(Pruner):
    """Pruning by the snapshot's index entries (see the module docstring)."""

    name = "index"
    reported = True
    beyond_statistics = True

    def __init__(
        self,
        predicate: Expr,
        schema: pa.Schema,
        indexes: Mapping[tuple[str, str], IndexMeta],
        store: ObjectStore,
        pool_id: str,
        threads: int = LOOKUP_THREADS,
    ) -> None:
        self.store, self.pool_id, self.threads = store, pool_id, threads
        self.schema = schema
        fields = {m.field for m in indexes.values()}
        self.values: dict[str, pa.Array[Any]] = {}
        for f in sorted(fields):
            values = lookup_values(predicate, f, schema)
            if values is not None:
                self.values[f] = values
        self.entries: dict[str, list[IndexMeta]] = {}
        for m in indexes.values():
            if m.field in self.values:
                self.entries.setdefault(m.object, []).append(m)
        #: object id → the row groups that may match (absent: not decided by an index).
        self.kept: dict[str, frozenset[int]] = {}
        #: object id → what an exact index of version 2 found: the rows of each kept row group
        #: that may match (absent: whole row groups).
        self.hits: dict[str, IndexHits] = {}
        #: Index objects consulted, and the bytes of them the lookups needed (footers and the
        #: index row groups read; a reader's read-ahead may fetch a little more).
        self.index_objects_read = 0
        self.bytes_read = 0

    @property
    def active(self) -> bool:
        return bool(self.entries)

    def prepare(self, objects: Sequence[ObjectMeta]) -> None:
        todo = [o for o in objects if o.id in self.entries and o.id not in self.kept]
        if not todo:
            return
        if len(todo) == 1:
            results = [self._decide(todo[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(self.threads, len(todo))) as ex:
                results = list(ex.map(self._decide, todo))
        for obj, (kept, sliced, read, size) in zip(todo, results, strict=True):
            self.index_objects_read += read
            self.bytes_read += size
            if kept is not None:
                self.kept[obj.id] = kept
            if sliced is not None:
                self.hits[obj.id] = sliced

    def _decide(self, obj: ObjectMeta) -> tuple[frozenset[int] | None, IndexHits | None, int, int]:
        """(the row groups the object's indexes keep, or None: undecided; the row slices an
        exact index found, or None; index objects read; their bytes). Runs on lookup threads:
        touches no shared state."""
        from lake_core.indexes.kinds import index_lookup

        kept: frozenset[int] | None = None
        sliced: IndexHits | None = None
        read = size = 0
        for meta in self.entries[obj.id]:
            stored = obj.columns.get(meta.field)
            if stored is None or stored.type != str(self.schema.field(meta.field).type):
                continue  # the object holds another type of the field: values would not match
            key = index_key(self.pool_id, meta)
            needed: list[int] = []
            try:
                whole: bytes | None = None
                fetched: Callable[[], int] | None = None
                if meta.size <= INDEX_WHOLE_READ and self.store.local_path(key) is None:
                    # A small index costs one GET whole: read in ranges (footer, then a
                    # bucket or two), each with its read-ahead, it took 2-4 GETs and fetched
                    # up to twice its size.
                    whole = self.store.get(key)
                    source: Any = pa.BufferReader(whole)
                else:
                    # Little read-ahead: a lookup reads a footer and a bucket or two of an
                    # index, small ranges a 256 KiB buffer would multiply on S3.
                    source, fetched = open_counted(self.store, key, meta.size, INDEX_READ_AHEAD)
                hits = index_lookup(meta.kind, source, self.values[meta.field], read=needed)
            except (LakeError, OSError, pa.ArrowException) as e:
                log.warning("index %s of object %s not used: %s", meta.id, obj.id, e)
                continue
            read += 1
            # Bytes fetched from the store; on local disk (mapped), the bytes the lookup needed.
            if whole is not None:
                size += len(whole)
            else:
                size += fetched() if fetched is not None else min(meta.size, sum(needed))
            if hits is None:
                continue
            kept = hits.groups if kept is None else kept & hits.groups
            if hits.slices is not None:
                # One index's slices narrow the rows; a second exact index would narrow them
                # further, but its slices are kept apart: the first is enough to read pages.
                sliced = sliced or hits
        return kept, sliced, read, size

    def keep_object(self, obj: ObjectMeta) -> bool:
        kept = self.kept.get(obj.id)
        return kept is None or bool(kept)

    def keep_row_group(self, group: RowGroupView) -> bool:
        kept = self.kept.get(group.obj.id)
        return kept is None or group.index in kept

    def row_ranges(self, group: RowGroupView) -> list[tuple[int, int]] | None:
        hits = self.hits.get(group.obj.id)
        return None if hits is None else hits.row_ranges(group.index)
