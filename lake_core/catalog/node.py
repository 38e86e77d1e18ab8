"""Node files: one B-tree node as an Arrow IPC file with three nullable UTF-8 columns.

Columns ``key``, ``value``, ``pnode`` (read by position). Rows, in order:

1. system rows (``key`` a system key name, ``value`` its text, ``pnode`` NULL):
   ``created_at_millis``, ``n_keys``; a root adds ``catalog_def``, ``previous_root`` and
   ``rollback_from_root`` (each only when present), ``transaction_id``, ``n_actions`` and
   ``actions_encoding``; a minimal export's root adds ``export_base``;
2. the pivot table: a row with NULL ``key`` and ``value`` whose ``pnode`` is the leftmost child
   (NULL in a leaf), then ``n_keys`` rows of (object key, definition path, right child or NULL)
   in ascending key order;
3. in a root only, ``n_actions`` rows of (object key or ``catalog_def``, action): the actions of
   the transaction that wrote this root, each a serialized ``ActionDef`` in standard padded
   base64 (``actions_encoding`` = :data:`ACTIONS_ENCODING`).

A reader collects system rows up to the first NULL key, reads ``n_keys`` pivot rows after it,
skips any all-NULL padding rows, then reads ``n_actions`` action rows. Unknown system keys are
ignored, so later versions can add some.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Union

import pyarrow as pa
import pyarrow.ipc as ipc
from google.protobuf.message import DecodeError

from lake_core.catalog.proto import actions_pb2
from lake_core.errors import CorruptObjectError

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=True),
        pa.field("value", pa.string(), nullable=True),
        pa.field("pnode", pa.string(), nullable=True),
    ]
)

CREATED_AT_MILLIS = "created_at_millis"
N_KEYS = "n_keys"
CATALOG_DEF = "catalog_def"
PREVIOUS_ROOT = "previous_root"
ROLLBACK_FROM_ROOT = "rollback_from_root"
TRANSACTION_ID = "transaction_id"
N_ACTIONS = "n_actions"
ACTIONS_ENCODING = "actions_encoding"
EXPORT_BASE = "export_base"
SYSTEM_KEYS = frozenset(
    {
        CREATED_AT_MILLIS,
        N_KEYS,
        CATALOG_DEF,
        PREVIOUS_ROOT,
        ROLLBACK_FROM_ROOT,
        TRANSACTION_ID,
        N_ACTIONS,
        ACTIONS_ENCODING,
        EXPORT_BASE,
    }
)

#: The value of the ``actions_encoding`` system row.
ACTIONS_ENCODING_BASE64 = "base64:lakepool.catalog.ActionDef"


@dataclass(frozen=True, eq=False)
class Node:
    """One B-tree node. ``children`` is empty in a leaf, else one more than ``keys``; a child is
    the path of a stored node (``node/<uuid>.arrow``) or a node not yet written."""

    keys: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    children: tuple[Child, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children


Child = Union[str, Node]  # noqa: UP007 - a runtime alias used before Node is complete


@dataclass(frozen=True)
class Action:
    """One action row of a root: the object key it touched and what was done."""

    key: str
    action: actions_pb2.ActionDef


@dataclass(frozen=True)
class RootFile:
    """A root node file (``vn/<version>``) or a saved transaction's running root."""

    tree: Node
    created_at_millis: int
    catalog_def: str
    previous_root: str | None = None
    rollback_from_root: str | None = None
    transaction_id: str = ""
    actions: tuple[Action, ...] = ()
    export_base: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _rows(system: list[tuple[str, str]], node: Node, tail: list[tuple[str, str]]) -> pa.RecordBatch:
    if any(isinstance(c, Node) for c in node.children):
        raise ValueError("a node is written after its children, which must have paths by then")
    children: list[str | None] = [str(c) for c in node.children] or [None] * (len(node.keys) + 1)
    keys: list[str | None] = [k for k, _ in system] + [None, *node.keys] + [k for k, _ in tail]
    values: list[str | None] = [v for _, v in system] + [None, *node.values] + [v for _, v in tail]
    pnodes: list[str | None] = [None] * len(system) + children + [None] * len(tail)
    return pa.record_batch(
        [pa.array(keys, pa.string()), pa.array(values, pa.string()), pa.array(pnodes, pa.string())],
        schema=SCHEMA,
    )


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, SCHEMA) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def encode_node(node: Node, created_at_millis: int) -> bytes:
    """A non-root node file."""
    system = [(CREATED_AT_MILLIS, str(created_at_millis)), (N_KEYS, str(len(node.keys)))]
    return _ipc(_rows(system, node, []))


def encode_action(action: actions_pb2.ActionDef) -> str:
    return base64.b64encode(action.SerializeToString(deterministic=True)).decode("ascii")


def encode_root(root: RootFile) -> bytes:
    """A root node file, with its system rows and actions."""
    system = [
        (CREATED_AT_MILLIS, str(root.created_at_millis)),
        (N_KEYS, str(len(root.tree.keys))),
        (CATALOG_DEF, root.catalog_def),
    ]
    if root.previous_root is not None:
        system.append((PREVIOUS_ROOT, root.previous_root))
    if root.rollback_from_root is not None:
        system.append((ROLLBACK_FROM_ROOT, root.rollback_from_root))
    if root.transaction_id:
        system.append((TRANSACTION_ID, root.transaction_id))
    system.append((N_ACTIONS, str(len(root.actions))))
    system.append((ACTIONS_ENCODING, ACTIONS_ENCODING_BASE64))
    if root.export_base is not None:
        system.append((EXPORT_BASE, root.export_base))
    system.extend(sorted(root.extra.items()))
    tail = [(a.key, encode_action(a.action)) for a in root.actions]
    return _ipc(_rows(system, root.tree, tail))


@dataclass(frozen=True)
class _Parsed:
    system: dict[str, str]
    tree: Node
    tail: list[tuple[str, str | None]]


def _parse(path: str, data: bytes) -> _Parsed:
    try:
        table = ipc.open_file(pa.BufferReader(data)).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptObjectError(path, f"not an Arrow IPC file: {e}") from None
    if table.num_columns < 3 or any(
        not pa.types.is_string(table.schema.field(i).type) for i in range(3)
    ):
        raise CorruptObjectError(path, "a node file has three UTF-8 columns key, value, pnode")
    keys: list[str | None] = table.column(0).to_pylist()
    values: list[str | None] = table.column(1).to_pylist()
    pnodes: list[str | None] = table.column(2).to_pylist()
    system: dict[str, str] = {}
    i = 0
    while i < len(keys):
        name = keys[i]
        if name is None:
            break
        system[name] = values[i] or ""
        i += 1
    if i == len(keys):
        raise CorruptObjectError(path, "no pivot table (no row with a NULL key)")
    try:
        n_keys = int(system[N_KEYS])
    except (KeyError, ValueError):
        raise CorruptObjectError(path, "missing or bad n_keys") from None
    end = i + 1 + n_keys
    if end > len(keys):
        raise CorruptObjectError(path, f"n_keys is {n_keys} but the pivot table is shorter")
    node_keys = [k for k in keys[i + 1 : end] if k is not None]
    node_values = [v for v in values[i + 1 : end] if v is not None]
    if len(node_keys) != n_keys or len(node_values) != n_keys:
        raise CorruptObjectError(path, "a pivot row has a NULL key or value (tombstone)")
    child_refs = [c for c in pnodes[i:end] if c is not None]
    if not child_refs:
        children: tuple[str, ...] = ()
    elif len(child_refs) != n_keys + 1:
        raise CorruptObjectError(path, "an inner node row lacks its child pointer")
    else:
        children = tuple(child_refs)
    if any(node_keys[j] >= node_keys[j + 1] for j in range(len(node_keys) - 1)):
        raise CorruptObjectError(path, "pivot keys are not in ascending order")
    while end < len(keys) and keys[end] is None and values[end] is None and pnodes[end] is None:
        end += 1  # padding rows (the format allows padding a pivot table to N rows)
    tail = [(k or "", v) for k, v in zip(keys[end:], values[end:], strict=True)]
    return _Parsed(system, Node(tuple(node_keys), tuple(node_values), children), tail)


def decode_node(path: str, data: bytes) -> Node:
    """A node file's tree node (system rows are not needed to walk the tree)."""
    return _parse(path, data).tree


def decode_action(path: str, text: str) -> actions_pb2.ActionDef:
    action = actions_pb2.ActionDef()
    try:
        action.ParseFromString(base64.b64decode(text, validate=True))
    except (DecodeError, binascii.Error, ValueError) as e:
        raise CorruptObjectError(path, f"undecodable action: {e}") from None
    return action


def decode_root(path: str, data: bytes) -> RootFile:
    """A root node file: tree, system rows and actions."""
    parsed = _parse(path, data)
    s = parsed.system
    try:
        created = int(s[CREATED_AT_MILLIS])
        catalog_def = s[CATALOG_DEF]
        n_actions = int(s.get(N_ACTIONS, "0"))
    except (KeyError, ValueError):
        raise CorruptObjectError(path, "a root needs created_at_millis and catalog_def") from None
    encoding = s.get(ACTIONS_ENCODING, ACTIONS_ENCODING_BASE64)
    if n_actions and encoding != ACTIONS_ENCODING_BASE64:
        raise CorruptObjectError(path, f"unknown actions_encoding {encoding!r}")
    rows = parsed.tail[:n_actions]
    if len(rows) < n_actions or any(not k or v is None for k, v in rows):
        raise CorruptObjectError(path, f"n_actions is {n_actions} but the action rows differ")
    actions = tuple(Action(k, decode_action(path, str(v))) for k, v in rows)
    extra = {k: v for k, v in s.items() if k not in SYSTEM_KEYS}
    return RootFile(
        tree=parsed.tree,
        created_at_millis=created,
        catalog_def=catalog_def,
        previous_root=s.get(PREVIOUS_ROOT),
        rollback_from_root=s.get(ROLLBACK_FROM_ROOT),
        transaction_id=s.get(TRANSACTION_ID, ""),
        actions=actions,
        export_base=s.get(EXPORT_BASE),
        extra=extra,
    )
