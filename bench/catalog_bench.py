"""Catalog benchmark: commit latency and lookup latency at 10, 1,000 and 100,000 pools, with the
node reads each lookup costs.

Usage: .venv/bin/python bench/catalog_bench.py [--sizes 10,1000,100000] [--store local|s3]
       [--order 128] [--samples 50]

For each size the catalog is grown to that many pools, then measured:

- **commit**: one transaction creating one pool (namespace ensured, definition written, path
  rewritten, root put-if-missing, ``vn/latest`` hint), wall clock per commit;
- **lookup, cold**: a new ``Catalog`` object (empty cache, as a ``lake`` CLI process) finds the
  latest version (``vn/latest``, a probe) and reads root, catalog definition, the nodes on the
  path and the pool's definition;
- **lookup, warm**: one long-lived ``Catalog`` (a server): immutable files are cached, so a
  lookup costs the hint read, the probe, and nothing else unless the catalog changed.

Node reads and requests per cold lookup are counted by wrapping the store. Pools up to 1,000 are
created one commit each; larger sizes are built by the bulk path (``Transaction.create_pools``:
10,000 pools per transaction, their definitions written 16 at a time), which the output says.
``--store s3`` runs against a moto S3 server in this process (its latency is moto's, not AWS's).
Prints one markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lake_core.catalog import Catalog  # noqa: E402
from lake_core.catalog.btree import check  # noqa: E402
from lake_core.catalog.proto import objects_pb2  # noqa: E402
from lake_core.stores import ObjectStore  # noqa: E402
from lake_core.stores.base import ObjectInfo  # noqa: E402
from lake_core.stores.factory import open_store  # noqa: E402

NAMESPACES = 16
BULK_BATCH = 10_000
ONE_BY_ONE_UP_TO = 1_000


class CountingStore(ObjectStore):
    """Counts requests; ``node`` gets separately."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.counts: Counter[str] = Counter()

    def _count(self, op: str, key: str) -> None:
        self.counts["requests"] += 1
        if op == "get" and "/node/" in key:
            self.counts["node gets"] += 1

    def get(self, key: str) -> bytes:
        self._count("get", key)
        return self.inner.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self._count("get", key)
        return self.inner.get_range(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        self._count("put", key)
        self.inner.put(key, data)

    def put_if_missing(self, key: str, data: bytes) -> None:
        self._count("put", key)
        self.inner.put_if_missing(key, data)

    def head(self, key: str) -> ObjectInfo:
        self._count("head", key)
        return self.inner.head(key)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self._count("delete", key)
        self.inner.delete(key)

    def arrow_location(self, key: str) -> tuple[Any, str]:
        return self.inner.arrow_location(key)


def pool(i: int) -> tuple[str, str, objects_pb2.TableDef]:
    definition = objects_pb2.TableDef(
        id=f"bench{i:08d}",
        key_fields=["ts"],
        key_order=objects_pb2.KEY_ORDER_DESC,
        target_size=128 << 20,
        seek_stride=4 << 20,
        layout=objects_pb2.PoolLayout(kind="sorted"),
        format_version=1,
    )
    return f"ns{i % NAMESPACES:02d}", f"pool{i:08d}", definition


def create_one(catalog: Catalog, i: int) -> None:
    ns, name, definition = pool(i)
    txn = catalog.begin()
    txn.create_namespace(ns, if_not_exists=True)
    txn.create_pool(ns, name, definition)
    txn.commit()


def grow(catalog: Catalog, start: int, stop: int) -> str:
    """Add pools ``start..stop-1``; returns how."""
    if stop <= ONE_BY_ONE_UP_TO:
        for i in range(start, stop):
            create_one(catalog, i)
        return "one commit each"
    pos = start
    while pos < stop:
        end = min(stop, pos + BULK_BATCH)
        txn = catalog.begin()
        for ns in {pool(i)[0] for i in range(pos, min(end, pos + NAMESPACES))}:
            txn.create_namespace(ns, if_not_exists=True)
        txn.create_pools([pool(i) for i in range(pos, end)])
        txn.commit()
        print(f"  bulk: {end} pools", file=sys.stderr)
        pos = end
    return f"bulk, {BULK_BATCH:,} a commit"


def ms(values: list[float]) -> str:
    values = sorted(values)
    p50 = statistics.median(values) * 1000
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))] * 1000
    return f"{p50:.2f} / {p95:.2f}"


def measure(store: CountingStore, order: int, sizes: list[int], samples: int) -> list[str]:
    catalog = Catalog(store)
    catalog.initialize(order=order)
    rng = random.Random(1)
    rows = []
    have = 0
    extra = 10_000_000  # ids of the pools created while measuring commits
    for size in sizes:
        t0 = time.perf_counter()
        built = grow(catalog, have, size)
        build_s = time.perf_counter() - t0
        have = size
        # One ordinary commit, so the measured root is not a bulk root with 10,000 actions.
        create_one(catalog, extra)
        extra += 1

        commits = []
        for _ in range(samples):
            t = time.perf_counter()
            create_one(catalog, extra)
            commits.append(time.perf_counter() - t)
            extra += 1

        targets = [pool(i) for i in rng.sample(range(size), min(samples, size))]
        cold, warm = [], []
        store.counts.clear()
        for ns, name, definition in targets:
            t = time.perf_counter()
            found = Catalog(store).snapshot().state.pool(ns, name)
            cold.append(time.perf_counter() - t)
            assert found == definition
        node_reads = store.counts["node gets"] / len(targets)
        requests = store.counts["requests"] / len(targets)
        server = Catalog(store)
        for ns, name, _ in targets:
            server.snapshot().state.pool(ns, name)  # fill its cache
        for ns, name, definition in targets:
            t = time.perf_counter()
            found = server.snapshot().state.pool(ns, name)
            warm.append(time.perf_counter() - t)
            assert found == definition
        snap = catalog.snapshot()
        depth = check(snap.root.tree, order, catalog.files.read_node).depth
        rows.append(
            f"| {size:,} | {built} ({build_s:.1f} s) | {depth} | {ms(commits)} | {ms(cold)} "
            f"| {ms(warm)} | {node_reads:.2f} | {requests:.1f} |"
        )
        print(rows[-1], file=sys.stderr)
    return rows


def moto_store() -> tuple[ObjectStore, Any]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        }
    )
    boto3.client("s3").create_bucket(Bucket="catalog-bench")
    return open_store("s3://catalog-bench/lake"), server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,1000,100000")
    parser.add_argument("--store", choices=["local", "s3"], default="local")
    parser.add_argument("--order", type=int, default=128)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    server = None
    with tempfile.TemporaryDirectory(prefix="catalog-bench-") as tmp:
        if args.store == "s3":
            inner, server = moto_store()
        else:
            inner = open_store(str(Path(tmp) / "lake"))
        rows = measure(CountingStore(inner), args.order, sizes, args.samples)
    if server is not None:
        server.stop()
    store = "local disk (fsync'd)" if args.store == "local" else "moto S3 in-process"
    print(
        f"Catalog order {args.order}, {store}, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; times in ms as p50 / p95 "
        f"over {args.samples} samples.\n"
    )
    print(
        "| pools | built by | depth | commit ms | lookup ms, cold | lookup ms, warm "
        "| node reads / cold lookup | requests / cold lookup |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
