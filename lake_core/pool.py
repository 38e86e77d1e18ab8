"""A pool: its branches, commits and snapshots, reading them, and the handle for every write.

:class:`Pool` resolves refs (branches, commit ids, times) through the branch journal, opens
snapshots (cached; one cached snapshot plus a bounded chain of commits each), and is the one
handle users write through: each write method delegates to the module that owns the work. The
commit protocol itself lives in :mod:`lake_core.committing`.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.clock import parse_iso, to_iso
from lake_core.commit import Commit
from lake_core.committing import CommitRequest
from lake_core.committing import commit as run_commit
from lake_core.config import LakeConfig
from lake_core.errors import (
    AlreadyExistsError,
    BranchNotFoundError,
    CommitStateUnknownError,
    CorruptObjectError,
    HistoryVacatedError,
    NoCommitAtTimeError,
    NotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
    PoolNotFoundError,
    RetriesExhaustedError,
    UsageError,
)
from lake_core.ids import is_ksuid, ksuid_time
from lake_core.journal import Journal, JournalEntry
from lake_core.keyset import KeySet
from lake_core.layout import PoolLayout
from lake_core.names import MAIN, TAIL_PREFIX, VACATED, validate_name
from lake_core.objects import ObjectMeta
from lake_core.partitions import PartitionSpec
from lake_core.registry import PoolConfig
from lake_core.snapshot import Snapshot, apply_commit
from lake_core.stores.base import ObjectStore, SyncBatch
from lake_core.txn import Txn, as_txns
from lake_core.vacated import read_vacated

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lake_core.counting import CountResult
    from lake_core.dedupe import DedupeResult
    from lake_core.diff import SnapshotDiff
    from lake_core.grouping import GroupCommitter
    from lake_core.indexes.building import IndexInputs
    from lake_core.indexes.meta import IndexMeta
    from lake_core.indexes.rules import IndexRule
    from lake_core.integrity import Verdict
    from lake_core.loading import Source, Staged
    from lake_core.locks import LockHandle, LockProvider
    from lake_core.maintenance import (
        CleanupResult,
        CompactionResult,
        Fragmentation,
        PartitionInfo,
        PurgeResult,
        RetainResult,
        VacateResult,
    )
    from lake_core.maintenance.policy import CompactionRun
    from lake_core.otree.optimize import OptimizeResult
    from lake_core.otree.revisions import Extent, Revision
    from lake_core.otree.settings import OTreeLayout
    from lake_core.planning import ReadStats
    from lake_core.scan import Scan
    from lake_core.upsert import UpsertResult

__all__ = ["MAIN", "TAIL_PREFIX", "VACATED", "Pool"]

_CACHE_COMMITS = 4096
_CACHE_SNAPSHOTS = 16


class _LRU(OrderedDict[str, Any]):
    """Thread-safe for get_or/put/pop: loads in several threads share one Pool (group
    commit), and a check-then-move must not race an eviction."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.lock = threading.Lock()

    def get_or(self, key: str) -> Any:
        with self.lock:
            value = super().get(key)
            if value is not None:
                self.move_to_end(key)
            return value

    def put(self, key: str, value: Any) -> None:
        with self.lock:
            self[key] = value
            self.move_to_end(key)
            while len(self) > self.size:
                self.popitem(last=False)

    def pop(self, key: str, default: Any = None) -> Any:
        with self.lock:
            return super().pop(key, default)


class Pool:
    """One pool of a lake: the handle for reads and writes alike. Cheap to construct; caches
    immutable commits and snapshots.

    Reads: :meth:`scan`, :meth:`read`, :meth:`files`, :meth:`dataset`, :meth:`log`,
    :meth:`schema`, :meth:`count`, :meth:`diff`, :meth:`verify`. Writes, each one commit (or
    none): :meth:`load`, :meth:`add` + :meth:`commit_staged`, :meth:`delete`, :meth:`merge`,
    :meth:`revert`. Maintenance, each under the pool's maintenance lock: :meth:`compact`,
    :meth:`retain`, :meth:`drop_partition`, :meth:`rewrite_partition`, :meth:`vacate`,
    :meth:`cleanup`, :meth:`purge`. Each method delegates to the module that owns the work
    (:mod:`lake_core.loading`, :mod:`lake_core.changes`, :mod:`lake_core.maintenance` …),
    whose functions stay public for callers that hold a lock themselves (the CLI, Spark).
    """

    def __init__(
        self,
        store: ObjectStore,
        config: PoolConfig,
        lake_config: LakeConfig,
        journal_lock: Callable[[], AbstractContextManager[Any]] | None = None,
        locks: Callable[[], LockProvider] | None = None,
        index_rules: Callable[[], Sequence[IndexRule]] | None = None,
        revise: Callable[[Callable[[OTreeLayout], OTreeLayout | None]], OTreeLayout] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.lake_config = lake_config
        self.clock = lake_config.clock
        #: Where this pool's files are (see :mod:`lake_core.layout`).
        self.layout = PoolLayout(config.id)
        self.journal = Journal(store, self.layout.journal, self.clock, journal_lock)
        self._commits = _LRU(_CACHE_COMMITS)
        self._snapshots = _LRU(_CACHE_SNAPSHOTS)
        self._rng = random.Random()
        self._locks = locks
        self._group: GroupCommitter | None = None
        self._group_lock = threading.Lock()
        self._index_rules_source = index_rules
        self._index_rules: tuple[IndexRule, ...] | None = None
        self._revise = revise

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def index_rules(self) -> tuple[IndexRule, ...]:
        """The index rules covering this pool, from the catalog version it was opened at (read
        once, when first needed; a pool opened without a lake has none)."""
        if self._index_rules is None:
            source = self._index_rules_source
            self._index_rules = tuple(source()) if source is not None else ()
        return self._index_rules

    def otree_revision(self, table: pa.Table | Extent) -> Revision:
        """The OTree revision a batch (with its weight column) of this pool is indexed in: the
        latest this handle knows when it covers the batch, else the one the catalog has after
        :func:`~lake_core.otree.write.revision_change` (a racing writer's, or a new one this
        commits); the handle's settings are updated to the catalog's. ``table``: the batch,
        or its :class:`~lake_core.otree.revisions.Extent` (a batch spread over tasks). Raises
        UsageError for a pool without the OTree layout or opened without its lake."""
        from lake_core.otree.revisions import next_revision
        from lake_core.otree.write import revision_change

        layout = self.config.otree
        if layout is None:
            raise UsageError(f"pool {self.name} has no OTree layout")
        now_ms = int(self.clock.now().timestamp() * 1000)
        latest = layout.latest
        if latest is not None and next_revision(latest, table, now_ms, self._rng) is None:
            return latest
        if self._revise is None:
            raise UsageError(
                f"pool {self.name} was opened without its lake: it cannot add a revision"
            )
        try:
            revised = self._revise(revision_change(table, now_ms, self._rng))
        except CommitStateUnknownError as e:
            # The catalog's answer was lost, again and again: the revision may exist, but this
            # load has written nothing and commits nothing. A plain store failure for it.
            raise ObjectStoreError(
                "catalog", f"could not record OTree revision of pool {self.name}: {e.detail}"
            ) from e
        self.config = replace(self.config, otree=revised)
        assert revised.latest is not None
        return revised.latest

    @property
    def partition_spec(self) -> PartitionSpec | None:
        """How the pool is partitioned, or None."""
        spec = self.config.partition_by
        return PartitionSpec.parse(spec) if spec else None

    @property
    def name(self) -> str:
        return str(self.config.name)

    def __repr__(self) -> str:
        return f"Pool({self.name!r}, id={self.id})"

    # -- branches and refs --------------------------------------------------------------------

    def initialize(self) -> None:
        """Create branch ``main`` with no commits: journal entry 1. Idempotent-safe: raises
        AlreadyExistsError if the pool's journal already exists."""
        try:
            self.journal.append(
                JournalEntry(0, None, {}), [{"op": "set", "name": MAIN, "value": None}]
            )
        except ObjectExistsError:
            raise AlreadyExistsError("pool directory", self.id) from None

    def branches(self, as_of: datetime | None = None) -> dict[str, str | None]:
        """Branch name → tip commit id (None: no commits yet)."""
        entry = self.journal.entry_as_of(as_of) if as_of else self.journal.read_head()
        return {k: v for k, v in entry.state.items() if not k.startswith("@")}

    def vacate_state(self) -> tuple[datetime | None, dict[str, str | None]]:
        """(vacate time, branch → tail commit) — (None, {}) if history was never vacated."""
        state = self.journal.read_head().state
        when = state.get(VACATED)
        tails = {k[len(TAIL_PREFIX) :]: v for k, v in state.items() if k.startswith(TAIL_PREFIX)}
        return (parse_iso(when) if when else None), tails

    def check_not_vacated(self, commit: Commit) -> None:
        """Raise HistoryVacatedError if ``commit`` lies in history cut by vacate."""
        when, tails = self.vacate_state()
        if when is not None and commit.date < when and commit.id not in tails.values():
            raise HistoryVacatedError(
                f"commit {commit.id} ({to_iso(commit.date)}) is older than the vacated "
                f"history ({to_iso(when)})"
            )

    def tip(self, branch: str = MAIN, as_of: datetime | None = None) -> str | None:
        """The branch's tip commit (None for an empty branch). Raises BranchNotFoundError."""
        branches = self.branches(as_of)
        if branch not in branches:
            raise BranchNotFoundError(branch, f"in pool {self.name}")
        return branches[branch]

    def resolve(self, ref: str | None = None, as_of: datetime | None = None) -> str | None:
        """A branch name or commit id → commit id. ``as_of`` goes with a branch only: the
        branch's tip at that time, or NoCommitAtTimeError when it had no commit then.

        A commit id that is not found is HistoryVacatedError when a vacate recorded it as cut
        (cleanup may have reclaimed it since), else NotFoundError: an id that never existed is
        "not found" whatever its KSUID time."""
        ref = ref or MAIN
        branches = self.branches(as_of)
        if ref in branches:
            tip = branches[ref]
            if tip is None and as_of is not None:
                raise NoCommitAtTimeError(ref, to_iso(as_of))
            return tip
        if is_ksuid(ref):
            if as_of is not None:
                raise UsageError("--as-of goes with a branch, not with a commit id")
            try:
                commit = self.read_commit(ref)
            except NotFoundError:
                self._raise_if_vacated(ref)
                raise
            self.check_not_vacated(commit)
            return ref
        if as_of is not None and ref in self.branches():
            raise NoCommitAtTimeError(ref, to_iso(as_of))
        raise BranchNotFoundError(ref, f"in pool {self.name}")

    def _raise_if_vacated(self, commit_id: str) -> None:
        """For a commit id whose object is gone: HistoryVacatedError if vacate cut it."""
        when, _ = self.vacate_state()
        if when is None:
            return
        cut = read_vacated(self.store, self.id)
        # Lakes vacated before vacate kept records: judge by the time the KSUID carries.
        vacated = commit_id in cut if cut is not None else ksuid_time(commit_id) < when
        if vacated:
            raise HistoryVacatedError(
                f"commit {commit_id} is older than the vacated history ({to_iso(when)})"
            )

    def create_branch(self, name: str, from_ref: str | None = None) -> str | None:
        """New branch at ``from_ref`` (branch or commit; default main). Returns its tip."""
        validate_name(name, "branch name")
        target = self.resolve(from_ref or MAIN)

        def build(state: dict[str, Any]) -> list[dict[str, Any]]:
            if name in state:
                raise AlreadyExistsError("branch", name)
            return [{"op": "set", "name": name, "value": target}]

        self.update_journal(f"create branch {name}", build)
        return target

    def delete_branch(self, name: str) -> None:
        if name == MAIN:
            raise UsageError("branch main cannot be deleted")

        def build(state: dict[str, Any]) -> list[dict[str, Any]]:
            if name not in state:
                raise BranchNotFoundError(name, f"in pool {self.name}")
            return [{"op": "delete", "name": name}]

        self.update_journal(f"delete branch {name}", build)

    def update_journal(self, what: str, build: Any) -> JournalEntry:
        """Append a journal entry whose actions ``build(state)`` derives from the head's state,
        retrying on a lost race (branch create and delete, vacate). ``build`` may raise to
        refuse."""
        retry = self.lake_config.retry
        for attempt in range(retry.max_attempts):
            head = self.journal.read_head()
            actions = build(dict(head.state))
            try:
                return self.journal.append(head, actions)
            except ObjectExistsError:
                self.backoff(attempt)
        raise RetriesExhaustedError(what, retry.max_attempts)

    def backoff(self, attempt: int, attempts: int | None = None) -> None:
        """Sleep a jittered, exponentially growing time after losing race ``attempt`` of
        ``attempts`` (counted from 0; default ``retry.max_attempts``, what most callers'
        loops run). Not after the last one: nothing follows it but the caller's
        RetriesExhaustedError."""
        retry = self.lake_config.retry
        if attempt + 1 >= (retry.max_attempts if attempts is None else attempts):
            return
        delay = min(retry.max_delay, retry.base_delay * (2 ** min(attempt, 20)))
        self.clock.sleep(self._rng.uniform(0, delay))

    # -- commits and snapshots ----------------------------------------------------------------

    def read_commit(self, commit_id: str) -> Commit:
        """The commit object. Raises NotFoundError naming the id, CorruptObjectError."""
        cached = self._commits.get_or(commit_id)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        key = self.layout.commit(commit_id)
        try:
            data = self.store.get(key)
        except ObjectNotFoundError:
            raise NotFoundError("commit", commit_id, f"in pool {self.name}") from None
        commit = Commit.decode(key, data)
        if commit.id != commit_id:
            raise CorruptObjectError(key, f"commit object says its id is {commit.id}")
        self._commits.put(commit_id, commit)
        return commit

    def _read_cached_snapshot(self, commit_id: str) -> Snapshot:
        cached = self._snapshots.get_or(commit_id)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        key = self.layout.snapshot(commit_id)
        snap = Snapshot.decode(key, self.store.get(key))
        if snap.commit_id != commit_id:
            raise CorruptObjectError(key, f"snapshot says it is of commit {snap.commit_id}")
        return snap

    def snapshot(self, commit_id: str | None) -> Snapshot:
        """The live set at ``commit_id``: one cached snapshot plus at most
        SNAPSHOT_INTERVAL commits, fetched in parallel."""
        if commit_id is None:
            return Snapshot()
        cached = self._snapshots.get_or(commit_id)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        commit = self.read_commit(commit_id)
        try:
            if commit.has_snapshot:
                snap = self._read_cached_snapshot(commit_id)
            else:
                base = (
                    self._read_cached_snapshot(commit.snapshot_base)
                    if commit.snapshot_base
                    else Snapshot()
                )
                chain = self._read_commits(list(commit.chain))
                snap = base
                for c in [*chain, commit]:
                    snap = apply_commit(snap, c, self.config.txn_retention)
        except (CorruptObjectError, ObjectNotFoundError, NotFoundError):
            # A damaged or missing cached snapshot must not make the pool unreadable
            # (Zed #4328): fall back to replaying the history from the root.
            snap = self._replay_from_root(commit)
        self._snapshots.put(commit_id, snap)
        return snap

    def _read_commits(self, ids: list[str]) -> list[Commit]:
        missing = [i for i in ids if i not in self._commits]
        # In parallel only where a read waits on the network: from local disk (page cache),
        # starting the threads costs ten times the reads (9 ms against 0.6 ms for 15 commits).
        if len(missing) > 1 and self.store.local_path(self.layout.commit(missing[0])) is None:
            with ThreadPoolExecutor(max_workers=min(16, len(missing))) as ex:
                list(ex.map(self.read_commit, missing))
        return [self.read_commit(i) for i in ids]

    def _replay_from_root(self, commit: Commit) -> Snapshot:
        """Replay back to the nearest readable cached snapshot (or the root). Slow path: used
        when a cached snapshot is damaged, or a chain reaches into reclaimed history (vacate
        writes a cached snapshot of every tail, so the walk stops there)."""
        path = [commit]
        base = Snapshot()
        while True:
            current = path[-1]
            try:
                # Any commit may have a cached snapshot (vacate writes one for every tail,
                # whatever its has_snapshot flag says), the starting commit included.
                base = self._read_cached_snapshot(current.id)
                path.pop()
                break
            except (CorruptObjectError, ObjectNotFoundError):
                pass
            if current.parent is None:
                break
            path.append(self.read_commit(current.parent))
        snap = base
        for c in reversed(path):
            snap = apply_commit(snap, c, self.config.txn_retention)
        return snap

    def last_txn(self, app: str, branch: str = MAIN) -> int | None:
        """The highest version of application transaction ``app`` committed on ``branch``
        (None: none): one snapshot open, however long the history (:mod:`lake_core.txn`)."""
        return self.snapshot(self.tip(branch)).txns.get(app)

    def txns(self, branch: str = MAIN) -> dict[str, int]:
        """Every application id committed on ``branch`` with its highest version."""
        return dict(self.snapshot(self.tip(branch)).txns)

    def log(self, ref: str | None = None) -> Iterator[Commit]:
        """Commits from ``ref``'s tip back to the first retained one, newest first."""
        commit_id = self.resolve(ref)
        when, tails = self.vacate_state()
        stop = set(tails.values())
        while commit_id is not None:
            commit = self.read_commit(commit_id)
            if when is not None and commit.date < when and commit.id not in stop:
                return
            yield commit
            if commit.id in stop:
                return
            commit_id = commit.parent

    # -- reading ------------------------------------------------------------------------------

    def scan(
        self,
        ref: str | None = None,
        *,
        as_of: datetime | None = None,
        where: str | None = None,
        columns: list[str] | None = None,
        order: str | None = None,
        sample: float | None = None,
    ) -> Scan:
        """A scan of the snapshot at ``ref`` (branch or commit; default main), optionally as of
        a time, filtered by a SQL ``where``; ``.reader()``, ``.to_table()``, ``.stats``.
        ``sample``: the OTree sample of that fraction (``0 < sample <= 1``), see
        :mod:`lake_core.otree.sampling`."""
        # Deferred, like the other facades: scans bring the SQL parser and pyarrow's filter
        # machinery, which a process that only writes (``lake load``) never needs.
        from lake_core.scan import Scan

        snap = self.snapshot(self.resolve(ref, as_of))
        scan = Scan(
            self.store,
            self.id,
            self.config.key,
            snap,
            where,
            columns,
            order,
            sample=sample,
            otree=self.config.otree,
            name=self.name,
        )
        return scan

    def read(self, ref: str | None = None, **kwargs: Any) -> pa.Table:
        """The records of ``ref`` as one Arrow table, in pool-key order (see :meth:`scan`)."""
        return self.scan(ref, **kwargs).to_table()

    def files(
        self, ref: str | None = None, *, as_of: datetime | None = None, where: str | None = None
    ) -> list[str]:
        """Paths (local) or ``s3://`` URIs of the live objects that may hold rows matching
        ``where``: plain Parquet that DuckDB, Polars or pyarrow read directly."""
        scan = self.scan(ref, as_of=as_of, where=where)
        out = []
        for obj in scan.objects:
            local = self.store.local_path(self.layout.data(obj.id))
            if local is not None:
                out.append(local)
            else:
                _, path = self.store.arrow_location(self.layout.data(obj.id))
                out.append(f"s3://{path}")
        return out

    def dataset(
        self, ref: str | None = None, *, as_of: datetime | None = None, where: str | None = None
    ) -> Any:
        """A ``pyarrow.dataset.Dataset`` over the (pruned) live objects, with the pool's
        schema (columns an object lacks read as null). Unordered: use :meth:`scan` for
        pool-key order."""
        import pyarrow.dataset as ds

        scan = self.scan(ref, as_of=as_of, where=where)
        keys = [self.layout.data(o.id) for o in scan.objects]
        if not keys:
            return ds.dataset(scan.pool_schema.empty_table())
        fs, _ = self.store.arrow_location(keys[0])
        paths = [self.store.arrow_location(k)[1] for k in keys]
        return ds.dataset(paths, schema=scan.pool_schema, format="parquet", filesystem=fs)

    def to_polars(
        self,
        ref: str | None = None,
        *,
        as_of: datetime | None = None,
        stats: ReadStats | None = None,
    ) -> Any:
        """The snapshot at ``ref`` (branch or commit; default main), as of ``as_of``, as a
        ``polars.LazyFrame``: its filters go to the read planner, which skips objects and row
        groups (see :mod:`lake_core.polars_scan`). The snapshot is fixed now; the frame reads in
        pool-key order. ``stats`` (a :class:`lake_core.planning.ReadStats`) adds up what each
        collect read. Needs polars."""
        from lake_core.polars_scan import lazy_frame
        from lake_core.scan import Scan

        snap = self.snapshot(self.resolve(ref, as_of))
        if snap.schema is None:  # nothing loaded yet: the key fields, typeless, no rows
            import polars as pl

            empty = pa.schema([(f, pa.null()) for f in self.config.key.fields]).empty_table()
            return pl.DataFrame(empty).lazy()
        schema = snap.schema

        def make_scan(where: str | None, columns: list[str] | None) -> Scan:
            scan = Scan(self.store, self.id, self.config.key, snap, where, columns)
            scan.pool_name = self.name
            return scan

        return lazy_frame(make_scan, schema, stats)

    def sql(self, query: str, *, as_of: datetime | None = None) -> Any:
        """Read-only SQL over this pool, named as itself (``SELECT … FROM logs``, or
        ``"logs@dev"`` for another snapshot); see :meth:`lake_core.lake.Lake.sql`. Returns a
        ``duckdb.DuckDBPyRelation``."""
        from lake_core.sql import run_sql  # deferred: DuckDB is imported by SQL only

        def open_pool(name: str) -> Pool:
            if name in (self.name, self.config.name.qualified):
                return self
            raise PoolNotFoundError(name, f"pool.sql reads only {self.name}; use lake.sql")

        return run_sql(query, open_pool, None, as_of=as_of).relation

    # -- committing ------------------------------------------------------------------------

    def commit(
        self,
        branch: str,
        adds: Sequence[ObjectMeta],
        deletes: Sequence[str],
        *,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
        incoming_schema: pa.Schema | None = None,
        source: str = "",
        extra: dict[str, Any] | None = None,
        guard: Callable[[], None] | None = None,
        prune_columns: bool = False,
        txn: Txn | Sequence[Txn] | None = None,
        carried_txns: Sequence[Txn] = (),
        durable_first: SyncBatch | None = None,
        group: bool = False,
        keys: KeySet | None = None,
        read_ids: Sequence[str] = (),
        index_adds: Sequence[IndexMeta] = (),
        index_deletes: Sequence[tuple[str, str]] = (),
        index: bool = True,
        index_inputs: IndexInputs | None = None,
    ) -> Commit:
        """Commit ``adds`` (objects already written) and ``deletes`` to ``branch`` atomically:
        a :class:`~lake_core.committing.CommitRequest` through the commit protocol
        (:func:`lake_core.committing.commit`, which names what it raises). ``guard`` runs right
        before every append (the commit point): maintenance passes its lock's ``check``.
        ``txn``: application transactions this commit lands (:mod:`lake_core.txn`), checked
        against the parent of every attempt: TxnCommittedError when one is in already.
        ``carried_txns``: another branch's transactions a merge brings, recorded where above
        the parent's versions, never refused. ``durable_first``: the batch ``adds`` were
        written into without fsync (:meth:`ObjectStore.deferring`), made durable before the
        commit point. ``group``: may share one commit with other threads' requests
        (:meth:`group_committer`); the returned commit then holds theirs too. ``keys`` and
        ``read_ids``: an upsert's changed keys and the objects its plan read; the commit
        conflicts with a live object it did not read that meets the keys
        (:func:`lake_core.committing.check_unread`). Never grouped. ``index_adds`` and
        ``index_deletes``: index entries to add and ``(object, rule)`` entries to remove
        (``lake index apply``); with ``index`` (the default) every added object is first indexed
        under the rules covering the pool (:mod:`lake_core.indexes.building`), so the commit
        adds its index entries with it; ``index_inputs``: what the write of ``adds`` prepared
        for that from their rows, so that they are not read back."""
        built: list[IndexMeta] = list(index_adds)
        if index and adds and self.index_rules:
            from lake_core.indexes.building import build_indexes

            built.extend(
                build_indexes(
                    self.store,
                    self.id,
                    self.name,
                    adds,
                    self.index_rules,
                    self.clock,
                    batch=durable_first,
                    inputs=index_inputs,
                )
            )
        request = CommitRequest(
            branch,
            tuple(adds),
            tuple(deletes),
            author or self.lake_config.user,
            message,
            meta,
            incoming_schema,
            source,
            MappingProxyType(dict(extra or {})),
            prune_columns,
            as_txns(txn),
            tuple(carried_txns),
            keys,
            frozenset(read_ids),
            tuple(built),
            tuple(index_deletes),
        )
        if group and keys is None:
            return self.group_committer().commit(request, guard, durable_first)
        return run_commit(self, request, guard, durable_first)

    def group_committer(self) -> GroupCommitter:
        """This handle's group-commit queue (:mod:`lake_core.grouping`): concurrent requests
        handed to it while a commit is in flight land together as one commit."""
        from lake_core.grouping import GroupCommitter

        with self._group_lock:
            if self._group is None:
                self._group = GroupCommitter(self)
            return self._group

    def remember(self, commit: Commit, snapshot: Snapshot | None = None) -> None:
        """Cache ``commit`` (and its snapshot): both are immutable once written."""
        self._commits.put(commit.id, commit)
        if snapshot is not None:
            self._snapshots.put(commit.id, snapshot)

    def forget(self, commit_id: str) -> None:
        """Drop a commit that never became reachable from the caches."""
        self._commits.pop(commit_id, None)
        self._snapshots.pop(commit_id, None)

    def cached_snapshot(self, commit_id: str) -> Snapshot | None:
        """The snapshot of ``commit_id`` if this handle has it in memory, else None."""
        cached = self._snapshots.get_or(commit_id)
        return cached if isinstance(cached, Snapshot) else None

    # -- the handle: writes, maintenance and inspection -----------------------------------------
    #
    # The modules doing this work import this one (they take a Pool), so each method imports
    # its module when called: importing pool.py must not import them, or the import graph has
    # a cycle.

    def schema(self, ref: str | None = None, *, as_of: datetime | None = None) -> pa.Schema | None:
        """The pool's schema at ``ref`` (branch or commit; default main): every column loaded
        so far, in first-seen order. None before the first load."""
        return self.snapshot(self.resolve(ref, as_of)).schema

    def count(
        self, where: str | None = None, ref: str | None = None, *, as_of: datetime | None = None
    ) -> CountResult:
        """How many rows of ``ref`` match ``where`` (all rows without it): ``.rows``. Objects
        whose recorded stats settle the question are not read (:mod:`lake_core.counting`)."""
        from lake_core.counting import count_rows

        snap = self.snapshot(self.resolve(ref, as_of))
        return count_rows(self.store, self.id, self.config.key, snap, where)

    def diff(self, ref1: str | None, ref2: str | None) -> SnapshotDiff:
        """Objects and rows added and removed going from ``ref1`` to ``ref2``."""
        from lake_core.diff import diff_snapshots

        return diff_snapshots(self.snapshot(self.resolve(ref1)), self.snapshot(self.resolve(ref2)))

    def verify(self, ref: str | None = None, *, check: bool = True) -> list[Verdict]:
        """Re-read every live object of ``ref`` (default: every branch) and check its size,
        rows and checksum against what its commit recorded. One verdict per object, by id;
        with ``check`` a corrupt or missing object raises CorruptDataObjectError after all
        were read (:mod:`lake_core.integrity`)."""
        from lake_core.integrity import raise_for_verdicts, verify_objects

        tips = [self.resolve(ref)] if ref is not None else list(self.branches().values())
        live: dict[str, ObjectMeta] = {}
        for tip in tips:
            live.update(self.snapshot(tip).objects)
        metas = sorted(live.values(), key=lambda o: o.id)
        verdicts = verify_objects(self.store, self.id, metas, self.name)
        if check:
            raise_for_verdicts(verdicts, self.name)
        return verdicts

    def load(
        self,
        sources: Source | Sequence[Source],
        branch: str = MAIN,
        *,
        fmt: str = "auto",
        author: str | None = None,
        message: str = "",
        meta: Any = None,
        on_object: Callable[[ObjectMeta], None] | None = None,
        txn: Txn | Sequence[Txn] | None = None,
        group: bool = False,
    ) -> Commit:
        """Load files (paths, ``-`` for stdin, binary streams) or Arrow tables into ``branch``
        in one commit; nothing is visible on failure (:func:`lake_core.loading.load`).
        ``txn``: the application transaction(s) this load is; TxnCommittedError, nothing
        committed, when one is in already (:mod:`lake_core.txn`). ``group``: concurrent
        loads from other threads of this process may land in the same commit (group commit,
        :mod:`lake_core.grouping`): the returned commit holds this load's objects, and maybe
        theirs; every caller still gets its own outcome.

        A unique pool (``PoolConfig.unique``) upserts instead (:meth:`upsert`, through
        :func:`lake_core.loading.load`): the returned commit records the counts in
        ``extra["upsert"]``; ``group`` is ignored there (an upsert commits alone)."""
        from lake_core.loading import load

        return load(
            self,
            _sources(sources),
            branch,
            fmt=fmt,
            author=author,
            message=message,
            meta=meta,
            on_object=on_object,
            txn=txn,
            group=group,
        )

    def upsert(
        self,
        sources: Source | Sequence[Source],
        branch: str = MAIN,
        *,
        fmt: str = "auto",
        delete_when: str | None = None,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
        txn: Txn | Sequence[Txn] | None = None,
        on_object: Callable[[ObjectMeta], None] | None = None,
    ) -> UpsertResult:
        """Upsert ``sources`` into ``branch`` in one commit: a row whose pool key is live
        replaces it, new keys are inserted, rows matching ``delete_when`` (a SQL boolean over
        the input) delete their key; the last row per key in input order wins; null keys
        never match and are inserted. Only objects whose key span meets an incoming key are
        read. ``.commit`` is None when nothing changes (:func:`lake_core.upsert.upsert`)."""
        from lake_core.upsert import upsert

        return upsert(
            self,
            _sources(sources),
            branch,
            fmt=fmt,
            delete_when=delete_when,
            author=author,
            message=message,
            meta=meta,
            txn=txn,
            on_object=on_object,
        )

    def add(
        self, sources: Source | Sequence[Source], branch: str = MAIN, *, fmt: str = "auto"
    ) -> Staged:
        """Write ``sources`` as staged work, not committed (``lake add``); commit it with
        :meth:`commit_staged` (:func:`lake_core.loading.stage`)."""
        from lake_core.loading import stage

        return stage(self, _sources(sources), branch, fmt=fmt)

    def staged(self) -> list[Staged]:
        """Staged work awaiting :meth:`commit_staged`, oldest first (``lake status``)."""
        from lake_core.loading import list_staged

        return list_staged(self)

    def commit_staged(
        self,
        staged_ids: Sequence[str],
        branch: str = MAIN,
        *,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        """Commit staged work (several ids: one commit), then forget it
        (:func:`lake_core.loading.commit_staged`)."""
        from lake_core.loading import commit_staged

        return commit_staged(self, staged_ids, branch, author=author, message=message, meta=meta)

    def delete(
        self,
        where: str | None = None,
        branch: str = MAIN,
        *,
        ids: Sequence[str] | None = None,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        """Delete the rows matching ``where`` (rewriting only the objects that hold them), or
        the objects ``ids``, in one commit (:mod:`lake_core.changes`). Exactly one of the two.
        No matching row raises NoRowsMatchedError (an EmptyTransactionError); nothing is
        committed."""
        from lake_core.changes import delete_objects, delete_where

        if (where is None) == (ids is None):
            raise UsageError("give either where or ids, not both or neither")
        if where is not None:
            return delete_where(self, where, branch, author=author, message=message, meta=meta)
        assert ids is not None
        return delete_objects(self, list(ids), branch, author=author, message=message, meta=meta)

    def merge(
        self,
        source: str,
        into: str = MAIN,
        *,
        resolve: str | None = None,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        """Apply ``source``'s changes since the merge base to ``into`` in one commit, three-way
        by rows; ``resolve`` (``theirs``/``ours``) settles conflicting rows
        (:func:`lake_core.changes.merge`)."""
        from lake_core.changes import merge

        return merge(self, source, into, author=author, message=message, meta=meta, resolve=resolve)

    def revert(
        self,
        commit_id: str,
        branch: str = MAIN,
        *,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        """Undo one commit's rows in a new commit on ``branch``, even after compaction
        (:func:`lake_core.changes.revert`)."""
        from lake_core.changes import revert

        return revert(self, commit_id, branch, author=author, message=message, meta=meta)

    @contextmanager
    def maintenance_lock(self, timeout: float | None = 600.0) -> Iterator[LockHandle]:
        """Hold the pool's maintenance lock (ZooKeeper when the lake is configured with it,
        else a local file lock), waiting up to ``timeout`` seconds. Pass the handle's
        ``check`` as ``guard`` to maintenance run inside the block."""
        if self._locks is None:
            raise UsageError(
                f"pool {self.name} was opened without its lake's locks: open it with "
                "Lake.pool(), or hold the maintenance lock yourself and pass guard="
            )
        with self._locks() as provider, provider.maintenance_lock(self.id, timeout=timeout) as held:
            yield held

    @contextmanager
    def _guarded(
        self, guard: Callable[[], None] | None, lock_timeout: float | None
    ) -> Iterator[Callable[[], None]]:
        """The commit guard for maintenance: the caller's (who holds the lock), else the check
        of the maintenance lock taken here for the block."""
        if guard is not None:
            yield guard
            return
        with self.maintenance_lock(lock_timeout) as held:
            yield held.check

    def optimize(
        self,
        branch: str = MAIN,
        *,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
        message: str = "",
        on_object: Callable[[ObjectMeta], None] | None = None,
    ) -> OptimizeResult:
        """Rewrite ``branch`` of an OTree pool as one tree in its latest revision when it holds
        unindexed objects, older revisions or split cubes; ``.commit`` is None when there was
        nothing to do. Takes the maintenance lock unless ``guard`` says the caller holds it
        (:func:`lake_core.otree.optimize.optimize`)."""
        from lake_core.otree.optimize import optimize

        with self._guarded(guard, lock_timeout) as check:
            return optimize(
                self, branch, guard=check, author=author, message=message, on_object=on_object
            )

    def compact(
        self,
        branch: str = MAIN,
        object_ids: Sequence[str] | None = None,
        *,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
        message: str = "",
        on_run: Callable[[int, int, CompactionRun], None] | None = None,
    ) -> CompactionResult:
        """LSM-compact ``branch``: ``object_ids`` merged together per partition, or what the
        policy picks; ``.commit`` is None when there was nothing to do. Takes the maintenance
        lock unless ``guard`` says the caller holds it
        (:func:`lake_core.maintenance.compact`)."""
        from lake_core.maintenance import compact

        ids = list(object_ids) if object_ids else None
        with self._guarded(guard, lock_timeout) as check:
            return compact(
                self, branch, ids, guard=check, author=author, message=message, on_run=on_run
            )

    def dedupe(
        self,
        branch: str = MAIN,
        *,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
        message: str = "",
    ) -> DedupeResult:
        """Remove duplicate keys from ``branch`` in one commit, keeping per key the row of the
        last commit; ``.commit`` is None when there was none. Under the maintenance lock
        (:mod:`lake_core.dedupe`)."""
        from lake_core.dedupe import dedupe

        with self._guarded(guard, lock_timeout) as check:
            return dedupe(self, branch, guard=check, author=author, message=message)

    def fragmentation(self, branch: str = MAIN) -> Fragmentation:
        """How far ``branch`` is from compacted (``lake objects --summary``)."""
        from lake_core.maintenance import fragmentation

        return fragmentation(self, branch)

    def retain(
        self,
        older_than: timedelta,
        branch: str = MAIN,
        *,
        now: datetime | None = None,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
    ) -> RetainResult:
        """Remove the rows whose time is before ``now - older_than`` in one commit; ``.commit``
        is None when none is. Under the maintenance lock (:mod:`lake_core.maintenance.retain`)."""
        from lake_core.maintenance import retain

        with self._guarded(guard, lock_timeout) as check:
            return retain(self, older_than, branch, now=now, guard=check, author=author)

    def partitions(
        self, ref: str | None = None, *, as_of: datetime | None = None
    ) -> list[PartitionInfo]:
        """The partitions of ``ref`` with their objects, rows and bytes, sorted by value."""
        from lake_core.maintenance import list_partitions

        return list_partitions(self, ref, as_of)

    def drop_partition(
        self,
        value: str,
        branch: str = MAIN,
        *,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
    ) -> Commit:
        """Delete every object of partition ``value`` in one metadata-only commit, under the
        maintenance lock (:func:`lake_core.maintenance.drop_partition`)."""
        from lake_core.maintenance import drop_partition

        with self._guarded(guard, lock_timeout) as check:
            return drop_partition(self, value, branch, guard=check, author=author)

    def rewrite_partition(
        self,
        value: str,
        sources: Source | Sequence[Source],
        branch: str = MAIN,
        *,
        fmt: str = "auto",
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
        txn: Txn | Sequence[Txn] | None = None,
    ) -> Commit:
        """Replace partition ``value``'s rows with ``sources`` atomically, under the
        maintenance lock (:func:`lake_core.maintenance.rewrite_partition`); ``txn``: the
        application transaction(s) it is (TxnCommittedError when one is in already)."""
        from lake_core.maintenance import rewrite_partition

        with self._guarded(guard, lock_timeout) as check:
            return rewrite_partition(
                self,
                value,
                _sources(sources),
                branch,
                fmt=fmt,
                guard=check,
                author=author,
                message=message,
                meta=meta,
                txn=txn,
            )

    def vacate(
        self,
        before: datetime,
        *,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
    ) -> VacateResult:
        """Cut the history older than ``before`` (data stays until :meth:`cleanup`), under the
        maintenance lock (:mod:`lake_core.maintenance.vacate`)."""
        from lake_core.maintenance import vacate

        with self._guarded(guard, lock_timeout) as check:
            return vacate(self, before, guard=check)

    def cleanup(
        self,
        grace: timedelta,
        *,
        dry_run: bool = False,
        now: datetime | None = None,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
    ) -> CleanupResult:
        """Delete what no retained commit, branch or staged work reaches, past ``grace`` (and
        the minimum orphan age), under the maintenance lock
        (:mod:`lake_core.maintenance.cleanup`)."""
        from lake_core.maintenance import cleanup

        with self._guarded(guard, lock_timeout) as check:
            return cleanup(self, grace, dry_run=dry_run, guard=check, now=now)

    def purge(
        self,
        commit_id: str,
        *,
        guard: Callable[[], None] | None = None,
        lock_timeout: float | None = 600.0,
    ) -> PurgeResult:
        """Danger zone: physically delete the data objects ``commit_id`` added, now, under the
        maintenance lock (:mod:`lake_core.maintenance.purge`)."""
        from lake_core.maintenance import purge

        with self._guarded(guard, lock_timeout) as check:
            return purge(self, commit_id, guard=check)


def _sources(sources: Source | Sequence[Source]) -> list[Source]:
    """One source or several, as a list (a path string is one source, not characters)."""
    if isinstance(sources, (str, Path, pa.Table)) or hasattr(sources, "read"):
        return [sources]  # type: ignore[list-item]
    return list(sources)
