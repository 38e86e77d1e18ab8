"""Purge records: which data objects a ``lake purge`` deleted for good, and when.

A purge writes one immutable record per purged commit, ``pools/<pool>/purged/<commit>.json``
(see :mod:`lake_core.layout`): a versioned document listing the objects the commit added. It
lands before any object is deleted, so every object a purge deleted is named by some record.
The read path consults the records only on an error path (an object that should be there is
not), to say "purged by commit X" instead of "missing"; maintenance writes them
(:mod:`lake_core.maintenance.purge`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from lake_core.clock import parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.errors import CorruptObjectError
from lake_core.layout import PoolLayout
from lake_core.objects import ObjectMeta
from lake_core.stores.base import ObjectStore

PURGED_FORMAT = "lakepool.purged"
PURGED_VERSION = 1


def write_purge_record(
    store: ObjectStore,
    pool_id: str,
    commit_id: str,
    purged_at: datetime,
    user: str,
    objects: Iterable[ObjectMeta],
) -> str:
    """Record that the purge of ``commit_id`` deletes ``objects``; return the record's key.
    Put-if-missing: raises ObjectExistsError when the commit was purged (or a purge of it
    began) before."""
    key = PoolLayout(pool_id).purge_record(commit_id)
    body = {
        "commit": commit_id,
        "purged_at": to_iso(purged_at),
        "user": user,
        "objects": [{"id": o.id, "count": o.count, "size": o.size} for o in objects],
    }
    store.put_if_missing(key, encode_doc(PURGED_FORMAT, PURGED_VERSION, body))
    return key


def read_purge_record(store: ObjectStore, key: str) -> tuple[list[str], datetime | None]:
    """The object ids a purge record names and when the purge began. Raises
    ObjectNotFoundError, CorruptObjectError."""
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
    layout = PoolLayout(pool_id)
    for info in sorted(store.list(layout.purged_dir), key=lambda i: i.key):
        commit_id = layout.parse_purge_record(info.key)
        if commit_id is None:
            continue
        try:
            ids, _ = read_purge_record(store, info.key)
        except (CorruptObjectError, FileNotFoundError):
            continue
        if object_id in ids:
            return commit_id
    return None


__all__ = [
    "PURGED_FORMAT",
    "PURGED_VERSION",
    "purged_by",
    "read_purge_record",
    "write_purge_record",
]
