"""Spark ingest: source files or a DataFrame become sorted data objects and one commit.

The job runs in three stages; the driver plans between them and commits at the end:

1. **Survey** (one task per chunk, see :mod:`lake_spark.sources`): read and normalize the
   chunk with lake_core, and report its schema, row count, bytes per row (a sorted sample
   encoded as Parquet), sampled keys and its pool partitions. A chunk of a Parquet file is
   surveyed from its footer (schema, stored size) and its key and partition columns only
   (plus any uint64 column, the one check that needs the data). Errors are reported, not
   raised.
2. **Plan** (driver): raise the first error in source order, then unify the schemas in source
   order — exactly what ``lake load`` does, so the same input gives the same
   ``MalformedInputError`` or ``SchemaConflictError``, before anything is written. Then cut
   each pool partition into key ranges of about the target size (:mod:`lake_spark.ranges`).
3. **Bucket and write**: each chunk is read again, conformed to the unified schema, and its
   rows are sent (as Arrow IPC pieces, through Spark's shuffle) to the task of their
   (partition, key range); that task sorts them with lake_core and writes objects with
   lake_core's writer, which cuts near the target size and never between equal keys. A key
   range never spans two partitions, and equal keys always fall in one range, so objects
   never straddle partitions or split a run of keys. Pieces meet their range's task in
   source order, so the stable sort gives the very order the local path gives. A chunk that
   fails now (a damaged page the survey did not read) sends its error to every range's task,
   and none of them writes.

   A load of Parquet sources with at most :data:`DIRECT_MAX_RANGES` key ranges skips the
   shuffle: each range's task reads every chunk itself, in source order, and keeps its own
   rows — the same rows in the same order, the same first error, without sending the data
   through the JVM.

Then the driver commits once (``pool.commit`` with the load's schema). If any task failed, or
the commit fails, every object any task wrote is deleted and the error is raised as the task
raised it. A task attempt killed outright (a lost executor) leaves its objects as orphans,
like a killed local writer: ``lake cleanup`` removes them after the grace period.

Memory: a task holds one chunk (a whole text file, or about ``chunk_bytes`` of a Parquet
file's row groups, or one DataFrame partition) or one key range (about the target size).
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.errors import EmptyTransactionError, UsageError
from lake_core.indexes.meta import IndexMeta
from lake_core.inflight import write_window_guard
from lake_core.ingest import conform_to, normalize_table, unify_schema
from lake_core.objects import ObjectMeta
from lake_core.otree.weights import WEIGHT_COLUMN
from lake_core.partitions import PartitionSpec
from lake_core.pool import MAIN, Pool
from lake_core.txn import Txn, as_txns, check_txns
from lake_core.units import counted
from lake_core.writer import WriteOptions, sort_table, write_objects
from lake_spark.ranges import (
    WEIGHT,
    assign_buckets,
    choose_boundaries,
    sample_indices,
    split_by_bucket,
)
from lake_spark.sources import (
    DEFAULT_CHUNK_BYTES,
    Chunk,
    expand_sources,
    plan_chunks,
    read_chunk,
    read_chunk_columns,
)
from lake_spark.stages import (
    DATAFRAME_NAME,
    PIECES_PER_CHUNK,
    Job,
    Piece,
    Survey,
    Written,
    batches_table,
    bucket_writer,
    by_bucket,
    chunk_pieces,
    frame_pieces,
    ipc_slices,
    partition_number,
    to_ipc,
    write_bucket,
)
from lake_spark.tasks import TaskError, task_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Sampled rows per chunk for the size estimate (encoded as Parquet: fewer rows compress
#: worse than a whole object does, so small samples overestimate sizes), and of those, for
#: the key boundaries (shipped to the driver).
SIZE_SAMPLE_ROWS = 65536
KEY_SAMPLE_ROWS = 4096
_COUNT = "__lake_partition_rows"
#: A load of Parquet sources cut into at most this many key ranges skips Spark's shuffle:
#: each range's task reads every source chunk and keeps its own rows. Measured on lineitem
#: sf 1 (two ranges, local[2]; docs/spark.md): the load cost 5.4 CPU-s more than the local
#: path this way, 11.1 through the shuffle (Arrow IPC pickled into the JVM, shuffle files and
#: back). Each range more reads the input once more, and the ranges' tasks are all the
#: parallelism there is: kept at the measured two. More ranges, text sources and DataFrames go
#: through the shuffle.
DIRECT_MAX_RANGES = 2


# -- stage 1: survey (tasks) ------------------------------------------------------------------


def _partition_column(spec: PartitionSpec | None) -> list[str]:
    return [spec.column] if spec is not None else []


def _partition_values(table: pa.Table, spec: PartitionSpec) -> pa.Table:
    """One raw value per partition of ``table`` with its row count. The driver turns them into
    partition values after conforming them to the pool schema (an int column may become a
    float one), so it computes exactly what the writer will."""
    n = table.num_rows
    if spec.column not in table.schema.names:
        return pa.table({_COUNT: pa.array([n], pa.int64())})
    raw: Any = table.column(spec.column).combine_chunks()
    if spec.transform == "identity":
        counted: Any = raw.value_counts()
        return pa.table({spec.column: counted.field(0), _COUNT: counted.field(1)})
    if pa.types.is_timestamp(raw.type) or pa.types.is_date(raw.type):
        codes = spec.values(table).dictionary_encode().indices.to_numpy(zero_copy_only=False)
        _, first, counts = np.unique(codes, return_index=True, return_counts=True)
        return pa.table({spec.column: raw.take(first), _COUNT: pa.array(counts, pa.int64())})
    # Not a timestamp (or all null): the driver's partition check decides, as the writer does.
    return pa.table({spec.column: raw.slice(0, 1), _COUNT: pa.array([n], pa.int64())})


def _wanted(job: Job) -> list[str]:
    """The columns the survey samples: the key fields and the partition column."""
    return list(dict.fromkeys([*job.key.fields, *_partition_column(job.spec)]))


def _survey_table(
    job: Job,
    chunk: int,
    source: int,
    table: pa.Table,
    schema: pa.Schema | None = None,
    bytes_per_row: float | None = None,
) -> Survey:
    """The survey of ``table`` (all of a chunk's rows; of its columns, at least the key and
    partition ones when ``schema`` and ``bytes_per_row`` are given)."""
    n = table.num_rows
    schema = schema or table.schema
    if n == 0:
        return Survey(chunk, source, 0, schema)
    if bytes_per_row is None:
        sized = table.take(pa.array(sample_indices(n, SIZE_SAMPLE_ROWS)))
        sink = pa.BufferOutputStream()
        compression: Any = job.options.compression
        pq.write_table(sort_table(sized, job.key), sink, compression=compression)
        bytes_per_row = sink.getvalue().size / sized.num_rows
    picks = pa.array(sample_indices(n, KEY_SAMPLE_ROWS))
    columns = {c: table.column(c).take(picks) for c in _wanted(job) if c in table.schema.names}
    columns[WEIGHT] = pa.array(np.full(len(picks), n / len(picks)))
    sampled = pa.table(columns)
    parts = _partition_values(table, job.spec) if job.spec is not None else None
    return Survey(chunk, source, n, schema, bytes_per_row, sampled, parts)


def survey_chunk(job: Job) -> Callable[[Chunk], Survey]:
    def run(chunk: Chunk) -> Survey:
        try:
            if chunk.row_groups is None:
                return _survey_table(job, chunk.index, chunk.source, read_chunk(chunk))
            # Part of a Parquet file: its footer tells the schema and the stored size, so
            # only the key and partition columns are read now (the data is read once, to
            # write it).
            part = read_chunk_columns(chunk, _wanted(job))
            per_row = part.stored_bytes / part.rows if part.rows else 0.0
            return _survey_table(job, chunk.index, chunk.source, part.table, part.schema, per_row)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            return Survey(chunk.index, chunk.source, error=TaskError.capture(exc))

    return run


def survey_frame(job: Job) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part = partition_number()
        try:
            raw = batches_table(batches)
            if raw is None:
                survey = Survey(part, 0)
            else:
                table = normalize_table(raw, DATAFRAME_NAME)
                survey = _survey_table(job, part, 0, table)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            survey = Survey(part, 0, error=TaskError.capture(exc))
        yield pa.RecordBatch.from_pydict({"survey": [pickle.dumps(survey)]})

    return run


# -- stage 2: plan (driver) -------------------------------------------------------------------


def unify_surveys(
    surveys: list[Survey], names: list[str], base: pa.Schema | None
) -> tuple[pa.Schema | None, pa.Schema | None, list[Survey]]:
    """(pool schema, object layout, surveys with rows), raising what the local path raises,
    in the order it would: per source, its read error, else its schema conflict."""
    by_source: dict[int, list[Survey]] = {}
    for s in surveys:
        by_source.setdefault(s.source, []).append(s)
    schema = base
    layouts: list[pa.Table] = []
    kept: list[Survey] = []
    for source in sorted(by_source):
        parts = sorted(by_source[source], key=lambda s: s.chunk)
        for s in parts:
            if s.error is not None:
                s.error.reraise()
        with_rows = [s for s in parts if s.rows > 0]
        if not with_rows:
            continue
        for s in with_rows:
            assert s.schema is not None
            schema = unify_schema(schema, s.schema, names[source])
            layouts.append(s.schema.empty_table())
        kept += with_rows
    if schema is None or not kept:
        return schema, None, []
    conformed = [conform_to(t, schema, exact=False) for t in layouts]
    layout = pa.concat_tables(conformed, promote_options="default").schema
    return schema, layout, kept


def _plan_ranges(
    job: Job, surveys: list[Survey], schema: pa.Schema, layout: pa.Schema, target: int
) -> Job:
    """``job`` with its buckets: each pool partition cut into key ranges of about ``target``
    bytes (estimated from each chunk's sample)."""
    spec = job.spec
    estimate: dict[str | None, float] = {}
    samples: dict[str | None, list[pa.Table]] = {}
    for s in surveys:
        assert s.samples is not None
        sampled = conform_to(s.samples, schema, exact=False)
        if spec is None:
            estimate[None] = estimate.get(None, 0.0) + s.rows * s.bytes_per_row
            samples.setdefault(None, []).append(sampled)
            continue
        assert s.partitions is not None
        reps = conform_to(s.partitions, schema, exact=False)
        # Partition values of the types the writer sees: the layout's.
        values = spec.values(conform_to(reps, layout)).to_pylist()
        for value, count in zip(values, reps.column(_COUNT).to_pylist(), strict=True):
            estimate[value] = estimate.get(value, 0.0) + int(count or 0) * s.bytes_per_row
        # ``sampled`` has the pool's types already; a sample lacking the partition column is
        # all in partition null, as it is once the layout adds the column as nulls.
        for value, part in spec.split(sampled):
            samples.setdefault(value, []).append(part)
    ranges: dict[str | None, tuple[int, pa.Table]] = {}
    partitions: list[str | None] = []
    for value in sorted(estimate, key=lambda v: (v is None, v or "")):
        wanted = max(1, math.ceil(estimate[value] / max(1, target)))
        parts = samples.get(value, [])
        bounds = (
            choose_boundaries(pa.concat_tables(parts, promote_options="default"), job.key, wanted)
            if parts and wanted > 1
            else pa.table({})
        )
        ranges[value] = (len(partitions), bounds)
        partitions += [value] * (bounds.num_rows + 1)
    return replace(job, schema=schema, layout=layout, ranges=ranges, partitions=tuple(partitions))


# -- stage 3: bucket and write (tasks) --------------------------------------------------------


def _by_partition(job: Job, table: pa.Table) -> Iterator[tuple[int, pa.Table, pa.Table]]:
    """One chunk's rows conformed to the pool schema, by pool partition: (the partition's
    first bucket, its key-range boundaries, its rows in the chunk's order)."""
    assert job.schema is not None
    table = conform_to(table, job.schema, exact=False)
    groups = job.spec.split(table) if job.spec is not None else [(None, table)]
    for value, part in groups:
        if value not in job.ranges:
            raise RuntimeError(
                f"partition {value!r} appeared after the survey: the input changed while "
                "loading (persist a DataFrame that is not deterministic)"
            )
        offset, bounds = job.ranges[value]
        yield offset, bounds, part


def _bucketize(job: Job, table: pa.Table, chunk: int) -> Iterator[Piece]:
    """The rows of one chunk, as (bucket, (sequence number, Arrow IPC)) pairs; sequence
    numbers follow the chunk's order and then the rows' order."""
    for offset, bounds, part in _by_partition(job, table):
        for r, rows in split_by_bucket(part, assign_buckets(part, bounds, job.key)):
            for i, piece in enumerate(ipc_slices(rows)):
                yield (
                    offset + r,
                    (chunk * PIECES_PER_CHUNK + i, to_ipc(piece, job.shuffle_compression)),
                )


def bucketize_chunk(job: Job) -> Callable[[Chunk], Iterator[Piece]]:
    return chunk_pieces(len(job.partitions), partial(_bucketize, job))


def bucketize_frame(job: Job) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    return frame_pieces(len(job.partitions), partial(_bucketize, job))


def _direct_rows(job: Job, chunks: Sequence[Chunk], bucket: int) -> pa.Table | TaskError | None:
    """``bucket``'s rows read straight from every one of ``chunks`` (in their order, the order
    :func:`~lake_spark.stages.gather_pieces` gives), or the error of the first chunk that fails
    (the one the shuffle would report); None when no chunk has rows for it."""
    parts: list[pa.Table] = []
    for chunk in chunks:
        try:
            parts += _own_rows(job, read_chunk(chunk), bucket)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            return TaskError.capture(exc)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")


def _own_rows(job: Job, table: pa.Table, bucket: int) -> list[pa.Table]:
    """The rows of one chunk that belong to ``bucket``, in the chunk's order: copied out by a
    filter, so that the rest of the chunk is freed (a task keeps about its range's rows)."""
    out: list[pa.Table] = []
    for offset, bounds, part in _by_partition(job, table):
        if part.num_rows == 0 or not offset <= bucket <= offset + bounds.num_rows:
            continue  # no rows, or another partition's ranges
        mine = assign_buckets(part, bounds, job.key) == bucket - offset
        if mine.all() and part.num_rows == table.num_rows:
            out.append(part)  # the whole chunk is this range's
        elif mine.any():
            # A copy: a partition's rows are a slice of the chunk's reordered copy, and a
            # slice would keep all of it alive.
            out.append(
                part.filter(pa.array(mine)) if not mine.all() else part.take(np.flatnonzero(mine))
            )
    return out


def direct_writer(
    job: Job, chunks: Sequence[Chunk]
) -> Callable[[int, Iterable[Any]], Iterator[Written]]:
    """The write task of a bucket that reads its own rows from every chunk (no shuffle):
    :func:`~lake_spark.stages.write_bucket` of :func:`_direct_rows`."""

    def run(bucket: int, _: Iterable[Any]) -> Iterator[Written]:
        gather = partial(_direct_rows, job, chunks, bucket)
        yield from write_bucket(job, partial(_write_range, job), bucket, gather)

    return run


def _direct(buckets: int, todo: Sequence[Chunk], frame: DataFrame | None) -> bool:
    """Whether the key ranges' tasks read the sources themselves (see
    :data:`DIRECT_MAX_RANGES`): Parquet sources (read by row group, their columns
    decoded once per task), at most that many ranges."""
    return (
        frame is None
        and bool(todo)
        and buckets <= DIRECT_MAX_RANGES
        and all(c.row_groups is not None for c in todo)
    )


def _write_range(
    job: Job, bucket: int, table: pa.Table, on_object: Callable[[ObjectMeta], None]
) -> None:
    """A key range's rows as sorted objects (lake_core's writer)."""
    assert job.layout is not None
    write_objects(
        task_store(job.uri),
        job.pool_id,
        conform_to(table, job.layout),
        job.key,
        job.options,
        partition=job.partitions[bucket],
        on_object=on_object,
    )


def _write_ranges(
    spark: SparkSession,
    pool: Pool,
    job: Job,
    kept: list[Survey],
    schema: pa.Schema,
    layout: pa.Schema,
    todo: list[Chunk],
    frame: DataFrame | None,
) -> list[Written]:
    """Stage 2's key ranges and stage 3: the objects each range's task wrote (or its error)."""
    job = _plan_ranges(job, kept, schema, layout, pool.config.target_size)
    if job.spec is not None:
        job.spec.values(layout.empty_table())  # the writer's partition check, before writing
    buckets = len(job.partitions)
    sc = spark.sparkContext
    if _direct(buckets, todo, frame):
        sc.setJobDescription(
            f"lakepool load into {pool.name}: write {buckets} key ranges, "
            f"each read from the {len(todo)} source chunks"
        )
        direct: list[Written] = (
            sc.parallelize(range(buckets), buckets)
            .mapPartitionsWithIndex(direct_writer(job, todo))
            .collect()
        )
        return direct
    sc.setJobDescription(f"lakepool load into {pool.name}: write {buckets} key ranges")
    if frame is not None:
        pairs = frame.mapInArrow(
            bucketize_frame(job), "bucket int, seq long, payload binary"
        ).rdd.map(lambda row: (row[0], (row[1], row[2])))
    else:
        pairs = sc.parallelize(todo, len(todo)).flatMap(bucketize_chunk(job))
    results: list[Written] = (
        pairs.partitionBy(buckets, by_bucket)
        .mapPartitionsWithIndex(bucket_writer(job, partial(_write_range, job)))
        .collect()
    )
    return results


# -- the driver -------------------------------------------------------------------------------


def spark_load(
    spark: SparkSession,
    pool: Pool,
    sources: DataFrame | Sequence[str | Path] | str | Path,
    branch: str = MAIN,
    *,
    fmt: str = "auto",
    author: str | None = None,
    message: str = "",
    meta: Any = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    txn: Txn | Sequence[Txn] | None = None,
) -> Commit:
    """Load ``sources`` — paths (local or ``s3://``; NDJSON, JSON, CSV, Parquet, Arrow) or a
    Spark DataFrame — into ``branch`` in one commit, the work spread over Spark tasks.

    Same rules, errors and result as :func:`lake_core.loading.load`; nothing is visible, and
    no object is left behind, on failure. A DataFrame is evaluated twice (survey, then write):
    persist it first if it is expensive or not deterministic. ``txn``: as for ``load``
    (:mod:`lake_core.txn`): one already committed raises TxnCommittedError before any work.
    A unique pool (``PoolConfig.unique``) refuses with UsageError: use
    :func:`lake_spark.upsert.spark_upsert` (``lake load --spark`` does).
    """
    from pyspark.sql import DataFrame

    if pool.config.unique:
        # Its loads are upserts (Pool.load upserts there too); a plain load would keep both
        # copies of a key.
        raise UsageError(
            f"pool {pool.name} is unique (rows unique by {pool.config.key}): load it with "
            "lake_spark.spark_upsert, which replaces rows by key"
        )
    tip = pool.tip(branch)  # BranchNotFoundError before any work
    txns = as_txns(txn)
    check_txns(pool.snapshot(tip).txns, txns)
    started = pool.clock.now()  # the write window (lake_core.inflight) runs from here
    base = pool.snapshot(tip).schema
    job = Job(
        pool.store.uri,
        pool.id,
        pool.config.key,
        WriteOptions(pool.config.target_size, pool.config.seek_stride),
        pool.partition_spec,
        index_rules=pool.index_rules,
        pool_name=pool.name,
    )
    sc = spark.sparkContext
    frame: DataFrame | None = None
    chunks: list[Chunk] = []
    if isinstance(sources, DataFrame):
        frame = sources
        names = [DATAFRAME_NAME]
        sc.setJobDescription(f"lakepool load into {pool.name}: survey the DataFrame")
        rows = frame.mapInArrow(survey_frame(job), "survey binary").collect()
        surveys = [pickle.loads(r[0]) for r in rows]
    else:
        paths = [sources] if isinstance(sources, str | Path) else list(sources)
        names = expand_sources(paths)
        chunks = plan_chunks(names, fmt, chunk_bytes)
        if not chunks:
            raise EmptyTransactionError("no records in the input")
        sc.setJobDescription(f"lakepool load into {pool.name}: read {len(names)} sources")
        surveys = sc.parallelize(chunks, len(chunks)).map(survey_chunk(job)).collect()
    schema, layout, kept = unify_surveys(sorted(surveys, key=lambda s: s.chunk), names, base)
    if not kept or schema is None or layout is None:
        raise EmptyTransactionError("no records in the input")
    # A whole-record key (this) is the pool's columns, known now: the tasks sort and write by
    # it. The survey sampled no key column for it, so each pool partition is one key range
    # (one task), which is correct, not parallel.
    if pool.config.otree is not None:
        # The weight column, as the local path adds it (int32, last): in the commit's schema
        # and in every object (the tasks compute it; conform_to's exact layout keeps it).
        weight = pa.field(WEIGHT_COLUMN, pa.int32(), nullable=False)
        schema = pa.schema([f for f in schema if f.name != WEIGHT_COLUMN] + [weight])
        layout = pa.schema([f for f in layout if f.name != WEIGHT_COLUMN] + [weight])
        job = replace(job, otree=pool.config.otree)
    job = replace(job, key=job.key.resolve(schema))
    with_rows = {s.chunk for s in kept}
    todo = [c for c in chunks if c.index in with_rows]
    if job.otree is not None:
        from lake_spark.otree_load import write_tree

        job = replace(job, schema=schema, layout=layout)
        live = list(pool.snapshot(tip).objects.values())
        results = write_tree(spark, pool, job, kept, live, todo, frame)
    else:
        results = _write_ranges(spark, pool, job, kept, schema, layout, todo, frame)
    objects = [
        ObjectMeta.from_json(o) for r in sorted(results, key=lambda r: r.bucket) for o in r.objects
    ]
    with discarding_on_failure(pool, objects):
        for r in sorted(results, key=lambda r: r.bucket):
            if r.error is not None:
                r.error.reraise()
        return pool.commit(
            branch,
            objects,
            [],
            author=author,
            message=message
            or f"loaded {counted(len(objects), 'data object')} from {', '.join(names)}",
            meta=meta,
            incoming_schema=layout,
            source=", ".join(names),
            guard=write_window_guard(pool.clock, started),
            txn=txns,
            index_adds=[IndexMeta.from_json(m) for r in results for m in r.indexes],
            index=False,  # the tasks indexed every object under the pool's rules
        )
