"""Purge: the danger-zone physical delete of the data objects one commit added — now, whatever
still references them.

Nothing in the history changes: snapshots that list a purged object keep listing it, and
reading one fails with :class:`~lake_core.errors.PurgedObjectError` naming the object and the
purging commit. To say so, purge first records ``pools/<id>/purged/<commit-id>.json`` (a
versioned document listing the objects) and only then deletes them; a purge that dies midway
is simply run again.

Run it under the pool's maintenance lock; ``guard`` is the lock's ``check``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lake_core.clock import parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.errors import CorruptObjectError, NotFoundError, ObjectExistsError
from lake_core.ids import is_ksuid
from lake_core.objects import data_key
from lake_core.stores.base import ObjectStore

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time

PURGED_FORMAT = "lakepool.purged"
PURGED_VERSION = 1


def purged_prefix(pool_id: str) -> str:
    return f"pools/{pool_id}/purged/"


def purged_key(pool_id: str, commit_id: str) -> str:
    return f"{purged_prefix(pool_id)}{commit_id}.json"


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
    key = purged_key(pool.id, commit_id)
    body = {
        "commit": commit_id,
        "purged_at": to_iso(now),
        "user": pool.lake_config.user,
        "objects": [{"id": o.id, "count": o.count, "size": o.size} for o in added],
    }
    try:
        pool.store.put_if_missing(key, encode_doc(PURGED_FORMAT, PURGED_VERSION, body))
    except ObjectExistsError:
        # Purged before (or a purge died after recording): the commit, hence the list, is
        # immutable, so the record already says the right thing. Finish the job.
        now = _read_record(pool.store, key)[1] or now
    if guard is not None:
        guard()
    pool.store.delete_many([data_key(pool.id, o.id) for o in added])
    return PurgeResult(commit_id, tuple(o.id for o in added), sum(o.size for o in added), key, now)


def _read_record(store: ObjectStore, key: str) -> tuple[list[str], datetime | None]:
    doc = decode_doc(key, store.get(key), PURGED_FORMAT, PURGED_VERSION)
    try:
        ids = [str(o["id"]) for o in doc["objects"]]
        when = parse_iso(doc["purged_at"]) if doc.get("purged_at") else None
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptObjectError(key, f"malformed purge record ({type(e).__name__})") from None
    return ids, when


def purged_by(store: ObjectStore, pool_id: str, object_id: str) -> str | None:
    """The commit whose purge deleted ``object_id``, or None if no purge record names it.
    Reads every purge record of the pool (purges are rare; this runs only on a read error)."""
    prefix = purged_prefix(pool_id)
    for info in sorted(store.list(prefix), key=lambda i: i.key):
        if not info.key.endswith(".json"):
            continue
        try:
            ids, _ = _read_record(store, info.key)
        except (CorruptObjectError, FileNotFoundError):
            continue
        if object_id in ids:
            return info.key[len(prefix) : -len(".json")]
    return None


__all__ = ["PurgeResult", "purge", "purged_by", "purged_key"]
