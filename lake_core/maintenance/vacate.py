"""Vacate: cut a pool's history older than a time.

For every branch, the newest commit at or before the time becomes the branch's *tail*: it and
later commits stay readable; earlier commits, and ``--as-of`` before the time, fail with
HistoryVacatedError. The journal's TAIL moves to the last entry at or before the time. Data
reachable only from the cut history becomes eligible for cleanup, which also reclaims the cut
commits, snapshots and journal entries (metadata must not grow without bound).

Order of writes (each step safe if the process dies after it): cached snapshots of the tails
(so they open without their ancestors), the record of the commits cut (:mod:`lake_core.vacated`,
so that once cleanup reclaims them a lookup still says "vacated", not "not found"), then the
journal entry recording tails and time (the commit point), then the TAIL file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lake_core.clock import to_iso
from lake_core.errors import NotFoundError, ObjectExistsError
from lake_core.names import TAIL_PREFIX, VACATED
from lake_core.vacated import write_vacated

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time


@dataclass(frozen=True)
class VacateResult:
    before: datetime
    tails: dict[str, str | None]
    journal_tail: int


def plan_tails(pool: Pool, before: datetime) -> dict[str, str | None]:
    """Branch → newest commit at or before ``before`` (branches with none are not cut)."""
    tails: dict[str, str | None] = {}
    for branch, tip in pool.branches().items():
        commit_id = tip
        while commit_id is not None:
            commit = pool.read_commit(commit_id)
            if commit.date <= before:
                tails[branch] = commit.id
                break
            commit_id = commit.parent
    return tails


def vacate(pool: Pool, before: datetime, guard: Any = None) -> VacateResult:
    """Cut history older than ``before``. Call under the pool's maintenance lock; ``guard`` is
    the lock's ``check``."""
    tails = plan_tails(pool, before)
    for commit_id in tails.values():
        if commit_id is None:
            continue
        try:
            pool.store.put_if_missing(
                pool.layout.snapshot(commit_id), pool.snapshot(commit_id).encode()
            )
        except ObjectExistsError:
            pass  # already cached; snapshots of a commit are identical
    write_vacated(pool.store, pool.id, _cut_commits(pool, tails), pool.clock)
    entry = pool.journal.read_head()
    journal_tail = _last_entry_at_or_before(pool, before, entry.n)

    def build(state: dict[str, Any]) -> list[dict[str, Any]]:
        actions: list[dict[str, Any]] = [
            {"op": "set", "name": f"{TAIL_PREFIX}{b}", "value": c} for b, c in tails.items()
        ]
        previous = state.get(VACATED)
        if previous is None or previous < to_iso(before):
            actions.append({"op": "set", "name": VACATED, "value": to_iso(before)})
        return actions

    if guard is not None:
        guard()
    pool.update_journal(f"vacate {pool.name}", build)
    if journal_tail > pool.journal.read_tail():
        pool.store.put(pool.journal.layout.tail, str(journal_tail).encode("ascii"))
    return VacateResult(before, tails, journal_tail)


def _cut_commits(pool: Pool, tails: dict[str, str | None]) -> set[str]:
    """The commits a vacate to ``tails`` cuts that no earlier vacate recorded: the ancestors of
    each new tail, down to and including the previous tail of any branch (whose ancestors the
    previous vacate recorded) or to history cleanup has already reclaimed. Each commit is read
    once in its life, by the first vacate that cuts it."""
    _, old_tails = pool.vacate_state()
    previous = {c for c in old_tails.values() if c is not None}
    keep = {c for c in tails.values() if c is not None}
    cut: set[str] = set()
    for tail in keep:
        commit_id = pool.read_commit(tail).parent
        while commit_id is not None and commit_id not in cut and commit_id not in keep:
            try:
                commit = pool.read_commit(commit_id)
            except NotFoundError:
                break  # reclaimed by cleanup after an earlier vacate
            cut.add(commit_id)
            if commit_id in previous:
                break
            commit_id = commit.parent
    return cut


def _last_entry_at_or_before(pool: Pool, before: datetime, head: int) -> int:
    lo, hi = pool.journal.read_tail(), head
    found = lo
    while lo <= hi:
        mid = (lo + hi) // 2
        e = pool.journal.read_entry(mid)
        if e.ts is not None and e.ts <= before:
            found, lo = mid, mid + 1
        else:
            hi = mid - 1
    return found
