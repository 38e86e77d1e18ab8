"""The catalog facade: create it, find its latest version, read any version, begin transactions,
time travel, log, roll back, export.

Finding the latest version (the Olympia "begin"): read the ``vn/latest`` hint (and
``vn/oldest``); start at the hint if it is above ``oldest`` (else at ``oldest``, else 0); then
probe forward for roots that exist, doubling the step and bisecting back, so a stale hint
costs O(log distance) requests. Versions are dense: every commit is ``observed latest + 1``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lake_core.catalog.defs import (
    DEFAULT_ORDER,
    check_catalog_def,
    decode_def,
    encode_def,
    new_catalog_def,
)
from lake_core.catalog.files import DEFAULT_CACHE_ENTRIES, CatalogFiles
from lake_core.catalog.node import Action, Node, RootFile, decode_root, encode_root
from lake_core.catalog.proto import actions_pb2, objects_pb2
from lake_core.catalog.state import CatalogSnapshot, CatalogState
from lake_core.catalog.transaction import Transaction
from lake_core.clock import SYSTEM_CLOCK, Clock, to_iso
from lake_core.config import LakeConfig, RetryPolicy
from lake_core.errors import (
    EmptyTransactionError,
    NotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    UsageError,
)
from lake_core.layout import CATALOG_ROOT, MAX_VERSION, CatalogLayout
from lake_core.names import MAX_NAME_BYTES
from lake_core.stores.base import ObjectStore

if TYPE_CHECKING:
    from lake_core.catalog.export import ExportResult

LOG_BATCH = 32


class Catalog:
    """An Olympia catalog under ``prefix`` of ``store`` (``<lake>/catalog/`` in a lake)."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        prefix: str = CATALOG_ROOT,
        clock: Clock = SYSTEM_CLOCK,
        retry: RetryPolicy | None = None,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
        rng: random.Random | None = None,
    ) -> None:
        self.files = CatalogFiles(store, prefix, cache_entries)
        self.clock = clock
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        self._cache_entries = cache_entries
        self._bases: dict[str, CatalogFiles] = {}

    @classmethod
    def for_lake(cls, store: ObjectStore, config: LakeConfig) -> Catalog:
        return cls(store, clock=config.clock, retry=config.retry)

    def now_millis(self) -> int:
        return int(self.clock.now().timestamp() * 1000)

    # -- creation --------------------------------------------------------------------------

    def initialize(self, *, order: int | None = None, max_name_bytes: int = MAX_NAME_BYTES) -> bool:
        """Write version 0 (an empty tree) if no catalog exists. True if this call created
        it; False if it existed (also when a racing creator won)."""
        if self.files.exists(CatalogLayout.version_root(0)):
            return False
        definition = new_catalog_def(
            order=order or DEFAULT_ORDER,
            max_name_bytes=max_name_bytes,
            created_at_millis=self.now_millis(),
        )
        def_path = CatalogLayout.new_catalog_def()
        self.files.write_new(def_path, encode_def(definition))
        root = RootFile(
            tree=Node(),
            created_at_millis=self.now_millis(),
            catalog_def=def_path,
            actions=(
                Action("catalog_def", actions_pb2.ActionDef(type=actions_pb2.CATALOG_CREATE)),
            ),
        )
        try:
            self.files.write_new(CatalogLayout.version_root(0), encode_root(root))
        except ObjectExistsError:
            self.files.delete_quietly([def_path])
            return False
        self.files.write_hint(CatalogLayout.LATEST_HINT, 0)
        return True

    # -- finding versions ------------------------------------------------------------------

    def _exists(self, version: int) -> bool:
        return self.files.exists(CatalogLayout.version_root(version))

    def oldest_version(self) -> int:
        return self.files.read_hint(CatalogLayout.OLDEST_HINT) or 0

    def _readable(self, version: int) -> bool:
        """Whether ``version``'s root exists, reading it (it is usually needed next)."""
        try:
            self.files.read_root(version)
        except ObjectNotFoundError:
            return False
        return True

    def latest_version(self) -> int | None:
        """The newest committed version, or None if the catalog has none.

        The common case costs three requests: the ``vn/latest`` hint, its root (kept for the
        snapshot that follows), and a probe of the next version. ``vn/oldest`` is read only
        when the hint is missing or names no root; a root that exists proves every version
        from it to the latest exists (versions are dense and expire oldest first)."""
        hint = self.files.read_hint(CatalogLayout.LATEST_HINT)
        if hint is not None and self._readable(hint):
            lo = hint
        else:
            oldest = self.oldest_version()
            if not self._readable(oldest):
                return None
            if hint is not None and hint > oldest:
                # A hint ahead of every root (a foreign writer's, or damage): search below it.
                return self._bisect(oldest, hint)
            lo = oldest
        step = 1
        while self._exists(lo + step):
            lo += step
            step *= 2
        return self._bisect(lo, lo + step)

    def _bisect(self, lo: int, hi: int) -> int:
        """The last existing version, given that ``lo`` exists and ``hi`` does not."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._exists(mid):
                lo = mid
            else:
                hi = mid
        return lo

    def roots_since(self, version: int) -> list[tuple[int, RootFile]]:
        """Every root from ``version`` on, in order (at least one: ``version`` must exist)."""
        out: list[tuple[int, RootFile]] = []
        v = version
        while True:
            try:
                out.append((v, self.files.read_root(v)))
            except ObjectNotFoundError:
                if not out:
                    raise
                return out
            v += 1

    # -- snapshots -------------------------------------------------------------------------

    def _files_for(self, root: RootFile) -> CatalogFiles:
        """Where a root's nodes and definitions are: here, or for a minimal export, at the
        catalog it was exported from."""
        if root.export_base is None:
            return self.files
        base = self._bases.get(root.export_base)
        if base is None:
            from lake_core.stores.factory import open_store

            base = CatalogFiles(open_store(root.export_base), "", self._cache_entries)
            self._bases[root.export_base] = base
        return base

    def snapshot_of(self, version: int, root: RootFile) -> CatalogSnapshot:
        files = self._files_for(root)
        definition = check_catalog_def(
            root.catalog_def, files.read_def(objects_pb2.CatalogDef, root.catalog_def)
        )
        return CatalogSnapshot(
            version, root, CatalogState(root.tree, definition, root.catalog_def, files)
        )

    def snapshot(self, version: int | None = None) -> CatalogSnapshot:
        """Version ``version``, or the latest. Raises NotFoundError."""
        if version is None:
            latest = self.latest_version()
            if latest is None:
                raise NotFoundError("catalog", self.files.uri, "no catalog version exists")
            version = latest
        if version < 0:
            raise UsageError(f"catalog versions start at 0, not {version}")
        if version > MAX_VERSION:
            raise UsageError(f"catalog version {version} is out of range (at most {MAX_VERSION})")
        try:
            root = self.files.read_root(version)
        except ObjectNotFoundError:
            oldest = self.oldest_version()
            why = f"older than the oldest kept version {oldest}" if version < oldest else ""
            raise NotFoundError("catalog version", str(version), why) from None
        return self.snapshot_of(version, root)

    def snapshot_as_of(self, when: datetime) -> CatalogSnapshot:
        """The newest version committed at or before ``when``. Writers keep root timestamps
        non-decreasing, so this bisects over versions. Raises NotFoundError."""
        millis = int(when.timestamp() * 1000)
        latest = self.latest_version()
        lo = self.oldest_version()
        if latest is None:
            raise NotFoundError("catalog version", f"at or before {to_iso(when)}")
        first = self.files.read_root(lo).created_at_millis
        if first > millis:
            since = to_iso(datetime.fromtimestamp(first / 1000, UTC))
            raise NotFoundError(
                "catalog version", f"at or before {to_iso(when)}", f"the first is from {since}"
            )
        hi = latest + 1  # lo qualifies; hi does not (or is past the end)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.files.read_root(mid).created_at_millis <= millis:
                lo = mid
            else:
                hi = mid
        return self.snapshot(lo)

    def snapshot_named(self, name: str) -> CatalogSnapshot:
        """The version an export called ``name`` recorded. Raises NotFoundError."""
        exported = self.snapshot().state.catalog_def.exported_snapshots
        if name not in exported:
            raise NotFoundError("catalog export", name)
        return self.snapshot(CatalogLayout.parse_version_root(exported[name]))

    def resolve(self, ref: str) -> CatalogSnapshot:
        """``ref`` as ``--at-version`` takes it: a version number or an export's name."""
        text = ref.strip()
        if text.isdigit():
            return self.snapshot(int(text))
        if text.lstrip("-").isdigit():
            # A negative number is not an export's name: say what versions look like.
            raise UsageError(f"invalid catalog version {text}: versions count up from 0")
        return self.snapshot_named(text)

    def snapshot_at(
        self, version: int | str | None = None, as_of: datetime | None = None
    ) -> CatalogSnapshot:
        """The version ``--at-version`` (a number, or an export's name: :meth:`resolve`) or
        ``--as-of`` names, else the latest. Raises UsageError for both, NotFoundError."""
        if version is not None and as_of is not None:
            raise UsageError("give a catalog version or a time, not both")
        if isinstance(version, int):
            return self.snapshot(version)
        if version is not None:
            return self.resolve(version)
        if as_of is not None:
            return self.snapshot_as_of(as_of)
        return self.snapshot()

    def log(self, limit: int | None = None) -> Iterator[CatalogSnapshot]:
        """Versions newest first (root reads batched in parallel)."""
        latest = self.latest_version()
        if latest is None:
            return
        stop = self.oldest_version()
        if limit is not None:
            stop = max(stop, latest - limit + 1)
        v = latest
        while v >= stop:
            batch = list(range(v, max(stop, v - LOG_BATCH + 1) - 1, -1))
            roots = self.files.map(self.files.read_root, batch)
            for version, root in zip(batch, roots, strict=True):
                yield self.snapshot_of(version, root)
            v = batch[-1] - 1

    # -- transactions ------------------------------------------------------------------------

    def begin(self) -> Transaction:
        """A transaction on the latest version (creating the catalog if there is none)."""
        latest = self.latest_version()
        if latest is None:
            self.initialize()
            latest = self.latest_version()
            assert latest is not None
        return Transaction(self, self.snapshot(latest))

    def rollback(self, version: int) -> int:
        """Commit a new version equal to ``version`` (roll forward); returns the new version.
        Raises NotFoundError, EmptyTransactionError (already at that version),
        CatalogConflictError (another commit landed meanwhile)."""
        txn = self.begin()
        if version == txn.base.version:
            raise EmptyTransactionError(f"catalog version {version} is the current version")
        txn.roll_back_to(self.snapshot(version))
        return txn.commit()

    def export(
        self, dest: ObjectStore, *, full: bool = False, name: str | None = None
    ) -> ExportResult:
        """Copy the latest version to ``dest`` (see :mod:`lake_core.catalog.export`)."""
        from lake_core.catalog.export import export_snapshot

        return export_snapshot(self, dest, full=full, name=name)

    def resume(self, transaction_id: str) -> Transaction:
        """A transaction another process saved (:meth:`Transaction.save`)."""
        path = CatalogLayout.dtxn(transaction_id)
        try:
            data = self.files.get(path)  # not cached: each save overwrites it
        except ObjectNotFoundError:
            raise NotFoundError("catalog transaction", transaction_id) from None
        definition = decode_def(objects_pb2.DistributedTransactionDef, path, data)
        if definition.expire_at_millis and self.now_millis() > definition.expire_at_millis:
            raise NotFoundError("catalog transaction", transaction_id, "expired")
        base_path = definition.beginning_root_node_file_path
        base = self.snapshot(CatalogLayout.parse_version_root(base_path))
        running_path = definition.running_root_node_file_path
        running = decode_root(running_path, self.files.get(running_path))
        txn = Transaction(
            self, base, transaction_id=definition.id, began_at_millis=definition.began_at_millis
        )
        txn._resume(running)
        return txn
