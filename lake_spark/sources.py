"""Input sources of a Spark load: which files, cut into which chunks, read how.

A source is a local path or an ``s3://bucket/key`` URI, named in errors exactly as given (as
``lake load`` names it); an ``s3://bucket/prefix/`` URI (ending in ``/``) stands for every
object under the prefix, in key order. Each chunk is read by one task:

- a Parquet source with several row groups is cut into chunks of whole row groups of about
  ``chunk_bytes`` uncompressed, so one big file still spreads over every core;
- any other source (NDJSON, JSON, CSV, Arrow, gzip'd input, or a file whose footer cannot be
  read) is one chunk, read by lake_core's :func:`~lake_core.ingest.read_input`, so its errors
  are the local path's, naming the file and the line.

S3 sources are read through lake_core's S3 store (boto3, the standard ``AWS_*`` settings):
no Hadoop S3A jars are involved.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.errors import (
    CorruptObjectError,
    LakeError,
    MalformedInputError,
    ObjectNotFoundError,
    UsageError,
)
from lake_core.ingest import normalize_table, read_input
from lake_core.ingest.formats import FORMATS, format_from_name
from lake_core.reader import open_object
from lake_core.stores.base import ObjectStore
from lake_core.stores.s3config import refuse_credentials_in_uri

DEFAULT_CHUNK_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Chunk:
    """One task's share of the input: a whole source, or some row groups of a Parquet one."""

    index: int  # position in the load's chunk order (source order, then row groups)
    source: int  # position of the source in the load
    name: str  # the source as given, as errors name it
    fmt: str
    row_groups: tuple[int, ...] | None = None  # None: the whole source


def _s3_parts(uri: str) -> tuple[str, str]:
    refuse_credentials_in_uri(uri)  # never echoed in an error, nor taken for a bucket
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket or not key:
        raise UsageError(f"cannot read {uri}: an S3 source is s3://bucket/key")
    return f"s3://{bucket}", key


def _s3_store(bucket_uri: str) -> ObjectStore:
    from lake_spark.tasks import task_store

    return task_store(bucket_uri)


def _parquet_file(name: str) -> pq.ParquetFile:
    """The Parquet file of source ``name`` (local, or S3 through ranged GETs)."""
    if name.startswith("s3://"):
        bucket_uri, key = _s3_parts(name)
        return open_object(_s3_store(bucket_uri), key).file
    return pq.ParquetFile(name, memory_map=True)


def plan_chunks(
    sources: Sequence[str | Path], fmt: str = "auto", chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> list[Chunk]:
    """The chunks of ``sources``, in order. Reads only Parquet footers (on the driver)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown input format {fmt!r}; expected one of {', '.join(FORMATS)}")
    chunks: list[Chunk] = []
    for s, name in enumerate(expand_sources(sources)):
        if name == "-":
            raise UsageError("a Spark load reads files, not standard input")
        groups = _row_group_chunks(name, fmt, chunk_bytes)
        if groups is None:
            chunks.append(Chunk(len(chunks), s, name, fmt))
        else:
            for g in groups:
                chunks.append(Chunk(len(chunks), s, name, fmt, g))
    return chunks


def expand_sources(sources: Sequence[str | Path]) -> list[str]:
    """``sources`` as names, each ``s3://bucket/prefix/`` replaced by the objects under it."""
    out: list[str] = []
    for source in sources:
        name = str(source)
        refuse_credentials_in_uri(name)
        if not (name.startswith("s3://") and name.endswith("/")):
            out.append(name)
            continue
        bucket, _, prefix = name[len("s3://") :].partition("/")
        listed = sorted(
            info.key for info in _s3_store(f"s3://{bucket}").list(prefix) if info.size > 0
        )
        out += [f"s3://{bucket}/{key}" for key in listed]
    return out


def _row_group_chunks(name: str, fmt: str, chunk_bytes: int) -> list[tuple[int, ...]] | None:
    chosen = fmt if fmt != "auto" else format_from_name(name)
    if chosen != "parquet" or name.lower().endswith((".gz", ".gzip")):
        return None
    try:
        meta = _parquet_file(name).metadata
    except (LakeError, OSError, pa.ArrowException):
        return None  # the task's read_input reports it as the local path does
    if meta.num_row_groups <= 1:
        return None
    out: list[tuple[int, ...]] = []
    current: list[int] = []
    size = 0
    for rg in range(meta.num_row_groups):
        current.append(rg)
        size += meta.row_group(rg).total_byte_size
        if size >= chunk_bytes:
            out.append(tuple(current))
            current, size = [], 0
    if current:
        out.append(tuple(current))
    return out if len(out) > 1 else None


@dataclass(frozen=True)
class ChunkColumns:
    """Some columns of a Parquet chunk, and what its footer says of the rest."""

    table: pa.Table  # the columns asked for, plus any that only the data can check; normalized
    schema: pa.Schema  # the whole chunk's normalized schema
    rows: int
    stored_bytes: int  # compressed bytes of the chunk's row groups


def _holds_uint64(dtype: pa.DataType) -> bool:
    if pa.types.is_uint64(dtype):
        return True
    if pa.types.is_dictionary(dtype):
        return _holds_uint64(dtype.value_type)
    if pa.types.is_struct(dtype):
        return any(_holds_uint64(f.type) for f in dtype)
    if pa.types.is_map(dtype):
        return _holds_uint64(dtype.key_type) or _holds_uint64(dtype.item_type)
    value_type = getattr(dtype, "value_type", None)
    return value_type is not None and _holds_uint64(value_type)


def read_chunk_columns(chunk: Chunk, columns: Sequence[str]) -> ChunkColumns:
    """``columns`` of a Parquet chunk (one with row groups), normalized, without reading the
    others: normalization can only fail on data for uint64 values beyond int64, so those
    columns are read (and checked) too; everything else is checked on the footer's schema.
    Raises the errors :func:`read_chunk` raises for the same problems."""
    assert chunk.row_groups is not None
    try:
        file = _parquet_file(chunk.name)
        schema = file.schema_arrow
        full = normalize_table(schema.empty_table(), chunk.name).schema
        wanted = [f.name for f in schema if f.name in set(columns) or _holds_uint64(f.type)]
        table = file.read_row_groups(list(chunk.row_groups), columns=wanted)
        meta = file.metadata
        groups = [meta.row_group(rg) for rg in chunk.row_groups]
    except (CorruptObjectError, pa.ArrowException, OSError) as err:
        detail = err.detail if isinstance(err, CorruptObjectError) else err
        raise MalformedInputError(chunk.name, "", f"not a valid Parquet file: {detail}") from None
    stored = sum(g.column(i).total_compressed_size for g in groups for i in range(g.num_columns))
    rows = sum(g.num_rows for g in groups)
    return ChunkColumns(normalize_table(table, chunk.name), full, rows, stored)


def read_chunk(chunk: Chunk) -> pa.Table:
    """The normalized table of ``chunk`` (runs in a task). Raises the local path's errors."""
    if chunk.row_groups is not None:
        try:
            table = _parquet_file(chunk.name).read_row_groups(list(chunk.row_groups))
        except (CorruptObjectError, pa.ArrowException, OSError) as err:
            detail = err.detail if isinstance(err, CorruptObjectError) else err
            raise MalformedInputError(
                chunk.name, "", f"not a valid Parquet file: {detail}"
            ) from None
        return normalize_table(table, chunk.name)
    if chunk.name.startswith("s3://"):
        bucket_uri, key = _s3_parts(chunk.name)
        try:
            data = _s3_store(bucket_uri).get(key)
        except ObjectNotFoundError:
            raise UsageError(f"cannot read {chunk.name}: no such object") from None
        return read_input(io.BytesIO(data), chunk.fmt, name=chunk.name)
    return read_input(chunk.name, chunk.fmt, name=chunk.name)
