"""The catalog's files on an object store: reading them (with a cache), writing them once.

Every node, root and definition file is immutable once written, so a decoded copy can be kept
for as long as the process likes; only the ``vn/latest`` and ``vn/oldest`` hints change, and
those are never cached. Roots and nodes are written with put-if-missing: a root's
put-if-missing is the commit point, and a node or definition under a fresh UUID cannot clash.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from google.protobuf.message import Message

from lake_core.catalog.defs import decode_def
from lake_core.catalog.node import Node, RootFile, decode_node, decode_root
from lake_core.errors import ObjectNotFoundError, ObjectStoreError
from lake_core.layout import CATALOG_ROOT, CatalogLayout
from lake_core.stores.base import ObjectStore

M = TypeVar("M", bound=Message)
T = TypeVar("T")
A = TypeVar("A")

DEFAULT_CACHE_ENTRIES = 4096
PARALLEL_IO = 16


class _Cache:
    """A small thread-safe LRU of decoded immutable files, keyed by path."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._data: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str) -> Any:
        with self._lock:
            value = self._data.get(path)
            if value is not None:
                self._data.move_to_end(path)
            return value

    def put(self, path: str, value: Any) -> None:
        if self.entries <= 0:
            return
        with self._lock:
            self._data[path] = value
            self._data.move_to_end(path)
            while len(self._data) > self.entries:
                self._data.popitem(last=False)


class CatalogFiles:
    """Files under ``prefix`` (``catalog`` in a lake; empty for an exported catalog), named by
    :class:`~lake_core.layout.CatalogLayout`."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = CATALOG_ROOT,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
    ) -> None:
        self.store = store
        self.layout = CatalogLayout(prefix)
        self._cache = _Cache(cache_entries)

    @property
    def uri(self) -> str:
        """Where these files are, as a lake URI another process can open."""
        return self.layout.uri(self.store.uri)

    def key(self, path: str) -> str:
        """The store key of catalog path ``path``."""
        return self.layout.key(path)

    def get(self, path: str) -> bytes:
        """Raw bytes. Raises ObjectNotFoundError."""
        return self.store.get(self.key(path))

    def _cached(self, path: str, decode: Callable[[str, bytes], T]) -> T:
        hit = self._cache.get(path)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        value = decode(path, self.get(path))
        self._cache.put(path, value)
        return value

    def read_node(self, path: str) -> Node:
        return self._cached(path, decode_node)

    def read_root(self, version: int) -> RootFile:
        """The root of ``version``. Raises ObjectNotFoundError if it was never committed."""
        return self.read_root_path(CatalogLayout.version_root(version))

    def read_root_path(self, path: str) -> RootFile:
        return self._cached(path, decode_root)

    def read_def(self, cls: type[M], path: str) -> M:
        return self._cached(path, lambda p, data: decode_def(cls, p, data))

    def read_defs(self, cls: type[M], paths: list[str]) -> list[M]:
        """Many definitions, fetched in parallel (each one is a round trip on S3)."""
        return self.map(lambda p: self.read_def(cls, p), paths)

    @staticmethod
    def map(fn: Callable[[A], T], args: list[A]) -> list[T]:
        """``fn`` over ``args`` on a few threads (order kept); object-store calls release
        the GIL, so this hides round trips."""
        if len(args) <= 2:
            return [fn(a) for a in args]
        with ThreadPoolExecutor(min(PARALLEL_IO, len(args))) as pool:
            return list(pool.map(fn, args))

    def exists(self, path: str) -> bool:
        if self._cache.get(path) is not None:
            return True
        return self.store.exists(self.key(path))

    def write_new(self, path: str, data: bytes) -> None:
        """Create ``path``; raises ObjectExistsError if it exists. Every path written here is
        fresh (a UUID) or its bytes carry the transaction id (a version root), so a retried
        request whose first try landed is recognised as success by its bytes."""
        self.store.put_if_missing_idempotent(self.key(path), data)

    def write_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Create fresh files in parallel (none is reachable until a root names it)."""
        self.map(lambda item: self.write_new(*item), list(items))

    def read_hint(self, path: str) -> int | None:
        """A ``vn/latest`` or ``vn/oldest`` hint; None if missing or unreadable."""
        try:
            return int(self.get(path).decode("ascii").strip())
        except (ObjectNotFoundError, UnicodeDecodeError, ValueError):
            return None

    def write_hint(self, path: str, version: int) -> None:
        """Best effort: a hint that fails to land is corrected by the next reader's probe."""
        try:
            self.store.put(self.key(path), str(version).encode("ascii"))
        except ObjectStoreError:
            pass

    def delete_quietly(self, paths: Iterable[str]) -> None:
        """Remove files this process wrote and nobody can reach (best effort)."""
        for path in paths:
            try:
                self.store.delete(self.key(path))
            except ObjectStoreError:
                pass
