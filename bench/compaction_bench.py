"""Compaction benchmark: a pool fragmented by N overlapping loads of TPC-H lineitem slices,
compacted by lakepool and, on the same slices, by deltalake's ``optimize.compact``; plus a
one-day key-range query before and after compaction on both.

Usage: .venv/bin/python bench/compaction_bench.py [--sf 1] [--loads 200] [--repeat 3]

Both sides are loaded once; each round copies the fragmented pool and Delta table and compacts
the copies, each in a fresh child process, so the child's peak RSS (``VmHWM``) is the
compaction's (plus opening the pool/table). Rounds alternate which side goes first. Throughput
is input bytes (the fragmented objects/files) ÷ wall-clock seconds of the compaction; CPU-s is
the child's user + system time over the compaction (every thread); medians and ranges over the
rounds are printed, with the load average. deltalake does not fsync; lakepool's local store does
(objects and commit files).

Two reference rows, not systems (``--no-floors`` leaves them out), rewrite the pool's live
objects (the ones lakepool's compaction takes here: every one, as its files in→out shows),
sorted by the key, into one Parquet file, each in a fresh child:

- ``pyarrow``: ``pq.read_table`` of every object, ``concat_tables``, ``sort_by`` the key (a
  whole sort, not a merge) and ``pq.write_table`` (snappy, its default row groups of 1Mi rows):
  the decode and encode any compaction built on pyarrow's Parquet codec pays, without a merge,
  object cuts, stats or fsync;
- ``duckdb``: ``COPY (SELECT * FROM read_parquet([...]) ORDER BY l_shipdate) TO ... (FORMAT
  parquet)`` on a connection of ``os.cpu_count()`` threads: the same rewrite with DuckDB's reader,
  sort and writer.

They say how much of a compaction's CPU the codec alone takes on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
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
WHERE = f"l_shipdate = DATE '{DAY.isoformat()}'"


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


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not ``ru_maxrss``: Linux carries that over
    from the parent across fork and exec, so a child would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB; not Linux


def lake_load(parts: list[pa.Table], path: Path) -> dict[str, Any]:
    lake = Lake.init(str(path))
    pool = lake.create_pool("lineitem", "l_shipdate:asc")
    for p in parts:
        load(pool, [p])
    q_before, before = timed(lambda: pool.read(where=WHERE))
    return {"q_before": q_before, "rows": before.num_rows,
            "overlapping": fragmentation(pool).overlapping_objects}


def lake_compact(path: str) -> dict[str, Any]:
    """Child process: compact the copied pool; peak RSS covers open + compaction."""
    pool = Lake.open(path).pool("lineitem")
    cpu = time.process_time()
    seconds, result = timed(lambda: compact(pool))
    cpu = time.process_time() - cpu
    rss = peak_rss_mb()
    q_after, after = timed(lambda: pool.read(where=WHERE))
    assert compact(pool).commit is None  # a fixpoint
    assert fragmentation(pool).overlapping_objects == 0
    return {"seconds": seconds, "mb_in": result.bytes_in / 2**20, "objects_in": result.objects_in,
            "objects_out": result.objects_out, "q_after": q_after, "rows": after.num_rows,
            "peak_rss_mb": rss, "cpu": cpu}


def pool_files(path: str) -> list[str]:
    """The live data objects of the pool at ``path`` (the fragmented input), oldest first."""
    from lake_core.layout import PoolLayout

    pool = Lake.open(path).pool("lineitem")
    snap = pool.snapshot(pool.tip())
    files = [pool.store.local_path(PoolLayout(pool.id).data(o)) for o in snap.objects]
    return [f for f in files if f is not None]


def floor_rewrite(engine: str, path: str) -> dict[str, Any]:
    """Child process: a reference rewrite of the pool's objects, sorted, into one file."""
    files = pool_files(path)
    mb_in = sum(Path(f).stat().st_size for f in files) / 2**20
    out = str(Path(path) / "floor.parquet")

    def pyarrow_rewrite() -> None:
        table = pa.concat_tables([pq.read_table(f) for f in files])
        pq.write_table(table.sort_by([("l_shipdate", "ascending")]), out, compression="snappy")

    def duckdb_rewrite() -> None:
        import duckdb

        con = duckdb.connect(config={"threads": os.cpu_count() or 1})
        con.execute(
            "COPY (SELECT * FROM read_parquet($files) ORDER BY l_shipdate) "
            f"TO '{out}' (FORMAT parquet, COMPRESSION snappy)",
            {"files": files},
        )
        con.close()

    cpu = time.process_time()
    seconds, _ = timed(pyarrow_rewrite if engine == "pyarrow" else duckdb_rewrite)
    cpu = time.process_time() - cpu
    rows = pq.read_table(out, filters=[("l_shipdate", "=", DAY)]).num_rows
    return {"seconds": seconds, "mb_in": mb_in, "objects_in": len(files), "objects_out": 1,
            "q_after": float("nan"), "rows": rows, "peak_rss_mb": peak_rss_mb(), "cpu": cpu}


def delta_files_mb(path: str) -> tuple[int, float]:
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    files = dt.file_uris() if hasattr(dt, "file_uris") else dt.files()
    mb = sum(Path(f.replace("file://", "")).stat().st_size if f.startswith(("/", "file:"))
             else (Path(path) / f).stat().st_size for f in files) / 2**20
    return len(files), mb


def delta_load(parts: list[pa.Table], path: Path) -> dict[str, Any]:
    from deltalake import DeltaTable, write_deltalake

    for p in parts:
        write_deltalake(str(path), p, mode="append")
    filt = [("l_shipdate", "=", DAY)]
    q_before, before = timed(lambda: DeltaTable(str(path)).to_pyarrow_table(filters=filt))
    return {"q_before": q_before, "rows": before.num_rows,
            "overlapping": delta_files_mb(str(path))[0]}


def delta_compact(path: str) -> dict[str, Any]:
    from deltalake import DeltaTable

    _, mb_in = delta_files_mb(path)
    cpu = time.process_time()
    seconds, metrics = timed(lambda: DeltaTable(path).optimize.compact())
    cpu = time.process_time() - cpu
    rss = peak_rss_mb()
    filt = [("l_shipdate", "=", DAY)]
    q_after, after = timed(lambda: DeltaTable(path).to_pyarrow_table(filters=filt))
    return {"seconds": seconds, "mb_in": mb_in, "objects_in": metrics.get("numFilesRemoved", 0),
            "objects_out": metrics.get("numFilesAdded", 0), "q_after": q_after,
            "rows": after.num_rows, "peak_rss_mb": rss, "cpu": cpu}


def child(side: str, path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", side, str(path)], check=True,
                         stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--loads", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-floors", action="store_true",
                    help="leave out the pyarrow and duckdb reference rewrites")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        side, path = args.child
        if side == "lakepool":
            result = lake_compact(path)
        elif side == "deltalake":
            result = delta_compact(path)
        else:
            result = floor_rewrite(side, path)
        print(json.dumps(result), flush=True)
        # deltalake's runtime threads abort the interpreter's exit now and then
        # ("terminate called without an active exception"): the result is out, leave at once.
        os._exit(0)
    table = pq.read_table(lineitem(args.sf))
    # tpchgen writes string_view; deltalake wants plain strings, and lakepool normalizes anyway.
    table = table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type)
                                           else f.type) for f in table.schema]))
    parts = slices(table, args.loads)
    workdir = Path(tempfile.mkdtemp(prefix="lakepool-compaction-bench-"))
    sides = {"lakepool": (lake_load, workdir / "lake"), "deltalake": (delta_load, workdir / "delta")}
    if not args.no_floors:
        # Reference rewrites of lakepool's fragmented objects (see the module docstring).
        sides.update({"pyarrow": (None, workdir / "lake"), "duckdb": (None, workdir / "lake")})
    rounds: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    loads: list[float] = []
    try:
        loaded = {s: fn(parts, src) for s, (fn, src) in sides.items() if fn is not None}
        loaded.update({s: loaded["lakepool"] for s, (fn, _) in sides.items() if fn is None})
        del parts, table
        for r in range(args.repeat):
            for s in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                src = sides[s][1]
                dst = workdir / f"{s}-{r}"
                shutil.copytree(src, dst)
                loads.append(os.getloadavg()[0])
                rounds[s].append(child(s, dst))
                shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"compaction of lineitem sf={args.sf:g} in {args.loads} overlapping loads "
          f"({loaded['lakepool']['rows']} rows on the query day) on {platform.machine()}, "
          f"{os.cpu_count()} CPUs, python {platform.python_version()}, pyarrow {pa.__version__}; "
          f"{args.repeat} rounds, 1-min load average {min(loads):.1f}–{max(loads):.1f}")
    print(f"{'system':<10} {'input MB':>9} {'files in→out':>13} {'seconds (range)':>20} "
          f"{'MB/s':>6} {'CPU-s (range)':>19} {'peak RSS MB':>17} {'query before':>13} "
          f"{'query after':>12}")
    mbps = {}
    for s, rs in rounds.items():
        secs = [r["seconds"] for r in rs]
        cpus = [r["cpu"] for r in rs]
        rss = [r["peak_rss_mb"] for r in rs]
        med = statistics.median(secs)
        mbps[s] = rs[0]["mb_in"] / med
        assert all(r["rows"] == loaded[s]["rows"] for r in rs)
        print(f"{s:<10} {rs[0]['mb_in']:>9.1f} {rs[0]['objects_in']:>6}→{rs[0]['objects_out']:<6} "
              f"{med:>7.2f} ({min(secs):.2f}–{max(secs):.2f}) {mbps[s]:>6.1f} "
              f"{statistics.median(cpus):>7.2f} ({min(cpus):.2f}–{max(cpus):.2f}) "
              f"{statistics.median(rss):>6.0f} ({min(rss):.0f}–{max(rss):.0f}) "
              + (f"{loaded[s]['q_before']:>12.3f}s {statistics.median(r['q_after'] for r in rs):>11.3f}s"
                 if s in ("lakepool", "deltalake") else f"{'—':>13} {'—':>12}"))
    ratio = mbps["lakepool"] / mbps["deltalake"]
    print(f"target: lakepool throughput >= deltalake's: {'met' if ratio >= 1 else 'NOT met'} "
          f"({ratio:.2f}x, medians)")
    if "pyarrow" in rounds:
        cpu = {s: statistics.median(r["cpu"] for r in rs) for s, rs in rounds.items()}
        print(f"CPU-s, medians: the pyarrow rewrite (decode + sort + encode, no merge) takes "
              f"{cpu['pyarrow'] / cpu['deltalake']:.2f}x deltalake's whole compaction; "
              f"lakepool {cpu['lakepool'] / cpu['pyarrow']:.2f}x the pyarrow rewrite; "
              f"the duckdb rewrite {cpu['duckdb'] / cpu['deltalake']:.2f}x deltalake's")


if __name__ == "__main__":
    main()
