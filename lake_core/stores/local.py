"""``LocalObjectStore``: the object-store contract on a local directory.

Atomicity comes from the file system: every write goes to a uniquely named temp file in the
*same directory* (so the final step never crosses devices), is fsync'd, and then either renamed
over the final name (``put``) or hard-linked to it (``put_if_missing``: ``link`` fails with
EEXIST if the name exists, atomically, which is exactly put-if-missing). The directory is
fsync'd after the final step so the new name itself survives a power loss. Readers therefore
never see a partial object, and a writer killed at any point leaves at most a temp file
(``.tmp-*``), which ``list`` hides and cleanup removes.

The small-commit path (:meth:`LocalObjectStore.deferring`, ``put_if_missing_after``): a
commit's data object, commit object (and every 32nd commit its snapshot) are written and renamed
or linked into place *without* fsync; the journal entry's put then fsyncs all of them, their
directories and its own temp file at once, on a small thread pool (concurrent fsyncs on one
file system share journal commits), and only then links the entry's name and fsyncs its
directory. Two fsync rounds and one link on the critical path, instead of eight fsyncs one
after the other. ``HEAD`` (``put_hint``) is renamed into place without fsync: it is a hint.
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lake_core.errors import (
    DurabilityUnknownError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from lake_core.stores.base import DeferringView, ObjectInfo, ObjectStore, SyncBatch

TEMP_PREFIX = ".tmp-"

_SYNC_THREADS = 8
_sync_pool: ThreadPoolExecutor | None = None
_sync_pool_lock = threading.Lock()


def _reset_sync_pool() -> None:
    # A forked child has the parent's executor object but none of its threads.
    global _sync_pool
    _sync_pool = None


os.register_at_fork(after_in_child=_reset_sync_pool)


def _fsync_path(path: str) -> None:
    """fsync a file or directory by path; a file deleted meanwhile (a discarded commit object)
    needs no durability."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def fsync_all(paths: list[str]) -> None:
    """fsync every path, concurrently: the file system batches concurrent fsyncs into shared
    journal commits, so a handful cost about one. Raises the first failure."""
    global _sync_pool
    if len(paths) <= 1:
        for path in paths:
            _fsync_path(path)
        return
    with _sync_pool_lock:
        if _sync_pool is None:
            _sync_pool = ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="lake-fsync")
        pool = _sync_pool
    # The calling thread syncs the first path itself: it would only wait otherwise, and each
    # hand-off to a pool thread costs a wake-up.
    futures = [pool.submit(_fsync_path, p) for p in paths[1:]]
    first: BaseException | None = None
    try:
        _fsync_path(paths[0])
    except BaseException as e:  # noqa: BLE001 - raised below, after the others finish
        first = e
    for future in futures:
        try:
            future.result()
        except BaseException as e:  # noqa: BLE001 - the first failure is the one raised
            first = first or e
    if first is not None:
        raise first


#: OS errors that stay until someone acts (permissions, a full or read-only disk, a quota):
#: not worth retrying (:attr:`ObjectStoreError.transient`).
_LASTING_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG}
)


class LocalObjectStore(ObjectStore):
    """Objects are files under ``root``; keys map to relative paths."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self.uri = str(self.root)
        self._root = str(self.root)

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ObjectStoreError(key, "invalid object key")
        return self.root / key

    def _file(self, key: str) -> str:
        """``_path`` as a string, built without pathlib: the small-commit path makes a dozen
        of these per commit (about 50 us each through pathlib)."""
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ObjectStoreError(key, "invalid object key")
        return f"{self._root}/{key}"

    def _failed(self, key: str, e: OSError) -> ObjectStoreError:
        """The store error for an OS failure on ``key``, naming the full path: the key alone
        is relative to a root the user may not see (a lake at a file, an export's DEST)."""
        lasting = e.errno in _LASTING_ERRNOS
        return ObjectStoreError(
            key, f"{e.strerror or e} ({self.root / key})", transient=not lasting
        )

    def local_path(self, key: str) -> str | None:
        return str(self._path(key))

    def arrow_location(self, key: str) -> tuple[Any, str]:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), str(self._path(key))

    def get(self, key: str) -> bytes:
        try:
            with open(self._file(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None
        except IsADirectoryError:
            raise ObjectNotFoundError(key) from None
        except OSError as e:
            raise self._failed(key, e) from e

    def get_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(length)
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None
        except OSError as e:
            raise self._failed(key, e) from e

    def _write_temp(self, key: str, data: bytes, sync: bool = True) -> str:
        parent = self._file(key).rpartition("/")[0]
        tmp = f"{parent}/{TEMP_PREFIX}{uuid.uuid4().hex}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:
            self._make_dirs(Path(parent))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if sync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        os.close(fd)
        return tmp

    def _make_dirs(self, directory: Path) -> None:
        """Create ``directory`` and its missing ancestors, each new name made durable in its
        parent at once: fsyncing a file's directory is no use if that directory's own entry
        (``pools/<id>/`` on a pool's first load) can vanish in a power loss. Rare (a
        directory is created once), so done eagerly even on the deferred path."""
        missing = []
        d = directory
        while not d.is_dir() and d != d.parent:
            missing.append(d)
            d = d.parent
        directory.mkdir(parents=True, exist_ok=True)
        for created in reversed(missing):
            self._fsync_dir(created.parent)

    @staticmethod
    def _fsync_dir(path: str | Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def put(self, key: str, data: bytes) -> None:
        try:
            tmp = self._write_temp(key, data)
            path = self._file(key)
            os.replace(tmp, path)
            self._fsync_dir(path.rpartition("/")[0])
        except OSError as e:
            raise self._failed(key, e) from e

    def put_hint(self, key: str, data: bytes) -> None:
        # Atomic (rename) but not fsync'd: a hint lost or garbled by a crash is probed past.
        try:
            tmp = self._write_temp(key, data, sync=False)
            os.replace(tmp, self._file(key))
        except OSError as e:
            raise self._failed(key, e) from e

    def deferring(self, batch: SyncBatch) -> ObjectStore:
        return _Deferred(self, batch)

    def sync(self, batch: SyncBatch) -> None:
        try:
            fsync_all([*batch.files, *sorted(batch.dirs)])
        except OSError as e:
            raise ObjectStoreError(batch.files[0] if batch.files else "", str(e)) from e
        batch.clear()

    def put_unsynced(self, key: str, data: bytes, batch: SyncBatch, exclusive: bool) -> None:
        """Put (``exclusive``: put-if-missing) atomically but without fsync, noting the file
        and its directory in ``batch`` (see :meth:`deferring`)."""
        path = self._file(key)
        try:
            tmp = self._write_temp(key, data, sync=False)
        except OSError as e:
            raise self._failed(key, e) from e
        if exclusive:
            self._link(key, tmp, path)
        else:
            try:
                os.replace(tmp, path)
            except OSError as e:
                _unlink_quietly(tmp)
                raise self._failed(key, e) from e
        batch.files.append(path)
        batch.dirs.add(path.rpartition("/")[0])

    def put_if_missing_after(self, key: str, data: bytes, after: SyncBatch) -> None:
        # The entry's temp file is fsync'd together with the batch (one round), then linked.
        try:
            tmp = self._write_temp(key, data, sync=False)
        except OSError as e:
            raise self._failed(key, e) from e
        try:
            fsync_all([tmp, *after.files, *sorted(after.dirs)])
        except BaseException as e:
            _unlink_quietly(tmp)
            if isinstance(e, OSError):
                raise self._failed(key, e) from e
            raise
        after.clear()
        self._link_temp(key, tmp)

    def put_if_missing(self, key: str, data: bytes) -> None:
        try:
            tmp = self._write_temp(key, data)
        except OSError as e:
            raise self._failed(key, e) from e
        self._link_temp(key, tmp)

    def _link(self, key: str, tmp: str, path: str) -> None:
        """Give the temp file ``tmp`` the name ``path`` unless it exists (ObjectExistsError),
        then drop the temp name. link() is the atomic conditional create."""
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise ObjectExistsError(key) from None
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise ObjectExistsError(key) from None
            raise self._failed(key, e) from e
        finally:
            _unlink_quietly(tmp)

    def _link_temp(self, key: str, tmp: str) -> None:
        """Link the durable temp file ``tmp`` to ``key`` (EEXIST: ObjectExistsError), remove
        the temp name, fsync the directory."""
        path = self._file(key)
        self._link(key, tmp, path)
        parent = path.rpartition("/")[0]
        try:
            self._fsync_dir(parent)
        except OSError as e:
            # Linked, so readers see it, but not durable: never let a read-back call it won.
            raise DurabilityUnknownError(key, f"{e.strerror or e} ({parent})") from e

    def head(self, key: str) -> ObjectInfo:
        try:
            st = os.stat(self._path(key))
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None
        except OSError as e:
            raise self._failed(key, e) from e
        if not os.path.isfile(self._path(key)):
            raise ObjectNotFoundError(key)
        return ObjectInfo(key, st.st_size, st.st_mtime)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        # Walk only the deepest directory the prefix names, then filter by the string prefix.
        base_dir = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base_dir.is_dir():
            return
        for dirpath, _dirnames, filenames in os.walk(base_dir):
            for name in filenames:
                if name.startswith(TEMP_PREFIX):
                    continue
                full = os.path.join(dirpath, name)
                key = os.path.relpath(full, self.root).replace(os.sep, "/")
                if not key.startswith(prefix):
                    continue
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue  # deleted while we walked
                yield ObjectInfo(key, st.st_size, st.st_mtime)

    def list_temp_files(self, prefix: str) -> Iterator[ObjectInfo]:
        """Temp files left by writers that died mid-write (for cleanup)."""
        base_dir = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base_dir.is_dir():
            return
        for dirpath, _dirnames, filenames in os.walk(base_dir):
            for name in filenames:
                if name.startswith(TEMP_PREFIX):
                    full = os.path.join(dirpath, name)
                    key = os.path.relpath(full, self.root).replace(os.sep, "/")
                    try:
                        st = os.stat(full)
                    except FileNotFoundError:
                        continue
                    yield ObjectInfo(key, st.st_size, st.st_mtime)

    def delete(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise self._failed(key, e) from e


class _Deferred(DeferringView):
    """A local store's puts without fsync, noted in a batch (:meth:`LocalObjectStore.deferring`).
    Everything else is the store's own."""

    store: LocalObjectStore

    def put(self, key: str, data: bytes) -> None:
        self.store.put_unsynced(key, data, self.batch, exclusive=False)

    def put_if_missing(self, key: str, data: bytes) -> None:
        self.store.put_unsynced(key, data, self.batch, exclusive=True)
