"""Search-index benchmark (issue 15): single-value lookups in TPC-H lineitem keyed by
``l_shipdate``, with an index against the stats-only scan and deltalake's filtered read.

    .venv/bin/python bench/index_bench.py            # sf 1, 3 rounds
    .venv/bin/python bench/index_bench.py --quick    # smoke run: sf 0.01, 1 round
    .venv/bin/python bench/index_bench.py --seek-stride 1MB   # every pool at a 1 MiB stride

Setup (outside the clock except the loads): lineitem (``/tmp/li1/lineitem.parquet`` at sf 1 when
it exists, else tpchgen-cli's output under bench/data), plain strings, sorted by ``l_shipdate``.

- ``stats-only``: a pool keyed ``l_shipdate:asc``, no index rule;
- ``exact(l_partkey)``: the same with an ``exact`` rule on ``l_partkey`` (200,000 distinct
  values per sf, each in about 30 rows scattered over the years);
- ``bloom(l_comment)``: the same with a ``bloom`` rule on ``l_comment`` (nearly every value
  distinct: the high-cardinality text case) at the default 1% false-positive rate;
- ``deltalake``: ``write_deltalake`` of the same sorted rows; lookups with
  ``DeltaTable.to_pyarrow_table(filters=[(col, "=", v)])`` (its file statistics prune files;
  delta-rs keeps no index).

Every lakepool pool is created with ``--seek-stride`` (default 4MB, the pool default). A bloom
index narrows a lookup to row groups, so the stride sets how many bytes a found value costs; an
exact index narrows it to slices of 2,048 rows, read by pages (docs/architecture.md, "Page
reads"); docs/cli.md ("Search indexes") says which stride suits which lookups.

- ``stats-only, no page index``: the stats-only pool written as lakepool wrote objects before
  page indexes (pyarrow's 1 MiB pages, no page index: ``EncodeOptions.page_options`` emptied
  for its load), so the same run shows what pages of 2,048 rows and their index cost a load,
  the data's size and a full scan (``Pool.scan()`` of every row, every column: wall and CPU,
  medians over rounds).

Load time: each pool's load (one ``Pool.load`` of the whole table, the index built in the same
commit), medians over rounds (each round loads the pools in a rotated order); the overhead is
the indexed load over the stats-only load. Load CPU-s: the process's CPU time (every thread)
over the same load, which says what the index costs when wall times are too noisy to.
Index bytes: the index objects' total size over the data objects'. Lookups: ``--lookups``
existing values of each column (and as many absent ones), every side reading every column of
the matching rows; per lookup the wall time (median over rounds) and, for lakepool, the bytes
of the row groups read (``--stats``' ``bytes_read``: column chunks of the rows groups opened,
compressed) plus the bytes of index objects the lookup read (``index_bytes_read``: footers and
index row groups); a row group an exact index narrows to a few slices counts the bytes fetched
to read it by pages (its footer, offset indexes, pages and dictionaries) — the same scan on the
stats-only pool gives the ratio. Prints one markdown section
(progress on stderr) and the raw numbers to ``bench/out/index-sf<SF>-stride<STRIDE>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.workloads import lineitem_path, plain_strings, settle  # noqa: E402
from lake_core import Lake  # noqa: E402
from lake_core.encode import EncodeOptions  # noqa: E402
from lake_core.units import format_size, parse_size  # noqa: E402

OUT = ROOT / "bench" / "out"
KEY = "l_shipdate:asc"
PREBUILT_SF1 = Path("/tmp/li1/lineitem.parquet")
#: (side, column, kind) of every lakepool pool; kind None: no rule.
POOLS = (
    ("stats-only", None, None),
    ("exact(l_partkey)", "l_partkey", "exact"),
    ("bloom(l_comment)", "l_comment", "bloom"),
)
NO_PAGES = "stats-only, no page index"
#: Every pool a round loads: the lakepool pools, and the stats-only one written as before.
SIDES = (*POOLS, (NO_PAGES, None, None))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def base_table(sf: float) -> pa.Table:
    path = PREBUILT_SF1 if sf == 1 and PREBUILT_SF1.exists() else lineitem_path(sf)
    return plain_strings(pq.read_table(path)).sort_by([("l_shipdate", "ascending")])


def _literal(v: Any) -> str:
    return "'" + v.replace("'", "''") + "'" if isinstance(v, str) else str(v)


def lookup_values(table: pa.Table, column: str, n: int, seed: int = 15) -> list[tuple[Any, bool]]:
    """``n`` values the column holds and ``n`` it does not, as (value, present)."""
    rng = np.random.default_rng(seed)
    col = table.column(column)
    present = [col[int(i)].as_py() for i in rng.choice(table.num_rows, n, replace=False)]
    if pa.types.is_integer(col.type):
        top = int(np.max(col.to_numpy()))
        absent: list[Any] = [top + 1 + i for i in range(n)]
    else:
        absent = [f"{v} (absent)" for v in present]
    return [(v, True) for v in present] + [(v, False) for v in absent]


def load_pool(
    root: Path, name: str, column: str | None, kind: str | None, table: pa.Table, stride: int
) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process's, every thread) of one ``Pool.load``."""
    lake = Lake.init(str(root / name))
    lake.create_pool("lineitem", KEY, seek_stride=stride)
    if column is not None and kind is not None:
        lake.create_index_rule("ix", column, kind)
    pool = lake.pool("lineitem")
    settle()
    with _without_page_index() if name == NO_PAGES else contextlib.nullcontext():
        cpu, t0 = time.process_time(), time.perf_counter()
        pool.load(table)
        return time.perf_counter() - t0, time.process_time() - cpu


@contextlib.contextmanager
def _without_page_index() -> Iterator[None]:
    """The writer as it was before page indexes: pyarrow's pages, no page index."""
    before = EncodeOptions.page_options
    EncodeOptions.page_options = lambda self: {}  # type: ignore[method-assign]
    try:
        yield
    finally:
        EncodeOptions.page_options = before  # type: ignore[method-assign]


def full_scan(root: Path, name: str) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and rows of a scan of every row and column of the pool."""
    pool = Lake.open(str(root / name)).pool("lineitem")
    settle()
    cpu, t0 = time.process_time(), time.perf_counter()
    rows = sum(b.num_rows for b in pool.scan().batches())
    return time.perf_counter() - t0, time.process_time() - cpu, rows


def sizes(root: Path, name: str) -> tuple[int, int]:
    pool = Lake.open(str(root / name)).pool("lineitem")
    snap = pool.snapshot(pool.tip())
    return snap.size, sum(m.size for m in snap.indexes.values())


def lake_lookup(
    root: Path, name: str, column: str, value: Any
) -> tuple[float, dict[str, int], int]:
    pool = Lake.open(str(root / name)).pool("lineitem")
    t0 = time.perf_counter()
    scan = pool.scan(where=f"{column} = {_literal(value)}")
    rows = sum(b.num_rows for b in scan.batches())
    return time.perf_counter() - t0, scan.stats.to_json(), rows


def delta_lookup(path: Path, column: str, value: Any) -> tuple[float, int]:
    from deltalake import DeltaTable

    t0 = time.perf_counter()
    rows = DeltaTable(str(path)).to_pyarrow_table(filters=[(column, "=", value)]).num_rows
    return time.perf_counter() - t0, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="sf 0.01, 1 round, 2 lookups")
    ap.add_argument("--seek-stride", default="4MB", help="every pool's seek stride (4MB)")
    args = ap.parse_args()
    args.stride = parse_size(args.seek_stride)
    if args.quick:
        args.sf, args.rounds, args.lookups = 0.01, 1, 2
    table = base_table(args.sf)
    log(f"lineitem sf {args.sf:g}: {table.num_rows:,} rows")
    work = Path(tempfile.mkdtemp(prefix="index-bench-"))
    try:
        loads: dict[str, list[float]] = {name: [] for name, _, _ in SIDES}
        load_cpu: dict[str, list[float]] = {name: [] for name, _, _ in SIDES}
        for r in range(args.rounds):
            # Each round loads the pools in another order (a load's place in the round, not
            # its pool, would otherwise bias the overhead), and removes the previous round's
            # pools first, all at once, so no removal falls between two timed loads.
            for name, _, _ in SIDES:
                shutil.rmtree(work / name, ignore_errors=True)
            for name, column, kind in SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]:
                seconds, cpu = load_pool(work, name, column, kind, table, args.stride)
                loads[name].append(seconds)
                load_cpu[name].append(cpu)
                log(f"round {r + 1}: load {name} {seconds:.2f} s, {cpu:.2f} CPU-s")
        from deltalake import write_deltalake

        write_deltalake(str(work / "delta"), table)
        data_bytes, _ = sizes(work, "stats-only")
        scans: dict[str, dict[str, Any]] = {}
        for name in ("stats-only", NO_PAGES):
            runs = [full_scan(work, name) for _ in range(args.rounds)]
            scans[name] = {
                "seconds": [w for w, _, _ in runs],
                "cpu": [c for _, c, _ in runs],
                "rows": runs[0][2],
                "data_bytes": sizes(work, name)[0],
            }
            log(f"full scan {name}: {scans[name]}")
        results: dict[str, Any] = {
            "loads": loads,
            "load_cpu": load_cpu,
            "pools": {},
            "scans": scans,
        }
        for name, column, _kind in POOLS[1:]:
            assert column is not None
            d, ix = sizes(work, name)
            entry: dict[str, Any] = {"data_bytes": d, "index_bytes": ix, "lookups": []}
            for value, present in lookup_values(table, column, args.lookups):
                per: dict[str, list[float]] = {"index": [], "stats": [], "delta": []}
                stats: dict[str, Any] = {}
                counts: set[int] = set()
                for _ in range(args.rounds):
                    t, st, n = lake_lookup(work, name, column, value)
                    per["index"].append(t)
                    stats["index"] = st
                    counts.add(n)
                    t, st, n = lake_lookup(work, "stats-only", column, value)
                    per["stats"].append(t)
                    stats["stats"] = st
                    counts.add(n)
                    t, n = delta_lookup(work / "delta", column, value)
                    per["delta"].append(t)
                    counts.add(n)
                if len(counts) != 1:
                    raise SystemExit(f"sides disagree on {column} = {value!r}: {counts}")
                entry["lookups"].append(
                    {
                        "value": value if isinstance(value, int) else str(value)[:40],
                        "present": present,
                        "rows": counts.pop(),
                        "seconds": {k: statistics.median(v) for k, v in per.items()},
                        "stats": stats,
                    }
                )
                log(f"{name} {value!r}: {entry['lookups'][-1]['seconds']}")
            results["pools"][name] = entry
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"index-sf{args.sf:g}-stride{args.seek_stride}.json").write_text(
        json.dumps(results, indent=1, default=str)
    )
    print(report(results, args, data_bytes, table.num_rows))


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def report(results: dict[str, Any], args: Any, data_bytes: int, rows: int) -> str:
    loads = results["loads"]
    base = statistics.median(loads["stats-only"])
    out = [
        f"lineitem sf {args.sf:g} ({rows:,} rows, {_mb(data_bytes)} in the pool) keyed "
        f"`{KEY}`, seek stride {format_size(args.stride)}; {args.rounds} round(s); load average {os.getloadavg()[0]:.2f}; "
        f"{platform.processor() or platform.machine()}.",
        "",
        "| pool | load (median) | vs stats-only | per round (median) | load CPU-s (median) "
        "| CPU vs stats-only | index bytes | of data |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    cpu = results.get("load_cpu") or {}
    base_cpu = statistics.median(cpu["stats-only"]) if cpu.get("stats-only") else None
    for name, _, _ in SIDES:
        med = statistics.median(loads[name])
        per_round = statistics.median(
            a / b for a, b in zip(loads[name], loads["stats-only"], strict=True)
        )
        entry = results["pools"].get(name)
        ix = entry["index_bytes"] if entry else 0
        cpus = cpu.get(name) or []
        cpu_cells = (
            f"{statistics.median(cpus):.2f} ({min(cpus):.2f}–{max(cpus):.2f}) | "
            f"{statistics.median(cpus) / base_cpu:.2f}×"
            if cpus and base_cpu
            else "— | —"
        )
        out.append(
            f"| {name} | {med:.2f} s ({min(loads[name]):.2f}–{max(loads[name]):.2f}) | "
            f"{med / base:.2f}× | {per_round:.2f}× | {cpu_cells} | "
            f"{_mb(ix) if entry else '—'} | {(100 * ix / data_bytes) if entry else 0:.1f}% |"
        )
    scans = results.get("scans") or {}
    if scans:
        out += [
            "",
            "| pool | data bytes | full scan (median) | scan CPU-s (median) |",
            "| --- | --- | --- | --- |",
        ]
        for name, sc in scans.items():
            w, c = sc["seconds"], sc["cpu"]
            out.append(
                f"| {name} | {_mb(sc['data_bytes'])} | {statistics.median(w):.2f} s "
                f"({min(w):.2f}–{max(w):.2f}) | {statistics.median(c):.2f} "
                f"({min(c):.2f}–{max(c):.2f}) |"
            )
    out += [
        "",
        "| pool | value | rows | bytes read: data + index / stats-only | fewer | time: index / "
        "stats-only / deltalake |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, entry in results["pools"].items():
        for lk in entry["lookups"]:
            ix_stats = lk["stats"]["index"]
            data_read, index_read = ix_stats["bytes_read"], ix_stats.get("index_bytes_read", 0)
            bi, bs = data_read + index_read, lk["stats"]["stats"]["bytes_read"]
            s = lk["seconds"]
            fewer = f"{bs / bi:,.0f}×" if bi else "all"
            label = str(lk["value"])
            if not lk["present"] and not label.endswith("(absent)"):
                label += " (absent)"  # absent text values say so already (lookup_values)
            out.append(
                f"| {name} | {label[:32]} | {lk['rows']} | {_mb(data_read)} + {_mb(index_read)} "
                f"/ {_mb(bs)} | {fewer} | "
                f"{s['index'] * 1000:.0f} / {s['stats'] * 1000:.0f} / {s['delta'] * 1000:.0f} ms |"
            )
    return "\n".join(out)


if __name__ == "__main__":
    main()
