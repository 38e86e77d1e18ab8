"""Export benchmark: ``lake query -f csv`` (and ``-f json``) of TPC-H lineitem against DuckDB's
``COPY … TO`` over the same Parquet objects, plus the time to the first records of
``lake query | head -3``.

Usage: .venv/bin/python bench/export_bench.py [--sf 1] [--repeat 3]

Both sides run as fresh processes (interpreter start and imports included), take turns within
each round, and write to the same disk; the table gives medians. The lake is a pool keyed
``l_shipdate:asc`` loaded once from ``tpchgen-cli``'s Parquet; DuckDB reads that pool's data
objects (``Pool.files()``), so both export the same bytes. The CSV outputs are compared byte
for byte; the JSON outputs by line count. Raw numbers go to ``bench/out/export-sf<SF>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.workloads import lineitem_path  # noqa: E402
from lake_core import Lake, LakeConfig  # noqa: E402
from lake_core.loading import load  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run(cmd: list[str] | str, shell: bool = False) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=ENV, shell=shell, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def duckdb_copy(files: list[str], dest: Path, fmt: str) -> list[str]:
    option = "(HEADER)" if fmt == "csv" else "(FORMAT JSON)"
    sql = f"COPY (SELECT * FROM read_parquet({files!r})) TO '{dest}' {option}"
    return [sys.executable, "-c", f"import duckdb; duckdb.sql({sql!r})"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "export-work")
    args = ap.parse_args()

    source = lineitem_path(args.sf)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    lake_uri = str(args.work / "lake")
    lake = Lake.init(LakeConfig(uri=lake_uri))
    pool = lake.create_pool("lineitem", "l_shipdate:asc")
    t0 = time.perf_counter()
    load(pool, [source])
    print(f"loaded {source} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    files = pool.files()
    lake_cmd = [
        sys.executable,
        "-m",
        "lake_cli",
        "--lake",
        lake_uri,
        "query",
        "-p",
        "lineitem",
    ]

    results: dict[str, list[float]] = {}
    load_before = os.getloadavg()[0]
    for r in range(args.repeat):
        for fmt in ("csv", "json"):
            ours, theirs = args.work / f"lake.{fmt}", args.work / f"duckdb.{fmt}"
            order = [("lake", ours), ("duckdb", theirs)]
            if r % 2:
                order.reverse()  # take turns: neither side always runs on a warmer cache
            for who, dest in order:
                cmd = (
                    lake_cmd + ["-f", fmt, "-o", str(dest)]
                    if who == "lake"
                    else duckdb_copy(files, dest, fmt)
                )
                results.setdefault(f"{who} {fmt}", []).append(run(cmd))
            if fmt == "csv":
                same = subprocess.run(["cmp", "-s", str(ours), str(theirs)]).returncode == 0
                results.setdefault("csv identical", []).append(float(same))
            else:
                with ours.open("rb") as a, theirs.open("rb") as b:
                    lines = (sum(1 for _ in a), sum(1 for _ in b))
                assert lines[0] == lines[1], lines
            ours.unlink()
            theirs.unlink()
        head = " ".join(lake_cmd) + " | head -3"
        results.setdefault("lake query, first 3 records (head -3)", []).append(
            run(head, shell=True)
        )
        results.setdefault("lake ls (startup floor)", []).append(
            run([sys.executable, "-m", "lake_cli", "--lake", lake_uri, "ls"])
        )

    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"| measurement | median of {args.repeat} (s) | runs (s) |")
    print("|---|---|---|")
    for k, v in results.items():
        if k != "csv identical":
            print(f"| {k} | {med[k]:.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
    for fmt in ("csv", "json"):
        # Each round's pair ran back to back: the median of the per-round ratios is less
        # sensitive to other load on the machine than the ratio of the medians.
        pairs = [
            a / b for a, b in zip(results[f"lake {fmt}"], results[f"duckdb {fmt}"], strict=True)
        ]
        print(
            f"| lake / duckdb, {fmt} | {med[f'lake {fmt}'] / med[f'duckdb {fmt}']:.2f}x "
            f"(median of per-round ratios {statistics.median(pairs):.2f}x) | "
            f"{', '.join(f'{x:.2f}' for x in pairs)} |"
        )
    print(f"| CSV byte-identical to DuckDB's | {all(results['csv identical'])} | |")
    print(f"load average: {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    out = ROOT / "bench" / "out" / f"export-sf{args.sf:g}.json"
    out.write_text(
        json.dumps(
            {"machine": platform.platform(), "cpus": os.cpu_count(), "results": results}, indent=1
        )
    )
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
