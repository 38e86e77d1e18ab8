"""The catalog's on-storage vectors: version file names, object keys, node files, definitions."""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from lake_core.catalog import btree
from lake_core.catalog.btree_keys import (
    INDEX_RULE,
    NAMESPACE,
    TABLE,
    VIEW,
    KeyWidths,
    ObjectRef,
    encode_type_id,
    parse_key,
)
from lake_core.catalog.defs import object_def_path
from lake_core.catalog.node import (
    Action,
    Node,
    RootFile,
    decode_node,
    decode_root,
    encode_node,
    encode_root,
)
from lake_core.catalog.proto import actions_pb2
from lake_core.errors import CorruptObjectError, InvalidNameError
from lake_core.layout import CatalogLayout, parse_version_name, version_name

W8 = KeyWidths(8, 8, 8, 8)


# -- version file names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "name"),
    [
        (0, "0" * 64),
        (1, "1" + "0" * 63),
        (100, "0010011" + "0" * 57),
        (12345678, "0111001010000110001111010000000000000000000000000000000000000000"),
        (
            9223372036854775802,
            "0101111111111111111111111111111111111111111111111111111111111110",
        ),
    ],
)
def test_version_names_are_64_binary_digits_least_significant_first(
    version: int, name: str
) -> None:
    assert version_name(version) == name
    assert CatalogLayout.version_root(version) == "vn/" + name
    assert parse_version_name(name) == version
    assert CatalogLayout.parse_version_root("vn/" + name) == version
    assert CatalogLayout.is_version_root("vn/" + name)


def test_version_100_as_the_32_wide_spec_example_prefix() -> None:
    assert version_name(100)[:32] == "00100110000000000000000000000000"


@pytest.mark.parametrize("bad", ["vn/2" + "0" * 63, "invalid.txt", "vn/" + "0" * 32, "vn/latest"])
def test_malformed_version_paths_are_rejected(bad: str) -> None:
    assert not CatalogLayout.is_version_root(bad)
    with pytest.raises(ValueError):
        CatalogLayout.parse_version_root(bad)


def test_negative_version_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        version_name(-1)


# -- object keys -------------------------------------------------------------------------------


def test_type_ids_encode_as_four_base64_characters() -> None:
    assert [encode_type_id(i) for i in range(6)] == ["A===", "B===", "C===", "D===", "E===", "F==="]
    assert encode_type_id(63) == "-==="
    assert encode_type_id(64) == "BA=="


def test_object_key_vectors_with_maximum_eight() -> None:
    ns = ObjectRef(NAMESPACE, "ns1").key(W8)
    t1 = ObjectRef(TABLE, "ns1", "t1").key(W8)
    assert ns == "B===ns1     "
    assert len(ns) == 12
    assert t1 == "C===ns1     t1      "
    assert len(t1) == 20
    assert ObjectRef(VIEW, "default", "view").key(W8) == "D===default view    "
    assert ObjectRef(INDEX_RULE, "ns1", "r").key(W8) == "F===ns1     r       "
    assert parse_key(t1, W8) == ObjectRef(TABLE, "ns1", "t1")
    assert parse_key(ns, W8) == ObjectRef(NAMESPACE, "ns1")
    with pytest.raises(ValueError):
        parse_key("B===ns1  ", W8)  # wrong length
    with pytest.raises(ValueError):
        parse_key("b===ns1     ", W8)


def test_key_width_counts_utf8_bytes() -> None:
    key = ObjectRef(NAMESPACE, "é").key(W8)  # 2 bytes in UTF-8
    assert key == "B===é      "
    assert len(key.encode("utf-8")) == 12
    with pytest.raises(InvalidNameError, match="at most 8 bytes"):
        ObjectRef(NAMESPACE, "ééééé").key(W8)  # 5 characters, 10 bytes


@pytest.mark.parametrize("bad", ["", "a b", "a\tb", "a\x00", "a\x7f", "aaaaaaaaa"])
def test_names_that_cannot_be_keyed_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        ObjectRef(TABLE, "ns1", bad).key(W8)
    with pytest.raises(InvalidNameError):
        ObjectRef(NAMESPACE, bad).key(W8)


def test_keys_sort_by_type_then_namespace_then_name() -> None:
    refs = [
        ObjectRef(TABLE, "b", "a"),
        ObjectRef(NAMESPACE, "z"),
        ObjectRef(TABLE, "a", "zz"),
        ObjectRef(TABLE, "a", "z"),
        ObjectRef(VIEW, "a", "a"),
        ObjectRef(TABLE, "ab", "a"),
    ]
    by_key = sorted(refs, key=lambda r: r.key(W8))
    assert by_key == sorted(refs, key=lambda r: (r.type, r.namespace, r.name))


# -- definition file paths ---------------------------------------------------------------------


def test_definition_paths() -> None:
    assert len(CatalogLayout.new_catalog_def()) == len("def/catalog/") + 36 + len(".binpb")
    ns = object_def_path(ObjectRef(NAMESPACE, "ns1"))
    assert ns.startswith("def/ns/") and ns.endswith("-ns1.binpb") and len(ns) == 7 + 36 + 10
    t = object_def_path(ObjectRef(TABLE, "ns1", "t1"))
    assert t.startswith("def/table/") and t.endswith("-ns1-t1.binpb")
    assert object_def_path(ObjectRef(VIEW, "ns1", "v1")).startswith("def/view/")
    assert CatalogLayout.dtxn("tid1") == "dtxn/tid1.binpb"


# -- node files --------------------------------------------------------------------------------


def _rows(data: bytes) -> list[tuple[str | None, str | None, str | None]]:
    reader = ipc.open_file(pa.BufferReader(data))
    assert reader.num_record_batches == 1
    table = reader.read_all()
    assert table.schema.names == ["key", "value", "pnode"]
    assert all(f.type == pa.string() and f.nullable for f in table.schema)
    return list(
        zip(*(table.column(i).to_pylist() for i in range(3)), strict=True)  # type: ignore[arg-type]
    )


def test_leaf_node_file_layout() -> None:
    node = Node(("a", "b"), ("def/x/1.binpb", "def/x/2.binpb"))
    data = encode_node(node, 1700000000123)
    assert data[:6] == b"ARROW1"
    assert _rows(data) == [
        ("created_at_millis", "1700000000123", None),
        ("n_keys", "2", None),
        (None, None, None),
        ("a", "def/x/1.binpb", None),
        ("b", "def/x/2.binpb", None),
    ]
    back = decode_node("node/x.arrow", data)
    assert (back.keys, back.values, back.children) == (node.keys, node.values, ())


def test_root_file_layout_with_actions() -> None:
    action = actions_pb2.ActionDef(
        type=actions_pb2.TABLE_CREATE, object_type=2, namespace_name="ns1", object_name="t1"
    )
    root = RootFile(
        tree=Node(("k",), ("def/v.binpb",), ("node/l.arrow", "node/r.arrow")),
        created_at_millis=5,
        catalog_def="def/catalog/c.binpb",
        previous_root=CatalogLayout.version_root(3),
        rollback_from_root=CatalogLayout.version_root(2),
        transaction_id="t-1",
        actions=(Action("C===ns1     t1      ", action),),
    )
    rows = _rows(encode_root(root))
    assert rows[:9] == [
        ("created_at_millis", "5", None),
        ("n_keys", "1", None),
        ("catalog_def", "def/catalog/c.binpb", None),
        ("previous_root", CatalogLayout.version_root(3), None),
        ("rollback_from_root", CatalogLayout.version_root(2), None),
        ("transaction_id", "t-1", None),
        ("n_actions", "1", None),
        ("actions_encoding", "base64:lakepool.catalog.ActionDef", None),
        (None, None, "node/l.arrow"),
    ]
    assert rows[9] == ("k", "def/v.binpb", "node/r.arrow")
    key, value, pnode = rows[10]
    assert (key, pnode) == ("C===ns1     t1      ", None)
    assert actions_pb2.ActionDef.FromString(base64.b64decode(value or "")) == action
    back = decode_root(CatalogLayout.version_root(4), encode_root(root))
    assert back.tree.children == ("node/l.arrow", "node/r.arrow")
    assert back.actions == root.actions
    assert (back.previous_root, back.rollback_from_root) == (
        root.previous_root,
        CatalogLayout.version_root(2),
    )


def test_reader_tolerates_padding_rows_and_unknown_system_keys() -> None:
    batch = pa.record_batch(
        [
            pa.array(["created_at_millis", "n_keys", "future_key", None, "a", None, None]),
            pa.array(["1", "1", "x", None, "def/a.binpb", None, None]),
            pa.array([None] * 7, pa.string()),
        ],
        names=["key", "value", "pnode"],
    )
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, batch.schema) as w:
        w.write_batch(batch)
    node = decode_node("node/p.arrow", sink.getvalue().to_pybytes())
    assert node.keys == ("a",) and node.is_leaf


@pytest.mark.parametrize("data", [b"", b"not arrow", b"ARROW1\x00\x00garbage"])
def test_corrupt_node_files_are_named_errors(data: bytes) -> None:
    with pytest.raises(CorruptObjectError, match="node/bad.arrow"):
        decode_node("node/bad.arrow", data)


def test_unwritten_nodes_get_paths_children_first() -> None:
    leaf1, leaf2 = Node(("a",), ("1",)), Node(("c",), ("3",))
    root = Node(("b",), ("2",), (leaf1, leaf2))
    names = iter(["node/1.arrow", "node/2.arrow"])
    settled, written = btree.unwritten(root, lambda: next(names))
    assert settled.children == ("node/1.arrow", "node/2.arrow")
    assert [p for p, _ in written] == ["node/1.arrow", "node/2.arrow"]
