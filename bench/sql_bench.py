"""SQL benchmark: TPC-H Q1, Q6 and a one-day range count over lineitem, three ways, same run.

    .venv/bin/python bench/sql_bench.py            # TPC-H sf 1, 9 runs of each query
    .venv/bin/python bench/sql_bench.py --quick    # smoke run: sf 0.1, 3 runs

The systems, all on the same rows, all executed by DuckDB (threads: DuckDB's default):

- ``lakepool``: ``Lake.open(root).sql(Q)`` over a pool keyed ``l_shipdate:asc`` loaded in one
  load from tpchgen-cli's Parquet; the lake plans (objects and row groups pruned by its
  metadata) and hands DuckDB Arrow.
- ``duckdb-files`` (the floor): DuckDB's own ``read_parquet`` over that pool's data objects
  (``Pool.files()``): the same bytes and row groups, no lake in between.
- ``delta``: the same rows, sorted the same way, written by ``write_deltalake``;
  ``DeltaTable(path).to_pyarrow_dataset()`` registered in DuckDB.

Every system runs as in a long-lived process, the steady state of repeated queries: each timed
run opens the lake or table, plans, runs the query and fetches the result, and the DuckDB it
runs in was started before the clock. The lake runs each query in a cursor of a sandboxed DuckDB
database it caches per process for the plan's file set (lake_core/sql/engine.py; its first run of
a query starts that database, later runs reuse it and its Parquet metadata cache); the peers
each keep one DuckDB connection for the whole run, made outside the clock, with DuckDB's Parquet
metadata cache on too (the floor re-creates its view over the files, delta re-registers its
dataset, inside the clock). ``--cold`` gives every peer run a fresh connection instead (and
still lets the lake reuse its cache: compare with care). Systems take turns in a rotating order within
each round; the table gives the ratio of the medians and, less sensitive to a shared machine's
load, the median of the per-round ratios (the systems of a round run back to back). Bytes read:
lakepool's from its planner's counters (``bytes_read``: compressed sizes of the column chunks of
the row groups read, in the columns read); delta's and the floor's counted the same way from
the pyarrow fragments and row groups their dataset keeps for the query's filter
(``get_fragments(filter)``, then ``split_by_row_group(filter)``) over the query's columns —
what a pyarrow scan with that filter and projection reads, which is how DuckDB scans an Arrow
dataset (filters and projection pushed into pyarrow's scanner).

Prints one markdown table on stdout (progress on stderr); raw numbers go to
``bench/out/sql-sf<SF>.json``. Results and discussion: docs/benchmarks.md, section "SQL".
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from bench.workloads import KEY, fresh, lineitem_path, plain_strings, settle  # noqa: E402
from lake_core import Lake  # noqa: E402
from lake_core.loading import load  # noqa: E402

OUT = ROOT / "bench" / "out"
DAY = dt.date(1995, 6, 17)

Q1 = """SELECT l_returnflag, l_linestatus,
  sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
  avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
  count(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus"""

Q6 = """SELECT sum(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"""

ONE_DAY = f"SELECT count(*) AS n FROM lineitem WHERE l_shipdate = DATE '{DAY.isoformat()}'"

D = pa.date32()
#: name -> (SQL, the columns it reads, its filter as a pyarrow expression for byte counting)
QUERIES: dict[str, tuple[str, list[str], Any]] = {
    "Q1": (
        Q1,
        [
            "l_returnflag",
            "l_linestatus",
            "l_quantity",
            "l_extendedprice",
            "l_discount",
            "l_tax",
            KEY,
        ],
        ds.field(KEY) <= pa.scalar(dt.date(1998, 9, 2), D),
    ),
    "Q6": (
        Q6,
        ["l_extendedprice", "l_discount", "l_quantity", KEY],
        (ds.field(KEY) >= pa.scalar(dt.date(1994, 1, 1), D))
        & (ds.field(KEY) < pa.scalar(dt.date(1995, 1, 1), D)),
    ),
    "one-day": (ONE_DAY, [KEY], ds.field(KEY) == pa.scalar(DAY, D)),
}
SYSTEMS = ("lakepool", "duckdb-files", "delta")
#: goal: (query, system compared against, max ratio of time, also of bytes?)
GOALS = {
    "Q1": ("duckdb-files", 1.2, False),
    "Q6": ("delta", 0.5, True),
    "one-day": ("delta", 0.5, True),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: sf 0.1, 3 runs")
    p.add_argument("--repeat", type=int, default=None, help="runs of each query (default 9)")
    p.add_argument(
        "--lineitem",
        type=Path,
        default=None,
        help="tpchgen-cli's lineitem.parquet (default: bench/data, generated)",
    )
    p.add_argument("--workdir", type=Path, default=OUT / "sql-work")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="query the lake and Delta table a previous run left in --workdir (no reload)",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="a fresh DuckDB connection for every peer run (default: one kept per peer)",
    )
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.sf is None:
        args.sf = 0.1 if args.quick else 1.0
    if args.repeat is None:
        args.repeat = 3 if args.quick else 9
    if args.json is None:
        args.json = OUT / f"sql-sf{args.sf:g}{'-quick' if args.quick else ''}.json"
    return args


# -- set-up (untimed) ---------------------------------------------------------------------------


def setup(args: argparse.Namespace) -> tuple[str, list[str], str]:
    """The lake (one load), the floor's file list (the pool's objects), the delta table."""
    if args.reuse and (args.workdir / "lake").exists() and (args.workdir / "delta").exists():
        root, delta = str(args.workdir / "lake"), str(args.workdir / "delta")
        log(f"reusing {root} and {delta}")
        return root, Lake.open(root).pool("lineitem").files(), delta
    source = args.lineitem or lineitem_path(args.sf)
    table = pq.read_table(source)
    log(f"lineitem: {table.num_rows:,} rows from {source}")
    root = str(fresh(args.workdir / "lake"))
    lake = Lake.init(root)
    pool = lake.create_pool("lineitem", f"{KEY}:asc")
    t0 = time.perf_counter()
    load(pool, [table], message="TPC-H lineitem")
    log(f"  pool loaded in {time.perf_counter() - t0:.1f} s")
    files = pool.files()
    delta = str(fresh(args.workdir / "delta"))
    t0 = time.perf_counter()
    write_deltalake(delta, plain_strings(table).sort_by([(KEY, "ascending")]))
    log(f"  delta written in {time.perf_counter() - t0:.1f} s")
    return root, files, delta


# -- the systems (timed) --------------------------------------------------------------------------


def run_lakepool(root: str, sql: str, con: Any) -> tuple[list[tuple[Any, ...]], Any]:
    """Open the lake, plan and run ``sql`` (in a cursor of the lake's cached sandboxed DuckDB
    database for the plan's files: started on the first run, reused after); the rows, and the run (its counters are read after
    the clock stops: on local disk ``SqlRun.stats`` reads the planned footers)."""
    from lake_core.sql import run_sql

    lake = Lake.open(root)
    run = run_sql(sql, lake.pool, lake)
    return run.relation.fetchall(), run


def run_files(files: list[str], sql: str, con: Any) -> list[tuple[Any, ...]]:
    """DuckDB's own reader over the files, in a connection made before the clock started."""
    con.execute(f"CREATE OR REPLACE VIEW lineitem AS SELECT * FROM read_parquet({files!r})")
    return con.sql(sql).fetchall()


def run_delta(path: str, sql: str, con: Any) -> list[tuple[Any, ...]]:
    """Open the Delta table, register its pyarrow dataset, query (connection made before)."""
    con.register("lineitem", DeltaTable(path).to_pyarrow_dataset())
    return con.sql(sql).fetchall()


# -- bytes a pyarrow scan of a dataset reads ------------------------------------------------------


def dataset_bytes(dataset: ds.Dataset, columns: list[str], flt: Any) -> dict[str, int]:
    """Fragments and row groups a pyarrow scan with ``flt`` keeps, and the compressed bytes of
    ``columns`` in those row groups."""
    frags = list(dataset.get_fragments(filter=flt))
    groups = 0
    nbytes = 0
    for frag in frags:
        for piece in frag.split_by_row_group(flt):
            meta = piece.metadata
            for rg_info in piece.row_groups:
                rg = meta.row_group(rg_info.id)
                groups += 1
                nbytes += sum(
                    rg.column(i).total_compressed_size
                    for i in range(rg.num_columns)
                    if rg.column(i).path_in_schema in columns
                )
    return {"objects_read": len(frags), "row_groups_read": groups, "bytes_read": nbytes}


# -- the run --------------------------------------------------------------------------------------


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    def norm(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return [tuple(round(float(v), 4) if isinstance(v, float) else v for v in r) for r in rows]

    return norm(a) == norm(b)


def bench(args: argparse.Namespace, root: str, files: list[str], delta: str) -> dict[str, Any]:
    runners: dict[str, Callable[[str, Any], Any]] = {
        "lakepool": lambda sql, con: run_lakepool(root, sql, con),
        "duckdb-files": lambda sql, con: run_files(files, sql, con),
        "delta": lambda sql, con: run_delta(delta, sql, con),
    }
    out: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    if not args.cold:
        for name in SYSTEMS[1:]:
            kept[name] = duckdb.connect()
            kept[name].execute("SET parquet_metadata_cache = true")
    for qname, (sql, columns, flt) in QUERIES.items():
        times: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        rows: dict[str, Any] = {}
        lake_stats: dict[str, Any] = {}
        for r in range(args.repeat):
            order = list(SYSTEMS[r % 3 :] + SYSTEMS[: r % 3])
            for name in order:
                # The peer's connection, made outside the clock (fresh each run with --cold).
                con = kept.get(name) or duckdb.connect()
                settle()
                t0 = time.perf_counter()
                got = runners[name](sql, con)
                times[name].append(time.perf_counter() - t0)
                if name not in kept:
                    con.close()
                if name == "lakepool":
                    got, run = got
                    lake_stats = run.stats()
                rows[name] = got
            log(
                f"  {qname} round {r + 1}: "
                + ", ".join(f"{n} {times[n][-1] * 1000:.0f} ms" for n in SYSTEMS)
            )
        for name in SYSTEMS[1:]:
            if not same(rows["lakepool"], rows[name]):
                raise SystemExit(
                    f"{qname}: lakepool and {name} disagree: {rows['lakepool']!r} vs {rows[name]!r}"
                )
        stats = next(iter(lake_stats.values()))
        out[qname] = {
            "times": times,
            "rows": [list(map(str, r)) for r in rows["lakepool"]],
            "bytes": {
                "lakepool": {
                    k: stats[k] for k in ("objects_read", "row_groups_read", "bytes_read")
                },
                "duckdb-files": dataset_bytes(ds.dataset(files, format="parquet"), columns, flt),
                "delta": dataset_bytes(DeltaTable(delta).to_pyarrow_dataset(), columns, flt),
            },
            "lakepool_stats": stats,
        }
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def ms(x: float) -> str:
    return f"{x * 1000:,.1f} ms" if x < 10 else f"{x:,.1f} s"


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n / 1e3:,.1f} kB"


def render(res: dict[str, Any]) -> str:
    head = [
        "query",
        "system",
        "median (min–max)",
        "objects / row groups / bytes read",
        "time ratio of medians",
        "bytes ratio",
        "goal",
        "status",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for qname, q in res["queries"].items():
        peer, limit, on_bytes = GOALS[qname]
        for name in SYSTEMS:
            t = q["times"][name]
            b = q["bytes"][name]
            cells = [
                qname,
                name,
                f"{ms(med(t))} ({ms(min(t))}–{ms(max(t))})",
                f"{b['objects_read']} / {b['row_groups_read']} / {mb(b['bytes_read'])}",
            ]
            if name == "lakepool":
                tr = med(t) / med(q["times"][peer])
                paired = med([a / b for a, b in zip(t, q["times"][peer], strict=True)])
                br = b["bytes_read"] / max(1, q["bytes"][peer]["bytes_read"])
                ok = tr <= limit and (br <= limit or not on_bytes)
                goal = f"≤ {limit}× {peer} time" + (" and bytes" if on_bytes else "")
                cells += [
                    f"{tr:.2f}× {peer} (per round: {paired:.2f}×)",
                    f"{br:.2f}× {peer}",
                    goal,
                    "**met**" if ok else "**not met**",
                ]
            else:
                cells += ["", "", "", ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    res: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "machine": {
            "python": platform.python_version(),
            "duckdb": duckdb.__version__,
            "pyarrow": pa.__version__,
            "nproc": os.cpu_count(),
            "loadavg_start": os.getloadavg(),
        },
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    log(f"SQL bench: sf {args.sf:g}, {args.repeat} runs, workdir {args.workdir}")
    root, files, delta = setup(args)
    res["objects"] = len(files)
    res["delta_files"] = len(DeltaTable(delta).file_uris())
    res["queries"] = bench(args, root, files, delta)
    res["machine"]["loadavg_end"] = os.getloadavg()
    res["table"] = render(res)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=2, default=str))
    log(f"raw results in {args.json}")
    print(res["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
