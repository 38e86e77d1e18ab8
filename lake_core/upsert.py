"""Upserts: rows replace the live rows with their pool key, new keys are inserted, and
``delete_when`` rows delete their key — in one atomic commit (seed 001, "Relational Model").

Semantics. The pool key identifies a row. An incoming row whose key is live replaces every live
row with that key (the last commit wins); duplicate keys inside one upsert: the last row in
input order wins, and if that row matches ``delete_when`` the key is deleted (a change feed's
insert-then-delete deletes, its delete-then-insert inserts). A row matching ``delete_when`` is
never inserted. A key with a null in any key field never matches anything (SQL equality): such
rows are all inserted, and as delete rows they delete nothing.

The algorithm (docs/architecture.md, "Upserts"):

1. :func:`prepare` reads and normalizes the input as a load does (schema union and conflicts,
   schema-mode checks: an error changes nothing), evaluates ``delete_when`` over it, and keeps
   the last row per key.
2. :func:`plan_upsert` plans on the branch tip: the targets are the live objects whose key
   span contains an incoming key (:func:`plan_targets`); only they are read. Each is
   merge-joined with the incoming keys (its key columns decoded, a hash join); a target no
   incoming key matches is left as it is. A matched target is deleted: its row groups whose
   key span holds no incoming key are copied byte for byte into objects of their own
   (:class:`Copy`, :func:`lake_core.stitch.copy_row_groups`), the other groups are decoded and
   their kept rows written again, with the incoming rows of its partition, as new sorted
   objects.
3. :func:`commit_upsert` commits the adds and deletes in one commit that records the keys and
   the objects the plan read. The commit protocol refuses it (CommitConflictError) on a parent
   where an object it deletes is gone, or where a live object it did not read meets its keys
   (:func:`lake_core.committing.check_unread`); :func:`upsert` then removes what it wrote and
   re-plans from the new tip, within the lake's retry budget.

Why that gives a serial history: the commit lands on some parent P. Every row of P with an
incoming key lies in an object whose span meets the keys; the validation proved each such
object is one the plan read, and the ones holding a matching row are the ones the commit
deletes (still live in P, or the commit is refused). So the commit is exactly the upsert
applied to P, whatever landed between planning and committing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure, replannable
from lake_core.errors import (
    CommitConflictError,
    CorruptDataObjectError,
    DuplicateKeyError,
    EmptyTransactionError,
    RetriesExhaustedError,
    UsageError,
)
from lake_core.ids import new_id
from lake_core.inflight import write_window_guard
from lake_core.ingest import conform_to, unify_schema
from lake_core.integrity import check_bytes, check_footer, checksum, read_verified
from lake_core.keyset import KeySet
from lake_core.loading import Source, read_sources, source_names
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.otree.settings import refuse_key_sorted
from lake_core.poolkey import PoolKey
from lake_core.reader import OpenObject, row_group_stats
from lake_core.schema_mode import check_key_present, check_new_columns
from lake_core.snapshot import Snapshot
from lake_core.stats import ColumnMeta, column_meta, encode_value
from lake_core.stitch import Footer, StitchError, copy_row_groups, read_footer
from lake_core.stores.base import ObjectStore, SyncBatch
from lake_core.txn import Txn, as_txns, check_txns
from lake_core.upsert_stream import Merge, Rewrite, chunks, streamable
from lake_core.writer import ENCODE_THREADS, WriteOptions, write_objects, write_sorted

if TYPE_CHECKING:
    from lake_core.pool import Pool  # Pool.upsert delegates here: no import back at run time

#: Commit ``extra`` field holding an upsert's counts.
UPSERT_FIELD = "upsert"

_POS = "__lakepool_pos__"
_ROW = "__lakepool_row__"
_DEL = "__lakepool_del__"


def _key_name(i: int) -> str:
    return f"__lakepool_k{i}__"


@dataclass(frozen=True)
class UpsertResult:
    """What one upsert did. The object counters are those of the attempt that committed."""

    commit: Commit | None  # None only when the upsert changes nothing and lands no txn
    inserted: int  # rows whose key was not live before
    updated: int  # live rows replaced by an incoming row with the same key
    deleted: int  # live rows removed by delete_when rows
    objects_read: int  # live objects read because their key range meets an incoming key
    objects_skipped: int  # live objects not read
    objects_rewritten: int  # objects the commit deletes (replaced by rewritten ones)
    bytes_rewritten: int  # stored bytes of those objects
    bytes_written: int  # stored bytes of the objects the commit adds
    attempts: int  # planning attempts (1 + re-plans after racing commits)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit.id if self.commit is not None else None,
            "inserted": self.inserted,
            "updated": self.updated,
            "deleted": self.deleted,
            "objects_read": self.objects_read,
            "objects_skipped": self.objects_skipped,
            "objects_rewritten": self.objects_rewritten,
            "bytes_rewritten": self.bytes_rewritten,
            "bytes_written": self.bytes_written,
            "attempts": self.attempts,
        }


@dataclass(frozen=True)
class Incoming:
    """An upsert's input, normalized by :func:`prepare`: ``table`` holds the last row per key
    in input order (every row whose key has a null field), ``delete`` says per row of it
    whether it deletes its key, ``keys`` is the set of its matchable keys."""

    table: pa.Table
    delete: np.ndarray[Any, np.dtype[np.bool_]]
    keys: KeySet
    source: str

    @property
    def rows(self) -> pa.Table:
        """The rows the upsert writes (delete rows left out)."""
        return self.table.filter(pa.array(~self.delete))


def key_table(table: pa.Table, key: PoolKey) -> pa.Table:
    """``table``'s key columns, named ``__lakepool_k<i>__`` (a field it lacks is all null);
    under ``this``, null-safe (:meth:`PoolKey.match_columns`). A float's -0.0 is made 0.0:
    equal keys (SQL, and :meth:`PoolKey.same_as_next`, by which compaction and dedupe drop
    duplicates), which a hash join and a group-by would tell apart."""
    columns = [_signless(c) for c in key.match_columns(table)]
    return pa.Table.from_arrays(columns, names=[_key_name(i) for i in range(len(columns))])


def _signless(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
    if pa.types.is_floating(column.type):
        zero: Any = pa.scalar(0.0, column.type)
        out: pa.ChunkedArray[Any] = pc.add(column, zero)  # -0.0 + 0.0 is +0.0
        return out
    return column


def _valid(keys: pa.Table, key: PoolKey) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row: every key field is non-null (a key that can match); every row under
    ``this``, where nulls are values."""
    mask = np.ones(keys.num_rows, dtype=bool)
    if key.nulls_match:
        return mask
    for column in keys.columns:
        if column.null_count:
            mask &= pc.is_valid(column).to_numpy(zero_copy_only=False)
    return mask


def last_per_key(table: pa.Table, key: PoolKey) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Ascending positions of the rows to keep: per key, the last row in input order, and
    every row whose key has a null field (such keys never match, so never collapse)."""
    keys = key_table(table, key)
    positions = np.arange(table.num_rows, dtype=np.int64)
    valid = _valid(keys, key)
    keyed = keys.filter(pa.array(valid)).append_column(_POS, pa.array(positions[valid]))
    if keyed.num_rows == 0:
        return positions
    try:
        last = keyed.group_by(keys.column_names, use_threads=False).aggregate([(_POS, "max")])
    except pa.ArrowNotImplementedError as e:
        types = ", ".join(str(c.type) for c in keys.columns)
        raise UsageError(f"an upsert cannot match keys of type {types}: {e}") from None
    kept = np.concatenate([last.column(f"{_POS}_max").to_numpy(), positions[~valid]]).astype(
        np.int64
    )
    kept.sort()
    return kept


def prepare(
    pool: Pool,
    sources: Sequence[Source],
    base_schema: pa.Schema | None,
    *,
    fmt: str = "auto",
    delete_when: str | None = None,
) -> Incoming:
    """Read ``sources`` against the branch's schema ``base_schema`` as a load does (raising
    SchemaConflictError, SchemaModeError, MissingKeyError, EmptyTransactionError for no
    records), evaluate ``delete_when`` over the input rows (ExpressionError when it does not
    apply to them) and keep the last row per key. Writes nothing."""
    table, unified = read_sources(sources, fmt, base_schema)
    if table.num_rows == 0:
        raise EmptyTransactionError("no records in the input")
    names = source_names(sources)
    key = pool.config.key.resolve(unified)  # ``this``: the pool's columns
    mode = pool.config.schema_mode
    check_new_columns(mode, pool.name, base_schema, table.schema, names)
    check_key_present(mode, pool.name, pool.config.key, table, names)
    pool.config.key.check_types(table.schema)
    return incoming_rows(table, key, delete_when, names)


def incoming_rows(table: pa.Table, key: PoolKey, delete_when: str | None, source: str) -> Incoming:
    """Rows in input order made an upsert's :class:`Incoming`: ``delete_when`` evaluated per
    row, then the last row per key kept (a row's fate is decided by its key's last row). Both
    steps are per key, so any split of the input that keeps each key's rows together (Spark's
    buckets) gives, bucket by bucket, exactly what the whole input gives."""
    delete = np.zeros(table.num_rows, dtype=bool)
    if delete_when is not None:
        # Imported here: the predicate machinery costs a fresh process about 0.2 s (pyarrow
        # loads pandas for its literals), which an upsert without delete rows never needs.
        from lake_core.expr import parse_predicate, to_arrow_expression

        predicate = to_arrow_expression(parse_predicate(delete_when), table.schema)
        positions = pa.array(np.arange(table.num_rows, dtype=np.int64))
        hits = table.append_column(_POS, positions).filter(predicate).column(_POS)
        delete[hits.to_numpy()] = True
    kept = last_per_key(table, key)
    if len(kept) < table.num_rows:
        table, delete = table.take(pa.array(kept)), delete[kept]
    return Incoming(table, delete, incoming_keys_of(table, key), source)


def incoming_keys_of(table: pa.Table, key: PoolKey) -> KeySet:
    """The :class:`KeySet` of ``table``'s keys. Under ``this`` a record holding a null (a
    column it lacks, too) matches an equal record: :meth:`KeySet.of_whole`."""
    columns = key.key_columns(table)
    if key.nulls_match:
        return KeySet.of_whole(columns, key.names(table.schema))
    return KeySet.of_columns(columns)


def plan_targets(
    snapshot: Snapshot, key: PoolKey, incoming_keys: KeySet | pa.Table
) -> list[ObjectMeta]:
    """The live objects of ``snapshot`` whose key span contains an incoming key (a
    :class:`~lake_core.keyset.KeySet`, or a table whose key columns are read), in snapshot
    order: the only objects an upsert of those keys reads. Pure."""
    keys = (
        incoming_keys
        if isinstance(incoming_keys, KeySet)
        else incoming_keys_of(incoming_keys, key)
    )
    if not keys:
        return []
    return [o for o in snapshot.objects.values() if keys.meets(o)]


@dataclass(frozen=True)
class Matched:
    """One object merge-joined with the incoming keys: ``rows`` (positions in the object)
    matched incoming rows ``incoming`` (positions in :attr:`Incoming.table`); ``deletes``
    per match whether it was a delete row."""

    rows: np.ndarray[Any, np.dtype[np.int64]]
    incoming: np.ndarray[Any, np.dtype[np.int64]]
    deletes: np.ndarray[Any, np.dtype[np.bool_]]


def match_rows(rows: pa.Table, incoming: pa.Table, key: PoolKey) -> Matched:
    """Join ``rows`` (an object's rows) with ``incoming`` (rows of the same key types) on the
    pool key; rows whose key has a null field match nothing. ``incoming`` may carry a bool
    column ``__lakepool_del__`` (delete rows)."""
    left = key_table(rows, key)
    left_ok = _valid(left, key)
    left = left.append_column(_ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    left = left.filter(pa.array(left_ok))
    right = key_table(incoming, key)
    right_ok = _valid(right, key)
    right = right.append_column(_POS, pa.array(np.arange(incoming.num_rows, dtype=np.int64)))
    flags = (
        incoming.column(_DEL)
        if _DEL in incoming.schema.names
        else pa.array(np.zeros(incoming.num_rows, dtype=bool))
    )
    right = right.append_column(_DEL, flags).filter(pa.array(right_ok))
    empty = np.zeros(0, dtype=np.int64)
    if left.num_rows == 0 or right.num_rows == 0:
        return Matched(empty, empty, np.zeros(0, dtype=bool))
    try:
        joined = left.join(right, keys=left.column_names[:-1], join_type="inner", use_threads=False)
    except pa.ArrowNotImplementedError as e:
        types = ", ".join(str(c.type) for c in left.columns[:-1])
        raise UsageError(f"an upsert cannot match keys of type {types}: {e}") from None
    return Matched(
        joined.column(_ROW).to_numpy().astype(np.int64),
        joined.column(_POS).to_numpy().astype(np.int64),
        joined.column(_DEL).to_numpy(zero_copy_only=False).astype(bool),
    )


@dataclass(frozen=True)
class Copy:
    """Row groups ``first`` to ``stop - 1`` of a rewritten object that hold no incoming key:
    copied into a new object as they are, not decoded (``data``: the object's bytes), with the
    metadata they carry (key bounds, row count, column stats)."""

    source: ObjectMeta
    data: bytes
    first: int
    stop: int
    min: list[Any] | None
    max: list[Any] | None
    count: int
    columns: dict[str, ColumnMeta]
    footer: Footer | None = None  # the object's walked footer, shared by its runs
    pieces: list[bytes | memoryview] | None = None  # the new object's bytes, as planned


@dataclass(frozen=True)
class UpsertPlan:
    """What an upsert does to one snapshot: the objects it read (``read``), those it deletes
    (``deletes``, each holding a matched row), the tables to write per partition value, the
    runs of row groups it copies, the row counts, and the schema of the incoming rows it
    writes (None: it writes none)."""

    snapshot: Snapshot
    read: tuple[ObjectMeta, ...]
    deletes: tuple[ObjectMeta, ...]
    tables: tuple[tuple[str | None, pa.Table], ...]
    inserted: int
    updated: int
    deleted: int
    incoming_schema: pa.Schema | None
    keys: KeySet = field(default_factory=KeySet)
    copies: tuple[Copy, ...] = ()
    merges: tuple[Merge, ...] = ()  # partitions rewritten as a stream (lake_core.upsert_stream)

    @property
    def empty(self) -> bool:
        return (
            not self.deletes
            and not any(t.num_rows for _, t in self.tables)
            and not any(m.rows for m in self.merges)
        )

    @property
    def read_ids(self) -> frozenset[str]:
        return frozenset(o.id for o in self.read)


@dataclass(frozen=True)
class _Target:
    """One target object, opened: its checked bytes and Parquet file."""

    meta: ObjectMeta
    data: bytes
    file: pq.ParquetFile


def _open(pool: Pool, obj: ObjectMeta) -> _Target:
    """The object's bytes, checked as :func:`~lake_core.integrity.read_verified` checks them
    (size, checksum, footer), and its Parquet file."""
    key = pool.layout.data(obj.id)
    data = pool.store.get(key)
    check_bytes(obj, data, pool.name)
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptDataObjectError(obj.id, pool.name, f"not readable as Parquet ({e})") from None
    check_footer(obj, OpenObject(key, file), pool.name)
    return _Target(obj, data, file)


def _plan_threads(pool: Pool, objects: Sequence[ObjectMeta]) -> int:
    """Threads that plan ``objects`` at once: eight where a read waits on the network, else the
    writer's :data:`~lake_core.writer.ENCODE_THREADS` (reading, checksumming and joining keys
    release the GIL)."""
    if len(objects) < 2:
        return 1
    remote = pool.store.local_path(pool.layout.data(objects[0].id)) is None
    return min(len(objects), 8 if remote else ENCODE_THREADS)


@dataclass(frozen=True)
class _TargetPlan:
    """What one target object adds to an upsert's plan (:func:`_plan_target`). Its bytes are
    kept only by the copies and the rewrite that need them."""

    obj: ObjectMeta
    hit: Matched
    copies: list[Copy]
    #: Its row groups to decode and merge again (None: every touched group is dropped whole).
    rewrite: Rewrite | None


def _plan_target(
    pool: Pool,
    obj: ObjectMeta,
    schema: pa.Schema,
    key: PoolKey,
    flagged: pa.Table,
    keys: KeySet,
) -> _TargetPlan | None:
    """Open ``obj``, join its keys with the incoming ones (``flagged``), and plan what of it is
    copied and what rewritten; None when none of its rows has an incoming key (it is not
    rewritten). Reads only: targets are planned on several threads at once."""
    target = _open(pool, obj)
    file = target.file
    present = [f for f in key.fields if f in file.schema_arrow.names]
    stored_keys = file.read(columns=present)
    keys_schema = pa.schema([schema.field(f) for f in (key.fields if key.nulls_match else present)])
    stored = conform_to(stored_keys, keys_schema, lossless=True)
    hit = match_rows(stored, flagged, key)
    if len(hit.rows) == 0:
        return None
    keep = np.ones(file.metadata.num_rows, dtype=bool)
    keep[hit.rows] = False
    copies: list[Copy] = []
    copied = _plan_copies(target, stored_keys, keep, keys, key, copies)
    groups = [g for g in range(file.metadata.num_row_groups) if g not in copied]
    if not groups:
        return _TargetPlan(obj, hit, copies, None)
    starts = _group_starts(file)
    positions = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in groups])
    kept_mask = keep[positions]
    if not kept_mask.any():
        return _TargetPlan(obj, hit, copies, None)
    sizes = np.cumsum([0] + [int(starts[g + 1] - starts[g]) for g in groups])
    rewrite = Rewrite(
        target.data,
        file,
        tuple(groups),
        kept_mask,
        stored.take(pa.array(positions)),
        tuple(int(x) for x in sizes),
    )
    return _TargetPlan(obj, hit, copies, rewrite)


def _encoded_key(columns: list[pa.ChunkedArray[Any]], row: int) -> list[Any]:
    return [encode_value(c.type, c[row].as_py()) for c in columns]


def _bounds(
    columns: list[pa.ChunkedArray[Any]], start: int, stop: int, valid_end: int, desc: bool
) -> tuple[list[Any] | None, list[Any] | None]:
    """Key bounds (ascending terms) of rows ``start`` to ``stop - 1`` of a sorted object whose
    rows from ``valid_end`` on have a null first key field (nulls sort last), as the writer
    records them."""
    last = min(stop, valid_end) - 1
    if last < start:
        return None, None
    a, b = _encoded_key(columns, start), _encoded_key(columns, last)
    return (b, a) if desc else (a, b)


def _run_stats(target: _Target, first: int, stop: int) -> dict[str, ColumnMeta]:
    """Column stats of row groups ``first`` to ``stop - 1``, equal to what the writer records
    for those rows: from the footer's statistics where every group has them, else by decoding
    that column of the run."""
    meta = target.file.metadata
    schema = target.file.schema_arrow
    groups = [row_group_stats(meta, g) for g in range(first, stop)]
    out: dict[str, ColumnMeta] = {}
    for name, old in target.meta.columns.items():
        found = [g.get(name) for g in groups]
        nulls = [f[2] if f is not None else None for f in found]
        orderable = old.min is not None or old.max is not None
        bounds = [(f[0], f[1]) if f is not None else (None, None) for f in found]
        complete = all(n is not None for n in nulls) and (
            not orderable or all(lo is not None and hi is not None for lo, hi in bounds)
        )
        if not complete or name not in schema.names:
            column = target.file.read_row_groups(list(range(first, stop)), columns=[name]).column(0)
            out[name] = column_meta(column)
            continue
        t = schema.field(name).type
        lo = hi = None
        if orderable:
            lows = [encode_value(t, b[0]) for b in bounds]
            highs = [encode_value(t, b[1]) for b in bounds]
            # A group's bound the stats cannot encode (an infinity) leaves the run's unknown:
            # the others' would exclude that value from pruned queries.
            lo = None if any(v is None for v in lows) else min(lows)
            hi = None if any(v is None for v in highs) else max(highs)
        out[name] = ColumnMeta(old.type, lo, hi, sum(n for n in nulls if n is not None))
    return out


def _runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """Maximal runs ``[start, stop)`` of consecutive True flags."""
    out: list[tuple[int, int]] = []
    for i, flag in enumerate(flags):
        if not flag:
            continue
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def plan_upsert(pool: Pool, snapshot: Snapshot, incoming: Incoming) -> UpsertPlan:
    """Plan ``incoming`` against ``snapshot`` (see the module docstring): reads the targets
    (their key columns, then the row groups that hold an incoming key), writes nothing.
    Raises SchemaConflictError when the input no longer unifies with the snapshot's schema,
    LossyRewriteError when a kept row would change in the rewrite."""
    schema = unify_schema(snapshot.schema, incoming.table.schema, incoming.source)
    key = pool.config.key.resolve(schema)  # ``this``: the pool's columns, new ones last
    table = conform_to(incoming.table, schema, exact=False)
    targets = plan_targets(snapshot, key, incoming.keys)
    # Under ``this`` both sides of the join hold every pool column (typed nulls where a
    # record lacks one), so equal records join whatever columns they were written with.
    joinable = conform_to(incoming.table, schema) if key.nulls_match else table
    flagged = joinable.append_column(_DEL, pa.array(incoming.delete))
    matched = np.zeros(table.num_rows, dtype=bool)
    updated = deleted = 0
    deletes: list[ObjectMeta] = []
    copies: list[Copy] = []
    # Per partition value: the tables to write there and the columns they carry (an object
    # never carries a column none of its rows had); the row groups to decode again there.
    pieces: dict[str | None, list[tuple[pa.Table, set[str]]]] = {}
    rewrites: dict[str | None, list[tuple[Rewrite, set[str]]]] = {}

    def plan(obj: ObjectMeta) -> _TargetPlan | None:
        return _plan_target(pool, obj, schema, key, flagged, incoming.keys)

    threads = _plan_threads(pool, targets)
    with ThreadPoolExecutor(max_workers=threads) if threads > 1 else nullcontext() as ex:
        # Folded in target order whatever order the threads finish in: the plan (and so
        # every object the upsert writes) is the one a single thread makes.
        for planned in ex.map(plan, targets) if ex is not None else map(plan, targets):
            if planned is None:
                continue  # none of its rows has an incoming key: not rewritten
            obj, hit = planned.obj, planned.hit
            matched[hit.incoming] = True
            n_deleted = int(hit.deletes.sum())
            deleted += n_deleted
            updated += len(hit.rows) - n_deleted
            deletes.append(obj)
            copies.extend(planned.copies)
            if planned.rewrite is not None:
                rewrites.setdefault(obj.partition, []).append((planned.rewrite, set(obj.columns)))
    inserting = ~incoming.delete
    inserted = int((inserting & ~matched).sum())
    new_rows = table.filter(pa.array(inserting))
    adding: dict[str | None, pa.Table] = {}
    own = set(new_rows.schema.names)
    if new_rows.num_rows:
        spec = pool.partition_spec
        parts = [(None, new_rows)] if spec is None else spec.split(new_rows)
        adding = {value: conform_to(part, schema) for value, part in parts}
    merges = []
    for value in {**rewrites, **adding}:
        group = rewrites.get(value, [])
        carried = set().union(*(cols for _, cols in group), own if value in adding else ())
        names = [n for n in schema.names if n in carried]
        added = adding.get(value) or conform_to(table.slice(0, 0), schema)
        if group and streamable(key, [*(r.keys for r, _ in group), added]):
            fields = pa.schema([schema.field(n) for n in names])
            merges.append(Merge(value, fields, tuple(r for r, _ in group), added))
            continue
        # Not orderable as a stream (see lake_core.upsert_stream): decoded now, sorted whole.
        for r, cols in group:
            rows = conform_to(r.file.read_row_groups(list(r.groups)), schema, lossless=True)
            pieces.setdefault(value, []).append((rows.filter(pa.array(r.keep)), cols))
        if value in adding:
            pieces.setdefault(value, []).append((added, own))
    tables = []
    for value, pieced in pieces.items():
        carried = set().union(*(cols for _, cols in pieced))
        combined = pa.concat_tables([t for t, _ in pieced])
        tables.append((value, combined.select([n for n in schema.names if n in carried])))
    return UpsertPlan(
        snapshot,
        tuple(targets),
        tuple(deletes),
        tuple(tables),
        inserted,
        updated,
        deleted,
        table.schema if new_rows.num_rows else None,
        incoming.keys,
        tuple(copies),
        tuple(merges),
    )


def _group_starts(file: pq.ParquetFile) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The first row of each row group, and the row count at the end."""
    sizes = [file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _plan_copies(
    target: _Target,
    stored_keys: pa.Table,
    keep: np.ndarray[Any, np.dtype[np.bool_]],
    keys: KeySet,
    key: PoolKey,
    copies: list[Copy],
) -> set[int]:
    """Append to ``copies`` the runs of ``target``'s row groups that a rewrite keeps as they
    are — groups whose key span holds no incoming key (so no matched row either, and no
    inserted key lands inside them) — and return their group numbers. The other groups are
    decoded and written again. Incoming keys between two groups' spans do not touch either:
    the new object holding them may overlap a copied run, which objects may."""
    file = target.file
    starts = _group_starts(file)
    n = file.metadata.num_row_groups
    if n < 2 or key.fields[0] not in stored_keys.schema.names:
        return set()
    columns = key.key_columns(stored_keys)
    valid_end = file.metadata.num_rows - columns[0].null_count  # null keys sort last
    touched = []
    for g in range(n):
        a, b = int(starts[g]), int(starts[g + 1])
        lo, hi = _bounds(columns, a, b, valid_end, key.descending)
        touched.append(keys.spans(lo, hi) or not keep[a:b].all())
    out: set[int] = set()
    runs = _runs([not t for t in touched])
    try:
        footer = read_footer(target.data) if runs else None
    except StitchError:
        return out  # not a file it can copy groups of: write every group again
    for a, b in runs:
        try:
            # Checked now, not when writing: groups it cannot copy (a footer or page index
            # it cannot walk: StitchError) are decoded and written again instead.
            pieces = copy_row_groups(target.data, a, b, footer)
            lo, hi = _bounds(columns, int(starts[a]), int(starts[b]), valid_end, key.descending)
            stats = _run_stats(target, a, b)
        except (pa.ArrowException, ValueError):
            continue  # groups or footer statistics it cannot use: decode and write them again
        count = int(starts[b] - starts[a])
        copies.append(Copy(target.meta, target.data, a, b, lo, hi, count, stats, footer, pieces))
        out.update(range(a, b))
    return out


def write_copy(store: ObjectStore, pool: Pool, copy: Copy) -> ObjectMeta:
    """Put the object holding ``copy``'s row groups (bytes copied, not decoded)."""
    pieces = copy.pieces
    if pieces is None:
        pieces = copy_row_groups(copy.data, copy.first, copy.stop, copy.footer)
    payload = b"".join(pieces)
    object_id = new_id(pool.clock)
    store.put(pool.layout.data(object_id), payload)
    return ObjectMeta(
        id=object_id,
        min=copy.min,
        max=copy.max,
        count=copy.count,
        size=len(payload),
        columns=copy.columns,
        partition=copy.source.partition,
        checksum=checksum(payload),
    )


def write_plan(
    pool: Pool,
    plan: UpsertPlan,
    written: list[ObjectMeta],
    batch: SyncBatch | None = None,
    on_object: Callable[[ObjectMeta], None] | None = None,
) -> None:
    """Write the plan's copied runs and its tables (sorted objects of their partition),
    appending each object to ``written`` as it lands (so a failure can remove them); into
    ``batch`` without fsync when given (the commit's journal append makes them durable)."""
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    store = pool.store if batch is None else pool.store.deferring(batch)
    schema = plan.snapshot.schema
    if plan.incoming_schema is not None:
        schema = unify_schema(schema, plan.incoming_schema, "upsert")
    key = pool.config.key.resolve(schema)

    def landed(obj: ObjectMeta) -> None:
        written.append(obj)
        if on_object is not None:
            on_object(obj)

    for copy in plan.copies:
        landed(write_copy(store, pool, copy))
    for merge in plan.merges:
        write_sorted(
            store,
            pool.id,
            chunks(merge, key),
            merge.schema,
            key,
            options,
            clock=pool.clock,
            on_object=landed,
            partition=merge.partition,
        )
    for value, table in plan.tables:
        write_objects(
            store,
            pool.id,
            table,
            key,
            options,
            clock=pool.clock,
            on_object=landed,
            partition=value,
        )


def commit_upsert(
    pool: Pool,
    branch: str,
    adds: Sequence[ObjectMeta],
    deletes: Sequence[str],
    *,
    keys: KeySet,
    read_ids: frozenset[str] | Sequence[str],
    counts: tuple[int, int, int],
    author: str | None = None,
    message: str = "",
    meta: Any = None,
    incoming_schema: pa.Schema | None = None,
    source: str = "",
    txn: Txn | Sequence[Txn] | None = None,
    guard: Callable[[], None] | None = None,
    durable_first: SyncBatch | None = None,
) -> Commit:
    """The validated commit of an upsert planned elsewhere (Spark's driver uses it): adds and
    deletes in one commit recording ``extra["upsert"]`` = ``counts`` (inserted, updated,
    deleted). ``keys``: every key the upsert changes (inserts, updates and deletes);
    ``read_ids``: every object the plan read. Raises CommitConflictError when the parent it
    lands on has a live object meeting ``keys`` that is not in ``read_ids``, or lacks an
    object in ``deletes``: re-plan from the new tip. The caller removes ``adds`` on failure
    (:func:`~lake_core.committing.discarding_on_failure`)."""
    inserted, updated, deleted = counts
    return pool.commit(
        branch,
        adds,
        deletes,
        author=author,
        message=message
        or f"upserted {inserted:,} new, {updated:,} updated, {deleted:,} deleted rows",
        meta=meta,
        incoming_schema=incoming_schema,
        source=source,
        extra={UPSERT_FIELD: {"inserted": inserted, "updated": updated, "deleted": deleted}},
        guard=guard,
        txn=txn,
        durable_first=durable_first,
        keys=keys,
        read_ids=tuple(read_ids),
    )


def check_unique(
    pool: Pool,
    snapshot: Snapshot,
    schema: pa.Schema,
    tables: Sequence[pa.Table],
    objects: Sequence[ObjectMeta],
    deletes: Collection[str],
    what: str,
) -> tuple[KeySet, frozenset[str]]:
    """For a change to a unique pool that adds rows (``tables``, and existing ``objects`` added
    by id) and deletes the objects ``deletes`` of ``snapshot``: raise DuplicateKeyError, naming
    the key, when some key would then be live twice (two joining rows, or a joining row and a
    row that stays). Null keys never count. Otherwise return the joining keys and the objects
    read, for the commit to validate against racing writers (:func:`commit_upsert`'s rule):
    the check holds on whatever parent the commit lands on."""
    key = pool.config.key.resolve(schema)  # ``this``: the pool's columns
    fields = [f for f in key.fields if f in schema.names]
    keys_schema = pa.schema([schema.field(f) for f in fields])
    parts = [
        conform_to(t.select([f for f in fields if f in t.schema.names]), keys_schema)
        for t in tables
        if t.num_rows
    ]
    for obj in objects:
        stored = read_verified(
            pool.store, pool.id, obj, pool.name, columns=[f for f in fields if f in obj.columns]
        )
        parts.append(conform_to(stored, keys_schema, lossless=True))
    if not parts or not fields:
        return KeySet(), frozenset()
    joining = pa.concat_tables(parts)
    keys = key_table(joining, key)
    valid = _valid(keys, key)
    keyed = keys.filter(pa.array(valid))
    if keyed.num_rows:
        names = keyed.column_names
        counts = keyed.group_by(names, use_threads=False).aggregate([(names[0], "count")])
        twice = counts.filter(pa.array(counts.column(f"{names[0]}_count").to_numpy() > 1))
        if twice.num_rows:
            raise _duplicate(pool, what, [twice.column(n)[0].as_py() for n in names])
    # Under ``this`` a record holding a null matches an equal record: its prefix before the
    # null is kept (:func:`incoming_keys_of`; ``of_columns`` would drop it).
    incoming = incoming_keys_of(joining, key)
    gone = set(deletes)
    staying = [o for o in snapshot.objects.values() if o.id not in gone and incoming.meets(o)]
    for obj in staying:
        present = [f for f in fields if f in obj.columns]
        stored = read_verified(pool.store, pool.id, obj, pool.name, columns=present)
        # Under ``this`` both sides of the join hold every key column (typed nulls where the
        # object lacks one), as in plan_upsert, so equal records join.
        fitted = keys_schema if key.nulls_match else pa.schema([schema.field(f) for f in present])
        rows = conform_to(stored, fitted, lossless=True)
        hit = match_rows(rows, joining, key)
        if len(hit.rows):
            found = key.key_columns(rows)
            raise _duplicate(pool, what, [c[int(hit.rows[0])].as_py() for c in found])
    # The objects it deletes are read too, as far as the commit's validation goes: their
    # rows leave with it (and check_actions refuses a parent where one is gone already).
    return incoming, frozenset([*(o.id for o in staying), *gone])


def _duplicate(pool: Pool, what: str, values: list[Any]) -> DuplicateKeyError:
    shown = ", ".join(f"{f}={v!r}" for f, v in zip(pool.config.key.fields, values, strict=False))
    return DuplicateKeyError(
        f"pool {pool.name} is unique by {pool.config.key}: {what} would leave two rows with "
        f"key {shown}; nothing committed (remove one of them on either side first)"
    )


def upsert(
    pool: Pool,
    sources: Sequence[Source],
    branch: str = MAIN,
    *,
    fmt: str = "auto",
    delete_when: str | None = None,
    author: str | None = None,
    message: str = "",
    meta: Any = None,
    txn: Txn | Sequence[Txn] | None = None,
    on_object: Callable[[ObjectMeta], None] | None = None,
) -> UpsertResult:
    """Upsert ``sources`` into ``branch`` in one commit (see the module docstring). Returns
    the counts; ``.commit`` is None when nothing changes (only deletes of absent keys) —
    unless ``txn`` is given: then a commit without actions records it, so a redelivery of
    the input is refused even after later commits wrote its keys (it would delete them).

    Raises EmptyTransactionError (no records), BranchNotFoundError, SchemaConflictError,
    SchemaModeError, ExpressionError (``delete_when``), TxnCommittedError (``txn`` is in
    already), RetriesExhaustedError (racing commits won every attempt),
    CommitStateUnknownError (the outcome is open: the objects are kept). Any other failure
    commits nothing and leaves nothing behind."""
    refuse_key_sorted(pool.config.otree, pool.name, "an upsert")
    txns = as_txns(txn)
    snapshot = pool.snapshot(pool.tip(branch))
    if txns:
        check_txns(snapshot.txns, txns)
    incoming = prepare(pool, sources, snapshot.schema, fmt=fmt, delete_when=delete_when)
    retry = pool.lake_config.retry
    for attempt in range(retry.max_attempts):
        if attempt:
            snapshot = pool.snapshot(pool.tip(branch))
        plan = plan_upsert(pool, snapshot, incoming)
        counts = (plan.inserted, plan.updated, plan.deleted)
        if plan.empty and not txns:
            return _result(None, plan, [], attempt + 1)
        started = pool.clock.now()
        batch = SyncBatch()
        written: list[ObjectMeta] = []
        try:
            with discarding_on_failure(pool, written):
                write_plan(pool, plan, written, batch, on_object)
                landed = commit_upsert(
                    pool,
                    branch,
                    written,
                    [o.id for o in plan.deletes],
                    keys=incoming.keys,
                    read_ids=plan.read_ids,
                    counts=counts,
                    author=author,
                    message=message
                    or (
                        f"upserted {incoming.source}: {plan.inserted:,} inserted, "
                        f"{plan.updated:,} updated, {plan.deleted:,} deleted"
                    ),
                    meta=meta,
                    incoming_schema=plan.incoming_schema,
                    source=incoming.source,
                    txn=txns,
                    guard=write_window_guard(pool.clock, started),
                    durable_first=batch,
                )
        except CommitConflictError as e:
            if not replannable(e):
                raise
            pool.backoff(attempt)  # what it wrote is removed: re-plan from the new tip
            continue
        return _result(landed, plan, written, attempt + 1)
    raise RetriesExhaustedError(f"upsert into {pool.name}@{branch}", retry.max_attempts)


def _result(
    commit: Commit | None, plan: UpsertPlan, written: Sequence[ObjectMeta], attempts: int
) -> UpsertResult:
    read = len(plan.read)
    return UpsertResult(
        commit=commit,
        inserted=plan.inserted,
        updated=plan.updated,
        deleted=plan.deleted,
        objects_read=read,
        objects_skipped=len(plan.snapshot.objects) - read,
        objects_rewritten=len(plan.deletes),
        bytes_rewritten=sum(o.size for o in plan.deletes),
        bytes_written=sum(o.size for o in written),
        attempts=attempts,
    )


__all__ = [
    "UPSERT_FIELD",
    "Copy",
    "Incoming",
    "Matched",
    "UpsertPlan",
    "UpsertResult",
    "check_unique",
    "commit_upsert",
    "key_table",
    "last_per_key",
    "match_rows",
    "plan_targets",
    "plan_upsert",
    "prepare",
    "upsert",
    "write_copy",
    "write_plan",
]
