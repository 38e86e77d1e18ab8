"""Group commit: concurrent small loads of one process landing as one journal entry.

Opt-in (``Pool.load(..., group=True)``). Each load writes its own data objects in its own
thread, then hands its commit request to the pool's :class:`GroupCommitter` for its branch.
One of the waiting callers — the *leader* — takes every request queued so far, merges them into
one request (the adds of all, their schemas unified, their application transactions together)
and runs the ordinary commit protocol (:func:`lake_core.committing.commit`) once: one commit
object, one journal entry, one round of fsyncs for every member's objects. Requests that
arrive meanwhile queue for the next round, whose leader is the first of them; so a group forms
exactly while a commit is in flight, and a lone caller pays nothing but a lock.

What each caller learns (the product is that every caller still learns *its own* outcome):

- the group landed: the group's :class:`~lake_core.commit.Commit` (shared; it holds every
  member's objects, ``meta`` lists the members' metas);
- the group's outcome is unknown (:class:`~lake_core.errors.CommitStateUnknownError`): every
  member gets its own copy of that error, naming the group's commit id — nothing any member
  wrote may be discarded, since the commit may be the tip;
- the group failed in a way known to have committed nothing (a conflict, a schema or
  transaction refusal, a store error before the commit point, retries exhausted): every member
  then commits *alone*, in its own thread, through the ordinary protocol, and gets its own
  outcome — so one member's bad schema or already-committed transaction never fails another.

Requests that cannot share a commit go alone from the start: one whose schema does not unify
with the group's so far, one whose application transaction id another member carries, one that
deletes objects or prunes columns. Invariant: a member's request is in at most one journal
entry — it is committed either in exactly one group attempt (whose outcome it receives) or,
only after that attempt is known to have committed nothing, alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.commit import Commit
from lake_core.committing import CommitRequest
from lake_core.committing import commit as run_commit
from lake_core.errors import CommitStateUnknownError, LakeError
from lake_core.ingest.schema import unify_schema
from lake_core.stores.base import SyncBatch

if TYPE_CHECKING:
    from lake_core.pool import Pool  # Pool.load delegates here: no import back at run time

#: At most this many requests share one commit (one journal entry stays small).
MAX_GROUP = 256

_WAITING, _LEAD, _DONE, _FAILED, _ALONE = "waiting", "lead", "done", "failed", "alone"


@dataclass
class _Member:
    request: CommitRequest
    guard: Callable[[], None] | None
    batch: SyncBatch
    state: str = _WAITING
    commit: Commit | None = None
    error: BaseException | None = None
    wake: threading.Event = field(default_factory=threading.Event)


class GroupCommitter:
    """The group-commit queue of one pool (one queue per branch); see the module docstring.
    Thread-safe; one per :class:`~lake_core.pool.Pool` (``Pool.group_committer()``)."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._queues: dict[str, list[_Member]] = {}
        self._leading: set[str] = set()
        #: Rounds run and requests they carried (for tests and benchmarks).
        self.rounds = 0
        self.grouped = 0

    def commit(
        self,
        request: CommitRequest,
        guard: Callable[[], None] | None = None,
        durable_first: SyncBatch | None = None,
    ) -> Commit:
        """Commit ``request``, sharing one commit with whatever other threads hand in
        meanwhile. Returns the commit that holds its objects, or raises this request's own
        outcome (see the module docstring). ``durable_first``: the batch its objects were
        written into without fsync."""
        me = _Member(request, guard, durable_first if durable_first is not None else SyncBatch())
        branch = request.branch
        with self._lock:
            self._queues.setdefault(branch, []).append(me)
            if branch not in self._leading:
                self._leading.add(branch)
                me.state = _LEAD
        interrupt: BaseException | None = None
        if me.state != _LEAD:
            try:
                me.wake.wait()
            except BaseException as e:
                if self._withdraw(me):
                    raise  # not taken by any round: nothing of it was committed
                interrupt = e
                _wait_through_interrupts(me.wake)
        if me.state == _LEAD:
            self._lead(branch)
        if interrupt is not None and me.state == _ALONE:
            raise interrupt  # the round committed nothing of it: do not commit it alone now
        return self._outcome(me)

    def _outcome(self, me: _Member) -> Commit:
        if me.state == _DONE:
            assert me.commit is not None
            return me.commit
        if me.state == _FAILED:
            assert me.error is not None
            raise me.error
        # Alone: the group could not take it, or failed having committed nothing.
        return run_commit(self.pool, me.request, me.guard, me.batch)

    def _withdraw(self, me: _Member) -> bool:
        """Take an interrupted caller's request out of the queue if no round has taken it
        (passing the lead on if it had just been handed it): True. False: a round is deciding
        it, so its caller must wait for that outcome — the group must not commit objects
        that their caller is about to delete."""
        branch = me.request.branch
        with self._lock:
            queue = self._queues[branch]
            if me not in queue:
                return False
            queue.remove(me)
            if me.state == _LEAD:
                self._pass_lead(branch)
            return True

    def _lead(self, branch: str) -> None:
        """Run one round: everything queued for ``branch``, as one commit; then hand the lead
        to the first request that queued meanwhile (or give it up)."""
        with self._lock:
            queue = self._queues[branch]
            taken, self._queues[branch] = queue[:MAX_GROUP], queue[MAX_GROUP:]
        try:
            group, alone = _partition(taken)
            for m in alone:
                _resolve(m, _ALONE)
            if group:
                self._run(group)
        finally:
            # An interrupt above must not strand a waiting thread: it landed (the commit is
            # set) or committed nothing (run_commit turns one during the append into unknown).
            for m in taken:
                if m.state in (_WAITING, _LEAD):
                    _resolve(m, _DONE if m.commit is not None else _ALONE)
            with self._lock:
                self._pass_lead(branch)

    def _pass_lead(self, branch: str) -> None:
        """Hand the lead to the first queued request, or give it up (lock held)."""
        rest = self._queues[branch]
        if rest:
            rest[0].state = _LEAD
            rest[0].wake.set()
        else:
            self._leading.discard(branch)

    def _run(self, group: list[_Member]) -> None:
        self.rounds += 1
        self.grouped += len(group)
        if len(group) == 1:
            # Nothing to merge: the ordinary protocol, whose outcome is the member's own. Run
            # here, holding the lead, so that requests arriving meanwhile form the next group.
            only = group[0]
            try:
                only.commit = run_commit(self.pool, only.request, only.guard, only.batch)
            except Exception as e:  # noqa: BLE001 - handed to its caller as is
                only.error = e
                _resolve(only, _FAILED)
                return
            _resolve(only, _DONE)
            return
        merged, batch = _merge([m.request for m in group], [m.batch for m in group])
        guards = [m.guard for m in group if m.guard is not None]

        def guard() -> None:
            for g in guards:
                g()

        try:
            landed = run_commit(self.pool, merged, guard if guards else None, batch)
        except CommitStateUnknownError as e:
            for m in group:
                m.error = CommitStateUnknownError(e.commit_id, e.detail, e.pool, e.branch)
                m.error.__cause__ = e
                _resolve(m, _FAILED)
            return
        except Exception:  # noqa: BLE001 - known to have committed nothing: each goes alone
            for m in group:
                _resolve(m, _ALONE)
            return
        for m in group:
            m.commit = landed
        for m in group:
            _resolve(m, _DONE)


def _wait_through_interrupts(event: threading.Event) -> None:
    """Wait for ``event`` even if interrupted again: a round ends within one commit."""
    while True:
        try:
            event.wait()
            return
        except BaseException:  # noqa: BLE001, S112 - see the docstring
            continue


def _resolve(m: _Member, state: str) -> None:
    m.state = state
    m.wake.set()


def _partition(members: list[_Member]) -> tuple[list[_Member], list[_Member]]:
    """Members that can share one commit (adds only, schemas unifying, distinct transaction
    ids), and those that must go alone."""
    group: list[_Member] = []
    alone: list[_Member] = []
    schema: pa.Schema | None = None
    apps: set[str] = set()
    for m in members:
        r = m.request
        if r.deletes or r.index_deletes or r.prune_columns or r.carried_txns or not r.adds:
            alone.append(m)
            continue
        own = {t.app for t in r.txns}
        if own & apps or len(own) < len(r.txns):
            alone.append(m)
            continue
        if r.incoming_schema is not None and len(r.incoming_schema) > 0:
            try:
                unified = unify_schema(schema, r.incoming_schema, r.source)
            except LakeError:
                alone.append(m)
                continue
            schema = unified
        apps |= own
        group.append(m)
    return group, alone


def _merge(
    requests: list[CommitRequest], batches: list[SyncBatch]
) -> tuple[CommitRequest, SyncBatch]:
    """One request doing what ``requests`` do (see :func:`_partition` for which may merge)."""
    first = requests[0]
    schema: pa.Schema | None = None
    for r in requests:
        if r.incoming_schema is not None and len(r.incoming_schema) > 0:
            schema = unify_schema(schema, r.incoming_schema, r.source)
    authors = {r.author for r in requests}
    metas: list[Any] = [r.meta for r in requests]
    extra: dict[str, Any] = {}
    for r in requests:
        extra.update(r.extra)
    batch = SyncBatch()
    for b in batches:
        batch.merge(b)
    merged = replace(
        first,
        adds=tuple(o for r in requests for o in r.adds),
        index_adds=tuple(m for r in requests for m in r.index_adds),
        author=", ".join(sorted(authors)),
        message=f"{len(requests)} grouped loads\n" + "\n".join(r.message for r in requests),
        meta={"group": metas},
        incoming_schema=schema,
        source=", ".join(r.source for r in requests if r.source),
        extra=MappingProxyType(extra),
        txns=tuple(t for r in requests for t in r.txns),
    )
    return merged, batch


__all__ = ["MAX_GROUP", "GroupCommitter"]
