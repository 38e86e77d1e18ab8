"""The commit protocol: a commit request, planned against the branch tip, made the tip by one
journal append; and the one rule for what a failed write leaves behind.

The steps (see docs/architecture.md, "The commit protocol"):

1. Data objects are already written (unique KSUID names, atomic puts): invisible until step 4.
2. Read the branch journal's last entry (HEAD hint, probed forward) → the branch tip (parent);
   a handle that saw the last entry lately (:meth:`~lake_core.journal.Journal.fresh_head`)
   takes that one without a read, and step 4 finds out if it was not the last any more.
3. :func:`plan_commit` — pure — checks the request against the parent's snapshot: deleting an
   object that is no longer live is a conflict; adds never conflict; the incoming schema must
   unify with the pool's; an upsert's request (``keys``) conflicts with a live object it did
   not read whose key span meets its keys (:func:`check_unread`). It returns the commit object, which is written under a fresh KSUID
   (and, every :data:`~lake_core.commit.SNAPSHOT_INTERVAL` commits, its cached snapshot first).
4. Append journal entry N+1 moving the branch to the new commit, with put-if-missing. Winning
   that put is the commit point. Losing it means someone else appended N+1: re-read, re-plan
   (the rebase) and retry with jittered backoff, within the retry budget.

Unknown outcomes. A lost race is *proven* (entry N+1 read back holds another writer's commit)
before the commit object is dropped. Any other failure of the append leaves the outcome open:
entry N+1 is read back; ours is success, anything short of proof is CommitStateUnknownError.
The three rules, which tests/core/test_faults.py, test_concurrency.py, test_crash.py and
test_journal_lock.py hold:

- nothing is discarded while an outcome is unknown (:func:`discarding_on_failure` keeps the
  data objects, :func:`commit` keeps the commit object);
- a failed read-back is "unknown", never "lost";
- a re-read that finds the branch at our pending commit means we won.

Anything a failed or abandoned attempt wrote is unreferenced: cleanup removes it after a grace
period. No step ever overwrites a file other than the HEAD hint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.commit import SNAPSHOT_INTERVAL, Add, AddIndex, Commit, Delete, DeleteIndex
from lake_core.errors import (
    BranchNotFoundError,
    CatalogConflictError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptObjectError,
    DurabilityUnknownError,
    EmptyTransactionError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
    RetriesExhaustedError,
    WriteWindowExpiredError,
)
from lake_core.ids import new_id
from lake_core.indexes.meta import IndexMeta
from lake_core.ingest.schema import unify_schema
from lake_core.journal import JournalEntry, Mark
from lake_core.keyset import KeySet
from lake_core.objects import ObjectMeta
from lake_core.schema_mode import check_new_columns
from lake_core.snapshot import Snapshot, apply_commit, check_actions
from lake_core.stores.base import SyncBatch
from lake_core.txn import TXN_FIELD, Txn, check_txns, encode_txns, pending

if TYPE_CHECKING:
    from lake_core.pool import Pool  # Pool.commit delegates here: no import back at run time


@dataclass(frozen=True)
class CommitRequest:
    """What a writer asks to commit to ``branch``: objects to add (already written) and ids to
    delete, with the commit's message and metadata. Immutable: every attempt of the protocol
    plans the same request against whatever tip it finds.

    ``incoming_schema``: the schema of the added rows, unified into the pool's (checked against
    the pool's schema mode). ``source`` names the input in schema errors. ``extra``: the
    commit's structured fields (:data:`~lake_core.commit.EXTRA_FIELDS`). ``prune_columns``:
    drop from the pool schema the columns no live object carries after this commit (a revert
    that removes the only rows of a column removes the column) — decided against the parent
    the commit lands on, so a concurrent load's new column is never dropped. ``txns``: the
    application transactions it lands (:mod:`lake_core.txn`), recorded in its fields.
    ``carried_txns``: transactions another branch recorded that this commit brings over (a
    merge): never refused, recorded only where they are above the parent's version.

    ``keys`` and ``read_ids`` (an upsert, :mod:`lake_core.upsert`): the keys the request
    changes and the objects its plan read. The request applies only to a parent where every
    live object whose key span meets ``keys`` is one of ``read_ids`` (:func:`check_unread`):
    otherwise rows with those keys may sit in an object the plan never saw.

    ``index_adds`` and ``index_deletes`` (``(object, rule)``): index entries the commit adds
    and removes (:mod:`lake_core.indexes`). Against whatever parent it lands on, an added entry
    whose object is no longer live (a racing compaction took it) or that the parent already
    holds for the same rule definition is left out, as is a removal of an entry the parent
    lacks; the index entries of every object the commit deletes are removed with it."""

    branch: str
    adds: tuple[ObjectMeta, ...] = ()
    deletes: tuple[str, ...] = ()
    author: str = ""
    message: str = ""
    meta: Any = None
    incoming_schema: pa.Schema | None = None
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    prune_columns: bool = False
    txns: tuple[Txn, ...] = ()
    carried_txns: tuple[Txn, ...] = ()
    keys: KeySet | None = None
    read_ids: frozenset[str] = frozenset()
    index_adds: tuple[IndexMeta, ...] = ()
    index_deletes: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.adds or self.deletes or self.index_adds or self.index_deletes)


def plan_commit(
    request: CommitRequest,
    parent: Snapshot,
    parent_commit: Commit | None,
    *,
    commit_id: str,
    date: datetime,
    attempt: int,
    schema_mode: str,
    pool_name: str,
) -> Commit:
    """The commit ``request`` makes on top of ``parent`` (the snapshot of ``parent_commit``,
    None for an empty branch). Pure: no I/O; the id and date are given.

    Raises CommitConflictError (a deleted object is no longer live, an added one already is,
    an upsert's keys meet a live object its plan did not read),
    TxnCommittedError (one of its application transactions is recorded already),
    SchemaConflictError and SchemaModeError: whatever makes the request not apply to this
    parent. The commit caches its snapshot (``has_snapshot``) every SNAPSHOT_INTERVAL commits;
    otherwise it names the nearest cached snapshot and the commits since (``chain``), so
    opening it costs a bounded number of reads."""
    adds, deletes = request.adds, request.deletes
    check_actions(parent, [o.id for o in adds], deletes)
    if request.keys is not None:
        check_unread(parent, request.keys, request.read_ids)
    # Against the parent this attempt lands on: a racing writer of the same transaction that
    # won the append is seen here on the retry, and this one commits nothing.
    check_txns(parent.txns, request.txns)
    own = {t.app for t in request.txns}
    txns = (
        *request.txns,
        # Max per app id against this parent: a version the target reached meanwhile wins.
        *(t for t in pending(parent.txns, request.carried_txns) if t.app not in own),
    )
    schema = None
    incoming = request.incoming_schema
    if incoming is not None and len(incoming) > 0:
        # Re-checked against the tip this commit lands on: racing first loads into a strict
        # pool must not union their columns.
        check_new_columns(schema_mode, pool_name, parent.schema, incoming, request.source)
        unified = unify_schema(parent.schema, incoming, request.source)
        if parent.schema is None or not unified.equals(parent.schema):
            schema = unified
    if request.prune_columns:
        current = schema if schema is not None else parent.schema
        if current is not None:
            gone = set(deletes)
            carried = {c for o in parent.objects.values() if o.id not in gone for c in o.columns}
            carried.update(c for o in adds for c in o.columns)
            pruned = pa.schema([f for f in current if f.name in carried])
            if len(pruned) < len(current) and len(pruned) > 0:
                schema = pruned
    chain: tuple[str, ...]
    base: str | None
    if parent_commit is None:
        base, chain = None, ()
    elif parent_commit.has_snapshot:
        base, chain = parent_commit.id, ()
    else:
        base, chain = parent_commit.snapshot_base, (*parent_commit.chain, parent_commit.id)
    has_snapshot = len(chain) >= SNAPSHOT_INTERVAL - 1
    rows = {
        "added": sum(o.count for o in adds),
        "removed": sum(parent.objects[i].count for i in deletes),
    }
    index_actions = plan_index_actions(request, parent)
    if not (adds or deletes or index_actions) and request.keys is None:
        raise EmptyTransactionError("nothing to commit: every index change is in already")
    return Commit(
        id=commit_id,
        parent=parent.commit_id,
        depth=parent.depth + 1,
        author=request.author,
        date=date,
        message=request.message,
        meta=request.meta,
        actions=(*(Delete(i) for i in deletes), *(Add(o) for o in adds), *index_actions),
        schema=schema,
        snapshot_base=None if has_snapshot else base,
        chain=() if has_snapshot else chain,
        has_snapshot=has_snapshot,
        retries=attempt,
        extra={
            **request.extra,
            **({TXN_FIELD: encode_txns(txns)} if txns else {}),
            "rows": rows,
        },
    )


def plan_index_actions(request: CommitRequest, parent: Snapshot) -> list[AddIndex | DeleteIndex]:
    """The index actions of ``request`` on ``parent`` (see :class:`CommitRequest`): removals
    first (the deleted objects' entries, then the requested ones the parent holds), then
    additions for objects live after the commit."""
    gone = set(request.deletes)
    out: list[AddIndex | DeleteIndex] = []
    if parent.indexes:
        if gone:
            out.extend(DeleteIndex(o, r) for (o, r) in parent.indexes if o in gone)
        out.extend(
            DeleteIndex(o, r)
            for (o, r) in dict.fromkeys(request.index_deletes)
            if (o, r) in parent.indexes and o not in gone
        )
    added = {o.id for o in request.adds}
    for meta in request.index_adds:
        if meta.object not in added and (meta.object not in parent.objects or meta.object in gone):
            continue  # its object left meanwhile: the index file is an orphan for cleanup
        held = parent.indexes.get(meta.slot)
        if held is not None and held.rule_id == meta.rule_id:
            continue  # a racing ``index apply`` indexed it already
        if held is not None and meta.object not in added:
            # An entry of the rule's earlier definition (dropped, re-created): replaced, and
            # the commit says so.
            out.append(DeleteIndex(*meta.slot))
        out.append(AddIndex(meta))
    return out


def check_unread(parent: Snapshot, keys: KeySet, read_ids: frozenset[str]) -> None:
    """Raise CommitConflictError when a live object of ``parent`` that is not in
    ``read_ids`` has a key span meeting ``keys``: a commit that landed after the upsert
    planned added rows it may replace, so the upsert must re-plan. Objects it read and does not
    delete hold none of the keys (they are immutable), so whether they are still live does not
    matter; the ones it deletes are checked by :func:`~lake_core.snapshot.check_actions`."""
    if not keys:
        return
    for obj in parent.objects.values():
        if obj.id not in read_ids and keys.meets(obj):
            raise CommitConflictError(
                f"object {obj.id}, committed after this change was planned, holds keys it writes"
            )


def commit(
    pool: Pool,
    request: CommitRequest,
    guard: Callable[[], None] | None = None,
    durable_first: SyncBatch | None = None,
) -> Commit:
    """Make ``request`` the tip of its branch atomically; see the module docstring.

    ``durable_first``: the batch the request's data objects were written into without fsync
    (:meth:`~lake_core.stores.base.ObjectStore.deferring`). The commit object (and snapshot)
    join it, and the journal append makes all of it durable before the entry's name exists:
    the small-commit path (docs/architecture.md, "Which fsync protects what"). None: a fresh
    batch for the commit's own objects.

    Raises EmptyTransactionError (nothing to do), BranchNotFoundError, CommitConflictError (a
    deleted object is gone; nothing committed), SchemaConflictError, RetriesExhaustedError,
    CommitStateUnknownError. ``guard`` runs right before every append (the commit point):
    maintenance passes its lock's ``check`` so a lost lock aborts the commit."""
    if request.empty and not (request.txns and request.keys is not None):
        # An upsert's request (``keys``) with no actions but an application transaction still
        # commits: it records the transaction, so a redelivered change feed is refused rather
        # than applied again after later commits (lake_core.upsert). Other writers keep
        # EmptyTransactionError.
        raise EmptyTransactionError("nothing to commit")
    branch = request.branch
    retry = pool.lake_config.retry
    batch = durable_first if durable_first is not None else SyncBatch()
    pending: Commit | None = None
    # Invariant: ``pending`` is only ever discarded while no journal entry can point at it:
    # every earlier append of it was proven lost (its entry number holds another writer's
    # entry). From the moment an append starts until it is proven lost, the outcome is open:
    # whatever escapes then (a store failure, Ctrl-C) is CommitStateUnknownError and the
    # commit object is kept.
    in_flight = False
    try:
        for attempt in range(retry.max_attempts):
            # A first attempt appends right after the head this handle saw last, if it saw it
            # lately: the append's put-if-missing is the check (lake_core.journal), so a
            # writer's next commit reads nothing first. Retries read the journal.
            head = pool.journal.fresh_head() if attempt == 0 else None
            unread = head is not None and branch in head.state
            if not unread:
                head = pool.journal.read_head()
            assert head is not None
            if branch not in head.state:
                raise BranchNotFoundError(branch, f"in pool {pool.name}")
            parent_id: str | None = head.state[branch]
            if pending is not None and parent_id == pending.id:
                # Only possible if an append judged lost landed after all: we won.
                return _committed(pool, pending)
            if pending is None or pending.parent != parent_id:
                if pending is not None:
                    _discard_commit(pool, pending)
                    pending = None
                pending = _write_commit(pool, request, parent_id, attempt, batch)
            action = {"op": "set", "name": branch, "value": pending.id, "prev": parent_id}
            # Puts still in flight (a remote store's background writes: the data objects and
            # this commit object) finish here, before the commit point: one that failed fails
            # the commit while nothing can name its objects.
            pool.store.settle(batch)
            if guard is not None:
                guard()
            in_flight = True
            if _append(pool, head, action, pending, branch, batch):
                return _committed(pool, pending)
            in_flight = False  # proven lost: no entry points at ``pending``
            if unread:
                # Another writer committed since this handle last looked: read first for a
                # while, and retry at once (the read is the news, not a collision).
                pool.journal.note_refused()
            else:
                pool.backoff(attempt)
        raise RetriesExhaustedError(f"commit to {pool.name}@{branch}", retry.max_attempts)
    except CommitStateUnknownError:
        raise  # keep ``pending``: an entry may point at it
    except BaseException as e:
        if pending is not None and in_flight:
            raise CommitStateUnknownError(
                pending.id,
                f"interrupted during the commit point ({type(e).__name__})",
                pool=pool.name,
                branch=branch,
            ) from e
        if pending is not None:
            _discard_commit(pool, pending)
        raise


def _write_commit(
    pool: Pool, request: CommitRequest, parent_id: str | None, attempt: int, batch: SyncBatch
) -> Commit:
    """Plan ``request`` on ``parent_id`` and write the commit object (and its snapshot), not
    yet durable: into ``batch``, which the journal append syncs before its commit point."""
    store = pool.store.deferring(batch)
    parent = pool.snapshot(parent_id)
    planned = plan_commit(
        request,
        parent,
        pool.read_commit(parent_id) if parent_id is not None else None,
        commit_id=new_id(pool.clock),
        date=pool.clock.now(),
        attempt=attempt,
        schema_mode=pool.config.schema_mode,
        pool_name=pool.name,
    )
    if planned.has_snapshot:
        snap = apply_commit(parent, planned, pool.config.txn_retention)
        # Put with the commit object (concurrently on S3: either may land first); both become
        # reachable only with the journal entry, which waits for both, so a reachable commit
        # that says it has a snapshot has one. (An unreachable one may lack it: harmless,
        # and Pool.snapshot replays history where a snapshot is missing.)
        store.put_if_missing_idempotent(pool.layout.snapshot(planned.id), snap.encode())
        pool.remember(planned, snap)
    store.put_if_missing_idempotent(pool.layout.commit(planned.id), planned.encode())
    return planned


def _append(
    pool: Pool,
    head: JournalEntry,
    action: dict[str, Any],
    pending: Commit,
    branch: str,
    batch: SyncBatch,
) -> bool:
    """The commit point: append entry ``head.n + 1`` moving ``branch`` to ``pending``, once
    ``batch`` (its data and commit objects) is durable.
    True: it landed. False: proven lost (another writer's entry holds that number, so ours
    never can). Otherwise raises CommitStateUnknownError."""
    started = Mark.now()
    try:
        pool.journal.append(head, [action], at=pending.date, durable_first=batch)
        return True
    except ObjectExistsError:
        # Taken, and not by our own retried request (append recognises that); the read-back
        # below confirms whose it is.
        failure = "the journal entry exists"
    except DurabilityUnknownError as e:
        # Our entry is linked but may not survive a power loss: neither won nor lost.
        raise CommitStateUnknownError(
            pending.id, f"the journal entry may not be durable: {e}", pool=pool.name, branch=branch
        ) from None
    except Exception as e:  # noqa: BLE001 - any failure mid-append leaves the outcome open
        failure = str(e) or type(e).__name__
    return _won_anyway(pool, head.n + 1, pending.id, branch, failure, started)


def _won_anyway(
    pool: Pool, n: int, commit_id: str, branch: str, failure: str, started: Mark
) -> bool:
    """After a failed append of entry ``n``, read it back. Ours → True (a retried request whose
    first try landed). Another writer's → False: lost for sure. Missing or unreadable, or the
    read-back failing → CommitStateUnknownError: a failed read-back is "unknown", never
    "lost", and a missing entry may still be written by a request that is in flight."""
    try:
        entry = pool.journal.read_entry(n)
    except ObjectNotFoundError:
        why = f"{failure}; entry {n} is not there (yet)"
    except (ObjectStoreError, CorruptObjectError) as e:
        why = f"{failure}; reading entry {n} back failed: {e}"
    else:
        ours = any(a.get("value") == commit_id for a in entry.actions)
        if ours:  # our retried append: the handle's next commit appends after it
            pool.journal.note_head(entry, started)
        return ours
    raise CommitStateUnknownError(commit_id, why, pool=pool.name, branch=branch)


def _committed(pool: Pool, landed: Commit) -> Commit:
    # Keep the new tip's snapshot (the parent's is cached: the commit was planned on it), so
    # the next commit from this process decodes nothing. A commit that wrote its snapshot has
    # it cached already (``_write_commit``).
    if landed.has_snapshot and pool.cached_snapshot(landed.id) is not None:
        pool.remember(landed)
        return landed
    parent = Snapshot() if landed.parent is None else pool.cached_snapshot(landed.parent)
    pool.remember(
        landed,
        apply_commit(parent, landed, pool.config.txn_retention) if parent is not None else None,
    )
    return landed


def _discard_commit(pool: Pool, lost: Commit) -> None:
    """Best-effort removal of a commit object that never became reachable."""
    for key in (pool.layout.commit(lost.id), pool.layout.snapshot(lost.id)):
        try:
            pool.store.delete(key)
        except ObjectStoreError:
            pass  # an orphan; cleanup will find it
    pool.forget(lost.id)


def discard_objects(pool: Pool, objects: Sequence[ObjectMeta]) -> None:
    """Best-effort removal of data objects a failed operation wrote. Use
    :func:`discarding_on_failure`, which knows when removal is safe."""
    keys = [pool.layout.data(o.id) for o in objects]
    if not keys:
        return
    try:
        pool.store.delete_many(keys)
    except ObjectStoreError:
        pass  # orphans; cleanup will find them


def replannable(e: CommitConflictError) -> bool:
    """Whether planning again from the new tip can resolve the conflict ``e`` (an object the
    change read or rewrites is gone, keys it writes were written meanwhile): not a spent retry
    budget, a lapsed write window or a catalog race. Changes planned from rows — an upsert,
    a delete by predicate — re-plan on it; changes that name objects cannot."""
    return not isinstance(e, (RetriesExhaustedError, WriteWindowExpiredError, CatalogConflictError))


@contextmanager
def discarding_on_failure(pool: Pool, objects: Sequence[ObjectMeta]) -> Iterator[None]:
    """Remove ``objects`` (data objects the block wrote for a commit) if the block fails in a
    way known to have committed nothing. The sequence is read when the block fails, so objects
    appended to a list inside the block count.

    The rule: nothing is discarded while a commit's outcome is unknown. A
    CommitStateUnknownError (the append failed or was interrupted and the read-back did not
    settle it; :func:`commit` turns Ctrl-C during the append into one) leaves everything in
    place, since the commit may be the tip; cleanup removes the objects later if it was not.
    Any other failure (a conflict, a schema error, a store error or Ctrl-C before the commit
    point) committed nothing, so the objects are removed."""
    try:
        yield
    except CommitStateUnknownError:
        raise
    except BaseException:
        discard_objects(pool, objects)
        raise


__all__ = [
    "CommitRequest",
    "replannable",
    "check_unread",
    "commit",
    "discard_objects",
    "discarding_on_failure",
    "plan_commit",
]
