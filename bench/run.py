"""lakepool benchmarks: ingest, small commits, opening after long histories, a key-range query.

    .venv/bin/python bench/run.py            # TPC-H sf 1 (what `make bench` runs)
    .venv/bin/python bench/run.py --quick    # smoke run: sf 0.1, fewer commits

Prints ONE markdown table on stdout (progress goes to stderr); every figure is measured in this
run, next to its peer, on the same data. Raw numbers go to ``bench/out/results-sf<SF>.json``.
The ``sql`` section is bench/sql_bench.py (runnable on its own): its table follows.
See docs/benchmarks.md for what each row means and the latest results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import workloads as w

OUT = Path(__file__).resolve().parent / "out"
QUERY_DAY = dt.date(1995, 6, 17)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def secs(x: float) -> str:
    if x >= 1:
        return f"{x:.2f} s"
    return f"{x * 1000:.1f} ms"


def status(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: sf 0.1, fewer commits")
    p.add_argument("--repeat", type=int, default=3, help="runs of each costly measurement")
    p.add_argument("--small-commits", type=int, default=None, help="default 300 (quick: 100)")
    p.add_argument("--rows-per-commit", type=int, default=10)
    p.add_argument("--history", type=int, default=None, help="long history, default 10000")
    p.add_argument("--workdir", type=Path, default=OUT / "work", help="scratch lakes (local disk)")
    p.add_argument("--json", type=Path, default=None, help="where to write raw results")
    p.add_argument(
        "--only",
        default="ingest,small,query,history,sql",
        help="comma-separated sections to run (query needs ingest; sql is bench/sql_bench.py, "
        "its own table printed after this one); default all",
    )
    args = p.parse_args(argv)
    args.only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = args.only - {"ingest", "small", "query", "history", "sql"}
    if unknown:
        p.error(f"unknown section(s) for --only: {', '.join(sorted(unknown))}")
    if "query" in args.only and "ingest" not in args.only:
        p.error("--only query needs ingest too (the query reads the ingested pool)")
    if args.sf is None:
        args.sf = 0.1 if args.quick else 1.0
    if args.small_commits is None:
        args.small_commits = 100 if args.quick else 300
    if args.history is None:
        args.history = 1000 if args.quick else 10_000
    if args.json is None:
        tag = "-quick" if args.quick else ""
        if args.only - {"sql"} != set(SECTIONS):
            tag += "-" + "-".join(n for n in SECTIONS if n in args.only)
        args.json = OUT / f"results-sf{args.sf:g}{tag}.json"
    return args


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "deltalake": deltalake.__version__,
        "nproc": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }


def bench_ingest(args: argparse.Namespace, table: pa.Table, res: dict[str, Any]) -> None:
    work = args.workdir
    systems = {
        "lakepool": lambda: w.ingest_lakepool(table, work / "ingest-lake"),
        "floor": lambda: w.ingest_floor(table, work / "ingest-floor.parquet"),
        "delta": lambda: w.ingest_delta(table, work / "ingest-delta"),
    }
    times: dict[str, list[float]] = {k: [] for k in systems}
    cpu: dict[str, list[float]] = {k: [] for k in systems}
    names = list(systems)
    for r in range(args.repeat):
        order = names[r % 3 :] + names[: r % 3]  # rotate, so no system always goes first
        # ... but lakepool last in the final round: its pool is the one the query reads
        order = (
            [*(n for n in order if n != "lakepool"), "lakepool"] if r == args.repeat - 1 else order
        )
        for name in order:
            s = systems[name]()
            times[name].append(s.wall)
            cpu[name].append(s.cpu)
            log(f"  ingest {name} run {r + 1}: {s.wall:.2f} s (CPU {s.cpu:.2f} s)")
    res["ingest"] = {
        "rows": table.num_rows,
        "arrow_mb": w.plain_strings(table).nbytes / 1e6,
        "times": times,
        "cpu": cpu,
        "bytes_written": {
            "lakepool": w.dir_bytes(work / "ingest-lake"),
            "floor": w.dir_bytes(work / "ingest-floor.parquet"),
            "delta": w.dir_bytes(work / "ingest-delta"),
        },
    }


def bench_small(args: argparse.Namespace, table: pa.Table, res: dict[str, Any]) -> None:
    k, n = args.rows_per_commit, args.small_commits
    batches = [table.slice(i * k, k) for i in range(n)]
    times: dict[str, list[float]] = {"lakepool": [], "delta": []}
    for r in range(args.repeat):
        for name in ("lakepool", "delta") if r % 2 == 0 else ("delta", "lakepool"):
            if name == "lakepool":
                s = w.small_commits_lakepool(batches, args.workdir / "small-lake")
            else:
                s = w.small_commits_delta(batches, args.workdir / "small-delta")
            times[name].append(s)
            log(f"  {n} small commits {name} run {r + 1}: {s:.2f} s ({n / s:.0f}/s)")
    res["small"] = {"commits": n, "rows_per_commit": k, "times": times}


def bench_query(args: argparse.Namespace, res: dict[str, Any]) -> None:
    lake_root, delta_path = args.workdir / "ingest-lake", args.workdir / "ingest-delta"
    runs = max(7, args.repeat)
    times: dict[str, list[float]] = {"lakepool": [], "delta_filters": [], "delta_dataset": []}
    counts: dict[str, int] = {}
    scan_stats: dict[str, int] = {}
    for _ in range(runs):
        s, t, scan_stats = w.query_lakepool(lake_root, QUERY_DAY)
        times["lakepool"].append(s)
        counts["lakepool"] = t.num_rows
        s, t = w.query_delta_filters(delta_path, QUERY_DAY)
        times["delta_filters"].append(s)
        counts["delta_filters"] = t.num_rows
        s, t = w.query_delta_dataset(delta_path, QUERY_DAY)
        times["delta_dataset"].append(s)
        counts["delta_dataset"] = t.num_rows
    assert len(set(counts.values())) == 1 and counts["lakepool"] > 0, counts
    log(
        f"  query: {counts['lakepool']} rows; medians "
        + ", ".join(f"{k} {secs(med(v))}" for k, v in times.items())
    )
    res["query"] = {
        "day": QUERY_DAY.isoformat(),
        "rows": counts["lakepool"],
        "times": times,
        "lakepool_scan": scan_stats,
    }


def bench_history(args: argparse.Namespace, res: dict[str, Any]) -> None:
    runs = max(7, args.repeat)
    res["history"] = {}
    points = sorted({10, *([3000] if args.history > 3000 else []), args.history})
    for kind in ("churn", "loads"):
        log(f"  building a {args.history}-commit pool ({kind})")
        delta = args.workdir / "history-delta" if kind == "loads" else None
        h = w.build_history(
            args.workdir / f"history-{kind}", kind, args.history, points, runs, log, delta
        )
        log(
            f"  {kind}: built in {h.build_seconds:.0f} s; open at 10: "
            f"{secs(med(h.opens[10]))}, at {args.history}: {secs(med(h.opens[args.history]))}"
        )
        res["history"][kind] = {
            "commits": h.commits,
            "points": points,
            "build_seconds": h.build_seconds,
            "delta_build_seconds": h.delta_build_seconds,
            "opens": {str(k): v for k, v in h.opens.items()},
            "opens_objects": {str(k): v for k, v in h.opens_objects.items()},
            "opens_delta": {str(k): v for k, v in h.opens_delta.items()},
            "live": {str(k): v for k, v in h.live.items()},
            "loadavg": {str(k): v for k, v in h.loadavg.items()},
        }


def rows_ingest(args: argparse.Namespace, res: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    ing = res["ingest"]
    t = {k: med(v) for k, v in ing["times"].items()}
    nrows, mb = ing["rows"], ing["arrow_mb"]
    n_runs = len(ing["times"]["lakepool"])

    def thr(name: str) -> str:
        return (
            f"{nrows / t[name] / 1e6:.2f} M rows/s, {mb / t[name]:.0f} MB/s; "
            f"CPU {med(ing['cpu'][name]):.2f} s; "
            f"{ing['bytes_written'][name] / 1e6:.0f} MB on disk"
        )

    what = f"ingest TPC-H sf {args.sf:g} lineitem ({nrows:,} rows, {mb:,.0f} MB as Arrow)"
    rows.append(
        [
            what,
            "lakepool `load` (normalize + sort + write + commit)",
            f"{secs(t['lakepool'])} ({n_runs})",
            thr("lakepool"),
            "",
            "",
            "",
        ]
    )
    r_floor = t["lakepool"] / t["floor"]
    rows.append(
        [
            "",
            "pyarrow cast + `sort_by` + `pq.write_table` (floor)",
            f"{secs(t['floor'])} ({n_runs})",
            thr("floor"),
            f"lakepool = {r_floor:.2f}× floor",
            "≤ 1.1× floor",
            status(r_floor <= 1.1),
        ]
    )
    r_delta = t["lakepool"] / t["delta"]
    rows.append(
        [
            "",
            "deltalake cast + `sort_by` + `write_deltalake`",
            f"{secs(t['delta'])} ({n_runs})",
            thr("delta"),
            f"lakepool = {r_delta:.2f}× delta",
            "≤ 1.0× delta",
            status(r_delta <= 1.0),
        ]
    )
    return rows


def rows_small(args: argparse.Namespace, res: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    sm = res["small"]
    n = sm["commits"]
    rate = {k: n / med(v) for k, v in sm["times"].items()}
    what = f"{n} small commits ({sm['rows_per_commit']} rows each), local disk"
    rows.append(
        [
            what,
            "lakepool `load`",
            f"{secs(med(sm['times']['lakepool']))} ({len(sm['times']['lakepool'])})",
            f"{rate['lakepool']:.1f} commits/s",
            "",
            "",
            "",
        ]
    )
    r = rate["lakepool"] / rate["delta"]
    rows.append(
        [
            "",
            'deltalake `write_deltalake(mode="append")`',
            f"{secs(med(sm['times']['delta']))} ({len(sm['times']['delta'])})",
            f"{rate['delta']:.1f} commits/s",
            f"lakepool = {r:.2f}× delta's rate",
            "≥ 10× delta's rate",
            status(r >= 10),
        ]
    )
    return rows


def rows_history(args: argparse.Namespace, res: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    hist = res["history"]
    labels = {
        "loads": "tiny loads (live set grows 1 object per commit)",
        "churn": "load / delete churn (live set stays at 5-6 objects)",
    }
    for kind in ("loads", "churn"):
        h = hist[kind]
        opens, objs, delta = h["opens"], h["opens_objects"], h["opens_delta"]
        o10 = med(opens["10"])
        first = True
        for point in h.get("points", [10, h["commits"]]):
            p = str(point)
            what = f"open pool + list live objects: {labels[kind]}" if first else ""
            first = False
            where = f"after {point:,} commits ({h['live'][p]:,} live objects, load {h['loadavg'][p]:.1f})"
            ratio = med(opens[p]) / o10
            detail = f"as ObjectMeta: {secs(med(objs[p]))}"
            if point == h["commits"]:
                detail += (
                    f"; built in {h['build_seconds']:.0f} s "
                    f"({h['commits'] / h['build_seconds']:.0f} commits/s)"
                )
            big = point == h["commits"] and point > 10
            rows.append(
                [
                    what,
                    f"lakepool, {where}",
                    f"{secs(med(opens[p]))} ({len(opens[p])})",
                    detail,
                    f"{ratio:.2f}× the 10-commit open" if point > 10 else "",
                    "≤ 2× (at 10,000 commits)" if big else "",
                    status(ratio <= 2) if big else "",
                ]
            )
            if p in delta:
                vs = med(opens[p]) / med(delta[p])
                goal = point >= 3000
                rows.append(
                    [
                        "",
                        f"deltalake `get_add_actions`, {where}",
                        f"{secs(med(delta[p]))} ({len(delta[p])})",
                        "no fsync"
                        + (
                            f"; built in {h['delta_build_seconds']:.0f} s"
                            if point == h["commits"]
                            else ""
                        ),
                        f"lakepool = {vs:.2f}× delta",
                        "≤ 1.0× delta" if goal else "",
                        status(vs <= 1.0) if goal else "",
                    ]
                )
    return rows


def rows_query(args: argparse.Namespace, res: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    q = res["query"]
    qt = {k: med(v) for k, v in q["times"].items()}
    st = q["lakepool_scan"]
    what = f"one-day key-range query `l_shipdate = DATE '{q['day']}'` ({q['rows']:,} rows)"
    rows.append(
        [
            what,
            "lakepool open + `Scan(...).to_table()`",
            f"{secs(qt['lakepool'])} ({len(q['times']['lakepool'])})",
            f"read {st['objects_read']}/{st['objects_total']} objects, "
            f"{st['row_groups_read']} row groups, {st['rows_read']:,} rows",
            "",
            "",
            "",
        ]
    )
    best = min(qt["delta_filters"], qt["delta_dataset"])
    for key, label in (
        ("delta_filters", "deltalake `to_pyarrow_table(filters=…)`"),
        ("delta_dataset", "deltalake `to_pyarrow_dataset().to_table(filter=…)`"),
    ):
        rr = qt["lakepool"] / qt[key]
        is_best = qt[key] == best
        rows.append(
            [
                "",
                label,
                f"{secs(qt[key])} ({len(q['times'][key])})",
                "",
                f"lakepool = {rr:.2f}× this",
                "≤ 1.0× the faster deltalake path" if is_best else "",
                status(rr <= 1.0) if is_best else "",
            ]
        )
    return rows


SECTIONS = {
    "ingest": rows_ingest,
    "small": rows_small,
    "history": rows_history,
    "query": rows_query,
}


def table_rows(args: argparse.Namespace, res: dict[str, Any]) -> list[list[str]]:
    return [row for name, fn in SECTIONS.items() if name in res for row in fn(args, res)]


def render(rows: list[list[str]]) -> str:
    head = [
        "measurement",
        "system",
        "median (runs)",
        "throughput / detail",
        "ratio",
        "target",
        "status",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "machine": machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    log(f"lakepool bench: sf {args.sf:g}, {args.repeat} runs, workdir {args.workdir}")
    # The history section needs no TPC-H data (sql reads its own): do not load it for them.
    needs_data = args.only & {"ingest", "small", "query"}
    table = pq.read_table(w.lineitem_path(args.sf)) if needs_data else pa.table({})
    log(f"lineitem: {table.num_rows:,} rows")
    t0 = time.perf_counter()
    if "ingest" in args.only:
        log("ingest")
        bench_ingest(args, table, res)
    if "small" in args.only:
        log("small commits")
        bench_small(args, table, res)
    if "query" in args.only:
        log("key-range query")
        bench_query(args, res)
    del table
    if "history" in args.only:
        log("open after long histories")
        bench_history(args, res)
    res["machine"]["loadavg_end"] = os.getloadavg()
    res["wall_seconds"] = time.perf_counter() - t0
    rows = table_rows(args, res)
    res["table"] = render(rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=2, default=str))
    log(f"done in {res['wall_seconds']:.0f} s; raw results in {args.json}")
    print(res["table"])
    if "sql" in args.only:  # its own run, table and JSON (bench/out/sql-sf<SF>.json)
        import sql_bench

        sys.stdout.flush()
        print()
        sql_bench.main(["--sf", f"{args.sf:g}", *(["--quick"] if args.quick else [])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
