"""The object-store contract every backend implements.

Keys are ``/``-separated relative paths (``pools/<id>/commits/<id>.json``); a store is rooted at
a lake URI and never sees absolute paths. Backends implement a handful of primitives; everything
else the lake needs is built from them in lake_core, once.

Errors every backend must raise (callers rely on them, never on backend exceptions):

- :class:`~lake_core.errors.ObjectNotFoundError` from ``get``, ``get_range`` and ``head`` when
  the key does not exist (``delete`` of a missing key is *not* an error: deletes are idempotent);
- :class:`~lake_core.errors.ObjectExistsError` from ``put_if_missing`` when the key exists;
- :class:`~lake_core.errors.ObjectStoreError` for any other failure, naming the key.

Invariants every backend keeps:

- ``put`` and ``put_if_missing`` are atomic: a reader sees either no object or the whole object,
  never a prefix, even if the writer dies mid-write.
- ``put_if_missing`` is a single atomic conditional create. Of any number of racing callers on
  one key, exactly one succeeds. Backends never check-then-write.
- A successful ``put``/``put_if_missing`` is durable (fsync'd on local disk) before it returns.
- ``list`` is strongly consistent with completed writes (true of local disk and of S3 since 2020).

Deferred durability (the small-commit path). A commit writes several objects that only its
journal entry makes reachable. On local disk each durable put costs a file fsync and a
directory fsync, one after the other. :meth:`ObjectStore.deferring` gives a view of the store
whose puts return *before* they are durable, noting what they wrote in a :class:`SyncBatch`;
:meth:`ObjectStore.put_if_missing_after` then makes the whole batch durable (concurrently with
its own temp file) before its own name appears. The invariant callers keep: nothing that names
an object of a batch is put before the batch is durable — the journal entry, the commit point,
is the one put that names them, and it goes through ``put_if_missing_after``. On S3 every PUT
is durable when it returns, so what a deferring view saves there is the wait: its small puts
run on background threads (the data object's PUT and the commit object's overlap), noted in
the batch as in flight; :meth:`ObjectStore.settle` waits for them and raises a failed one, and
the commit calls it before its commit point. A store's own reads and deletes of a key wait for
that key's put in flight, so a process reads what it wrote.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future


@dataclass(frozen=True)
class ObjectInfo:
    """What ``head`` and ``list`` report of one object. ``mtime`` is seconds since the epoch."""

    key: str
    size: int
    mtime: float


@dataclass
class SyncBatch:
    """Objects a :meth:`ObjectStore.deferring` view wrote that are not durable yet: store-
    specific handles (local: file paths, and the directories whose new names must be synced).
    ``put_if_missing_after`` empties it once they are durable."""

    files: list[str] = field(default_factory=list)
    dirs: set[str] = field(default_factory=set)
    #: Puts still running (a remote store's deferring view): key and its future.
    pending: list[tuple[str, Future[None]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.files or self.dirs or self.pending)

    def merge(self, other: SyncBatch) -> None:
        self.files.extend(other.files)
        self.dirs.update(other.dirs)
        self.pending.extend(other.pending)

    def clear(self) -> None:
        self.files.clear()
        self.dirs.clear()
        self.pending.clear()


class ObjectStore(abc.ABC):
    """A flat key → bytes store: local directory or S3 bucket prefix. See the module docstring."""

    #: The URI this store was opened from (credentials never appear in it).
    uri: str

    @abc.abstractmethod
    def get(self, key: str) -> bytes:
        """The whole object. Raises ObjectNotFoundError."""

    @abc.abstractmethod
    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start`` (fewer at the end). Raises ObjectNotFoundError."""

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Create or replace the object atomically. Used only for data objects with unique names
        and for hint files (HEAD), which readers must treat as hints."""

    @abc.abstractmethod
    def put_if_missing(self, key: str, data: bytes) -> None:
        """Create the object only if no object exists under ``key``; atomically.
        Raises ObjectExistsError when it exists, and then nothing was written."""

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo:
        """Size and modification time. Raises ObjectNotFoundError."""

    @abc.abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a plain string prefix, not a
        directory), in no promised order."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; a missing key is not an error."""

    # -- derived helpers, the same for every backend ------------------------------------------

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists now (a hint only: never use it to guard a write)."""
        from lake_core.errors import ObjectNotFoundError

        try:
            self.head(key)
        except ObjectNotFoundError:
            return False
        return True

    def deferring(self, batch: SyncBatch) -> ObjectStore:
        """A view of this store whose ``put`` and ``put_if_missing`` may return before the
        object is durable, noting it in ``batch`` (see the module docstring). Reads, lists and
        deletes are the store's own. Default: the store itself (its puts are durable)."""
        return self

    def sync(self, batch: SyncBatch) -> None:
        """Make every object in ``batch`` durable, then empty it. Default: nothing to do."""
        batch.clear()

    def settle(self, batch: SyncBatch) -> None:
        """Wait for the puts of ``batch`` still in flight; raise ObjectStoreError (never
        ObjectExistsError) if one failed. What is left in ``batch`` then only needs syncing.
        Default: nothing runs in the background."""
        return

    def flush(self) -> None:
        """Wait for every write this store still runs in the background (hints included).
        Default: none."""
        return

    def put_if_missing_after(self, key: str, data: bytes, after: SyncBatch) -> None:
        """``put_if_missing``, made only once every object of ``after`` is durable: nothing can
        name an object that a crash could lose. Default: sync, then put."""
        self.sync(after)
        self.put_if_missing(key, data)

    def put_hint(self, key: str, data: bytes) -> None:
        """Replace a hint file (``HEAD``): atomic, but it need not survive a crash (readers
        verify hints and probe past stale ones). Default: ``put``."""
        self.put(key, data)

    def put_if_missing_idempotent(
        self, key: str, data: bytes, after: SyncBatch | None = None
    ) -> None:
        """``put_if_missing`` for a key and bytes unique to this writer (a fresh KSUID or UUID
        key, or contents that embed one): a request retried by the SDK after its response was
        lost finds its own first try there and gets ``ObjectExistsError``, yet it succeeded.
        So on ``ObjectExistsError`` read the object back: the same bytes are success, other
        bytes re-raise ``ObjectExistsError``. A read-back that fails raises ObjectStoreError
        (the outcome is then unknown; callers must not assume nothing was written).

        Sound only where no other writer can produce the same bytes under the same key:
        never use it for a key that writers race for with identical contents.

        ``after``: objects to make durable first (:meth:`put_if_missing_after`)."""
        from lake_core.errors import ObjectExistsError, ObjectNotFoundError, ObjectStoreError

        try:
            if after:
                self.put_if_missing_after(key, data, after)
            else:
                self.put_if_missing(key, data)
            return
        except ObjectExistsError:
            pass
        try:
            existing = self.get(key)
        except ObjectNotFoundError:
            # It existed a moment ago and is gone: not ours to judge, so not a success.
            raise ObjectExistsError(key) from None
        except ObjectStoreError as e:
            raise ObjectStoreError(
                key, f"put-if-missing answered 'exists' and reading it back failed: {e.detail}"
            ) from e
        if existing != data:
            raise ObjectExistsError(key)

    def delete_many(self, keys: builtins.list[str]) -> None:
        """Delete each key; backends may batch."""
        for key in keys:
            self.delete(key)

    def local_path(self, key: str) -> str | None:
        """A filesystem path for ``key`` if the store is a local directory, else None. Lets
        Parquet readers memory-map local files instead of copying bytes."""
        return None

    @abc.abstractmethod
    def arrow_location(self, key: str) -> tuple[Any, str]:
        """(``pyarrow.fs.FileSystem``, path) where another engine can read ``key`` directly."""

    def close(self) -> None:  # noqa: B027 - optional hook, most stores hold nothing
        """Release clients and sockets."""


class DeferringView(ObjectStore):
    """What :meth:`ObjectStore.deferring` returns: ``store`` itself for everything but its
    puts, which a backend's subclass makes deferred (noting them in ``batch``). The batch
    methods and hints go to ``store``, so the view never needs a batch of its own."""

    def __init__(self, store: ObjectStore, batch: SyncBatch) -> None:
        self.store, self.batch, self.uri = store, batch, store.uri

    def get(self, key: str) -> bytes:
        return self.store.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return self.store.get_range(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        self.store.put(key, data)

    def put_if_missing(self, key: str, data: bytes) -> None:
        self.store.put_if_missing(key, data)

    def head(self, key: str) -> ObjectInfo:
        return self.store.head(key)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        return self.store.list(prefix)

    def delete(self, key: str) -> None:
        self.store.delete(key)

    def delete_many(self, keys: builtins.list[str]) -> None:
        self.store.delete_many(keys)

    def local_path(self, key: str) -> str | None:
        return self.store.local_path(key)

    def arrow_location(self, key: str) -> tuple[Any, str]:
        return self.store.arrow_location(key)

    def deferring(self, batch: SyncBatch) -> ObjectStore:
        return self.store.deferring(batch)

    def sync(self, batch: SyncBatch) -> None:
        self.store.sync(batch)

    def settle(self, batch: SyncBatch) -> None:
        self.store.settle(batch)

    def flush(self) -> None:
        self.store.flush()

    def put_if_missing_after(self, key: str, data: bytes, after: SyncBatch) -> None:
        self.store.put_if_missing_after(key, data, after)

    def put_hint(self, key: str, data: bytes) -> None:
        self.store.put_hint(key, data)
