"""What the stages of a Spark load share (:mod:`lake_spark.ingest`, :mod:`lake_spark.otree_load`,
:mod:`lake_spark.upsert`): the job every task is shipped, the survey's and the write stage's
reports, and the shuffle *pieces* rows travel in — Arrow IPC slices of about
:data:`PIECE_BYTES`, each numbered so that a bucket's task gathers them in source order, or a
chunk's error sent to every bucket so that none writes."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lake_core.clock import SYSTEM_CLOCK
from lake_core.indexes.building import build_indexes
from lake_core.indexes.rules import IndexRule
from lake_core.ingest import normalize_table
from lake_core.objects import ObjectMeta
from lake_core.otree.settings import OTreeLayout
from lake_core.partitions import PartitionSpec
from lake_core.poolkey import PoolKey
from lake_core.writer import WriteOptions
from lake_spark.sources import Chunk, read_chunk
from lake_spark.tasks import TaskError, task_store

#: What errors call the rows of a DataFrame source.
DATAFRAME_NAME = "DataFrame"
#: Rows travel to their bucket's task in Arrow IPC pieces of about this size. PySpark
#: groups up to ten pieces a bucket into one shuffle record (a JVM byte array), so small
#: pieces keep records small whatever the size of a chunk.
PIECE_BYTES = 8 * 1024 * 1024
#: Pieces per chunk, at most: a piece's sequence number is chunk * PIECES_PER_CHUNK + piece.
PIECES_PER_CHUNK = 1 << 24


@dataclass(frozen=True)
class Survey:
    """What the survey stage learns of one chunk."""

    chunk: int
    source: int
    rows: int = 0
    schema: pa.Schema | None = None
    bytes_per_row: float = 0.0
    samples: pa.Table | None = None  # key fields and partition column, plus WEIGHT
    partitions: pa.Table | None = None  # a raw value per partition, with its row count
    error: TaskError | None = None


@dataclass(frozen=True)
class Job:
    """What every task of one load needs (shipped to executors with the task)."""

    uri: str
    pool_id: str
    key: PoolKey
    options: WriteOptions
    spec: PartitionSpec | None
    schema: pa.Schema | None = None  # the unified pool schema: chunks are conformed to it
    layout: pa.Schema | None = None  # the columns of every object, as the local path has them
    ranges: dict[str | None, tuple[int, pa.Table]] = field(default_factory=dict)
    partitions: tuple[str | None, ...] = ()  # bucket -> pool partition
    # Of the Arrow IPC pieces rows travel in: compressed here (Arrow compresses buffers on
    # threads), the bytes through the JVM and its shuffle files are a third as many.
    # spark_session turns Spark's own shuffle compression off: it would redo this work.
    shuffle_compression: str | None = "lz4"
    #: The index rules covering the pool (lake_core.indexes): each task indexes the objects it
    #: writes, so the driver never reads them back.
    index_rules: tuple[IndexRule, ...] = ()
    pool_name: str = ""
    #: An OTree pool's settings: the load builds the tree instead of key ranges
    #: (:mod:`lake_spark.otree_load`).
    otree: OTreeLayout | None = None


@dataclass(frozen=True)
class Written:
    bucket: int
    objects: tuple[dict[str, Any], ...]
    error: TaskError | None = None
    indexes: tuple[dict[str, Any], ...] = ()


def batches_table(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    collected = list(batches)
    return pa.Table.from_batches(collected) if collected else None


def to_ipc(table: pa.Table, compression: str | None) -> bytes | bytearray:
    options = pa.ipc.IpcWriteOptions(compression=compression)  # type: ignore[arg-type]
    if compression is not None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()
    # Measure, then write once into a buffer of the exact size: no regrowing, no copy.
    mock = pa.MockOutputStream()
    with pa.ipc.new_stream(mock, table.schema, options=options) as writer:
        writer.write_table(table)
    out = bytearray(mock.size())
    with pa.ipc.new_stream(
        pa.FixedSizeBufferWriter(pa.py_buffer(out)), table.schema, options=options
    ) as writer:
        writer.write_table(table)
    return out


def from_ipc(data: bytes | bytearray) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


Piece = tuple[int, tuple[int, bytes | bytearray]]  # (bucket, (seq, Arrow IPC or error))


def failed_pieces(buckets: int, chunk: int, exc: Exception) -> Iterator[Piece]:
    """A chunk that failed after the survey: its error goes to every bucket (with a negative
    sequence number), so that no bucket writes and the driver raises it."""
    error = pickle.dumps(TaskError.capture(exc))
    for bucket in range(buckets):
        yield bucket, (-1 - chunk * PIECES_PER_CHUNK, error)


def ipc_slices(rows: pa.Table) -> Iterator[pa.Table]:
    """``rows`` in slices of about :data:`PIECE_BYTES` (no shuffle record grows huge)."""
    step = max(1, PIECE_BYTES * rows.num_rows // max(1, rows.nbytes))
    for start in range(0, rows.num_rows, step):
        yield rows.slice(start, step)


Split = Callable[[pa.Table, int], Iterable[Piece]]  # a chunk's rows (and its number) -> pieces


def chunk_pieces(buckets: int, split: Split) -> Callable[[Chunk], Iterator[Piece]]:
    """A task reading one chunk and sending its rows to their buckets (``split``); a chunk
    that fails now (a damaged row group the survey skipped) sends its error to every one of
    the ``buckets``, so that none writes."""

    def run(chunk: Chunk) -> Iterator[Piece]:
        try:
            pieces = list(split(read_chunk(chunk), chunk.index))
        except Exception as exc:  # noqa: BLE001 - reported to every bucket, then the driver
            yield from failed_pieces(buckets, chunk.index, exc)
            return
        yield from pieces

    return run


def partition_number() -> int:
    """The DataFrame partition this task reads (its chunk number)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def frame_pieces(
    buckets: int, split: Split
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """As :func:`chunk_pieces`, for one partition of a DataFrame (``mapInArrow``): the pieces
    as rows of :data:`BUCKET_SCHEMA`."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part = partition_number()
        try:
            raw = batches_table(batches)
            if raw is None or raw.num_rows == 0:
                return
            pieces = list(split(normalize_table(raw, DATAFRAME_NAME), part))
        except Exception as exc:  # noqa: BLE001 - e.g. a DataFrame that changed since the survey
            pieces = list(failed_pieces(buckets, part, exc))
        for bucket, (seq, payload) in pieces:
            yield pa.RecordBatch.from_pydict(
                {"bucket": [bucket], "seq": [seq], "payload": [payload]},
                schema=BUCKET_SCHEMA,
            )

    return run


_BUCKET_TYPES: dict[str, pa.DataType] = {
    "bucket": pa.int32(),
    "seq": pa.int64(),
    "payload": pa.binary(),
}
BUCKET_SCHEMA = pa.schema(_BUCKET_TYPES)


def gather_pieces(items: Iterable[Piece]) -> pa.Table | TaskError | None:
    """One bucket's rows, in source order (the pieces' sequence numbers), from the pieces
    :func:`bucketize_chunk` sent it; the first failed chunk's error if any chunk failed after
    the survey; None when no piece came."""
    pieces = sorted((pair for _, pair in items), key=lambda pair: pair[0])
    if not pieces:
        return None
    if pieces[0][0] < 0:  # a chunk failed: report the first one's error
        failed = max(seq for seq, _ in pieces if seq < 0)
        error: TaskError = pickle.loads(next(p for seq, p in pieces if seq == failed))
        return error
    tables = [from_ipc(payload) for _, payload in pieces]
    del pieces
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def by_bucket(bucket: int) -> int:
    return bucket


#: Writes one bucket's rows as objects, reporting each object as it lands: (bucket, rows,
#: on_object).
BucketWrite = Callable[[int, pa.Table, Callable[[ObjectMeta], None]], None]


def bucket_writer(
    job: Job, write: BucketWrite
) -> Callable[[int, Iterable[Piece]], Iterator[Written]]:
    """The write task of a bucket: gather its pieces in source order, ``write`` them, index
    the objects under the pool's rules, report them (:func:`write_bucket`)."""

    def run(bucket: int, items: Iterable[Piece]) -> Iterator[Written]:
        yield from write_bucket(job, write, bucket, lambda: gather_pieces(items))

    return run


#: A bucket's rows in source order, the first failed chunk's error, or None (no rows).
Gather = Callable[[], pa.Table | TaskError | None]


def write_bucket(job: Job, write: BucketWrite, bucket: int, gather: Gather) -> Iterator[Written]:
    """Write the rows ``gather`` gives for ``bucket``, index the objects under the pool's rules
    and report them. A chunk's error gathered is reported without writing; an error here
    (gathering included) is reported with the objects written so far (the driver deletes
    them)."""
    written: list[ObjectMeta] = []
    try:
        table = gather()
        if table is None:
            return
        if isinstance(table, TaskError):  # a chunk failed: write nothing
            yield Written(bucket, (), table)
            return
        write(bucket, table, written.append)
        metas = build_indexes(
            task_store(job.uri),
            job.pool_id,
            job.pool_name,
            written,
            job.index_rules,
            SYSTEM_CLOCK,
            threads=1,
        )
        yield Written(
            bucket,
            tuple(o.to_json() for o in written),
            indexes=tuple(m.to_json() for m in metas),
        )
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
        yield Written(bucket, tuple(o.to_json() for o in written), TaskError.capture(exc))
