"""Commit objects: immutable records of one change to a branch.

A commit names its parent (None for a pool's first commit), its author, date, message, free
JSON ``meta``, and its actions: ``Add`` (an object joins the live set), ``Delete`` (an object
leaves it; the commit's date is the object's tombstone time), ``AddIndex`` (an index object of
a live data object joins the snapshot, :mod:`lake_core.indexes`) and ``DeleteIndex`` (it leaves).

Format versions: 1 has Add and Delete only; 2 adds the two index actions. Both are read; a
commit is written as version 2 only when it holds an index action, so a pool that uses no
index stays readable by releases before indexes.

Bounded opening: a commit also records where the nearest cached snapshot is. ``snapshot_base``
is the nearest ancestor whose snapshot is cached and ``chain`` lists the commits strictly
between that ancestor and this one, oldest first, so a reader fetches one snapshot plus at most
:data:`SNAPSHOT_INTERVAL` commits — all known up front, so they can be fetched in parallel —
however long the history. ``has_snapshot`` says this commit's own snapshot was written.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from lake_core.clock import parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.codec import field as doc_field
from lake_core.errors import CorruptObjectError
from lake_core.indexes.meta import IndexMeta
from lake_core.objects import ObjectMeta

COMMIT_FORMAT = "lakepool.commit"
COMMIT_VERSION = 2
#: The version of a commit without index actions.
COMMIT_VERSION_PLAIN = 1
#: A commit whose chain back to a cached snapshot would exceed this writes its own snapshot.
SNAPSHOT_INTERVAL = 32
#: Optional commit fields kept verbatim: ``merge_source`` is the source tip a merge applied;
#: ``kind`` marks maintenance commits (``compaction``, ``partition-drop``, …).
#: ``rows`` is ``{"added": N, "removed": M}``: rows in the added objects and in the deleted
#: ones (a delete by predicate removes ``removed - added`` rows net; a compaction 0).
#: ``reverts`` names the commit a revert undid; ``layout_only`` marks a commit that moved rows
#: between objects without changing them (compaction), which history operations see through.
#: ``txn`` lists the application transactions the commit landed (:mod:`lake_core.txn`).
#: ``upsert`` is an upsert's ``{"inserted": N, "updated": N, "deleted": N}``
#: (:data:`lake_core.upsert.UPSERT_FIELD`).
EXTRA_FIELDS = ("merge_source", "kind", "rows", "reverts", "layout_only", "txn", "upsert")


@dataclass(frozen=True)
class Add:
    object: ObjectMeta


@dataclass(frozen=True)
class Delete:
    id: str


@dataclass(frozen=True)
class AddIndex:
    """Index entry ``index`` joins the snapshot (replacing one of the same object and rule)."""

    index: IndexMeta


@dataclass(frozen=True)
class DeleteIndex:
    """The index entry of data object ``object`` under rule ``rule`` leaves the snapshot."""

    object: str
    rule: str


Action = Add | Delete | AddIndex | DeleteIndex


def encode_schema(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


@dataclass(frozen=True)
class Commit:
    """One immutable commit. ``schema`` is set only when this commit changed the pool schema."""

    id: str
    parent: str | None
    depth: int
    author: str
    date: datetime
    message: str
    meta: Any = None
    actions: tuple[Action, ...] = ()
    schema: pa.Schema | None = None
    snapshot_base: str | None = None
    chain: tuple[str, ...] = ()
    has_snapshot: bool = False
    retries: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def adds(self) -> list[ObjectMeta]:
        return [a.object for a in self.actions if isinstance(a, Add)]

    def deletes(self) -> list[str]:
        return [a.id for a in self.actions if isinstance(a, Delete)]

    def index_adds(self) -> list[IndexMeta]:
        return [a.index for a in self.actions if isinstance(a, AddIndex)]

    def index_deletes(self) -> list[tuple[str, str]]:
        """``(object, rule)`` of every DeleteIndex action."""
        return [(a.object, a.rule) for a in self.actions if isinstance(a, DeleteIndex)]

    @property
    def rows_added(self) -> int:
        """Rows in the objects this commit added."""
        return sum(o.count for o in self.adds())

    @property
    def rows_removed(self) -> int | None:
        """Rows in the objects this commit deleted (None for commits written before this was
        recorded)."""
        rows = self.extra.get("rows")
        return int(rows["removed"]) if isinstance(rows, dict) and "removed" in rows else None

    @property
    def layout_only(self) -> bool:
        """True when the commit only moved rows between objects (compaction)."""
        return bool(self.extra.get("layout_only")) or self.extra.get("kind") == "compaction"

    def actions_json(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for a in self.actions:
            if isinstance(a, Add):
                out.append({"op": "add", "object": a.object.to_json()})
            elif isinstance(a, Delete):
                out.append({"op": "delete", "id": a.id})
            elif isinstance(a, AddIndex):
                out.append({"op": "add_index", "index": a.index.to_json()})
            else:
                out.append({"op": "delete_index", "object": a.object, "rule": a.rule})
        return out

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "id": self.id,
            "parent": self.parent,
            "depth": self.depth,
            "author": self.author,
            "date": to_iso(self.date),
            "message": self.message,
            "meta": self.meta,
            "actions": self.actions_json(),
            "snapshot_base": self.snapshot_base,
            "chain": list(self.chain),
            "has_snapshot": self.has_snapshot,
            "retries": self.retries,
        }
        if self.schema is not None:
            body["schema"] = encode_schema(self.schema)
        body.update(self.extra)
        indexed = any(isinstance(a, AddIndex | DeleteIndex) for a in self.actions)
        return encode_doc(COMMIT_FORMAT, COMMIT_VERSION if indexed else COMMIT_VERSION_PLAIN, body)

    @classmethod
    def decode(cls, key: str, data: bytes) -> Commit:
        doc = decode_doc(key, data, COMMIT_FORMAT, COMMIT_VERSION)
        try:
            actions: list[Action] = []
            for a in doc_field(key, doc, "actions", list):
                if a["op"] == "add":
                    actions.append(Add(ObjectMeta.from_json(a["object"])))
                elif a["op"] == "delete":
                    actions.append(Delete(str(a["id"])))
                elif a["op"] == "add_index":
                    actions.append(AddIndex(IndexMeta.from_json(a["index"])))
                elif a["op"] == "delete_index":
                    actions.append(DeleteIndex(str(a["object"]), str(a["rule"])))
                else:
                    raise CorruptObjectError(key, f"unknown action {a['op']!r}")
            schema = decode_schema(doc["schema"]) if doc.get("schema") else None
            return cls(
                id=doc_field(key, doc, "id", str),
                parent=doc.get("parent"),
                depth=doc_field(key, doc, "depth", int),
                author=str(doc.get("author", "")),
                date=parse_iso(doc_field(key, doc, "date", str)),
                message=str(doc.get("message", "")),
                meta=doc.get("meta"),
                actions=tuple(actions),
                schema=schema,
                snapshot_base=doc.get("snapshot_base"),
                chain=tuple(doc.get("chain", [])),
                has_snapshot=bool(doc.get("has_snapshot", False)),
                retries=int(doc.get("retries", 0)),
                extra={k: doc[k] for k in EXTRA_FIELDS if k in doc},
            )
        except CorruptObjectError:
            raise
        except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
            raise CorruptObjectError(key, f"malformed commit ({type(e).__name__}: {e})") from None
