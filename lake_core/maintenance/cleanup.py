"""Cleanup: physically delete what no retained commit, no branch and no staged work can reach.

What is *retained*: for every branch, the commits from its tip back to its tail (the commit
``vacate`` recorded; the root if history was never vacated). Every retained commit stays fully
readable after cleanup — time travel within the retained window never breaks (IceDB's cleanup
made time travel impossible). The *reachable* objects are the live objects of every tail's
snapshot, every object a retained commit added, and every object of staged work.

What goes:

- **tombstoned data**: an object no longer reachable, whose tombstone is older than the grace
  period. The tombstone time is the date of the latest commit known to add or delete the object
  (normally the commit that deleted it; for data of a dropped branch, the commit that added it);
- **orphan data**: an object no commit ever referenced (a failed or killed load, compaction or
  rewrite), older than the grace period;
- **commit metadata** (``<id>.json`` and ``<id>.snap``) of commits no branch retains — vacated
  history, race losers, commits of dropped branches — older than the grace period, once every
  object the commit mentions is either reachable or gone (so a pending tombstone's date is never
  forgotten while its file remains). Kept: the cached snapshot and the commits that a retained
  commit's bounded opening path names (its ``snapshot_base`` and ``chain``; at most one snapshot
  and 31 commits per branch tail), so retained commits open as fast after cleanup as before;
- **journal entries** below the journal TAIL except entry TAIL-1, which readers fall back to
  when the HEAD hint is stale;
- **temp files** (``.tmp-*``) of writers killed mid-write on local disk, older than the grace.

Staging documents are never removed, nor purge records, nor anything outside the pool.

Ages. An object's or a metadata file's age counts from the latest of its modification time,
the time stamped in its KSUID name and the dates of the commits that mention it. Taking the
latest errs on the side of keeping: a file a running writer has just written is young by every
measure. The grace period is what protects work in flight — a load's objects exist before the
commit that references them, a commit object exists before the journal entry that makes it
reachable — so it must exceed the longest such window (minutes in practice; never 0 while
anything else writes to the pool).

Concurrency. Run under the pool's maintenance lock (cleanup, compaction, vacate and purge then
take turns); ``guard`` is the lock's ``check`` and runs right before the first delete. Loads,
deletes, merges and branch changes keep committing meanwhile. The plan reads staging *before*
the journal (work committed from staging meanwhile is then found in the journal), and re-reads
the journal after planning: commits that landed meanwhile are walked too and whatever they
reach is kept. Cleanup never writes to the journal, so it cannot race a commit into resurrecting
or duplicating rows (IceDB's cleanup rewrote its log and did).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from lake_core.clock import to_iso
from lake_core.commit import Commit, commit_key
from lake_core.errors import CorruptObjectError, ObjectNotFoundError, UsageError
from lake_core.ids import is_ksuid
from lake_core.loading import list_staged
from lake_core.objects import OBJECT_SUFFIX, data_key
from lake_core.pool import TAIL_PREFIX, Pool
from lake_core.stores.base import ObjectInfo

_READ_THREADS = 16
_ENTRY_RE = re.compile(r"^([0-9]+)\.json$")


@dataclass(frozen=True)
class CleanupResult:
    """What cleanup deleted (or, with ``dry_run``, would delete): a count and bytes per kind.

    ``pending`` counts unreachable data objects kept because they are still within the grace
    period; ``objects`` lists the ids of the data objects deleted (tombstoned and orphans; not
    in :meth:`to_json`, which stays one line however many there are)."""

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
    pending: int = 0
    pending_bytes: int = 0
    objects: tuple[str, ...] = ()

    _KINDS: ClassVar[tuple[str, ...]] = (
        "tombstoned",
        "orphans",
        "commits",
        "snapshots",
        "journal_entries",
        "temp_files",
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
        }
        for f in fields(self):
            if f.name not in ("dry_run", "now", "grace", "objects"):
                out[f.name] = getattr(self, f.name)
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


@dataclass
class _History:
    """Retained commits, the tails whose snapshots count, and everything they reach."""

    retained: dict[str, Commit] = field(default_factory=dict)
    tails: set[str] = field(default_factory=set)
    reachable: set[str] = field(default_factory=set)


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
    base = f"pools/{pool.id}/"
    data_prefix = f"{base}data/"
    for info in pool.store.list(data_prefix):
        name = info.key[len(data_prefix) :]
        if "/" not in name and name.endswith(OBJECT_SUFFIX):
            inv.data[name[: -len(OBJECT_SUFFIX)]] = info
    commits_prefix = f"{base}commits/"
    for info in pool.store.list(commits_prefix):
        name = info.key[len(commits_prefix) :]
        stem, dot, ext = name.rpartition(".")
        if "/" in name or not dot or not is_ksuid(stem):
            continue
        if ext == "json":
            inv.commits[stem] = info
        elif ext == "snap":
            inv.snaps[stem] = info
    entries_prefix = f"{pool.journal.prefix}/"
    for info in pool.store.list(entries_prefix):
        m = _ENTRY_RE.match(info.key[len(entries_prefix) :])
        if m:
            inv.entries[int(m.group(1))] = info
    list_temp_files = getattr(pool.store, "list_temp_files", None)
    if list_temp_files is not None:
        inv.temps = list(list_temp_files(base))
    return inv


def _read_commits(pool: Pool, ids: Iterable[str]) -> dict[str, Commit]:
    """Every listed commit object that can still be read, fetched in parallel. Ones that vanished
    (a race loser discarding its commit) or cannot be decoded are left out: cleanup never
    deletes what it could not read."""

    def read(commit_id: str) -> Commit | None:
        key = commit_key(pool.id, commit_id)
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
    to the first tail (of any branch) on its line, or to the root.

    Stopping at a tail, not at a date, matters: a commit that lands just after a vacate can
    carry a date before the vacate time, and it is still a branch tip. A retained commit whose
    object cannot be read aborts cleanup (NotFoundError): nothing is deleted on a guess."""
    stops = {v for k, v in state.items() if k.startswith(TAIL_PREFIX) and v}
    tips = [v for k, v in state.items() if not k.startswith("@") and v]
    for tip in tips:
        commit_id: str | None = tip
        while commit_id is not None and commit_id not in history.retained:
            commit = known.get(commit_id) or pool.read_commit(commit_id)
            known[commit_id] = commit
            history.retained[commit_id] = commit
            history.reachable.update(o.id for o in commit.adds())
            if commit_id in stops:
                if commit_id not in history.tails:
                    history.tails.add(commit_id)
                    history.reachable.update(pool.snapshot(commit_id).objects)
                break
            commit_id = commit.parent


def _references(known: Mapping[str, Commit]) -> dict[str, datetime]:
    """Object id → date of the latest known commit that adds or deletes it."""
    refs: dict[str, datetime] = {}
    for commit in known.values():
        for oid in [*(o.id for o in commit.adds()), *commit.deletes()]:
            seen = refs.get(oid)
            if seen is None or commit.date > seen:
                refs[oid] = commit.date
    return refs


def _mentions(commit: Commit) -> list[str]:
    return [*(o.id for o in commit.adds()), *commit.deletes()]


@dataclass
class _Plan:
    tombstoned: list[ObjectInfo] = field(default_factory=list)
    orphans: list[ObjectInfo] = field(default_factory=list)
    pending: list[ObjectInfo] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)
    snapshots: list[ObjectInfo] = field(default_factory=list)
    commits: list[ObjectInfo] = field(default_factory=list)
    entries: list[ObjectInfo] = field(default_factory=list)
    temps: list[ObjectInfo] = field(default_factory=list)


def _plan(
    inv: _Inventory,
    known: Mapping[str, Commit],
    history: _History,
    journal_tail: int,
    cutoff: datetime,
) -> _Plan:
    plan = _Plan()
    refs = _references(known)
    gone: set[str] = set()
    for oid, info in sorted(inv.data.items()):
        if oid in history.reachable:
            continue
        age_from = _latest(_mtime(info), _id_time(oid), refs.get(oid))
        if age_from > cutoff:
            plan.pending.append(info)
            continue
        (plan.tombstoned if oid in refs else plan.orphans).append(info)
        plan.objects.append(oid)
        gone.add(oid)

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
        commit = known.get(cid)
        if commit is None:
            continue  # unreadable: never delete what we could not read
        if _latest(_mtime(info), _id_time(cid), commit.date) > cutoff or not settled(commit):
            continue
        plan.commits.append(info)
        reclaimed.add(cid)
    for cid, info in sorted(inv.snaps.items()):
        if cid in history.retained or cid in pinned_snaps:
            continue
        if cid in reclaimed or (
            cid not in inv.commits and _latest(_mtime(info), _id_time(cid)) <= cutoff
        ):
            plan.snapshots.append(info)

    # Entry TAIL-1 stays: Journal.read_head falls back to it when the HEAD hint is stale.
    plan.entries = [info for n, info in sorted(inv.entries.items()) if n < journal_tail - 1]
    plan.temps = [info for info in inv.temps if _mtime(info) <= cutoff]
    return plan


def cleanup(
    pool: Pool,
    grace: timedelta,
    *,
    dry_run: bool = False,
    guard: Callable[[], None] | None = None,
    now: datetime | None = None,
) -> CleanupResult:
    """Delete tombstoned and orphaned data past ``grace``, and the metadata of history no branch
    retains; see the module docstring. ``now`` defaults to the pool's clock. With ``dry_run``
    nothing is deleted and the result reports what would be. ``guard`` (the maintenance lock's
    ``check``) runs right before the first delete; if it raises, nothing is deleted."""
    if grace < timedelta(0):
        raise UsageError(f"grace period must not be negative, not {grace}")
    now = now or pool.clock.now()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)  # naive times are UTC, as everywhere in the lake
    cutoff = now - grace

    # Staging before the journal: work committed from staging meanwhile is in the journal.
    staged = {o.id for s in list_staged(pool) for o in s.objects}
    inv = _inventory(pool)
    known = _read_commits(pool, inv.commits)
    history = _History(reachable=set(staged))
    head = pool.journal.read_head()
    journal_tail = pool.journal.read_tail()
    _walk(pool, head.state, known, history)
    # Commits that landed while we listed and read are walked too; what they reach is kept.
    # What lands after this read is younger than the grace period.
    latest = pool.journal.read_head()
    if latest.n != head.n:
        _walk(pool, latest.state, known, history)

    plan = _plan(inv, known, history, journal_tail, cutoff)
    if not dry_run and (
        plan.objects or plan.commits or plan.snapshots or plan.entries or plan.temps
    ):
        if guard is not None:
            guard()
        store = pool.store
        # Data first: if we die midway, the commits that date the remaining tombstones are
        # still there for the next run.
        store.delete_many([data_key(pool.id, oid) for oid in plan.objects])
        store.delete_many([i.key for i in plan.snapshots])
        store.delete_many([i.key for i in plan.commits])
        store.delete_many([i.key for i in plan.entries])
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
        pending=len(plan.pending),
        pending_bytes=size(plan.pending),
        objects=tuple(plan.objects),
    )


__all__ = ["CleanupResult", "cleanup"]
