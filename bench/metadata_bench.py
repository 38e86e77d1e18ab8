"""Metadata tables at scale: ``POOL$objects`` and ``POOL$commits`` against what ``lake objects``
and ``lake log`` do to list the same things, on one local lake in one run.

    .venv/bin/python bench/metadata_bench.py [--objects 10000] [--per-commit 100]

The pool's history is metadata only (commits of object records, no data files: listing never
reads data). Each figure is the best of 5 on a fresh ``Lake.open`` handle with the tip's
snapshot already read (what every listing needs first), so it is the listing's own cost.
Prints one markdown table on stdout.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lake_core import Lake, LakeConfig
from lake_core.ids import new_id
from lake_core.introspection import commits_table, objects_table, partitions_table
from lake_core.objects import ObjectMeta
from lake_core.stats import ColumnMeta

SCHEMA = pa.schema([("ts", pa.int64()), ("v", pa.float64()), ("s", pa.string())])


def build(uri: str, objects: int, per_commit: int) -> None:
    lake = Lake.init(LakeConfig(uri=uri, user="bench"))
    pool = lake.create_pool("p", "ts:asc")
    k = 0
    for _ in range(objects // per_commit):
        adds = []
        for _ in range(per_commit):
            cols = {
                "ts": ColumnMeta("int64", k, k + 9, 0),
                "v": ColumnMeta("double", 0.5, 9.5, 1),
                "s": ColumnMeta("string", "a", "z", 0),
            }
            adds.append(ObjectMeta(new_id(lake.config.clock), [k], [k + 9], 10, 1000, cols))
            k += 10
        pool.commit("main", adds, [], incoming_schema=SCHEMA)


def best(uri: str, run: Callable[[Any], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        lake = Lake.open(uri)
        pool = lake.pool("p")
        pool.snapshot(pool.tip())
        start = time.perf_counter()
        run(lake)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--per-commit", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"{tmp}/lake"
        build(uri, args.objects, args.per_commit)
        commits = args.objects // args.per_commit

        def metas(lake: Any) -> object:  # what `lake objects` does before printing
            pool = lake.pool("p")
            return sorted(pool.snapshot(pool.tip()).objects.values(), key=lambda o: o.id)

        rows = [
            (
                f"objects: `p$objects` table ({args.objects:,} rows)",
                best(uri, lambda lk: objects_table(lk.pool("p"))),
            ),
            ("objects: ObjectMeta listing (`lake objects`)", best(uri, metas)),
            (
                "objects: `SELECT count(*), sum(size) FROM p$objects`",
                best(
                    uri, lambda lk: lk.sql("SELECT count(*), sum(size) FROM p$objects").fetchall()
                ),
            ),
            (
                "partitions: `p$partitions` table",
                best(uri, lambda lk: partitions_table(lk.pool("p"))),
            ),
            (
                f"commits: `p$commits` table ({commits} commits)",
                best(uri, lambda lk: commits_table(lk.pool("p")), 3),
            ),
            (
                "commits: `Pool.log` walk (`lake log`)",
                best(uri, lambda lk: list(lk.pool("p").log()), 3),
            ),
        ]
    print("| listing | best of runs |")
    print("| --- | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
