"""The copy-on-write B-tree, as pure functions over immutable :class:`Node` values.

Nothing here does I/O: stored children are loaded through a ``load(path) -> Node`` callable, and
every change returns a new root whose changed nodes are new, unwritten :class:`Node` objects
while untouched subtrees are still referred to by their paths, so versions share them.

Rules for order ``N`` (the textbook's and the Olympia specification's):

- a node holds at most ``N - 1`` keys and an inner node one more child than keys;
- an insert that leaves a node with ``N`` keys splits it around its key at index ``N // 2``:
  the lower keys stay left, that key moves up, the higher keys go right (order 5 with keys
  ``a``-``e`` gives root ``{c}`` over ``{a, b}`` and ``{d, e}``); a split root grows the tree;
- every node but the root keeps at least ``ceil(N / 2) - 1`` keys: a delete that leaves fewer
  borrows through the parent from a sibling that can spare one (left first), else merges with a
  sibling and the parent's separating key; a root left without keys is replaced by its child;
- all leaves are at the same depth.

(The Olympia reference splits one key earlier and never merges; its shape differs, readers do
not care.)
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lake_core.catalog.node import Child, Node

Loader = Callable[[str], Node]
MIN_ORDER = 3


def min_keys(order: int) -> int:
    """The fewest keys a non-root node may hold."""
    return (order + 1) // 2 - 1


def _node(child: Child, load: Loader) -> Node:
    return child if isinstance(child, Node) else load(child)


def _replace(t: tuple[Child, ...], i: int, *items: Child) -> tuple[Child, ...]:
    return t[:i] + items + t[i + 1 :]


def lookup(root: Node, key: str, load: Loader) -> str | None:
    """The value stored under ``key``, or None."""
    node = root
    while True:
        i = bisect_left(node.keys, key)
        if i < len(node.keys) and node.keys[i] == key:
            return node.values[i]
        if node.is_leaf:
            return None
        node = _node(node.children[i], load)


def scan(
    root: Node, load: Loader, lo: str | None = None, hi: str | None = None
) -> Iterator[tuple[str, str]]:
    """``(key, value)`` for ``lo <= key < hi`` in key order, loading only the nodes that can
    hold such keys."""

    def walk(node: Node) -> Iterator[tuple[str, str]]:
        start = bisect_left(node.keys, lo) if lo is not None else 0
        for j in range(start, len(node.keys) + 1):
            if not node.is_leaf:
                yield from walk(_node(node.children[j], load))
            if j == len(node.keys):
                return
            if hi is not None and node.keys[j] >= hi:
                raise _Stop
            yield node.keys[j], node.values[j]

    try:
        yield from walk(root)
    except _Stop:
        return


class _Stop(Exception):
    """Ends a scan at its upper bound from any depth."""


def insert(root: Node, key: str, value: str, order: int, load: Loader) -> Node:
    """The tree with ``key`` set to ``value`` (inserted, or its value replaced)."""
    if order < MIN_ORDER:
        raise ValueError(f"a B-tree order is at least {MIN_ORDER}, not {order}")
    result = _insert(root, key, value, order, load)
    if len(result) == 1:
        return result[0]
    left, k, v, right = result
    return Node((k,), (v,), (left, right))


_Split = tuple[Node, str, str, Node]


def _insert(node: Node, key: str, value: str, order: int, load: Loader) -> tuple[Node] | _Split:
    keys, values, children = node.keys, node.values, node.children
    i = bisect_left(keys, key)
    if i < len(keys) and keys[i] == key:
        return (Node(keys, values[:i] + (value,) + values[i + 1 :], children),)
    if node.is_leaf:
        keys = keys[:i] + (key,) + keys[i:]
        values = values[:i] + (value,) + values[i:]
    else:
        sub = _insert(_node(children[i], load), key, value, order, load)
        if len(sub) == 1:
            return (Node(keys, values, _replace(children, i, sub[0])),)
        left, k, v, right = sub
        keys = keys[:i] + (k,) + keys[i:]
        values = values[:i] + (v,) + values[i:]
        children = _replace(children, i, left, right)
    if len(keys) < order:
        return (Node(keys, values, children),)
    mid = order // 2
    lower = Node(keys[:mid], values[:mid], children[: mid + 1] if children else ())
    upper = Node(keys[mid + 1 :], values[mid + 1 :], children[mid + 1 :] if children else ())
    return lower, keys[mid], values[mid], upper


def delete(root: Node, key: str, order: int, load: Loader) -> Node:
    """The tree without ``key``. Raises KeyError if it is absent."""
    new = _delete(root, key, order, load)
    if not new.keys and not new.is_leaf:
        return _node(new.children[0], load)
    return new


def _max_item(node: Node, load: Loader) -> tuple[str, str]:
    while not node.is_leaf:
        node = _node(node.children[-1], load)
    return node.keys[-1], node.values[-1]


def _delete(node: Node, key: str, order: int, load: Loader) -> Node:
    keys, values = node.keys, node.values
    i = bisect_left(keys, key)
    found = i < len(keys) and keys[i] == key
    if node.is_leaf:
        if not found:
            raise KeyError(key)
        return Node(keys[:i] + keys[i + 1 :], values[:i] + values[i + 1 :])
    child = _node(node.children[i], load)
    if found:
        # An inner key is replaced by its predecessor, which is then deleted from its leaf.
        pk, pv = _max_item(child, load)
        keys = keys[:i] + (pk,) + keys[i + 1 :]
        values = values[:i] + (pv,) + values[i + 1 :]
        key = pk
    children = _replace(node.children, i, _delete(child, key, order, load))
    return _rebalance(Node(keys, values, children), i, order, load)


def _rebalance(parent: Node, i: int, order: int, load: Loader) -> Node:
    """``parent`` with its child ``i`` brought back to at least the minimum number of keys."""
    child = _node(parent.children[i], load)
    least = min_keys(order)
    if len(child.keys) >= least:
        return parent
    keys, values, children = parent.keys, parent.values, parent.children
    if i > 0:
        left = _node(children[i - 1], load)
        if len(left.keys) > least:
            moved = Node(
                (keys[i - 1], *child.keys),
                (values[i - 1], *child.values),
                (left.children[-1], *child.children) if child.children else (),
            )
            shrunk = Node(left.keys[:-1], left.values[:-1], left.children[:-1])
            return Node(
                keys[: i - 1] + (left.keys[-1],) + keys[i:],
                values[: i - 1] + (left.values[-1],) + values[i:],
                children[: i - 1] + (shrunk, moved) + children[i + 1 :],
            )
    if i < len(children) - 1:
        right = _node(children[i + 1], load)
        if len(right.keys) > least:
            moved = Node(
                (*child.keys, keys[i]),
                (*child.values, values[i]),
                (*child.children, right.children[0]) if child.children else (),
            )
            shrunk = Node(right.keys[1:], right.values[1:], right.children[1:])
            return Node(
                keys[:i] + (right.keys[0],) + keys[i + 1 :],
                values[:i] + (right.values[0],) + values[i + 1 :],
                children[:i] + (moved, shrunk) + children[i + 2 :],
            )
    j = i - 1 if i > 0 else i  # merge children j and j + 1 around key j
    a = _node(children[j], load) if j != i else child
    b = _node(children[j + 1], load) if j + 1 != i else child
    merged = Node(
        (*a.keys, keys[j], *b.keys),
        (*a.values, values[j], *b.values),
        (*a.children, *b.children),
    )
    return Node(
        keys[:j] + keys[j + 1 :],
        values[:j] + values[j + 1 :],
        children[:j] + (merged,) + children[j + 2 :],
    )


@dataclass(frozen=True)
class Shape:
    """What :func:`check` found: depth (1 for a lone root), number of keys, number of nodes."""

    depth: int
    keys: int
    nodes: int


def check(root: Node, order: int, load: Loader) -> Shape:
    """Verify every B-tree invariant; raises AssertionError naming the first violation."""
    least = min_keys(order)
    leaf_depths: set[int] = set()
    counts = [0, 0]

    def walk(node: Node, depth: int, lo: str | None, hi: str | None, is_root: bool) -> None:
        counts[0] += len(node.keys)
        counts[1] += 1
        assert len(node.keys) == len(node.values), "keys and values differ in number"
        assert len(node.keys) <= order - 1, f"{len(node.keys)} keys in a node of order {order}"
        if not is_root:
            assert len(node.keys) >= least, f"{len(node.keys)} keys, fewer than {least}"
        assert list(node.keys) == sorted(set(node.keys)), "keys not strictly ascending"
        if node.keys:
            assert lo is None or node.keys[0] > lo, "key below its subtree's range"
            assert hi is None or node.keys[-1] < hi, "key above its subtree's range"
        if node.is_leaf:
            leaf_depths.add(depth)
            return
        assert len(node.children) == len(node.keys) + 1, "children != keys + 1"
        bounds = [lo, *node.keys, hi]
        for j, c in enumerate(node.children):
            walk(_node(c, load), depth + 1, bounds[j], bounds[j + 1], False)

    walk(root, 1, None, None, True)
    assert len(leaf_depths) == 1, f"leaves at different depths {sorted(leaf_depths)}"
    return Shape(leaf_depths.pop(), counts[0], counts[1])


def unwritten(root: Node, new_path: Callable[[], str]) -> tuple[Node, list[tuple[str, Node]]]:
    """Give every unwritten node below ``root`` a path. Returns the root with only path
    children, and ``(path, node)`` for each node to write (children listed before parents)."""
    out: list[tuple[str, Node]] = []

    def settle(node: Node) -> Node:
        if not any(isinstance(c, Node) for c in node.children):
            return node
        kids: list[Child] = []
        for c in node.children:
            if isinstance(c, Node):
                path = new_path()
                out.append((path, settle(c)))
                kids.append(path)
            else:
                kids.append(c)
        return Node(node.keys, node.values, tuple(kids))

    return settle(root), out


def paths(root: Node, load: Loader) -> Iterator[str]:
    """Every stored node path reachable from ``root`` (each once, parents before children)."""
    for c in root.children:
        if isinstance(c, str):
            yield c
        yield from paths(_node(c, load), load)
