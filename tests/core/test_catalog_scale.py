"""Thousands of pools: create, look up, list and drop stay logarithmic in node reads.

The catalog runs with a small order (8) and no cache over a store that counts requests, so
every node a call needs is a visible ``get``."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from lake_core.catalog import Catalog
from lake_core.catalog.btree import check
from lake_core.catalog.proto import objects_pb2
from lake_core.stores import ObjectStore
from lake_core.stores.base import ObjectInfo

ORDER = 8
SIZES = [10, 100, 1000, 3000]
S3_SIZES = [10, 100, 1000]  # moto takes ~5-8 ms a request: fewer pools on S3
NAMESPACES = 10


class CountingStore(ObjectStore):
    """Delegates to ``inner`` and counts requests by kind and catalog folder."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.counts: Counter[str] = Counter()

    @staticmethod
    def _kind(key: str) -> str:
        parts = key.split("/")
        if len(parts) > 2 and parts[1] == "vn":
            return "hint" if parts[2] in ("latest", "oldest") else "root"
        return parts[1] if len(parts) > 1 else parts[0]

    def get(self, key: str) -> bytes:
        self.counts["get " + self._kind(key)] += 1
        return self.inner.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self.counts["get " + self._kind(key)] += 1
        return self.inner.get_range(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        self.counts["put " + self._kind(key)] += 1
        self.inner.put(key, data)

    def put_if_missing(self, key: str, data: bytes) -> None:
        self.counts["put " + self._kind(key)] += 1
        self.inner.put_if_missing(key, data)

    def head(self, key: str) -> ObjectInfo:
        self.counts["head " + self._kind(key)] += 1
        return self.inner.head(key)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def arrow_location(self, key: str) -> tuple[Any, str]:
        return self.inner.arrow_location(key)

    def measure(self) -> Counter[str]:
        """Counts since the last call."""
        out = Counter(self.counts)
        self.counts.clear()
        return out


def _pool(i: int) -> tuple[str, str, objects_pb2.TableDef]:
    definition = objects_pb2.TableDef(
        id=f"pool-{i:06d}",
        key_fields=["ts"],
        key_order=objects_pb2.KEY_ORDER_DESC,
        target_size=1 << 27,
        seek_stride=1 << 22,
    )
    return f"ns{i % NAMESPACES}", f"p{i:06d}", definition


def _max_depth(n: int) -> int:
    """The B-tree height bound, levels counted from 1: 1 + log_t((n + 1) / 2), t = ceil(N/2)."""
    t = math.ceil(ORDER / 2)
    return 1 + math.floor(math.log((n + 1) / 2, t))


@pytest.mark.slow
def test_thousands_of_pools_stay_logarithmic_in_node_reads(store: ObjectStore) -> None:
    counting = CountingStore(store)

    def cold() -> Catalog:
        """A catalog object with an empty cache, as a new ``lake`` process has."""
        return Catalog(counting)

    catalog = cold()
    catalog.initialize(order=ORDER)
    txn = catalog.begin()
    for ns in range(NAMESPACES):
        txn.create_namespace(f"ns{ns}")
    txn.commit()
    rng = random.Random(7)
    created = 0
    report = []
    sizes = S3_SIZES if store.uri.startswith("s3://") else SIZES
    for size in sizes:
        txn = cold().begin()  # the bulk path: one transaction, definitions written in parallel
        txn.create_pools([_pool(i) for i in range(created, size)])
        txn.commit()
        created = size

        snap = cold().snapshot()
        shape = check(snap.root.tree, ORDER, snap.state.files.read_node)
        assert shape.keys == size + NAMESPACES
        assert shape.depth <= _max_depth(size + NAMESPACES)
        below_root = shape.depth - 1
        counting.measure()

        # Look up: the root, at most one node per level below it, the pool's definition (and
        # the catalog's, once per process).
        lookups = min(20, size)
        for i in rng.sample(range(size), lookups):
            ns, name, definition = _pool(i)
            assert cold().snapshot().state.pool(ns, name) == definition
        looked = counting.measure()
        assert looked["get root"] == lookups
        assert looked["get node"] <= lookups * below_root
        assert looked["get def"] == lookups * 2

        # A miss always walks down to a leaf.
        assert cold().snapshot().state.pool("ns0", "missing") is None
        assert counting.measure()["get node"] == below_root

        # Create one pool: the paths to its key, to its namespace's key and to the key a view
        # of the same name would have (a pool and a view never share a name: checked in
        # apply_action) are read; its path is rewritten, plus at most one new node per level
        # for splits.
        t = cold().begin()
        t.create_pool(*_pool(size))
        t.commit()
        made = counting.measure()
        assert made["get node"] <= 3 * below_root
        assert below_root <= made["put node"] <= 2 * below_root + 1
        assert made["put root"] == 1

        # Drop it: its path, plus at most two siblings per level for rebalancing.
        t = cold().begin()
        t.drop_pool(*_pool(size)[:2])
        t.commit()
        dropped = counting.measure()
        assert dropped["get node"] <= 3 * below_root
        assert dropped["put node"] <= 2 * below_root

        # List one namespace: the nodes of its key range, not the whole tree.
        pools = cold().snapshot().state.pools("ns3")
        assert len(pools) == len(range(3, size, NAMESPACES))
        listed = counting.measure()
        per_leaf = math.ceil(ORDER / 2) - 1
        assert listed["get node"] <= shape.depth + 2 * (len(pools) // per_leaf + 1)
        assert listed["get def"] == len(pools) + 1
        report.append(
            (size, shape.depth, looked["get node"] / lookups, made["get node"], listed["get node"])
        )

    # Reads per lookup grow with the depth, i.e. logarithmically: 100-300x the pools, +2-3 reads.
    per_lookup = [r[2] for r in report]
    assert per_lookup == sorted(per_lookup)
    assert per_lookup[-1] - per_lookup[0] <= math.log(sizes[-1] / sizes[0], ORDER // 2) + 1
    print("\npools depth node-reads/lookup node-reads/create node-reads/list(ns3)")
    for row in report:
        print(*row)
