"""The catalog's content at one point: a tree plus the catalog definition, and typed reads.

:class:`CatalogState` is what a transaction works on (its running tree) and what a
:class:`CatalogSnapshot` (one committed version) exposes. Reads go through the tree: looking up one
object costs one node read per level plus its definition; listing one kind of object (or one
namespace's) reads only the nodes of that key range.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypeVar

from google.protobuf.message import Message

from lake_core.catalog import btree
from lake_core.catalog.btree_keys import (
    INDEX_RULE,
    NAMESPACE,
    TABLE,
    VIEW,
    KeyWidths,
    ObjectRef,
    namespace_range,
    parse_key,
    type_range,
)
from lake_core.catalog.files import CatalogFiles
from lake_core.catalog.node import Node, RootFile
from lake_core.catalog.proto import objects_pb2
from lake_core.layout import CatalogLayout

M = TypeVar("M", bound=Message)

DEF_TYPES: dict[int, type[Message]] = {
    NAMESPACE: objects_pb2.NamespaceDef,
    TABLE: objects_pb2.TableDef,
    VIEW: objects_pb2.ViewDef,
    INDEX_RULE: objects_pb2.IndexRuleDef,
}


@dataclass(frozen=True)
class CatalogState:
    """A tree, the catalog definition it is read with, and where its files are."""

    tree: Node
    catalog_def: objects_pb2.CatalogDef
    catalog_def_path: str
    files: CatalogFiles

    @property
    def order(self) -> int:
        return int(self.catalog_def.order)

    @property
    def widths(self) -> KeyWidths:
        return KeyWidths.of(self.catalog_def)

    def with_tree(self, tree: Node) -> CatalogState:
        return replace(self, tree=tree)

    # -- raw tree access ------------------------------------------------------------------

    def key(self, ref: ObjectRef) -> str:
        return ref.key(self.widths)

    def def_path(self, ref: ObjectRef) -> str | None:
        """The definition file of ``ref``, or None if it does not exist."""
        return btree.lookup(self.tree, self.key(ref), self.files.read_node)

    def exists(self, ref: ObjectRef) -> bool:
        return self.def_path(ref) is not None

    def entries(
        self, object_type: int, namespace: str | None = None
    ) -> list[tuple[ObjectRef, str]]:
        """``(object, definition path)`` of one type (in one namespace), in key order."""
        if namespace is None:
            lo, hi = type_range(object_type)
        else:
            lo, hi = namespace_range(object_type, namespace, self.widths)
        widths = self.widths
        return [
            (parse_key(k, widths), v)
            for k, v in btree.scan(self.tree, self.files.read_node, lo, hi)
        ]

    def all_entries(self) -> list[tuple[str, str]]:
        """Every ``(key, definition path)`` in the tree."""
        return list(btree.scan(self.tree, self.files.read_node))

    # -- typed reads ----------------------------------------------------------------------

    def get(self, ref: ObjectRef, cls: type[M]) -> M | None:
        path = self.def_path(ref)
        return None if path is None else self.files.read_def(cls, path)

    def objects(
        self, object_type: int, cls: type[M], namespace: str | None = None
    ) -> list[tuple[ObjectRef, M]]:
        """Objects of one type (in one namespace) with their definitions, in key order."""
        found = self.entries(object_type, namespace)
        defs = self.files.read_defs(cls, [path for _, path in found])
        return [(ref, d) for (ref, _), d in zip(found, defs, strict=True)]

    def namespaces(self) -> list[str]:
        return [ref.namespace for ref, _ in self.entries(NAMESPACE)]

    def namespace(self, namespace: str) -> objects_pb2.NamespaceDef | None:
        return self.get(ObjectRef(NAMESPACE, namespace), objects_pb2.NamespaceDef)

    def pools(self, namespace: str | None = None) -> list[tuple[ObjectRef, objects_pb2.TableDef]]:
        return self.objects(TABLE, objects_pb2.TableDef, namespace)

    def pool(self, namespace: str, name: str) -> objects_pb2.TableDef | None:
        return self.get(ObjectRef(TABLE, namespace, name), objects_pb2.TableDef)

    def views(self, namespace: str | None = None) -> list[tuple[ObjectRef, objects_pb2.ViewDef]]:
        return self.objects(VIEW, objects_pb2.ViewDef, namespace)

    def index_rules(
        self, namespace: str | None = None
    ) -> list[tuple[ObjectRef, objects_pb2.IndexRuleDef]]:
        return self.objects(INDEX_RULE, objects_pb2.IndexRuleDef, namespace)

    def is_empty_namespace(self, namespace: str) -> bool:
        """Whether no pool, view or index rule lives in ``namespace`` (stops at the first)."""
        for object_type in (TABLE, VIEW, INDEX_RULE):
            lo, hi = namespace_range(object_type, namespace, self.widths)
            if next(btree.scan(self.tree, self.files.read_node, lo, hi), None) is not None:
                return False
        return True


@dataclass(frozen=True)
class CatalogSnapshot:
    """One committed catalog version."""

    version: int
    root: RootFile
    state: CatalogState

    @property
    def path(self) -> str:
        return CatalogLayout.version_root(self.version)

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.root.created_at_millis / 1000, UTC)

    @property
    def rollback_from(self) -> int | None:
        src = self.root.rollback_from_root
        return None if src is None else CatalogLayout.parse_version_root(src)
