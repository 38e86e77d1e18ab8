"""Spark benchmarks: ingest of TPC-H lineitem and LSM compaction of a fragmented pool, with
lakepool on Spark (``local[1]`` and ``local[2]``), lakepool's local path, and deltalake.

    .venv/bin/python bench/spark_bench.py --sf 1 --repeat 3 --json bench/spark.json

- **Ingest**: ``lineitem.parquet`` (``tpchgen-cli``, generated on first use into
  ``bench/data/sf<SF>/``) into a new pool keyed ``l_shipdate:asc`` (target 128 MB):
  ``spark_load`` vs ``lake_core.loading.load`` vs deltalake (read, sort by the key,
  ``write_deltalake``), each starting from the file.
- **Compaction**: a pool fragmented by overlapping loads — lineitem cut at key changes into
  ``--ranges`` key ranges, each loaded as ``--layers`` overlapping loads (round-robin rows), so
  the policy finds one run per range (target 32 MB) — compacted by ``spark_compact`` vs
  ``lake_core.maintenance.compact`` vs deltalake's ``optimize.z_order([key])`` (the sorting
  rewrite; ``optimize.compact()``, which only bin-packs, is shown for reference). Every run
  starts from a copy of the same fragmented lake / table.

Each Spark configuration runs in a child process of its own (one SparkContext per process);
its session start-up and a warm-up job are timed separately, not charged to the work. Times
are medians of ``--repeat`` runs; rows/s and MB/s are over the rows and the uncompressed Arrow
size (ingest) or the compressed bytes rewritten (compaction).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lake_core import Lake, LakeConfig  # noqa: E402
from lake_core.loading import load  # noqa: E402
from lake_core.maintenance import compact  # noqa: E402

KEY = "l_shipdate"
INGEST_TARGET = 128 * 1024 * 1024
COMPACT_TARGET = 32 * 1024 * 1024
DATA = Path(__file__).resolve().parent / "data"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def lineitem(sf: float) -> Path:
    out = DATA / f"sf{sf:g}"
    path = out / "lineitem.parquet"
    if not path.exists():
        exe = Path(sys.executable).with_name("tpchgen-cli")
        cmd = [str(exe) if exe.exists() else "tpchgen-cli", "parquet", "-s", f"{sf:g}"]
        cmd += ["--tables=lineitem", "--output-dir", str(out)]
        log("generating: " + " ".join(cmd))
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(cmd, check=True)
    return path


def plain_strings(table: pa.Table) -> pa.Table:
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def tree_cpu() -> float:
    """CPU seconds used so far by this process and every process below it (a Spark child's
    JVM and its Python workers; exited ones count in their parent's ``cutime``)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = sum(int(x) for x in fields[11:15]) / tick  # utime..cstime
    mine = {os.getpid()}
    grew = True
    while grew:
        below = {p for p, parent in parents.items() if parent in mine} - mine
        grew = bool(below)
        mine |= below
    return sum(used.get(p, 0.0) for p in mine)


def timed(fn: Callable[[], Any]) -> dict[str, float]:
    """Wall seconds, CPU seconds (this process tree) and the 1-minute load average."""
    gc.collect()
    os.sync()  # one run's deferred write-back is not charged to the next
    cpu0 = tree_cpu()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return {"wall": wall, "cpu": tree_cpu() - cpu0, "load": os.getloadavg()[0]}


def show(run: dict[str, float]) -> str:
    return f"{run['wall']:.2f} s ({run['cpu']:.1f} CPU-s, load {run['load']:.1f})"


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    return path


def new_pool(root: Path, target: int) -> Any:
    lake = Lake.init(LakeConfig(uri=str(fresh(root))))
    return lake.create_pool("lineitem", f"{KEY}:asc", target_size=target)


# -- the fragmented pool ----------------------------------------------------------------------


def fragments(table: pa.Table, ranges: int, layers: int) -> list[pa.Table]:
    """``ranges`` key ranges cut where the key changes, each split round-robin into
    ``layers`` overlapping loads."""
    table = plain_strings(table).sort_by([(KEY, "ascending")])
    keys = table.column(KEY).combine_chunks().cast(pa.int32()).to_numpy()
    n = table.num_rows
    # Cut after the last row of a key: a key never spans two ranges.
    cuts = [0] + [int(np.searchsorted(keys, keys[i * n // ranges], "right")) for i in range(1, ranges)]
    cuts.append(n)
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        part = table.slice(a, b - a)
        for layer in range(layers):
            out.append(part.take(pa.array(range(layer, part.num_rows, layers))))
    return out


def build_fragmented(table: pa.Table, root: Path, ranges: int, layers: int) -> dict[str, Any]:
    pool = new_pool(root, COMPACT_TARGET)
    for piece in fragments(table, ranges, layers):
        load(pool, [piece])
    snap = pool.snapshot(pool.tip())
    return {"objects": len(snap.objects), "bytes": sum(o.size for o in snap.objects.values())}


def build_fragmented_delta(table: pa.Table, root: Path, ranges: int, layers: int) -> None:
    from deltalake import write_deltalake

    fresh(root)
    for piece in fragments(table, ranges, layers):
        write_deltalake(str(root), piece, mode="append")


def copy_of(template: Path, dest: Path) -> Path:
    fresh(dest)
    shutil.copytree(template, dest)
    return dest


# -- the local path and deltalake -------------------------------------------------------------


def run_local(args: argparse.Namespace, path: Path, template: Path, work: Path) -> dict[str, Any]:
    ingest = []
    for r in range(args.repeat):
        pool = new_pool(work / "local-ingest", INGEST_TARGET)
        ingest.append(timed(lambda pool=pool: load(pool, [str(path)])))
        log(f"  local ingest run {r + 1}: {show(ingest[-1])}")
    snap = pool.snapshot(pool.tip())
    compaction = []
    result: Any = None
    for r in range(args.repeat):
        lake = Lake.open(LakeConfig(uri=str(copy_of(template, work / "local-compact"))))
        p = lake.pool("lineitem")
        box: dict[str, Any] = {}
        compaction.append(timed(lambda p=p, box=box: box.update(r=compact(p))))
        result = box["r"]
        log(f"  local compaction run {r + 1}: {show(compaction[-1])} ({result.runs} runs)")
    return {
        "ingest": ingest,
        "ingest_objects": len(snap.objects),
        "ingest_bytes": sum(o.size for o in snap.objects.values()),
        "compact": compaction,
        "compact_runs": result.runs,
        "compact_out": result.objects_out,
    }


def run_delta(args: argparse.Namespace, path: Path, template: Path, work: Path) -> dict[str, Any]:
    from deltalake import DeltaTable, write_deltalake

    ingest = []
    for r in range(args.repeat):
        dest = fresh(work / "delta-ingest")

        def go(dest: Path = dest) -> None:
            table = plain_strings(pq.read_table(path))
            write_deltalake(str(dest), table.sort_by([(KEY, "ascending")]))

        ingest.append(timed(go))
        log(f"  deltalake ingest run {r + 1}: {show(ingest[-1])}")
    z_order, binpack = [], []
    for r in range(args.repeat):
        dt = DeltaTable(str(copy_of(template, work / "delta-compact")))
        z_order.append(timed(lambda dt=dt: dt.optimize.z_order([KEY], target_size=COMPACT_TARGET)))
        dt = DeltaTable(str(copy_of(template, work / "delta-compact")))
        binpack.append(timed(lambda dt=dt: dt.optimize.compact(target_size=COMPACT_TARGET)))
        log(f"  deltalake z_order run {r + 1}: {show(z_order[-1])}; compact {show(binpack[-1])}")
    return {"ingest": ingest, "z_order": z_order, "compact": binpack}


# -- Spark (in a child process per master) ----------------------------------------------------


def child(args: argparse.Namespace) -> None:
    from lake_spark import SparkSettings, spark_compact, spark_load, spark_session

    t0 = time.perf_counter()
    spark = spark_session(SparkSettings.resolve(args.master, app_name="lakepool-bench"))
    session = time.perf_counter() - t0
    sc = spark.sparkContext
    t0 = time.perf_counter()
    parallelism = sc.defaultParallelism
    sc.parallelize(range(parallelism), parallelism).map(
        lambda _: __import__("lake_spark.ingest") and 0
    ).collect()
    warmup = time.perf_counter() - t0
    work = Path(args.workdir)
    tag = args.master.replace("[", "").replace("]", "").replace("*", "all")
    ingest = []
    pool: Any = None
    for r in range(args.repeat):
        pool = new_pool(work / f"spark-ingest-{tag}", INGEST_TARGET)
        ingest.append(timed(lambda pool=pool: spark_load(spark, pool, [args.source])))
        log(f"  spark {args.master} ingest run {r + 1}: {show(ingest[-1])}")
    snap = pool.snapshot(pool.tip())
    compaction = []
    result: Any = None
    for r in range(args.repeat):
        lake = Lake.open(LakeConfig(uri=str(copy_of(Path(args.template), work / f"spark-c-{tag}"))))
        p = lake.pool("lineitem")
        box: dict[str, Any] = {}
        compaction.append(timed(lambda p=p, box=box: box.update(r=spark_compact(spark, p))))
        result = box["r"]
        log(f"  spark {args.master} compaction run {r + 1}: {show(compaction[-1])}")
    spark.stop()
    report = {
        "session": session,
        "warmup": warmup,
        "ingest": ingest,
        "ingest_objects": len(snap.objects),
        "ingest_bytes": sum(o.size for o in snap.objects.values()),
        "compact": compaction,
        "compact_runs": result.runs,
        "compact_out": result.objects_out,
    }
    print("REPORT " + json.dumps(report), flush=True)


def run_spark(
    args: argparse.Namespace, master: str, path: Path, template: Path, work: Path
) -> dict[str, Any]:
    cmd = [
        sys.executable, __file__, "--child", "--master", master, "--source", str(path),
        "--template", str(template), "--workdir", str(work), "--repeat", str(args.repeat),
    ]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("REPORT ")][-1]
    return dict(json.loads(line[len("REPORT ") :]))


# -- report -----------------------------------------------------------------------------------


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """The fastest run: on a shared machine, the one least disturbed by other work."""
    return min(runs, key=lambda r: r["wall"])


def markdown(res: dict[str, Any]) -> str:
    rows = res["rows"]
    mb = res["arrow_mb"]
    frag = res["fragmented"]
    cmb = frag["bytes"] / 1e6
    header = [
        "| system | time | rows/s | MB/s | CPU-s | vs local path |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]

    def line(what: str, runs: list[dict[str, float]], size: float, ref: float | None) -> str:
        run = best(runs)
        t = run["wall"]
        vs = f"{t / ref:.2f}×" if ref else "1.00×"
        return (
            f"| {what} | {t:.2f} s | {rows / t / 1e6:.2f} M | {size / t:.0f} | "
            f"{run['cpu']:.1f} | {vs} |"
        )

    out = [
        f"Ingest: TPC-H sf {res['sf']:g} lineitem, {rows:,} rows, {mb:,.0f} MB as Arrow, "
        f"into a pool keyed `{KEY}:asc` (target 128 MB). Best of {res['repeat']} runs.",
        "",
        *header,
    ]
    local_t = best(res["local"]["ingest"])["wall"]
    out.append(line("lakepool local path (`load`)", res["local"]["ingest"], mb, None))
    for master, r in res["spark"].items():
        out.append(line(f"lakepool Spark `{master}` (`spark_load`)", r["ingest"], mb, local_t))
    if "delta" in res:
        out.append(
            line("deltalake read + sort + `write_deltalake`", res["delta"]["ingest"], mb, local_t)
        )
    out += [
        "",
        f"Compaction: the same rows as {frag['objects']} overlapping objects ({cmb:,.0f} MB; "
        f"{res['ranges']} key ranges × {res['layers']} loads), target 32 MB: "
        f"{res['local']['compact_runs']} runs. Best of {res['repeat']} runs.",
        "",
        *header,
    ]
    local_c = best(res["local"]["compact"])["wall"]
    out.append(line("lakepool local path (`compact`)", res["local"]["compact"], cmb, None))
    for master, r in res["spark"].items():
        out.append(line(f"lakepool Spark `{master}` (`spark_compact`)", r["compact"], cmb, local_c))
    if "delta" in res:
        for key, what in (
            ("z_order", "deltalake `optimize.z_order([key])`"),
            ("compact", "deltalake `optimize.compact()` (no sort)"),
        ):
            out.append(line(what, res["delta"][key], cmb, local_c))
    starts = ", ".join(
        f"`{m}` {r['session']:.1f} s + {r['warmup']:.1f} s" for m, r in res["spark"].items()
    )
    loads = [r["load"] for part in ("local", *res["spark"]) for r in _runs(res, part)]
    out += [
        "",
        f"Spark session start + first job (not in the times above): {starts}. "
        f"Load average during the runs: {min(loads):.1f}–{max(loads):.1f} on {res['cpus']} CPUs.",
    ]
    return "\n".join(out)


def _runs(res: dict[str, Any], part: str) -> list[dict[str, float]]:
    r = res["local"] if part == "local" else res["spark"][part]
    return [*r["ingest"], *r["compact"]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--masters", default="local[1],local[2]")
    p.add_argument("--ranges", type=int, default=8)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--no-delta", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--master", help=argparse.SUPPRESS)
    p.add_argument("--source", help=argparse.SUPPRESS)
    p.add_argument("--template", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lake-spark-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    path = lineitem(args.sf)
    table = pq.read_table(path)
    res: dict[str, Any] = {
        "sf": args.sf,
        "repeat": args.repeat,
        "rows": table.num_rows,
        "arrow_mb": plain_strings(table).nbytes / 1e6,
        "ranges": args.ranges,
        "layers": args.layers,
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }
    log(f"lineitem sf {args.sf:g}: {table.num_rows:,} rows; building the fragmented pool")
    template = work / "fragmented-lake"
    res["fragmented"] = build_fragmented(table, template, args.ranges, args.layers)
    delta_template = work / "fragmented-delta"
    if not args.no_delta:
        build_fragmented_delta(table, delta_template, args.ranges, args.layers)
    del table
    log("local path")
    res["local"] = run_local(args, path, template, work)
    if not args.no_delta:
        log("deltalake")
        res["delta"] = run_delta(args, path, delta_template, work)
    res["spark"] = {}
    for master in args.masters.split(","):
        log(f"spark {master}")
        res["spark"][master] = run_spark(args, master, path, template, work)
    res["loadavg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    print(markdown(res))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
