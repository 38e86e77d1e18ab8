"""Purge: the danger-zone physical delete of the data objects one commit added — now, whatever
still references them.

Nothing in the history changes: snapshots that list a purged object keep listing it, and
reading one fails with :class:`~lake_core.errors.PurgedObjectError` naming the object and the
purging commit. To say so, purge first writes a purge record (:mod:`lake_core.purge_records`, a
versioned document listing the objects) and only then deletes them; a purge that dies midway
is simply run again.

Run it under the pool's maintenance lock; ``guard`` is the lock's ``check``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lake_core.clock import to_iso
from lake_core.errors import NotFoundError, ObjectExistsError
from lake_core.ids import is_ksuid
from lake_core.purge_records import read_purge_record, write_purge_record

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time


@dataclass(frozen=True)
class PurgeResult:
    """What a purge deleted: the objects ``commit_id`` added, their recorded bytes, and where
    the purge record is (``record`` is "" when the commit added nothing)."""

    commit_id: str
    objects: tuple[str, ...]
    bytes: int
    record: str
    purged_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit_id,
            "objects": list(self.objects),
            "count": len(self.objects),
            "bytes": self.bytes,
            "record": self.record,
            "purged_at": to_iso(self.purged_at),
        }


def purge(pool: Pool, commit_id: str, *, guard: Callable[[], None] | None = None) -> PurgeResult:
    """Physically delete the data objects ``commit_id`` added. Raises NotFoundError naming an
    unknown commit. The purge record is written before anything is deleted; ``guard`` runs
    before the record and again right before the deletes."""
    if not is_ksuid(commit_id):
        raise NotFoundError("commit", commit_id, f"in pool {pool.name}")
    commit = pool.read_commit(commit_id)  # NotFoundError naming the id
    added = commit.adds()
    now = pool.clock.now()
    if not added:
        return PurgeResult(commit_id, (), 0, "", now)
    if guard is not None:
        guard()
    key = pool.layout.purge_record(commit_id)
    try:
        write_purge_record(pool.store, pool.id, commit_id, now, pool.lake_config.user, added)
    except ObjectExistsError:
        # Purged before (or a purge died after recording): the commit, hence the list, is
        # immutable, so the record already says the right thing. Finish the job.
        now = read_purge_record(pool.store, key)[1] or now
    if guard is not None:
        guard()
    pool.store.delete_many([pool.layout.data(o.id) for o in added])
    # Their index objects hold their values too (an exact index holds every one): they go
    # with them. A read that meets an index entry whose file is gone reads unpruned.
    index_keys = [
        info.key
        for o in added
        for info in pool.store.list(f"{pool.layout.index_dir}{o.id}-")
    ]
    if index_keys:
        pool.store.delete_many(index_keys)
    return PurgeResult(commit_id, tuple(o.id for o in added), sum(o.size for o in added), key, now)


__all__ = ["PurgeResult", "purge"]
