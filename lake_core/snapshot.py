"""Snapshots: the live object set and schema of a branch at one commit.

State changes only through the pure function :func:`apply_commit` (snapshot, commit) →
snapshot, so replay, rebase and tests need no I/O. A snapshot is also what gets cached next to
a commit (``<id>.snap``) so opening a tip reads a bounded number of objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from lake_core.clock import parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.commit import Add, Commit, Delete, decode_schema, encode_schema
from lake_core.errors import CommitConflictError, CorruptObjectError
from lake_core.objects import ObjectMeta
from lake_core.txn import apply_txns

SNAPSHOT_FORMAT = "lakepool.snapshot"
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class Snapshot:
    """Live objects (in the order they were added) and the accumulated schema at ``commit_id``
    (None: the empty pool before its first commit). ``txns``: application id -> highest
    transaction version committed on this lineage (:mod:`lake_core.txn`), unexpired;
    ``txn_dates``: the date of the commit that recorded each (ids from snapshots written
    before dates have none until the next commit that rebuilds the map)."""

    commit_id: str | None = None
    depth: int = 0
    objects: Mapping[str, ObjectMeta] = field(default_factory=lambda: MappingProxyType({}))
    schema: pa.Schema | None = None
    txns: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    txn_dates: Mapping[str, datetime] = field(default_factory=lambda: MappingProxyType({}))

    def encode(self) -> bytes:
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
        return encode_doc(SNAPSHOT_FORMAT, SNAPSHOT_VERSION, body)

    @classmethod
    def decode(cls, key: str, data: bytes) -> Snapshot:
        doc = decode_doc(key, data, SNAPSHOT_FORMAT, SNAPSHOT_VERSION)
        try:
            objs = {o["id"]: ObjectMeta.from_json(o) for o in doc["objects"]}
            schema = decode_schema(doc["schema"]) if doc.get("schema") else None
            txns = {str(k): int(v) for k, v in (doc.get("txns") or {}).items()}
            dates = {str(k): parse_iso(str(v)) for k, v in (doc.get("txn_dates") or {}).items()}
            return cls(
                doc.get("commit"),
                int(doc["depth"]),
                MappingProxyType(objs),
                schema,
                MappingProxyType(txns),
                MappingProxyType(dates),
            )
        except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
            raise CorruptObjectError(key, f"malformed snapshot ({type(e).__name__})") from None

    @property
    def count(self) -> int:
        return sum(o.count for o in self.objects.values())

    @property
    def size(self) -> int:
        return sum(o.size for o in self.objects.values())


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
    objects = dict(snapshot.objects)
    for action in commit.actions:
        if isinstance(action, Delete):
            if objects.pop(action.id, None) is None:
                raise CommitConflictError(
                    f"commit {commit.id} deletes object {action.id}, which is not live"
                )
        elif isinstance(action, Add):
            if action.object.id in objects:
                raise CommitConflictError(
                    f"commit {commit.id} adds object {action.object.id} twice"
                )
            objects[action.object.id] = action.object
    schema = commit.schema if commit.schema is not None else snapshot.schema
    txns, dates = apply_txns(
        snapshot.txns,
        snapshot.txn_dates,
        commit.extra,
        commit.date,
        rebuild=commit.has_snapshot,
        retention=txn_retention,
    )
    return Snapshot(commit.id, commit.depth, MappingProxyType(objects), schema, txns, dates)
