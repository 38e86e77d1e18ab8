"""``LocalObjectStore``: the object-store contract on a local directory.

Atomicity comes from the file system: every write goes to a uniquely named temp file in the
*same directory* (so the final step never crosses devices), is fsync'd, and then either renamed
over the final name (``put``) or hard-linked to it (``put_if_missing``: ``link`` fails with
EEXIST if the name exists, atomically, which is exactly put-if-missing). The directory is
fsync'd after the final step so the new name itself survives a power loss. Readers therefore
never see a partial object, and a writer killed at any point leaves at most a temp file
(``.tmp-*``), which ``list`` hides and cleanup removes.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lake_core.errors import ObjectExistsError, ObjectNotFoundError, ObjectStoreError
from lake_core.stores.base import ObjectInfo, ObjectStore

TEMP_PREFIX = ".tmp-"


class LocalObjectStore(ObjectStore):
    """Objects are files under ``root``; keys map to relative paths."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ObjectStoreError(key, "invalid object key")
        return self.root / key

    def _failed(self, key: str, e: OSError) -> ObjectStoreError:
        """The store error for an OS failure on ``key``, naming the full path: the key alone
        is relative to a root the user may not see (a lake at a file, an export's DEST)."""
        return ObjectStoreError(key, f"{e.strerror or e} ({self.root / key})")

    def local_path(self, key: str) -> str | None:
        return str(self._path(key))

    def arrow_location(self, key: str) -> tuple[Any, str]:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), str(self._path(key))

    def get(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
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

    def _write_temp(self, key: str, data: bytes) -> Path:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return tmp

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def put(self, key: str, data: bytes) -> None:
        try:
            tmp = self._write_temp(key, data)
            path = self._path(key)
            os.replace(tmp, path)
            self._fsync_dir(path.parent)
        except OSError as e:
            raise self._failed(key, e) from e

    def put_if_missing(self, key: str, data: bytes) -> None:
        try:
            tmp = self._write_temp(key, data)
        except OSError as e:
            raise self._failed(key, e) from e
        path = self._path(key)
        try:
            # link() is the atomic conditional create: EEXIST if anyone got there first.
            os.link(tmp, path)
        except FileExistsError:
            raise ObjectExistsError(key) from None
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise ObjectExistsError(key) from None
            raise self._failed(key, e) from e
        finally:
            tmp.unlink(missing_ok=True)
        self._fsync_dir(path.parent)

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
