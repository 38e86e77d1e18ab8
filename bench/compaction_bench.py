"""Compaction benchmark: a pool fragmented by N overlapping loads of TPC-H lineitem slices,
compacted by lakepool and, on the same slices, by deltalake's ``optimize.compact``; plus a
one-day key-range query before and after compaction on both.

Usage: .venv/bin/python bench/compaction_bench.py [--sf 1] [--loads 200]
Throughput is input bytes (the fragmented objects/files) ÷ wall-clock seconds of the
compaction. Prints one table.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lake_core import Lake  # noqa: E402
from lake_core.loading import load  # noqa: E402
from lake_core.maintenance import compact, fragmentation  # noqa: E402

DAY = date(1995, 6, 17)


def lineitem(sf: float) -> Path:
    out = ROOT / "bench" / "data" / f"sf{sf:g}"
    path = out / "lineitem.parquet"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        exe = Path(sys.executable).parent / "tpchgen-cli"
        subprocess.run([str(exe), "parquet", "-s", f"{sf:g}", "--tables=lineitem",
                        "--output-dir", str(out)], check=True)
    return path


def slices(table: pa.Table, n: int) -> list[pa.Table]:
    """``n`` interleaved slices: every slice spans the whole date range (maximal overlap)."""
    which = np.arange(table.num_rows) % n
    return [table.filter(pa.array(which == i)) for i in range(n)]


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def lake_side(parts: list[pa.Table], workdir: Path) -> dict[str, float]:
    lake = Lake.init(str(workdir / "lake"))
    pool = lake.create_pool("lineitem", "l_shipdate:asc")
    for p in parts:
        load(pool, [p])
    where = f"l_shipdate = DATE '{DAY.isoformat()}'"
    q_before, before = timed(lambda: pool.read(where=where))
    frag = fragmentation(pool)
    seconds, result = timed(lambda: compact(pool))
    q_after, after = timed(lambda: pool.read(where=where))
    assert before.num_rows == after.num_rows > 0
    assert compact(pool).commit is None
    return {"seconds": seconds, "mb_in": result.bytes_in / 2**20, "objects_in": result.objects_in,
            "objects_out": result.objects_out, "q_before": q_before, "q_after": q_after,
            "rows": before.num_rows, "overlapping": frag.overlapping_objects}


def delta_side(parts: list[pa.Table], workdir: Path) -> dict[str, float]:
    from deltalake import DeltaTable, write_deltalake

    path = str(workdir / "delta")
    for p in parts:
        write_deltalake(path, p, mode="append")
    dt = DeltaTable(path)
    files = dt.file_uris() if hasattr(dt, "file_uris") else dt.files()
    mb_in = sum(Path(f.replace("file://", "")).stat().st_size if f.startswith(("/", "file:"))
                else (Path(path) / f).stat().st_size for f in files) / 2**20
    filt = [("l_shipdate", "=", DAY)]
    q_before, before = timed(lambda: DeltaTable(path).to_pyarrow_table(filters=filt))
    seconds, metrics = timed(lambda: DeltaTable(path).optimize.compact())
    q_after, after = timed(lambda: DeltaTable(path).to_pyarrow_table(filters=filt))
    assert before.num_rows == after.num_rows > 0
    return {"seconds": seconds, "mb_in": mb_in, "objects_in": metrics.get("numFilesRemoved", 0),
            "objects_out": metrics.get("numFilesAdded", 0), "q_before": q_before,
            "q_after": q_after, "rows": before.num_rows, "overlapping": len(files)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--loads", type=int, default=200)
    args = ap.parse_args()
    table = pq.read_table(lineitem(args.sf))
    # tpchgen writes string_view; deltalake wants plain strings, and lakepool normalizes anyway.
    table = table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type)
                                           else f.type) for f in table.schema]))
    parts = slices(table, args.loads)
    workdir = Path(tempfile.mkdtemp(prefix="lakepool-compaction-bench-"))
    try:
        ours = lake_side(parts, workdir)
        theirs = delta_side(parts, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"compaction of lineitem sf={args.sf:g} in {args.loads} overlapping loads "
          f"({table.num_rows:,} rows) on {platform.machine()}, python {platform.python_version()}")
    print(f"{'system':<10} {'input MB':>9} {'files in→out':>13} {'seconds':>8} {'MB/s':>7} "
          f"{'query before':>13} {'query after':>12} {'rows':>6}")
    for name, r in (("lakepool", ours), ("deltalake", theirs)):
        print(f"{name:<10} {r['mb_in']:>9.1f} {r['objects_in']:>6}→{r['objects_out']:<6} "
              f"{r['seconds']:>8.2f} {r['mb_in'] / r['seconds']:>7.1f} {r['q_before']:>12.3f}s "
              f"{r['q_after']:>11.3f}s {r['rows']:>6}")
    ratio = (ours["mb_in"] / ours["seconds"]) / (theirs["mb_in"] / theirs["seconds"])
    print(f"target: lakepool throughput >= deltalake's: {'met' if ratio >= 1 else 'NOT met'} "
          f"({ratio:.2f}x)")


if __name__ == "__main__":
    main()
