"""Data object integrity: what a commit records of an object's bytes, and checking it.

A commit records each object's size, row count, columns and — since checksums were added — a
CRC-32 of its bytes (``ObjectMeta.checksum``, ``"crc32:<8 hex digits>"``), computed by the
writer over the very buffer it puts. Objects of older commits have no checksum; everything else
is still checked for them.

What is checked when (cheap checks always, the checksum only when every byte is read anyway):

* every read (:func:`open_verified`): the Parquet footer's row count, top-level column names
  and column bounds (row-group statistics of exact types) against the commit's, and the size — on local disk the file's size; on other stores the
  footer is fetched at the recorded size, so an object of another size has no footer there;
* whole-object reads (:func:`read_verified`: compaction, rewrites, delete by predicate): the
  size and the checksum of the bytes fetched, before they are decoded;
* ``lake verify`` / ``lake objects --verify`` (:func:`verify_object`): all of it, for every
  live object.

A mismatch raises :class:`~lake_core.errors.CorruptDataObjectError` naming the object and the
pool: the lake never returns rows of an object that is not the one its commit recorded.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.errors import (
    CorruptDataObjectError,
    CorruptObjectError,
    LakeError,
    ObjectNotFoundError,
    PurgedObjectError,
    SchemaConflictError,
)
from lake_core.layout import PoolLayout
from lake_core.objects import ObjectMeta
from lake_core.purge_records import purged_by
from lake_core.reader import OpenObject, open_object, row_group_stats
from lake_core.stats import encode_value
from lake_core.stores.base import ObjectStore

CHECKSUM_ALGORITHM = "crc32"


def checksum(data: bytes | memoryview | pa.Buffer) -> str:
    """The checksum a commit records for an object of these bytes."""
    return f"{CHECKSUM_ALGORITHM}:{zlib.crc32(data) & 0xFFFFFFFF:08x}"


def _corrupt(meta: ObjectMeta, pool: str, detail: str) -> CorruptDataObjectError:
    return CorruptDataObjectError(meta.id, pool, detail)


def check_footer(meta: ObjectMeta, opened: OpenObject, pool: str) -> None:
    """Compare the Parquet footer with what the commit recorded (no data read)."""
    check_metadata(meta, opened.metadata, opened.file.schema_arrow, pool)


def check_metadata(
    meta: ObjectMeta, file_meta: pq.FileMetaData, schema: pa.Schema, pool: str
) -> None:
    """:func:`check_footer` for a footer opened elsewhere (``schema``: its Arrow schema, as
    pyarrow reads the file), e.g. by a pyarrow dataset fragment."""
    rows = file_meta.num_rows
    if rows != meta.count:
        raise _corrupt(meta, pool, f"it holds {rows} rows, its commit recorded {meta.count}")
    if meta.columns:
        names = set(schema.names)
        if names != set(meta.columns):
            extra = sorted(names - set(meta.columns))
            missing = sorted(set(meta.columns) - names)
            what = f"unrecorded columns {extra}" if extra else f"no columns {missing}"
            raise _corrupt(meta, pool, f"it has {what}")
        _check_bounds(meta, file_meta, schema, pool)


def _check_bounds(
    meta: ObjectMeta, file_meta: pq.FileMetaData, schema: pa.Schema, pool: str
) -> None:
    """Compare the footer's per-row-group min/max with the recorded column bounds: an object of
    the same size, row count and columns as the recorded one (another load of the same shape)
    still differs there. Only exact types (integers, strings, timestamps, dates) are compared,
    and only where the footer has bounds for every row group. At most
    :data:`_BOUND_COLUMNS` columns are compared: decoding every column's statistics of every
    row group cost more than the read itself for objects of many small row groups (an OTree
    pool's), and two columns already tell two loads of one shape apart."""
    if file_meta.num_row_groups == 0:
        return
    names = [
        name
        for name, recorded in meta.columns.items()
        if recorded.min is not None
        and recorded.max is not None
        and name in schema.names
        and _exact(schema.field(name).type)
    ][:_BOUND_COLUMNS]
    if not names:
        return
    groups = [row_group_stats(file_meta, rg, names) for rg in range(file_meta.num_row_groups)]
    for name in names:
        recorded = meta.columns[name]
        t = schema.field(name).type
        bounds = [g.get(name) for g in groups]
        if any(b is None or b[0] is None or b[1] is None for b in bounds):
            continue
        lo = min(encode_value(t, b[0]) for b in bounds if b is not None)
        hi = max(encode_value(t, b[1]) for b in bounds if b is not None)
        if (lo, hi) != (recorded.min, recorded.max):
            raise _corrupt(
                meta,
                pool,
                f"column {name!r} spans {lo!r}..{hi!r}, its commit recorded "
                f"{recorded.min!r}..{recorded.max!r}",
            )


#: How many columns' bounds :func:`_check_bounds` compares.
_BOUND_COLUMNS = 2


def _exact(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date32(t)
    )


def open_verified(store: ObjectStore, pool_id: str, meta: ObjectMeta, pool: str) -> OpenObject:
    """Open the object for reading after the cheap checks. Raises ObjectNotFoundError when it
    is gone, CorruptDataObjectError when it is not the object its commit recorded."""
    key = PoolLayout(pool_id).data(meta.id)
    path = store.local_path(key)
    if path is not None:
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None
        if size != meta.size:
            raise _corrupt(meta, pool, f"it is {size} bytes, its commit recorded {meta.size}")
    try:
        opened = open_object(store, key, meta.size)
    except CorruptObjectError as e:
        detail = f"not readable as Parquet at its recorded size ({e.detail})"
        raise _corrupt(meta, pool, detail) from None
    check_footer(meta, opened, pool)
    return opened


def open_verified_fragment(
    store: ObjectStore, pool_id: str, meta: ObjectMeta, pool: str, fmt: Any
) -> Any:
    """:func:`open_verified` through the store's Arrow filesystem: a pyarrow Parquet fragment
    (of ``fmt``, a ``ParquetFileFormat``) whose footer has been read and checked. The fragment
    keeps the parsed footer, and so do its subsets, so a pyarrow scan of it reads the footer
    no second time. Raises ObjectNotFoundError, CorruptDataObjectError."""
    key = PoolLayout(pool_id).data(meta.id)
    fs, path = store.arrow_location(key)
    # The recorded size: no HEAD, and an object of another size has no footer there.
    fragment = fmt.make_fragment(path, filesystem=fs, file_size=meta.size)
    try:
        fragment.ensure_complete_metadata()
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, FileNotFoundError) or not store.exists(key):
            raise ObjectNotFoundError(key) from None
        detail = f"not readable as Parquet at its recorded size ({e})"
        raise _corrupt(meta, pool, detail) from None
    check_metadata(meta, fragment.metadata, fragment.physical_schema, pool)
    return fragment


def check_bytes(meta: ObjectMeta, data: bytes, pool: str) -> None:
    """Compare whole-object bytes with the recorded size and checksum."""
    if len(data) != meta.size:
        raise _corrupt(meta, pool, f"it is {len(data)} bytes, its commit recorded {meta.size}")
    if meta.checksum is not None:
        algorithm = meta.checksum.partition(":")[0]
        if algorithm == CHECKSUM_ALGORITHM:
            found = checksum(data)
            if found != meta.checksum:
                raise _corrupt(meta, pool, f"checksum {found}, its commit recorded {meta.checksum}")


def read_verified(
    store: ObjectStore, pool_id: str, meta: ObjectMeta, pool: str, columns: list[str] | None = None
) -> pa.Table:
    """The whole object as a table, its bytes checked first (size, checksum, footer)."""
    key = PoolLayout(pool_id).data(meta.id)
    data = store.get(key)
    check_bytes(meta, data, pool)
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
    except (pa.ArrowInvalid, OSError) as e:
        raise _corrupt(meta, pool, f"not readable as Parquet ({e})") from None
    check_footer(meta, OpenObject(key, file), pool)
    return file.read(columns=columns)


def open_checked(store: ObjectStore, pool_id: str, meta: ObjectMeta, pool: str) -> pq.ParquetFile:
    """The object opened for a whole read decoded piece by piece (a streaming compaction),
    after the checks of :func:`read_verified` (size, checksum, footer). On local disk the bytes
    are checksummed in 1 MiB reads and then decoded from the file, so the object is never held
    whole in memory (objects are immutable: the second read sees the bytes the first checked);
    on other stores the fetched bytes are checked and decoded from memory."""
    key = PoolLayout(pool_id).data(meta.id)
    path = store.local_path(key)
    if path is None:
        data = store.get(key)
        check_bytes(meta, data, pool)
        source: pa.NativeFile = pa.BufferReader(data)
    else:
        size, crc = 0, 0
        try:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    size += len(chunk)
                    crc = zlib.crc32(chunk, crc)
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None
        if size != meta.size:
            raise _corrupt(meta, pool, f"it is {size} bytes, its commit recorded {meta.size}")
        found = f"{CHECKSUM_ALGORITHM}:{crc & 0xFFFFFFFF:08x}"
        recorded = meta.checksum
        checked = recorded is not None and recorded.partition(":")[0] == CHECKSUM_ALGORITHM
        if checked and found != recorded:
            raise _corrupt(meta, pool, f"checksum {found}, its commit recorded {recorded}")
        source = pa.OSFile(path, "r")
    try:
        # Column chunks read in 64 KiB pieces, not whole: a merge holds many objects open.
        file = pq.ParquetFile(source, pre_buffer=False, buffer_size=1 << 16)
    except (pa.ArrowInvalid, OSError) as e:
        raise _corrupt(meta, pool, f"not readable as Parquet ({e})") from None
    check_footer(meta, OpenObject(key, file), pool)
    return file


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one object: ``problem`` is None when it is intact.
    ``purged_by`` names the commit whose ``lake purge`` deleted the object on purpose (a purge
    record names it), so it is not reported as damage."""

    object_id: str
    size: int
    checksummed: bool
    problem: str | None
    purged_by: str | None = None

    @property
    def status(self) -> str:
        """``ok``, ``purged`` or ``corrupt``."""
        if self.problem is None:
            return "ok"
        return "purged" if self.purged_by is not None else "corrupt"


def verify_object(store: ObjectStore, pool_id: str, meta: ObjectMeta, pool: str) -> Verdict:
    """Fetch the whole object and check everything recorded of it, decoding every row group
    (a damaged page inside an intact footer shows up only then)."""
    try:
        table = read_verified(store, pool_id, meta, pool)
        if table.num_rows != meta.count:
            raise _corrupt(meta, pool, f"it decodes to {table.num_rows} rows, not {meta.count}")
    except ObjectNotFoundError:
        # Purges are rare and this is the error path: read the records only now, as scans do.
        commit_id = purged_by(store, pool_id, meta.id)
        if commit_id is not None:
            detail = f"purged (lake purge of commit {commit_id})"
            return Verdict(meta.id, meta.size, meta.checksum is not None, detail, commit_id)
        return Verdict(meta.id, meta.size, meta.checksum is not None, "missing from the store")
    except CorruptDataObjectError as e:
        return Verdict(meta.id, meta.size, meta.checksum is not None, e.detail)
    except (pa.ArrowException, OSError) as e:
        return Verdict(meta.id, meta.size, meta.checksum is not None, f"cannot be decoded ({e})")
    return Verdict(meta.id, meta.size, meta.checksum is not None, None)


def verify_objects(
    store: ObjectStore, pool_id: str, metas: list[ObjectMeta], pool: str, workers: int = 4
) -> list[Verdict]:
    """:func:`verify_object` for each of ``metas`` (in order), a few at a time: fetching is
    I/O and Parquet decoding releases the GIL."""
    if len(metas) <= 1:
        return [verify_object(store, pool_id, m, pool) for m in metas]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(workers, len(metas))) as ex:
        return list(ex.map(lambda m: verify_object(store, pool_id, m, pool), metas))


def raise_for_verdicts(verdicts: list[Verdict], pool: str) -> None:
    """If any object is not intact: CorruptDataObjectError naming the first corrupt one (and
    how many more are corrupt or purged), else PurgedObjectError naming the first purged one
    and its purge. Damage is named before a deliberate purge."""
    corrupt = [v for v in verdicts if v.status == "corrupt"]
    purged = [v for v in verdicts if v.status == "purged"]
    if corrupt:
        others = []
        if len(corrupt) > 1:
            others.append(f"{len(corrupt) - 1} more corrupt objects")
        if purged:
            others.append(f"{len(purged)} purged" + (" objects" if len(purged) > 1 else " object"))
        more = f" (and {', '.join(others)})" if others else ""
        raise CorruptDataObjectError(corrupt[0].object_id, pool, f"{corrupt[0].problem}{more}")
    if purged:
        raise PurgedObjectError(purged[0].object_id, purged[0].purged_by)


@dataclass(frozen=True)
class Presence:
    """Which of a live set's objects are not in the store at their recorded size."""

    objects: int
    missing: list[str]
    wrong_size: list[str]  # "ID: N bytes, recorded M"

    @property
    def ok(self) -> bool:
        return not self.missing and not self.wrong_size


def check_presence(store: ObjectStore, pool_id: str, metas: list[ObjectMeta]) -> Presence:
    """Every object of ``metas`` is in the store with its recorded size: one listing of the
    pool's data objects, no object read."""
    layout = PoolLayout(pool_id)
    sizes = {i.key: i.size for i in store.list(layout.data_dir)}
    missing: list[str] = []
    wrong: list[str] = []
    for meta in metas:
        size = sizes.get(layout.data(meta.id))
        if size is None:
            missing.append(meta.id)
        elif size != meta.size:
            wrong.append(f"{meta.id}: {size} bytes, recorded {meta.size}")
    return Presence(len(metas), missing, wrong)


def schema_conflicts(
    store: ObjectStore, pool_id: str, metas: list[ObjectMeta], schema: pa.Schema | None
) -> list[str]:
    """Why each object of ``metas`` does not fit the pool ``schema`` (empty: all fit). A
    column fits when the pool's rules (:func:`lake_core.ingest.schema.unify_schema`) accept
    its type into the pool's unchanged; recorded types equal to the pool's pass without
    reading, others are judged from the object's Parquet footer."""
    from lake_core.ingest.schema import unify_schema

    if schema is None:
        return ["the pool has objects but no schema"] if metas else []
    pool_fields = {f.name: f for f in schema}
    out: list[str] = []
    for meta in metas:
        footer: pa.Schema | None = None
        for name, col in meta.columns.items():
            field = pool_fields.get(name)
            if field is None:
                out.append(f"{meta.id}: column {name} is not in the pool schema")
                continue
            if col.type in (str(field.type), "null"):
                continue
            try:
                if footer is None:
                    opened = open_object(store, PoolLayout(pool_id).data(meta.id), meta.size)
                    footer = opened.file.schema_arrow
                merged = unify_schema(pa.schema([field]), pa.schema([footer.field(name)]), meta.id)
                fits = merged.field(name).type.equals(field.type)
            except (SchemaConflictError, KeyError):
                fits = False
            except LakeError as e:
                out.append(f"{meta.id}: {e}")
                break
            if not fits:
                out.append(f"{meta.id}: column {name} is {col.type}, the pool has {field.type}")
    return out
