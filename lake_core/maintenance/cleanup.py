"""Cleanup: physically delete what no retained commit, no branch and no staged work can reach.

What is *retained*: for every branch, the commits from its tip back to its tail (the commit
``vacate`` recorded; the root if history was never vacated). Every retained commit stays fully
readable after cleanup — time travel within the retained window never breaks (IceDB's cleanup
made time travel impossible). The *reachable* objects are the live objects of every tail's
snapshot, every object a retained commit added, and every object of staged work.

What goes:

- **tombstoned data**: an object no longer reachable that some commit deleted (or that a
  commit known to have landed added), whose tombstone is older than the grace period. The
  tombstone time is the date of the latest commit known to add or delete the object;
- **unreferenced data**: an object no landed commit mentions — a failed or killed load,
  compaction or rewrite (an *orphan*), or the data of a dropped branch — older than the grace
  period *and* than :data:`~lake_core.inflight.MIN_ORPHAN_AGE` (see "In-flight work");
- **commit metadata** (``<id>.json`` and ``<id>.snap``) of commits no branch retains — vacated
  history, race losers, commits of dropped branches — older than the grace period (and, for a
  commit not known to have landed, than the minimum orphan age), once every object the commit
  mentions is either reachable or gone (so a pending tombstone's date is never forgotten while
  its file remains). Kept: the cached snapshot and the commits that a retained commit's bounded
  opening path names (its ``snapshot_base`` and ``chain``; at most one snapshot and 31 commits
  per branch tail), so retained commits open as fast after cleanup as before;
- **journal entries** below the journal TAIL except entry TAIL-1, which readers fall back to
  when the HEAD hint is stale, once their time is older than :data:`VACATED_ENTRY_AGE` (24 h)
  and the grace period: a writer appends right after the head it saw lately without reading
  the journal first (:meth:`~lake_core.journal.Journal.fresh_head`), which is sound only
  while the entry after that head, if one was written, is still there to refuse it;
- **temp files** (``.tmp-*``) of writers killed mid-write on local disk, older than the minimum
  orphan age;
- **index objects** (:mod:`lake_core.indexes`) that no retained commit adds and no counted tail's
  snapshot holds, by the same ages as data: past the grace period from the latest commit known
  to add one, past the minimum orphan age when no commit names it (a build whose commit never
  landed, or one still in flight).

Staging documents are never removed, nor purge records, nor anything outside the pool.

Ages. A file's age counts from the latest of its modification time, the time stamped in its
KSUID name and the dates of the commits that mention it: taking the latest errs on the side of
keeping.

In-flight work. A load writes its objects, then a commit object, then the journal entry that
makes them reachable; ``lake add`` writes objects, then the staging document. Between the two,
the objects are unreferenced files exactly like a killed load's. Cleanup takes no lock that
writers take, so the race to close is: cleanup lists a file, judges it unreferenced, a commit
naming it lands, cleanup deletes it — and the load has been acknowledged with data that is gone.
It is closed by an order of reads and a pair of bounds:

1. Cleanup lists the store first, and only then reads staging and then the journal (``S`` and
   ``H``); right before deleting it reads staging and the journal once more (``S2`` then
   ``H2``) and re-plans with whatever landed meanwhile. Staging is read before the journal
   because ``commit`` of staged work lands its journal entry before it removes the staging
   document: a document gone at ``S2`` means its commit is in the journal at ``H2``. No vacate
   can cut a commit that landed after the listing (vacate needs the maintenance lock, which
   cleanup holds), so such a commit is retained at ``H2`` and the walk reaches what it adds.
2. Every writer that adds new objects reaches its commit point within
   :data:`~lake_core.inflight.WRITE_WINDOW` (12 h) of starting, or refuses to commit:
   ``load``'s and Spark load's commit guard, and ``stage`` before its staging document. An
   object's KSUID is stamped after its writer started, so the writer's last possible commit
   point for it is before ``ksuid + WRITE_WINDOW`` (plus an append in flight, plus skew).
3. Cleanup deletes an unreferenced file only if, at ``now`` (taken before ``S2``), it is older
   than ``MIN_ORPHAN_AGE`` (24 h) by its KSUID and modification time — whatever ``--grace``
   says. So any commit or staging document that references it landed before ``S2``/``H2``
   (24 h − 12 h leaves 12 h of margin for skew and a slow append), and the re-read in 1. finds
   it: a reference that exists is seen, and one that does not exist yet never will.

The same bound covers a pending commit object waiting for its append, a cached snapshot written
just before its commit object, and a temp file waiting for its rename. Tombstoned data needs no
such bound: it was deleted by a commit whose parent held it, so it landed once, and nothing
may re-add an object that no retained commit reaches (revert and merge must refuse vacated
history). Writers that rewrite objects under a lock or that the window does not cover (the
commands of :mod:`lake_core.changes` rewrite a few objects and commit within seconds) rely on
the 24 h minimum alone.

Concurrency with other maintenance: run under the pool's maintenance lock (cleanup, compaction,
vacate and purge then take turns); ``guard`` is the lock's ``check`` and runs right before the
first delete. Cleanup never writes to the journal, so it cannot race a commit into resurrecting
or duplicating rows (IceDB's cleanup rewrote its log and did).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from lake_core.clock import to_iso
from lake_core.commit import Commit
from lake_core.errors import CorruptObjectError, ObjectNotFoundError, UsageError
from lake_core.ids import is_ksuid
from lake_core.inflight import MIN_ORPHAN_AGE
from lake_core.loading import list_staged
from lake_core.names import TAIL_PREFIX
from lake_core.stores.base import ObjectInfo

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time

_READ_THREADS = 16

#: Deletes a batch of store keys (``ObjectStore.delete_many`` by default; Spark spreads them).
KeyDeleter = Callable[[Sequence[str]], Any]


@dataclass(frozen=True)
class CleanupResult:
    """What cleanup deleted (or, with ``dry_run``, would delete): a count and bytes per kind.

    ``pending`` counts unreachable data objects kept because they are still within the grace
    period or younger than the minimum orphan age; ``held`` counts data objects that some
    commit deleted but that retained history still reaches (a vacate before ``release_before``
    releases them); ``objects`` lists the ids of the data objects deleted (tombstoned and
    orphans; not in :meth:`to_json`, which stays one line however many there are)."""

    dry_run: bool
    now: datetime
    grace: timedelta
    tombstoned: int = 0
    tombstoned_bytes: int = 0
    orphans: int = 0
    orphans_bytes: int = 0
    commits: int = 0
    commits_bytes: int = 0
    snapshots: int = 0
    snapshots_bytes: int = 0
    journal_entries: int = 0
    journal_entries_bytes: int = 0
    temp_files: int = 0
    temp_files_bytes: int = 0
    index_files: int = 0
    index_files_bytes: int = 0
    pending: int = 0
    pending_bytes: int = 0
    held: int = 0
    held_bytes: int = 0
    release_before: datetime | None = None
    objects: tuple[str, ...] = ()

    _KINDS: ClassVar[tuple[str, ...]] = (
        "tombstoned",
        "orphans",
        "commits",
        "snapshots",
        "journal_entries",
        "temp_files",
        "index_files",
    )

    @property
    def files(self) -> int:
        """Files deleted, every kind together."""
        return sum(int(getattr(self, k)) for k in self._KINDS)

    @property
    def bytes(self) -> int:
        """Bytes deleted, every kind together."""
        return sum(int(getattr(self, f"{k}_bytes")) for k in self._KINDS)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dry_run": self.dry_run,
            "now": to_iso(self.now),
            "grace_seconds": self.grace.total_seconds(),
            "min_orphan_age_seconds": MIN_ORPHAN_AGE.total_seconds(),
        }
        for f in fields(self):
            if f.name not in ("dry_run", "now", "grace", "objects", "release_before"):
                out[f.name] = getattr(self, f.name)
        out["release_before"] = to_iso(self.release_before) if self.release_before else None
        out["files"] = self.files
        out["bytes"] = self.bytes
        return out


@dataclass
class _Inventory:
    """What the pool's directories hold, listed once."""

    data: dict[str, ObjectInfo] = field(default_factory=dict)  # object id → info
    commits: dict[str, ObjectInfo] = field(default_factory=dict)  # commit id → its .json
    snaps: dict[str, ObjectInfo] = field(default_factory=dict)  # commit id → its .snap
    entries: dict[int, ObjectInfo] = field(default_factory=dict)  # journal entry n → info
    temps: list[ObjectInfo] = field(default_factory=list)
    indexes: dict[str, ObjectInfo] = field(default_factory=dict)  # index id → its file


@dataclass
class _History:
    """Retained commits, the tails whose snapshots count, everything they reach, what staged
    work holds, and what every branch tip shows live."""

    retained: dict[str, Commit] = field(default_factory=dict)
    tails: set[str] = field(default_factory=set)
    reachable: set[str] = field(default_factory=set)
    staged: set[str] = field(default_factory=set)
    live: set[str] = field(default_factory=set)
    #: Index object ids a retained commit adds or a counted tail's snapshot holds.
    indexes: set[str] = field(default_factory=set)
    head: int = -1


def _mtime(info: ObjectInfo) -> datetime:
    return datetime.fromtimestamp(info.mtime, UTC)


def _id_time(name: str) -> datetime | None:
    """The creation time stamped in a KSUID name (second resolution), or None."""
    if not is_ksuid(name):
        return None
    try:
        from ksuid import Ksuid

        stamped: datetime = Ksuid.from_base62(name).datetime
    except (ValueError, TypeError, OverflowError):
        return None
    return stamped if stamped.tzinfo else stamped.replace(tzinfo=UTC)


def _latest(*times: datetime | None) -> datetime:
    return max(t for t in times if t is not None)


def _inventory(pool: Pool) -> _Inventory:
    inv = _Inventory()
    layout = pool.layout
    for info in pool.store.list(layout.data_dir):
        object_id = layout.parse_data(info.key)
        if object_id is not None:
            inv.data[object_id] = info
    for info in pool.store.list(layout.commits_dir):
        commit_id, kind = layout.parse_commit(info.key), inv.commits
        if commit_id is None:
            commit_id, kind = layout.parse_snapshot(info.key), inv.snaps
        if commit_id is not None and is_ksuid(commit_id):
            kind[commit_id] = info
    for info in pool.store.list(layout.index_dir):
        parsed = layout.parse_index(info.key)
        if parsed is not None:
            inv.indexes[parsed[2]] = info
    journal = layout.journal
    for info in pool.store.list(journal.dir):
        n = journal.parse_entry(info.key)
        if n is not None:
            inv.entries[n] = info
    list_temp_files = getattr(pool.store, "list_temp_files", None)
    if list_temp_files is not None:
        inv.temps = list(list_temp_files(layout.root))
    return inv


def _read_commits(pool: Pool, ids: Iterable[str]) -> dict[str, Commit]:
    """Every listed commit object that can still be read, fetched in parallel. Ones that vanished
    (a race loser discarding its commit) or cannot be decoded are left out: cleanup never
    deletes what it could not read."""

    def read(commit_id: str) -> Commit | None:
        key = pool.layout.commit(commit_id)
        try:
            commit = Commit.decode(key, pool.store.get(key))
        except (ObjectNotFoundError, CorruptObjectError):
            return None
        return commit if commit.id == commit_id else None

    ids = list(ids)
    if not ids:
        return {}
    with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(ids))) as ex:
        found = ex.map(read, ids)
        return {c.id: c for c in found if c is not None}


def _walk(
    pool: Pool, state: Mapping[str, Any], known: dict[str, Commit], history: _History
) -> None:
    """Add to ``history`` the commits each branch of journal ``state`` retains: from the tip back
    to the first tail (of any branch) on its line, or to the root; and what each tip shows live.

    Stopping at a tail, not at a date, matters: a commit that lands just after a vacate can
    carry a date before the vacate time, and it is still a branch tip. A retained commit whose
    object cannot be read aborts cleanup (NotFoundError): nothing is deleted on a guess."""
    stops = {v for k, v in state.items() if k.startswith(TAIL_PREFIX) and v}
    tips = [v for k, v in state.items() if not k.startswith("@") and v]
    for tip in tips:
        if tip not in history.retained:
            history.live.update(pool.snapshot(tip).objects)
        commit_id: str | None = tip
        while commit_id is not None and commit_id not in history.retained:
            commit = known.get(commit_id) or pool.read_commit(commit_id)
            known[commit_id] = commit
            history.retained[commit_id] = commit
            history.reachable.update(o.id for o in commit.adds())
            history.indexes.update(m.id for m in commit.index_adds())
            if commit_id in stops:
                if commit_id not in history.tails:
                    history.tails.add(commit_id)
                    tail = pool.snapshot(commit_id)
                    history.reachable.update(tail.objects)
                    history.indexes.update(m.id for m in tail.indexes.values())
                break
            commit_id = commit.parent


def _read_history(pool: Pool, known: dict[str, Commit], history: _History) -> None:
    """Staging, then the journal (the order the module docstring's argument needs), into
    ``history``; the journal is walked again only if it moved since the last read."""
    history.staged.update(o.id for s in list_staged(pool) for o in s.objects)
    head = pool.journal.read_head()
    if head.n != history.head:
        _walk(pool, head.state, known, history)
        history.head = head.n


def _landed(known: Mapping[str, Commit], history: _History) -> set[str]:
    """Commits known to have landed: the retained ones and the ancestors of every tail. Any
    other commit object may be a race loser or a commit still on its way to the journal."""
    landed = set(history.retained)
    for tail in history.tails:
        parent = history.retained[tail].parent
        while parent is not None and parent in known and parent not in landed:
            landed.add(parent)
            parent = known[parent].parent
    return landed


def _mentions(commit: Commit) -> list[str]:
    return [*(o.id for o in commit.adds()), *commit.deletes()]


@dataclass
class _Plan:
    tombstoned: list[ObjectInfo] = field(default_factory=list)
    orphans: list[ObjectInfo] = field(default_factory=list)
    pending: list[ObjectInfo] = field(default_factory=list)
    held: list[ObjectInfo] = field(default_factory=list)
    release_before: datetime | None = None
    objects: list[str] = field(default_factory=list)
    snapshots: list[ObjectInfo] = field(default_factory=list)
    commits: list[ObjectInfo] = field(default_factory=list)
    entries: list[ObjectInfo] = field(default_factory=list)
    temps: list[ObjectInfo] = field(default_factory=list)
    indexes: list[ObjectInfo] = field(default_factory=list)

    def empty(self) -> bool:
        return not (
            self.objects
            or self.commits
            or self.snapshots
            or self.entries
            or self.temps
            or self.indexes
        )


def _plan(
    inv: _Inventory,
    known: Mapping[str, Commit],
    history: _History,
    entries_below: int,
    cutoff: datetime,
    orphan_cutoff: datetime,
) -> _Plan:
    """Decide what goes (pure). ``cutoff`` is now minus the grace period; ``orphan_cutoff`` is
    the earlier of it and now minus the minimum orphan age."""
    plan = _Plan()
    landed = _landed(known, history)
    refs: dict[str, datetime] = {}  # object id → date of the latest commit mentioning it
    settled_refs: set[str] = set()  # deleted by some commit, or mentioned by a landed one
    for commit in known.values():
        for oid in _mentions(commit):
            seen = refs.get(oid)
            if seen is None or commit.date > seen:
                refs[oid] = commit.date
        settled_refs.update(commit.deletes())
        if commit.id in landed:
            settled_refs.update(o.id for o in commit.adds())

    keep = history.reachable | history.staged
    gone: set[str] = set()
    for oid, info in sorted(inv.data.items()):
        if oid in keep:
            continue
        age_from = _latest(_mtime(info), _id_time(oid), refs.get(oid))
        if age_from > (cutoff if oid in settled_refs else orphan_cutoff):
            plan.pending.append(info)
            continue
        (plan.tombstoned if oid in refs else plan.orphans).append(info)
        plan.objects.append(oid)
        gone.add(oid)

    # Deleted by a commit, not live on any branch, but still reached by retained history: only
    # a vacate releases these. A vacate at or after the latest retained commit deleting one of
    # them releases them all.
    held = {oid for oid in history.reachable - history.live - history.staged if oid in inv.data}
    for commit in history.retained.values():
        hit = held.intersection(commit.deletes())
        if hit and (plan.release_before is None or commit.date > plan.release_before):
            plan.release_before = commit.date
    plan.held = [inv.data[oid] for oid in sorted(held)]

    # Metadata a retained commit's fast opening path names: its cached-snapshot base and the
    # commits of its chain (below the tail these are the same for every retained commit).
    pinned_snaps: set[str] = set()
    pinned_commits: set[str] = set()
    for kept in history.retained.values():
        if kept.snapshot_base and kept.snapshot_base not in history.retained:
            pinned_snaps.add(kept.snapshot_base)
        pinned_commits.update(c for c in kept.chain if c not in history.retained)

    def settled(commit: Commit) -> bool:
        """Nothing this commit says is still needed to judge a data file that remains."""
        return all(
            oid in history.reachable or oid in gone or oid not in inv.data
            for oid in _mentions(commit)
        )

    reclaimed: set[str] = set()
    for cid, info in sorted(inv.commits.items()):
        if cid in history.retained or cid in pinned_commits:
            continue
        found = known.get(cid)
        if found is None:
            continue  # unreadable: never delete what we could not read
        limit = cutoff if cid in landed else orphan_cutoff
        if _latest(_mtime(info), _id_time(cid), found.date) > limit or not settled(found):
            continue
        plan.commits.append(info)
        reclaimed.add(cid)
    for cid, info in sorted(inv.snaps.items()):
        if cid in history.retained or cid in pinned_snaps:
            continue
        # A snapshot without its commit object may be one written just before it (a commit
        # caching its snapshot lands the .snap first): an orphan by age only.
        if cid in reclaimed or (
            cid not in inv.commits and _latest(_mtime(info), _id_time(cid)) <= orphan_cutoff
        ):
            plan.snapshots.append(info)

    # Index objects no retained commit adds and no counted tail holds: by the same ages as
    # data (one a landed commit added waits out the grace period from the latest commit that
    # names it; one no landed commit names — a build whose commit never landed, or is still
    # in flight — the minimum orphan age). Nothing else refers to an index object.
    index_refs: dict[str, datetime] = {}
    index_landed: set[str] = set()  # added by a commit known to have landed
    for commit in known.values():
        for meta in commit.index_adds():
            seen = index_refs.get(meta.id)
            if seen is None or commit.date > seen:
                index_refs[meta.id] = commit.date
            if commit.id in landed:
                index_landed.add(meta.id)
    for iid, info in sorted(inv.indexes.items()):
        if iid in history.indexes:
            continue
        # A commit object that has not landed may still be on its way to the journal: its
        # index files wait out the minimum orphan age, as its data does.
        limit = cutoff if iid in index_landed else orphan_cutoff
        if _latest(_mtime(info), _id_time(iid), index_refs.get(iid)) <= limit:
            plan.indexes.append(info)

    plan.entries = [info for n, info in sorted(inv.entries.items()) if n < entries_below]
    plan.temps = [info for info in inv.temps if _mtime(info) <= orphan_cutoff]
    return plan


#: Youngest vacated journal entry cleanup may delete (see the module docstring): far beyond
#: how long a writer trusts a head it saw (``journal.TRUST_HEAD_FOR``) plus clock skew.
VACATED_ENTRY_AGE = MIN_ORPHAN_AGE


def _old_vacated_entries(pool: Pool, inv: _Inventory, cutoff: datetime) -> int:
    """The journal entries that may go are those numbered below the returned number: below
    TAIL-1 (entry TAIL-1 stays: Journal.read_head falls back to it when the HEAD hint is
    stale) and written at or before ``cutoff`` (see the module docstring). Entry times
    never decrease with the number, so the last old one is found by bisection: a few reads,
    however long the vacated history."""
    below = pool.journal.read_tail() - 1
    numbers = sorted(n for n in inv.entries if n < below)
    lo, hi = 0, len(numbers)  # invariant: numbers[:lo] are old, numbers[hi:] are not
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            ts = pool.journal.read_entry(numbers[mid]).ts
        except (ObjectNotFoundError, CorruptObjectError):
            ts = None  # unreadable where probed: it and everything after it stay
        if ts is not None and ts <= cutoff:
            lo = mid + 1
        else:
            hi = mid
    return numbers[lo - 1] + 1 if lo else 0


def cleanup(
    pool: Pool,
    grace: timedelta,
    *,
    dry_run: bool = False,
    guard: Callable[[], None] | None = None,
    now: datetime | None = None,
    delete_keys: KeyDeleter | None = None,
) -> CleanupResult:
    """Delete tombstoned and orphaned data past ``grace``, and the metadata of history no branch
    retains; see the module docstring. Unreferenced files also wait out the minimum orphan age
    (:data:`~lake_core.inflight.MIN_ORPHAN_AGE`), whatever ``grace`` is. ``now`` defaults to the
    pool's clock. With ``dry_run`` nothing is deleted and the result reports what would be.
    ``guard`` (the maintenance lock's ``check``) runs right before the first delete; if it
    raises, nothing is deleted. ``delete_keys`` deletes a batch of keys (default: the store's
    ``delete_many``; the Spark path spreads them over tasks)."""
    if grace < timedelta(0):
        raise UsageError(f"grace period must not be negative, not {grace}")
    now = now or pool.clock.now()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)  # naive times are UTC, as everywhere in the lake
    cutoff = now - grace
    orphan_cutoff = min(cutoff, now - MIN_ORPHAN_AGE)

    # List first; staging and the journal are read only afterwards (module docstring, 1.).
    inv = _inventory(pool)
    known = _read_commits(pool, inv.commits)
    entries_below = _old_vacated_entries(pool, inv, min(cutoff, now - VACATED_ENTRY_AGE))
    history = _History()
    _read_history(pool, known, history)
    plan = _plan(inv, known, history, entries_below, cutoff, orphan_cutoff)
    if not plan.empty():
        if not dry_run and guard is not None:
            guard()
        # Re-read staging and the journal right before deleting: whatever landed while we
        # planned is kept. (Dry runs re-read too, so they report what a real run would do.)
        _read_history(pool, known, history)
        plan = _plan(inv, known, history, entries_below, cutoff, orphan_cutoff)
    if not dry_run and not plan.empty():
        store = pool.store
        delete = delete_keys or store.delete_many
        # Data first: if we die midway, the commits that date the remaining tombstones are
        # still there for the next run.
        for keys in (
            [pool.layout.data(oid) for oid in plan.objects],
            [i.key for i in plan.indexes],
            [i.key for i in plan.snapshots],
            [i.key for i in plan.commits],
            [i.key for i in plan.entries],
        ):
            if keys:
                delete(keys)
        for info in plan.temps:
            store.delete(info.key)

    def size(infos: list[ObjectInfo]) -> int:
        return sum(i.size for i in infos)

    return CleanupResult(
        dry_run=dry_run,
        now=now,
        grace=grace,
        tombstoned=len(plan.tombstoned),
        tombstoned_bytes=size(plan.tombstoned),
        orphans=len(plan.orphans),
        orphans_bytes=size(plan.orphans),
        commits=len(plan.commits),
        commits_bytes=size(plan.commits),
        snapshots=len(plan.snapshots),
        snapshots_bytes=size(plan.snapshots),
        journal_entries=len(plan.entries),
        journal_entries_bytes=size(plan.entries),
        temp_files=len(plan.temps),
        temp_files_bytes=size(plan.temps),
        index_files=len(plan.indexes),
        index_files_bytes=size(plan.indexes),
        pending=len(plan.pending),
        pending_bytes=size(plan.pending),
        held=len(plan.held),
        held_bytes=size(plan.held),
        release_before=plan.release_before,
        objects=tuple(plan.objects),
    )


__all__ = ["CleanupResult", "KeyDeleter", "cleanup"]
