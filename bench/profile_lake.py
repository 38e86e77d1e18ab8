"""Where lakepool's time goes in the `bench/run.py` workloads: cProfile, lakepool frames first.

    .venv/bin/python bench/profile_lake.py ingest [--sf 1]
    .venv/bin/python bench/profile_lake.py small [--commits 300]
    .venv/bin/python bench/profile_lake.py open --pool bench/out/work/history-loads

Prints the functions with the largest cumulative time, each with its share of the wall time of
the profiled region. cProfile sees only the main thread and charges C calls (Arrow kernels,
syscalls) to the Python function that made them.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import workloads as w

from lake_core.lake import Lake
from lake_core.loading import load

OUT = Path(__file__).resolve().parent / "out" / "profile"


def profile(fn: Callable[[], object], top: int) -> None:
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    fn()
    pr.disable()
    wall = time.perf_counter() - t0
    print(f"profiled region: {wall:.3f} s wall")
    stats = pstats.Stats(pr)
    rows = []
    items = stats.stats.items()  # type: ignore[attr-defined]
    for (path, _line, name), (_cc, calls, tottime, cumtime, _callers) in items:
        where = f"{Path(path).name}:{name}" if path != "~" else name
        rows.append((cumtime, tottime, calls, where, "lake_core" in path))
    rows.sort(reverse=True)
    print(f"{'cum s':>8} {'share':>6} {'self s':>8} {'calls':>7}  function")
    for cum, tot, calls, where, ours in rows[:top]:
        mark = "*" if ours else " "
        print(f"{cum:8.3f} {cum / wall:6.1%} {tot:8.3f} {calls:7d} {mark}{where}")
    print("(* = lake_core)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=["ingest", "small", "open"])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--commits", type=int, default=300)
    p.add_argument("--pool", type=Path, default=Path("bench/out/work/history-loads"))
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args()
    table = pq.read_table(w.lineitem_path(args.sf)) if args.what != "open" else None
    root = OUT / args.what
    if args.what in ("ingest", "small"):
        assert table is not None
        shutil.rmtree(root, ignore_errors=True)
        lake = Lake.init(str(root))
        pool = lake.create_pool("p", f"{w.KEY}:asc")
        if args.what == "ingest":
            profile(lambda: load(pool, [table], "main"), args.top)
        else:
            batches = [table.slice(i * 10, 10) for i in range(args.commits)]
            profile(lambda: [load(pool, [b], "main") for b in batches], args.top)
    else:
        w.open_and_list(args.pool, "history")  # warm imports
        profile(lambda: [w.open_and_list(args.pool, "history") for _ in range(5)], args.top)


if __name__ == "__main__":
    main()
