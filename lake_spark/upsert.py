"""Spark upsert: a change set merge-joined with the live objects it meets, per key range on
Spark tasks, committed once by the driver (``lake upsert --spark``).

The same rules and result as :func:`lake_core.upsert.upsert` (the pool key identifies a row;
last in input order wins within the input; ``delete_when`` rows delete their key; null keys
match nothing and are inserted; only live objects whose key span contains an incoming key are
read), spread like :mod:`lake_spark.ingest`:

1. **Survey** (one task per chunk, :func:`lake_spark.ingest.survey_chunk`): schema, rows,
   bytes per row and weighted key samples; errors are the local path's, raised in source
   order by the driver before anything is written. Done once: the input does not change.
2. **Plan** (driver, per attempt): the tip's snapshot; the schemas unified with the tip's;
   ``delete_when`` checked against them; the key space cut into buckets at group ends of the
   live objects (:mod:`lake_spark.upsert_plan`), so every live object belongs to one bucket and
   no two tasks ever read or rewrite the same object.
3. **Merge** (one task per bucket): each chunk is read again and its rows travel to their
   bucket's task in source order (:func:`lake_spark.ingest.bucketize_chunk`). The task
   evaluates ``delete_when``, keeps the last row per key (a key's rows all meet in one task)
   and then runs lake_core's own planner and writer on them (``plan_upsert``, ``write_plan``)
   against a snapshot holding only its bucket's live objects: the targets are the objects
   whose span contains one of its keys, a target holding a matched row is rewritten without
   it, the upserted rows are written as new sorted objects. So a bucket does exactly what the
   local path does to those keys. It reports what it wrote, read and rewrote, its counts
   and its keys.
4. **Commit** (driver): one commit adding every written object and deleting the rewritten
   targets, validated by lake_core (``commit_upsert`` with the keys and the objects read, see
   :func:`lake_core.committing.check_unread`): a racing commit that deleted an object this
   upsert rewrites, or added a live object meeting its keys that it did not read, is a
   conflict; the objects written are removed and the upsert re-plans from the new tip
   (:data:`MAX_ATTEMPTS` plans in all). It never commits on stale objects. An upsert that
   changes nothing (only deletes of absent keys) commits nothing.

The rows, the counts and the objects read and rewritten are the local path's; the objects
written are cut per bucket, so they may differ in number and size from the local path's.

Memory: a task holds its bucket's incoming rows plus its targets (buckets are cut at about
the target size of estimated work: incoming bytes plus the targets the samples meet).
The keys of the whole change set go to the driver, which validates the commit with them.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.committing import discarding_on_failure
from lake_core.config import LakeConfig
from lake_core.errors import (
    CatalogConflictError,
    CommitConflictError,
    EmptyTransactionError,
    RetriesExhaustedError,
    UsageError,
    WriteWindowExpiredError,
)
from lake_core.expr import parse_predicate, to_arrow_expression
from lake_core.inflight import write_window_guard
from lake_core.ingest import conform_to, unify_schema
from lake_core.keyset import KeySet
from lake_core.objects import ObjectMeta
from lake_core.pool import MAIN, Pool
from lake_core.registry import PoolConfig
from lake_core.schema_mode import check_key_present, check_new_columns
from lake_core.snapshot import Snapshot
from lake_core.txn import Txn, as_txns, check_txns
from lake_core.upsert import (
    UpsertResult,
    commit_upsert,
    incoming_rows,
    plan_upsert,
    write_plan,
)
from lake_core.writer import WriteOptions
from lake_spark.ingest import (
    bucketize_chunk,
    bucketize_frame,
    survey_chunk,
    survey_frame,
    unify_surveys,
)
from lake_spark.ranges import WEIGHT
from lake_spark.sources import DEFAULT_CHUNK_BYTES, Chunk, expand_sources, plan_chunks
from lake_spark.stages import DATAFRAME_NAME, Job, Survey, by_bucket, gather_pieces
from lake_spark.tasks import TaskError, task_store
from lake_spark.upsert_plan import plan_buckets

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

#: Planning attempts: the first plus re-plans after racing commits.
MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class _Input:
    """The change set: source names (as errors name them) and their chunks, or a DataFrame."""

    names: list[str]
    chunks: list[Chunk]
    frame: DataFrame | None = None


@dataclass(frozen=True)
class _MergeJob:
    """What every merge task needs besides its rows (shipped with the task)."""

    uri: str
    config: PoolConfig
    base: Snapshot  # the tip's schema, no objects (a bucket's objects come from ``objects``)
    layout: pa.Schema  # the input's columns, unified: every bucket's rows are given all of them
    delete_when: str | None
    source: str
    objects: Broadcast[list[list[dict[str, Any]]]]  # per bucket: its live objects


@dataclass(frozen=True)
class _Merged:
    """One bucket's outcome, reported to the driver."""

    bucket: int
    adds: tuple[dict[str, Any], ...] = ()
    deletes: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    keys: tuple[tuple[Any, ...], ...] = ()
    opaque: bool = False
    writes_rows: bool = False
    keyed: bool = False  # some row has its first key field
    error: TaskError | None = None


# -- the merge (inside a task) ----------------------------------------------------------------


def merge_bucket(
    job: _MergeJob, rows: pa.Table, objects: Sequence[ObjectMeta], written: list[ObjectMeta]
) -> _Merged:
    """Plan and write one bucket exactly as :func:`lake_core.upsert.upsert` plans and writes
    a whole upsert (:func:`~lake_core.upsert.plan_upsert`, :func:`~lake_core.upsert.write_plan`),
    against a snapshot holding only the bucket's live objects: the objects any of its keys
    can meet. Appends each object to ``written`` as it lands."""
    key = job.config.key
    pool = Pool(task_store(job.uri), job.config, LakeConfig(uri=job.uri))
    incoming = incoming_rows(conform_to(rows, job.layout), key, job.delete_when, job.source)
    snapshot = replace(job.base, objects=MappingProxyType({o.id: o for o in objects}))
    plan = plan_upsert(pool, snapshot, incoming)
    if not plan.empty:
        write_plan(pool, plan, written)
    table = incoming.table
    first = table.column(key.fields[0]) if key.fields[0] in table.schema.names else None
    return _Merged(
        0,
        tuple(o.to_json() for o in written),
        tuple(o.id for o in plan.deletes),
        tuple(o.id for o in plan.read),
        plan.inserted,
        plan.updated,
        plan.deleted,
        incoming.keys.keys,
        incoming.keys.opaque,
        plan.incoming_schema is not None,
        first is not None and first.null_count < len(first),
    )


def _merge_task(job: _MergeJob) -> Callable[[int, Iterable[Any]], Iterator[_Merged]]:
    def run(bucket: int, items: Iterable[Any]) -> Iterator[_Merged]:
        written: list[ObjectMeta] = []
        try:
            table = gather_pieces(items)
            if table is None:
                return  # no incoming key falls in this bucket: nothing to read or write
            if isinstance(table, TaskError):
                yield _Merged(bucket, error=table)
                return
            objects = [ObjectMeta.from_json(o) for o in job.objects.value[bucket]]
            yield replace(merge_bucket(job, table, objects, written), bucket=bucket)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            adds = tuple(o.to_json() for o in written)
            yield _Merged(bucket, adds, error=TaskError.capture(exc))

    return run


# -- the driver -------------------------------------------------------------------------------


def _samples(surveys: list[Survey], schema: pa.Schema) -> tuple[pa.Table, float]:
    """The surveys' key samples as the pool schema types them, and bytes per input row."""
    tables = [conform_to(s.samples, schema, exact=False) for s in surveys if s.samples is not None]
    rows = sum(s.rows for s in surveys)
    per_row = sum(s.rows * s.bytes_per_row for s in surveys) / max(1, rows)
    if not tables:
        return pa.table({WEIGHT: pa.array([], pa.float64())}), per_row
    return pa.concat_tables(tables, promote_options="default"), per_row


def spark_upsert(
    spark: SparkSession,
    pool: Pool,
    sources: DataFrame | Sequence[str | Path] | str | Path,
    branch: str = MAIN,
    *,
    fmt: str = "auto",
    delete_when: str | None = None,
    author: str | None = None,
    message: str = "",
    meta: Any = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    txn: Txn | Sequence[Txn] | None = None,
) -> UpsertResult:
    """Upsert ``sources`` — paths, local or ``s3://`` (NDJSON, JSON, CSV, Parquet, Arrow),
    or a Spark DataFrame — into ``branch`` in one commit, the merge-join spread over Spark
    tasks by key range. A DataFrame is evaluated once to survey it and once per planning
    attempt: persist it if that is expensive or not deterministic (its row order within a
    partition, and the order of its partitions, is its input order).

    Same rules, errors, counts and rows as :func:`lake_core.upsert.upsert` (see the module
    docstring for how). Nothing is visible, and no object is left behind, on failure; a
    racing commit makes it re-plan from the new tip, up to :data:`MAX_ATTEMPTS` plans
    (then RetriesExhaustedError)."""
    from pyspark.sql import DataFrame

    if pool.config.key.is_this:
        # Key ranges are cut from sampled named key fields; the whole record's order is the
        # pool's columns, known only once every chunk is surveyed.
        raise UsageError(
            f"pool {pool.name} is keyed by the whole record (this): upsert it without --spark"
        )
    snap = pool.snapshot(pool.tip(branch))  # BranchNotFoundError before any work
    txns = as_txns(txn)
    check_txns(snap.txns, txns)
    if delete_when is not None:
        parse_predicate(delete_when)  # a malformed predicate fails before Spark starts work
    key = pool.config.key
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    # The survey and the buckets ignore partitions: each task splits what it writes by
    # partition itself (lake_core.upsert.write_plan).
    survey = Job(pool.store.uri, pool.id, key, options, None)
    sc = spark.sparkContext
    if isinstance(sources, DataFrame):
        given = _Input([DATAFRAME_NAME], [], sources)
        sc.setJobDescription(f"lakepool upsert into {pool.name}: survey the DataFrame")
        rows = sources.mapInArrow(survey_frame(survey), "survey binary").collect()
        surveys: list[Survey] = [pickle.loads(r[0]) for r in rows]
    else:
        paths = [sources] if isinstance(sources, str | Path) else list(sources)
        names = expand_sources(paths)
        given = _Input(names, plan_chunks(names, fmt, chunk_bytes))
        if not given.chunks:
            raise EmptyTransactionError("no records in the input")
        sc.setJobDescription(f"lakepool upsert into {pool.name}: read {len(names)} sources")
        chunks = given.chunks
        surveys = sc.parallelize(chunks, len(chunks)).map(survey_chunk(survey)).collect()
    surveys.sort(key=lambda s: s.chunk)
    source = ", ".join(given.names)
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            snap = pool.snapshot(pool.tip(branch))
        started = pool.clock.now()  # the write window (lake_core.inflight) runs from here
        result, layout = _attempt(spark, pool, snap, surveys, given, delete_when)
        adds = [ObjectMeta.from_json(o) for r in result for o in r.adds]
        try:
            with discarding_on_failure(pool, adds):
                for r in result:
                    if r.error is not None:
                        r.error.reraise()
                return _commit(
                    pool,
                    branch,
                    snap,
                    result,
                    adds,
                    layout,
                    source,
                    attempt + 1,
                    author=author,
                    message=message,
                    meta=meta,
                    txns=txns,
                    guard=write_window_guard(pool.clock, started),
                )
        except CommitConflictError as e:
            if isinstance(
                e, RetriesExhaustedError | WriteWindowExpiredError | CatalogConflictError
            ):
                raise
            pool.backoff(attempt, MAX_ATTEMPTS)  # what it wrote is removed: re-plan
    raise RetriesExhaustedError(f"upsert into {pool.name}@{branch}", MAX_ATTEMPTS)


def _attempt(
    spark: SparkSession,
    pool: Pool,
    snap: Snapshot,
    surveys: list[Survey],
    given: _Input,
    delete_when: str | None,
) -> tuple[list[_Merged], pa.Schema]:
    """Plan on ``snap`` and run the merge tasks: their outcomes, in bucket order, and the
    input's columns (unified)."""
    key = pool.config.key
    schema, layout, kept = unify_surveys(surveys, given.names, snap.schema)
    if not kept or schema is None or layout is None:
        raise EmptyTransactionError("no records in the input")
    source = ", ".join(given.names)
    # The checks lake_core.upsert.prepare makes, before anything is written.
    check_new_columns(pool.config.schema_mode, pool.name, snap.schema, layout, source)
    key.check_types(layout)
    if key.fields[0] not in layout.names:
        _check_key_present(pool, layout, source)  # no row can have the key: before any work
    if delete_when is not None:
        to_arrow_expression(parse_predicate(delete_when), layout)  # an unknown column, …
    if pool.partition_spec is not None:
        pool.partition_spec.values(layout.empty_table())  # the writer's check, up front
    samples, per_row = _samples(kept, schema)
    plan = plan_buckets(
        snap.objects.values(), key, schema, samples, per_row, pool.config.target_size
    )
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    bucketing = Job(
        pool.store.uri,
        pool.id,
        key,
        options,
        None,
        schema,
        layout,
        {None: (0, plan.bounds)},
        (None,) * plan.buckets,
    )
    sc = spark.sparkContext
    shared = sc.broadcast([[o.to_json() for o in objs] for objs in plan.objects])
    base = Snapshot(snap.commit_id, snap.depth, MappingProxyType({}), snap.schema)
    job = _MergeJob(pool.store.uri, pool.config, base, layout, delete_when, source, shared)
    sc.setJobDescription(f"lakepool upsert into {pool.name}: merge {plan.buckets} key ranges")
    if given.frame is not None:
        pairs = given.frame.mapInArrow(
            bucketize_frame(bucketing), "bucket int, seq long, payload binary"
        ).rdd.map(lambda row: (row[0], (row[1], row[2])))
    else:
        with_rows = {s.chunk for s in kept}
        todo = [c for c in given.chunks if c.index in with_rows]
        pairs = sc.parallelize(todo, len(todo)).flatMap(bucketize_chunk(bucketing))
    try:
        results: list[_Merged] = (
            pairs.partitionBy(plan.buckets, by_bucket)
            .mapPartitionsWithIndex(_merge_task(job))
            .collect()
        )
    finally:
        shared.unpersist()
    return sorted(results, key=lambda r: r.bucket), layout


def _check_key_present(pool: Pool, layout: pa.Schema, source: str) -> None:
    """lake_core.schema_mode.check_key_present for an input of ``layout`` no row of which
    has the pool key: MissingKeyError under strict, else its warning."""
    keyless = pa.Table.from_pylist([{}], schema=layout)
    check_key_present(pool.config.schema_mode, pool.name, pool.config.key, keyless, source)


def _union_keys(results: list[_Merged], width: int) -> KeySet:
    """Every bucket's keys as one KeySet (a key lies in one bucket only). Keys that do not
    sort together make it opaque: every object with a key then meets it, as KeySet does."""
    opaque = any(r.opaque for r in results)
    every = [k for r in results for k in r.keys]
    try:
        return KeySet(tuple(sorted(every)), width, opaque)
    except TypeError:
        return KeySet(tuple(every), width, True)


def _commit(
    pool: Pool,
    branch: str,
    snap: Snapshot,
    results: list[_Merged],
    adds: list[ObjectMeta],
    layout: pa.Schema,
    source: str,
    attempts: int,
    *,
    author: str | None,
    message: str,
    meta: Any,
    txns: Sequence[Txn],
    guard: Callable[[], None],
) -> UpsertResult:
    """Commit what the tasks wrote and deleted, validated against the keys and the objects
    read (lake_core.upsert.commit_upsert); the result counts it."""
    if not any(r.keyed for r in results):
        # No row has the pool key (its field is in the input, null in every row): a strict
        # pool refuses (MissingKeyError), as load does; the caller removes what was written.
        _check_key_present(pool, layout, source)
    deletes = [i for r in results for i in r.deletes]
    read = [i for r in results for i in r.read]
    inserted = sum(r.inserted for r in results)
    updated = sum(r.updated for r in results)
    deleted = sum(r.deleted for r in results)
    keys = _union_keys(results, len(pool.config.key.fields))
    # The schema of the rows written, as plan_upsert gives it (the same in every bucket).
    unified = unify_schema(snap.schema, layout, source)
    writes = any(r.writes_rows for r in results)
    written_schema = (
        conform_to(layout.empty_table(), unified, exact=False).schema if writes else None
    )
    commit = None
    if adds or deletes or txns:  # a txn is recorded even when nothing changes (as locally)
        commit = commit_upsert(
            pool,
            branch,
            adds,
            deletes,
            keys=keys,
            read_ids=read,
            counts=(inserted, updated, deleted),
            author=author,
            message=message
            or f"upserted {source}: {inserted} inserted, {updated} updated, {deleted} deleted",
            meta=meta,
            incoming_schema=written_schema,
            source=source,
            txn=txns,
            guard=guard,
        )
    return UpsertResult(
        commit=commit,
        inserted=inserted,
        updated=updated,
        deleted=deleted,
        objects_read=len(read),
        objects_skipped=len(snap.objects) - len(read),
        objects_rewritten=len(deletes),
        bytes_rewritten=sum(snap.objects[i].size for i in deletes),
        bytes_written=sum(o.size for o in adds),
        attempts=attempts,
    )
