"""Object definition files: the path a new definition gets, and how it is (de)serialized.

A definition file holds one bare serialized protobuf message and is never rewritten: a change
writes a new file (new UUID) and points the tree at it. Where each kind lives is
:class:`~lake_core.layout.CatalogLayout`'s (``def/<kind>/<uuid4>-<names>.binpb``,
``dtxn/<transaction-id>.binpb``); :func:`object_def_path` picks the one for an object.
"""

from __future__ import annotations

import uuid
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from lake_core.catalog.btree_keys import INDEX_RULE, NAMESPACE, TABLE, VIEW, ObjectRef
from lake_core.catalog.proto import objects_pb2
from lake_core.errors import CorruptObjectError
from lake_core.layout import CatalogLayout
from lake_core.names import MAX_NAME_BYTES

#: The catalog format version this code writes (``CatalogDef.major_version``) and reads.
FORMAT_VERSION = 1
DEFAULT_ORDER = 128
DEFAULT_NODE_FILE_MAX_BYTES = 1 << 20
DEFAULT_TXN_TTL_MILLIS = 3 * 24 * 3600 * 1000

M = TypeVar("M", bound=Message)


def object_def_path(ref: ObjectRef) -> str:
    """A fresh path for a new definition of ``ref``."""
    if ref.type == NAMESPACE:
        return CatalogLayout.new_namespace_def(ref.namespace)
    new_def = {
        TABLE: CatalogLayout.new_table_def,
        VIEW: CatalogLayout.new_view_def,
        INDEX_RULE: CatalogLayout.new_index_rule_def,
    }[ref.type]
    return new_def(ref.namespace, ref.name)


def encode_def(message: Message) -> bytes:
    """Deterministic bytes (map entries sorted), so equal definitions are equal files."""
    return message.SerializeToString(deterministic=True)


def decode_def(cls: type[M], path: str, data: bytes) -> M:
    message = cls()
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise CorruptObjectError(path, f"not a {cls.__name__}: {e}") from None
    return message


def new_catalog_def(
    *,
    order: int = DEFAULT_ORDER,
    max_name_bytes: int = MAX_NAME_BYTES,
    created_at_millis: int = 0,
) -> objects_pb2.CatalogDef:
    """The definition of a new catalog: B-tree order and name widths."""
    return objects_pb2.CatalogDef(
        id=str(uuid.uuid4()),
        major_version=FORMAT_VERSION,
        order=order,
        namespace_name_max_size_bytes=max_name_bytes,
        table_name_max_size_bytes=max_name_bytes,
        view_name_max_size_bytes=max_name_bytes,
        index_rule_name_max_size_bytes=max_name_bytes,
        node_file_max_size_bytes=DEFAULT_NODE_FILE_MAX_BYTES,
        txn_ttl_millis=DEFAULT_TXN_TTL_MILLIS,
        txn_isolation_level=objects_pb2.SNAPSHOT,
        created_at_millis=created_at_millis,
    )


def check_catalog_def(path: str, catalog_def: objects_pb2.CatalogDef) -> objects_pb2.CatalogDef:
    """Refuse a catalog this code cannot read correctly."""
    if catalog_def.major_version > FORMAT_VERSION:
        raise CorruptObjectError(
            path,
            f"catalog format version {catalog_def.major_version} is newer than this lakepool "
            f"reads ({FORMAT_VERSION}); upgrade lakepool",
        )
    if catalog_def.order < 3:
        raise CorruptObjectError(path, f"catalog order {catalog_def.order} is below 3")
    if not catalog_def.namespace_name_max_size_bytes or not catalog_def.table_name_max_size_bytes:
        raise CorruptObjectError(path, "catalog name widths are missing")
    return catalog_def
