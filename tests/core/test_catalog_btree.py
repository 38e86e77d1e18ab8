"""The copy-on-write B-tree as pure logic: shapes, invariants, and random operation sequences
against a dict, with every version persisted and re-read to prove old versions never change."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from lake_core.catalog import btree
from lake_core.catalog.node import Node


class MemoryNodes:
    """A node store: ``persist`` writes a tree's unwritten nodes like a commit does."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.reads = 0
        self._ids = itertools.count()

    def load(self, path: str) -> Node:
        self.reads += 1
        return self.nodes[path]

    def persist(self, root: Node) -> Node:
        settled, written = btree.unwritten(root, lambda: f"node/{next(self._ids)}.arrow")
        for path, node in written:
            assert path not in self.nodes
            self.nodes[path] = node
        return settled


def _insert_all(keys: str, order: int) -> tuple[Node, MemoryNodes]:
    mem = MemoryNodes()
    root = Node()
    for k in keys:
        root = mem.persist(btree.insert(root, k, k.upper(), order, mem.load))
    return root, mem


def _shape(node: Node, mem: MemoryNodes) -> object:
    if node.is_leaf:
        return "".join(node.keys)
    return ("".join(node.keys), [_shape(mem.load(str(c)), mem) for c in node.children])


def test_order_five_keys_a_to_e_split_at_the_middle_key() -> None:
    # Our rule (docs/catalog.md): at most N-1 = 4 keys; the fifth splits around index N//2.
    root, mem = _insert_all("abcd", 5)
    assert _shape(root, mem) == "abcd"
    root, mem = _insert_all("abcde", 5)
    assert _shape(root, mem) == ("c", ["ab", "de"])


def test_order_three_grows_and_shrinks_one_level_at_a_time() -> None:
    root, mem = _insert_all("abcdefg", 3)
    assert _shape(root, mem) == ("d", [("b", ["a", "c"]), ("f", ["e", "g"])])
    for k in "abcdef":
        root = mem.persist(btree.delete(root, k, 3, mem.load))
        btree.check(root, 3, mem.load)
    assert _shape(root, mem) == "g"


def test_delete_borrows_from_a_sibling_before_merging() -> None:
    root, mem = _insert_all("abcdefgh", 5)  # c / f split: (ab)c(de)f(gh) -> plus inserts
    assert _shape(root, mem) == ("cf", ["ab", "de", "gh"])
    root = mem.persist(btree.insert(root, "i", "I", 5, mem.load))
    root = mem.persist(btree.delete(root, "e", 5, mem.load))  # (d) too small: borrow f down
    assert _shape(root, mem) == ("cg", ["ab", "df", "hi"])
    root = mem.persist(btree.delete(root, "a", 5, mem.load))  # (b): right sibling cannot spare
    assert _shape(root, mem) == ("g", ["bcdf", "hi"])


def test_lookup_and_scan_read_one_node_per_level() -> None:
    keys = [f"k{i:05d}" for i in range(2000)]
    mem = MemoryNodes()
    root = Node()
    for k in keys:
        root = btree.insert(root, k, "v" + k, 8, mem.load)
    root = mem.persist(root)
    shape = btree.check(root, 8, mem.load)
    assert shape.keys == 2000
    mem.reads = 0
    assert btree.lookup(root, "k01234", mem.load) == "vk01234"
    assert mem.reads <= shape.depth - 1  # the root is in hand; an inner key stops early
    mem.reads = 0
    assert btree.lookup(root, "k01234x", mem.load) is None
    assert mem.reads == shape.depth - 1  # a miss always ends in a leaf
    mem.reads = 0
    got = list(btree.scan(root, mem.load, "k00100", "k00110"))
    assert [k for k, _ in got] == keys[100:110]
    assert mem.reads <= 2 * (shape.depth - 1)


operation = st.tuples(st.sampled_from(["put", "put", "delete"]), st.integers(0, 60))


@settings(max_examples=150, deadline=None)
@given(order=st.integers(3, 7), ops=st.lists(operation, max_size=120))
def test_random_operations_match_a_dict_and_old_versions_never_change(
    order: int, ops: list[tuple[str, int]]
) -> None:
    mem = MemoryNodes()
    root = Node()
    model: dict[str, str] = {}
    history: list[tuple[Node, dict[str, str]]] = [(root, {})]
    for step, (op, n) in enumerate(ops):
        key = f"{n:03d}"
        if op == "put":
            root = btree.insert(root, key, f"v{step}", order, mem.load)
            model[key] = f"v{step}"
        elif key in model:
            root = btree.delete(root, key, order, mem.load)
            del model[key]
        else:
            try:
                btree.delete(root, key, order, mem.load)
            except KeyError:
                pass
            else:
                raise AssertionError("deleting a missing key must fail")
            continue
        root = mem.persist(root)
        history.append((root, dict(model)))
        shape = btree.check(root, order, mem.load)
        assert shape.keys == len(model)
        assert btree.lookup(root, key, mem.load) == model.get(key)
    for old_root, old_model in history:
        assert dict(btree.scan(old_root, mem.load)) == old_model
        lo, hi = "010", "030"
        assert list(btree.scan(old_root, mem.load, lo, hi)) == sorted(
            (k, v) for k, v in old_model.items() if lo <= k < hi
        )
