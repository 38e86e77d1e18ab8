"""Indexing data objects: build and write the index objects a commit will add.

Every writer's commit goes through :meth:`lake_core.pool.Pool.commit`, which calls
:func:`build_indexes` for the objects it adds under the rules that cover the pool; ``lake index
apply`` calls it for objects already live. An index is built from the data object as written
(its row groups read back, the indexed columns only), so one path serves loads, compaction,
upserts, merges and reverts alike, and the row-group numbers an index records are the file's.
A load skips the read-back: its writer shows each row group to an :class:`IndexInputs` as it
encodes it (on the encoding threads), which keeps the Parquet bloom filters the writer built of
its version 2 bloom columns, and the indexed values of the very rows written in canonical form
for the other rules, and builds an object's index objects once the object is put
(:func:`lake_core.indexes.kinds.build_sbbf`, :func:`~lake_core.indexes.kinds.prepare_canonical`,
:func:`~lake_core.indexes.kinds.build_prepared`); the commit then only writes them. Building
from the rows or from the file gives the same index: the Parquet round trip of an indexable
column is exact, :func:`~lake_core.indexes.canonical.canonical` removes the type differences it
could make, and a read-back writes the column alone with the options the writer had
(:func:`lake_core.indexes.sbbf.column_filters`: the same filters).

Invariants: an index object is written (put-if-missing, a fresh KSUID name) before the commit
that names it, so a commit never names a missing index; an object without the rule's field, or
whose field has a type indexes do not cover, gets no entry (reads of it are never pruned by
that rule, which is always correct).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.errors import UsageError
from lake_core.ids import new_id
from lake_core.indexes.meta import IndexMeta
from lake_core.indexes.rules import BLOOM, EXACT
from lake_core.indexes.sbbf import filters_in, physical, writer_options
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


@dataclass(frozen=True)
class _Filter:
    """A row group's split-block filter of one column, as the writer built it: the bitset, the
    column's non-null values, how it is stored (:func:`~lake_core.indexes.sbbf.physical`)
    and the rate it was asked for."""

    bits: bytes
    values: int
    stored: str
    fpp: float


@dataclass(frozen=True)
class _Group:
    """What :meth:`IndexInputs.group` keeps of a row group: filters, canonical values and (for
    exact rules) their row slices, by column name."""

    filters: dict[str, _Filter]
    values: dict[str, pa.Array[Any]]
    slices: dict[str, Any]


class IndexInputs:
    """``rules``' indexes of the objects a write lands, built from the rows as they are
    written: a :class:`~lake_core.encode.GroupTap` for the writer, and the source
    :func:`build_indexes` takes in place of reading those objects back.

    :meth:`writer_options` asks the writer for Parquet's split-block filter of every column a
    bloom rule covers whose type has one (:func:`lake_core.indexes.sbbf.physical`; at the
    lowest rate of the rules on it), built in C++ as the column is encoded; :meth:`group` (on
    the writer's encoding threads) takes those filters out of the fragment, and keeps each
    row group's values of the other indexed columns in canonical form; :meth:`landed` (while the object is put, and the
    next object encodes) builds the object's index objects from them at once, keeping only
    their bytes. A rule whose field a row group lacks, or whose values cannot be indexed — or
    any failure here: this is an optimisation, never a reason for a write to fail — gets
    nothing here for that object: the build reads it back (and logs why it skips the rule)."""

    def __init__(self, rules: Sequence[IndexRule]) -> None:
        self._rules = tuple(rules)
        self._built: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()
        self._blooms: dict[pa.Schema, dict[str, float]] = {}
        self._any_bloom = any(r.kind == BLOOM for r in self._rules)

    def writer_options(self, schema: pa.Schema, rows: int) -> dict[str, Any]:
        blooms = self._bloom_columns(schema)
        return {"bloom_filter_options": writer_options(blooms, rows)} if blooms else {}

    def _bloom_columns(self, schema: pa.Schema) -> dict[str, float]:
        """The columns of ``schema`` to ask Parquet's filter of, and at what rate."""
        if not self._any_bloom:
            return {}  # without hashing ``schema`` (twice for each row group of a load)
        found = self._blooms.get(schema)
        if found is None:
            found = {}
            for rule in self._rules:
                if rule.kind != BLOOM or rule.field not in schema.names:
                    continue
                if physical(schema.field(rule.field).type) is not None:
                    found[rule.field] = min(rule.fpp, found.get(rule.field, rule.fpp))
            self._blooms[schema] = found  # a race computes the same twice: harmless
        return found

    def group(self, rows: pa.Table, data: memoryview, meta: pq.FileMetaData) -> _Group:
        from lake_core.indexes.canonical import check_indexable
        from lake_core.indexes.kinds import canonical_rows, row_slices

        asked = self._bloom_columns(rows.schema)
        exact = {r.field for r in self._rules if r.kind == EXACT}
        out = _Group({}, {}, {})
        chunks = meta.row_group(0)
        for i in range(chunks.num_columns if asked else 0):
            name = chunks.column(i).path_in_schema
            if name not in asked:
                continue
            try:
                bits = filters_in(data, meta, i)[0]
            except ValueError:  # not a filter this release reads: the build reads back
                continue
            if bits is not None:
                column = rows.column(name)
                out.filters[name] = _Filter(
                    bits, len(column) - column.null_count, physical(column.type) or "", asked[name]
                )
        wanted = (r.field for r in self._rules if not (r.kind == BLOOM and r.field in asked))
        for name in dict.fromkeys(wanted):
            if name not in rows.column_names:
                continue
            field = rows.schema.field(name)
            try:
                if pa.types.is_null(field.type):
                    out.values[name] = pa.array([], pa.int64())  # all null: an empty index
                else:
                    check_indexable(field)
                    out.values[name] = canonical_rows(rows.column(name))
                    if name in exact:
                        out.slices[name] = row_slices(rows.column(name))
            except Exception:  # noqa: BLE001 - an optimisation only: the build reads back
                continue  # and says why it skips the rule
        return out

    def landed(self, meta: ObjectMeta, groups: list[Any]) -> None:
        from lake_core.indexes.kinds import build_prepared, build_sbbf, prepare_canonical

        prepared: dict[tuple[str, str], list[Any]] = {}
        built: dict[tuple[str, str], bytes] = {}
        for rule in self._rules:
            filters = [
                g.filters[rule.field] for g in groups if g is not None and rule.field in g.filters
            ]
            if rule.kind == BLOOM and filters:
                if len(filters) < len(groups) or {(f.stored, f.fpp) for f in filters} != {
                    (filters[0].stored, rule.fpp)
                }:
                    # Filters at another rule's lower rate (two rules on one field), or not
                    # of every row group: the build reads the object back, so that a load
                    # and ``lake index apply`` make the same index.
                    continue
                try:
                    built[(meta.id, rule.id)] = build_sbbf(
                        [f.bits for f in filters],
                        filters[0].stored,
                        rule.fpp,
                        sum(f.values for f in filters),
                    )
                except Exception:  # noqa: BLE001 - never fail the write (as below)
                    log.debug(
                        "index rule %s: object %s is left to the read-back build", rule, meta.id
                    )
                continue
            values = [
                g.values[rule.field] for g in groups if g is not None and rule.field in g.values
            ]
            if len(values) < len(groups):
                continue
            slices = None
            if rule.kind == EXACT:
                # Version 2 (row slices) unless the field is all null: an empty version 1
                # index, as the read-back builds it.
                slices = [g.slices.get(rule.field) for g in groups if g is not None]
                if any(s is None for s in slices):
                    slices = None
            try:
                inputs = prepared.get((rule.kind, rule.field))
                if inputs is None:
                    inputs = prepared[(rule.kind, rule.field)] = prepare_canonical(
                        rule.kind, values, slices
                    )
                built[(meta.id, rule.id)] = build_prepared(rule.kind, inputs, fpp=rule.fpp)
            except Exception:  # noqa: BLE001 - never fail the write that put the object: the
                log.debug("index rule %s: object %s is left to the read-back build", rule, meta.id)
                continue  # build reads it back, and says why if it skips the rule
        with self._lock:
            self._built.update(built)

    def built(self, object_id: str, rule: IndexRule) -> bytes | None:
        """The bytes of ``rule``'s index object of ``object_id``, if built here; handed out
        once (a second ask reads the object back), so they are not kept past their write."""
        with self._lock:
            return self._built.pop((object_id, rule.id), None)


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
    inputs: IndexInputs | None = None,
) -> list[IndexMeta]:
    """Build and write the index of every object in ``objects`` under every rule in ``rules``
    whose field it holds; returns their entries (objects in order, then rules in order).
    ``batch``: write the index objects into it without fsync (the commit's small-commit path
    syncs it before its commit point). ``inputs``: what the write of (some of) ``objects``
    prepared from their rows; the rest are read back. Raises what reading the objects raises
    (ObjectNotFoundError, CorruptDataObjectError)."""
    work = [(o, [r for r in rules if r.field in o.columns]) for o in objects]
    work = [(o, rs) for o, rs in work if rs]
    if not work:
        return []
    target = store.deferring(batch) if batch is not None else store

    def one(item: tuple[ObjectMeta, list[IndexRule]]) -> list[IndexMeta]:
        return _index_object(target, store, pool_id, pool_name, item[0], item[1], clock, inputs)

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
    inputs: IndexInputs | None = None,
) -> list[IndexMeta]:
    from lake_core.indexes.canonical import check_indexable
    from lake_core.indexes.kinds import build_index
    from lake_core.integrity import open_verified

    ready = [inputs.built(obj.id, r) for r in rules] if inputs is not None else []
    if ready and all(data is not None for data in ready):
        # Every rule's index was built from the rows as they were written: no read-back.
        return [
            _put_index(target, pool_id, obj, rule, clock, data or b"")
            for rule, data in zip(rules, ready, strict=True)
        ]
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
        version = None
        if columns and pa.types.is_null(columns[0].type):
            # No value in any row group: an empty index, of version 1 as a load builds it.
            columns = [pa.array([], pa.int64()) for _ in columns]
            version = 1
        try:
            data = build_index(rule.kind, columns, fpp=rule.fpp, version=version)
        except (UsageError, ValueError, pa.ArrowException) as e:
            # The object's values, not the store: an entry left out is always correct (the
            # object is read unpruned). Store errors still fail the write, to be retried.
            log.warning("index rule %s skips object %s: %s", rule.full_name, obj.id, e)
            continue
        out.append(_put_index(target, pool_id, obj, rule, clock, data))
    return out


def _put_index(
    target: ObjectStore,
    pool_id: str,
    obj: ObjectMeta,
    rule: IndexRule,
    clock: Clock,
    payload: bytes,
) -> IndexMeta:
    """Write ``payload`` as ``rule``'s index object of ``obj``; return its entry."""
    meta = IndexMeta(
        object=obj.id,
        rule=rule.name,
        rule_id=rule.id,
        kind=rule.kind,
        field=rule.field,
        id=new_id(clock),
        size=len(payload),
    )
    # A fresh KSUID key: a retry after a lost answer finds its own bytes (success).
    target.put_if_missing_idempotent(index_key(pool_id, meta), payload)
    return meta
