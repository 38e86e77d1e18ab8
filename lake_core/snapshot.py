"""Snapshots: the live object set and schema of a branch at one commit.

State changes only through the pure function :func:`apply_commit` (snapshot, commit) →
snapshot, so replay, rebase and tests need no I/O. A snapshot is also what gets cached next to
a commit (``<id>.snap``) so opening a tip reads a bounded number of objects.

Cached snapshot formats (``SNAPSHOT_VERSION``):

- 1: a JSON document (``lake_core.codec``) with one JSON object per live object. Still read:
  pools written before version 2 open as they are.
- 2 (written now): an Arrow IPC file, one row per live object with the key bounds and the
  per-column stats as columns (:mod:`lake_core.live`); the commit id, depth, pool schema and
  transactions are a JSON header in the schema metadata under ``lakepool.snapshot``. Decoding
  reads the arrays only; ObjectMeta are built when something iterates the objects' values.
- 3: version 2 plus the snapshot's index entries (:mod:`lake_core.indexes`) as ``indexes`` in
  the header. Written only for a snapshot that has index entries (others are written as
  version 2, so pools without indexes stay readable by releases before them); a version-2
  snapshot has none.

Either format is only a cache of what the commits say: a cached snapshot that does not decode
makes the pool replay from further back (``Pool.snapshot``), never unreadable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.clock import parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.commit import (
    Add,
    AddIndex,
    Commit,
    Delete,
    DeleteIndex,
    decode_schema,
    encode_schema,
)
from lake_core.errors import CommitConflictError, CorruptObjectError
from lake_core.indexes.meta import IndexMeta
from lake_core.live import LiveObjects
from lake_core.objects import ObjectMeta
from lake_core.txn import apply_txns

SNAPSHOT_FORMAT = "lakepool.snapshot"
#: The version written; every version up to it is read (see the module docstring).
SNAPSHOT_VERSION = 3
#: The version of a snapshot without index entries (the Arrow format before indexes).
SNAPSHOT_VERSION_PLAIN = 2
#: The last JSON version.
SNAPSHOT_JSON_VERSION = 1
_ARROW_MAGIC = b"ARROW1"
_HEADER_KEY = SNAPSHOT_FORMAT.encode()


@dataclass(frozen=True)
class Snapshot:
    """Live objects (in the order they were added) and the accumulated schema at ``commit_id``
    (None: the empty pool before its first commit). ``txns``: application id -> highest
    transaction version committed on this lineage (:mod:`lake_core.txn`), unexpired;
    ``txn_dates``: the date of the commit that recorded each (ids from snapshots written
    before dates have none until the next commit that rebuilds the map). ``indexes``: the
    index entries, keyed by ``(object id, rule name)``; every one names a live object."""

    commit_id: str | None = None
    depth: int = 0
    objects: Mapping[str, ObjectMeta] = field(default_factory=LiveObjects)
    schema: pa.Schema | None = None
    txns: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    txn_dates: Mapping[str, datetime] = field(default_factory=lambda: MappingProxyType({}))
    indexes: Mapping[tuple[str, str], IndexMeta] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def indexes_of(self, object_id: str) -> list[IndexMeta]:
        """The index entries of one object."""
        return [m for (oid, _), m in self.indexes.items() if oid == object_id]

    def encode(self) -> bytes:
        """The cached form (format version 3: Arrow IPC, see the module docstring)."""
        header: dict[str, Any] = {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION if self.indexes else SNAPSHOT_VERSION_PLAIN,
            "commit": self.commit_id,
            "depth": self.depth,
            "schema": encode_schema(self.schema) if self.schema is not None else None,
            "txns": dict(self.txns),
            "txn_dates": {k: to_iso(v) for k, v in self.txn_dates.items()},
        }
        if self.indexes:
            header["indexes"] = [m.to_json() for m in self.indexes.values()]
        table = LiveObjects.of(self.objects).table()
        table = table.replace_schema_metadata({_HEADER_KEY: json.dumps(header).encode()})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return bytes(sink.getvalue())

    def encode_json(self) -> bytes:
        """The version-1 JSON form. Only tests write it now (pools from before version 2)."""
        body: dict[str, Any] = {
            "commit": self.commit_id,
            "depth": self.depth,
            "schema": encode_schema(self.schema) if self.schema is not None else None,
            "objects": [o.to_json() for o in self.objects.values()],
        }
        if self.txns:  # absent when empty: snapshots without transactions read as before
            body["txns"] = dict(self.txns)
            # Beside ``txns`` rather than in it, so readers that predate dates still read it.
            body["txn_dates"] = {k: to_iso(v) for k, v in self.txn_dates.items()}
        return encode_doc(SNAPSHOT_FORMAT, SNAPSHOT_JSON_VERSION, body)

    @classmethod
    def decode(cls, key: str, data: bytes) -> Snapshot:
        """Either format; CorruptObjectError if ``data`` is neither, or a newer version."""
        if data[: len(_ARROW_MAGIC)] == _ARROW_MAGIC:
            return cls._decode_arrow(key, data)
        return cls._decode_json(key, data)

    @classmethod
    def _decode_arrow(cls, key: str, data: bytes) -> Snapshot:
        try:
            table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
            raw = (table.schema.metadata or {}).get(_HEADER_KEY)
            if raw is None:
                raise CorruptObjectError(key, "an Arrow file without a snapshot header")
            doc = json.loads(raw)
            if not isinstance(doc, dict) or doc.get("format") != SNAPSHOT_FORMAT:
                raise CorruptObjectError(key, "not a snapshot header")
            version = doc.get("version")
            if not isinstance(version, int) or version <= SNAPSHOT_JSON_VERSION:
                raise CorruptObjectError(key, "missing format version")
            if version > SNAPSHOT_VERSION:
                raise CorruptObjectError(
                    key,
                    f"format version {version} is newer than this lakepool reads "
                    f"({SNAPSHOT_VERSION})",
                )
            ids = table.column("id")
            if ids.null_count or table.column("count").null_count:
                raise ValueError("an object row without id or count")
            if len(pc.unique(ids)) != len(ids):
                raise ValueError("an object id twice")
            schema = decode_schema(doc["schema"]) if doc.get("schema") else None
            txns = {str(k): int(v) for k, v in (doc.get("txns") or {}).items()}
            dates = {str(k): parse_iso(str(v)) for k, v in (doc.get("txn_dates") or {}).items()}
            metas = [IndexMeta.from_json(m) for m in doc.get("indexes") or []]
            return cls(
                doc.get("commit"),
                int(doc["depth"]),
                LiveObjects.from_table(table.replace_schema_metadata(None)),
                schema,
                MappingProxyType(txns),
                MappingProxyType(dates),
                MappingProxyType({m.slot: m for m in metas}),
            )
        except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
            raise CorruptObjectError(key, f"malformed snapshot ({type(e).__name__})") from None

    @classmethod
    def _decode_json(cls, key: str, data: bytes) -> Snapshot:
        doc = decode_doc(key, data, SNAPSHOT_FORMAT, SNAPSHOT_JSON_VERSION)
        try:
            objs = [ObjectMeta.from_json(o) for o in doc["objects"]]
            if len({o.id for o in objs}) != len(objs):
                raise ValueError("an object id twice")
            schema = decode_schema(doc["schema"]) if doc.get("schema") else None
            txns = {str(k): int(v) for k, v in (doc.get("txns") or {}).items()}
            dates = {str(k): parse_iso(str(v)) for k, v in (doc.get("txn_dates") or {}).items()}
            return cls(
                doc.get("commit"),
                int(doc["depth"]),
                LiveObjects.from_objects(objs),
                schema,
                MappingProxyType(txns),
                MappingProxyType(dates),
            )
        except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
            raise CorruptObjectError(key, f"malformed snapshot ({type(e).__name__})") from None

    def object_table(self) -> pa.Table:
        """The live objects as one Arrow table, one row per object in order (the columns of
        the cached format, :mod:`lake_core.live`): lists ids, sizes, counts and key bounds
        without building an ObjectMeta each."""
        return LiveObjects.of(self.objects).table()

    @property
    def count(self) -> int:
        """Rows across the live objects (from the arrays when there are any)."""
        return LiveObjects.of(self.objects).count

    @property
    def size(self) -> int:
        return LiveObjects.of(self.objects).size


def check_actions(snapshot: Snapshot, adds: Iterable[str], deletes: Iterable[str]) -> None:
    """Raise CommitConflictError unless the actions apply cleanly to ``snapshot``: every
    deleted object is live (a concurrent commit may have deleted it already) and no added id is
    live already. Adds of new objects never conflict."""
    gone = [i for i in deletes if i not in snapshot.objects]
    if gone:
        raise CommitConflictError(
            f"object {gone[0]} is no longer live on this branch"
            + (f" (and {len(gone) - 1} more)" if len(gone) > 1 else "")
        )
    dup = [i for i in adds if i in snapshot.objects]
    if dup:
        raise CommitConflictError(f"object {dup[0]} is already live on this branch")


def apply_commit(
    snapshot: Snapshot, commit: Commit, txn_retention: timedelta | None = None
) -> Snapshot:
    """The snapshot after ``commit``. Pure. Raises CommitConflictError if the commit does not
    apply (replaying a valid history never does). ``txn_retention``: the pool's
    (``PoolConfig.txn_retention``; None keeps transaction records forever) — recorded
    transactions older than it at ``commit.date`` expire when the commit records
    transactions or caches its snapshot (:mod:`lake_core.txn`)."""
    live = LiveObjects.of(snapshot.objects)
    deletes: dict[str, None] = {}  # ordered, with O(1) membership
    adds: dict[str, ObjectMeta] = {}
    index_changes: list[AddIndex | DeleteIndex] = []
    for action in commit.actions:
        if isinstance(action, AddIndex | DeleteIndex):
            index_changes.append(action)
            continue
        if isinstance(action, Delete):
            if action.id in adds:
                del adds[action.id]
            elif action.id in live and action.id not in deletes:
                deletes[action.id] = None
            else:
                raise CommitConflictError(
                    f"commit {commit.id} deletes object {action.id}, which is not live"
                )
        elif isinstance(action, Add):
            oid = action.object.id
            if oid in adds or (oid in live and oid not in deletes):
                raise CommitConflictError(f"commit {commit.id} adds object {oid} twice")
            adds[oid] = action.object
    objects = live.applied(deletes, adds.values())
    indexes = _apply_indexes(snapshot.indexes, commit, deletes, index_changes, objects)
    if commit.has_snapshot:
        # This commit's snapshot is cached: fold the overlay so a long run of commits in one
        # process keeps it bounded by SNAPSHOT_INTERVAL.
        objects = objects.compacted()
    schema = commit.schema if commit.schema is not None else snapshot.schema
    txns, dates = apply_txns(
        snapshot.txns,
        snapshot.txn_dates,
        commit.extra,
        commit.date,
        rebuild=commit.has_snapshot,
        retention=txn_retention,
    )
    return Snapshot(commit.id, commit.depth, objects, schema, txns, dates, indexes)


def _apply_indexes(
    current: Mapping[tuple[str, str], IndexMeta],
    commit: Commit,
    deletes: Mapping[str, None],
    changes: list[AddIndex | DeleteIndex],
    live: Mapping[str, ObjectMeta],
) -> Mapping[tuple[str, str], IndexMeta]:
    """The index entries after ``commit``: a deleted object's entries go with it (whether or
    not the commit says DeleteIndex for them: a commit planned before a racing ``index apply``
    landed cannot name that entry), DeleteIndex removes an entry if present, AddIndex sets one
    (replacing that object's entry under the same rule). Shares ``current`` when nothing
    changes, so the common commit copies nothing. CommitConflictError: an AddIndex for an
    object not live after the commit."""
    if not changes and not (current and deletes):
        return current
    out = {slot: m for slot, m in current.items() if slot[0] not in deletes}
    for change in changes:
        if isinstance(change, DeleteIndex):
            out.pop((change.object, change.rule), None)
        else:
            meta = change.index
            if meta.object not in live:
                raise CommitConflictError(
                    f"commit {commit.id} indexes object {meta.object}, which is not live"
                )
            out[meta.slot] = meta
    return MappingProxyType(out)
