"""``FileLockProvider``: per-pool locks as ``flock(2)`` on local files — the embedded default.

Each lock is ``<lock dir>/<pool-id>.<kind>.lock``. For a lake on local disk the lock dir is
``<lake dir>/locks/``; for any other lake (S3) it is a per-user temp directory keyed by a hash of
the lake URI, ``$TMPDIR/lakepool-<uid>/<hash>/locks/``.

**File locks only exclude processes on one machine** (and, for an S3 lake, only processes of
one user, and only those that resolve the same URI string). Two machines maintaining one S3
lake, or one NFS-mounted lake, need ZooKeeper (``--zk`` / ``LAKE_ZOOKEEPER``).

Invariants:

- ``flock`` belongs to the open file description, so two opens conflict even within one
  process, and the kernel drops the lock when the holder dies (no stale locks after SIGKILL).
- Lock files are never deleted, by this module or by anyone else: a process that locks a file
  somebody unlinked holds a lock on an orphan inode while a newcomer locks a fresh file. The
  provider detects that (after taking the lock, and in :meth:`LockHandle.check`) by comparing
  the locked descriptor's inode with the path's.
- While held, the file contains the holder's identifier (``user@host:pid``); it is truncated
  before the lock is released, so a non-empty file read by a waiter names the current holder.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

from lake_core.clock import SYSTEM_CLOCK, Clock
from lake_core.errors import LockError, LockTimeoutError
from lake_core.locks.base import (
    LockHandle,
    LockKind,
    LockProvider,
    default_identifier,
)

LOCKS_DIR = "locks"


def lock_dir_for(lake_uri: str, temp_root: str | os.PathLike[str] | None = None) -> Path:
    """Where the file locks of the lake at ``lake_uri`` live (see the module docstring)."""
    if "://" not in lake_uri:
        return Path(lake_uri).absolute() / LOCKS_DIR
    if lake_uri.startswith("file://"):
        return Path(unquote(urlparse(lake_uri).path)).absolute() / LOCKS_DIR
    digest = hashlib.sha256(lake_uri.rstrip("/").encode("utf-8")).hexdigest()[:24]
    root = Path(temp_root if temp_root is not None else tempfile.gettempdir())
    return root / f"lakepool-{os.getuid()}" / digest / LOCKS_DIR


class FileLockHandle(LockHandle):
    """A held ``flock``; lost only if released or if its file was removed or replaced."""

    def __init__(self, pool_id: str, kind: LockKind, identifier: str, path: Path, fd: int) -> None:
        super().__init__(pool_id, kind, identifier)
        self.path = path
        self._fd: int | None = fd

    def lost_reason(self) -> str | None:
        if self._fd is None:
            return "already released"
        try:
            held = os.fstat(self._fd)
            now = os.stat(self.path)
        except FileNotFoundError:
            return f"lock file {self.path} was removed; another process may hold a new one"
        except OSError as e:
            return f"cannot stat lock file {self.path}: {e.strerror or e}"
        if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
            return f"lock file {self.path} was replaced; another process may hold the new one"
        return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # Clear the holder's name first, so a waiter never reads a stale one.
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing the last descriptor drops the flock


class FileLockProvider(LockProvider):
    """Per-pool ``flock`` files under ``lock_dir``; see the module docstring for its reach.

    ``clock`` measures and sleeps the polling wait of a finite ``timeout`` (injectable, so
    tests of timeouts need not sleep); ``poll_interval`` is the first wait between attempts,
    doubling up to ``max_poll_interval``. With ``timeout=None`` the kernel queues the waiter.
    """

    def __init__(
        self,
        lock_dir: str | os.PathLike[str],
        *,
        identifier: str | None = None,
        user: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        poll_interval: float = 0.01,
        max_poll_interval: float = 0.25,
    ) -> None:
        self.lock_dir = Path(lock_dir)
        self._identifier = identifier
        self._user = user
        self._clock = clock
        self._poll_interval = poll_interval
        self._max_poll_interval = max_poll_interval

    def lock_path(self, pool_id: str, kind: LockKind) -> Path:
        return self.lock_dir / f"{pool_id}.{kind}.lock"

    @contextmanager
    def _hold(self, pool_id: str, kind: LockKind, timeout: float | None) -> Iterator[LockHandle]:
        identifier = self._identifier or default_identifier(self._user)
        path = self.lock_path(pool_id, kind)
        name = f"{kind} lock of pool {pool_id}"
        fd = self._acquire(path, name, timeout)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, identifier.encode("utf-8"), 0)
        except OSError:
            pass  # the holder's name is a courtesy to waiters, not part of the lock
        handle = FileLockHandle(pool_id, kind, identifier, path, fd)
        try:
            yield handle
        finally:
            handle.release()

    def _acquire(self, path: Path, name: str, timeout: float | None) -> int:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LockError(f"cannot create lock directory {path.parent}: {e.strerror or e}") from e
        start = self._clock.now()
        delay = self._poll_interval
        while True:
            fd = self._open(path)
            try:
                if timeout is None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                else:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise LockError(f"cannot lock {path}: {e.strerror or e}") from e
                assert timeout is not None  # a blocking flock does not return EWOULDBLOCK
                waited = (self._clock.now() - start).total_seconds()
                if waited >= timeout:
                    raise LockTimeoutError(name, timeout, read_holder(path)) from None
                self._clock.sleep(min(delay, timeout - waited))
                delay = min(delay * 2, self._max_poll_interval)
                continue
            if _same_file(fd, path):
                return fd
            # We locked an inode that was unlinked or replaced while we waited: that lock
            # excludes nobody. Try again on whatever the path names now.
            os.close(fd)

    @staticmethod
    def _open(path: Path) -> int:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise LockError(f"cannot open lock file {path}: {e.strerror or e}") from e


def read_holder(path: Path) -> str:
    """The identifier written by the current holder, or ``""`` if unknown."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        held = os.fstat(fd)
        now = os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)
