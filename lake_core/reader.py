"""Reading one data object: open the Parquet file, pick the row groups that can match, read them.

Local objects are memory-mapped; objects on other stores are read through ranged GETs, so a
key-range query fetches the footer and the chosen row groups, not the whole object.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.errors import CorruptObjectError, ObjectNotFoundError
from lake_core.stores.base import ObjectStore


class _RangedRawFile(io.RawIOBase):
    """A seekable read-only file over ``store.get_range`` (one GET per buffered read)."""

    def __init__(self, store: ObjectStore, key: str, size: int) -> None:
        self.store, self.key, self.size, self.pos = store, key, size, 0
        self.bytes_fetched = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        data = self.store.get_range(self.key, self.pos, n)
        b[: len(data)] = data
        self.pos += len(data)
        self.bytes_fetched += len(data)
        return len(data)


@dataclass
class OpenObject:
    """An open Parquet object and its footer metadata."""

    key: str
    file: pq.ParquetFile

    @property
    def metadata(self) -> pq.FileMetaData:
        return self.file.metadata


def open_source(
    store: ObjectStore, key: str, size: int | None = None, read_ahead: int = 256 * 1024
) -> Any:
    """A random-access Arrow file over ``key``: memory-mapped on local disk, ranged GETs (read
    ahead ``read_ahead`` bytes) on S3, so a Parquet reader fetches the footer and the column
    chunks it reads, not the whole object. ``size`` saves a HEAD. Raises ObjectNotFoundError."""
    return open_counted(store, key, size, read_ahead)[0]


def open_counted(
    store: ObjectStore, key: str, size: int | None = None, read_ahead: int = 256 * 1024
) -> tuple[Any, Callable[[], int] | None]:
    """:func:`open_source`, and a function that tells the bytes fetched from the store so far
    (None on local disk, where nothing is fetched: the file is mapped)."""
    path = store.local_path(key)
    if path is not None:
        try:
            return pa.memory_map(path, "r"), None
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None
    if size is None:
        size = store.head(key).size
    raw = _RangedRawFile(store, key, size)
    source = pa.PythonFile(io.BufferedReader(raw, buffer_size=max(1, read_ahead)), mode="r")
    return source, lambda: raw.bytes_fetched


def open_object(store: ObjectStore, key: str, size: int | None = None) -> OpenObject:
    """Open data object ``key``. Raises ObjectNotFoundError (e.g. purged or cleaned up) or
    CorruptObjectError (not a readable Parquet file)."""
    try:
        return OpenObject(key, pq.ParquetFile(open_source(store, key, size)))
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, (ObjectNotFoundError,)):
            raise
        if isinstance(e, FileNotFoundError):
            raise ObjectNotFoundError(key) from None
        raise CorruptObjectError(key, f"unreadable data object ({e})") from None


def row_group_stats(
    meta: pq.FileMetaData, rg: int, columns: Collection[str] | None = None
) -> dict[str, tuple[Any, Any, int | None, int]]:
    """name → (min, max, null_count, rows) for the top-level columns of row group ``rg`` (only
    those in ``columns``, if given: decoding every column's statistics is most of the cost of
    pruning a wide file's row groups)."""
    group = meta.row_group(rg)
    out: dict[str, tuple[Any, Any, int | None, int]] = {}
    for i in range(group.num_columns):
        col = group.column(i)
        path = col.path_in_schema
        if "." in path:
            continue  # nested leaf: no top-level stats
        if columns is not None and path not in columns:
            continue
        st = col.statistics
        if st is None:
            out[path] = (None, None, None, group.num_rows)
            continue
        lo = hi = None
        if st.has_min_max:
            try:
                lo, hi = st.min, st.max
            except (ValueError, pa.ArrowException):
                lo = hi = None
        nulls = st.null_count if getattr(st, "has_null_count", True) else None
        out[path] = (lo, hi, nulls, group.num_rows)
    return out
