"""Upsert benchmark: 60,000 changed rows merged into TPC-H lineitem by lakepool's upsert
(merge-join with the objects whose key range holds an incoming key) and by deltalake's MERGE.

    .venv/bin/python bench/upsert_bench.py            # sf 1, 60,000 rows, 3 rounds
    .venv/bin/python bench/upsert_bench.py --quick    # smoke run: sf 0.01, 600 rows, 1 round

The base table is lineitem (``/tmp/li1/lineitem.parquet`` when it exists at sf 1, else
tpchgen-cli's output under bench/data), sorted by ``(l_orderkey, l_linenumber)``, on both
sides with the same target file size (``--target-size``, default 16 MiB):

- ``lakepool``: a pool keyed ``l_orderkey,l_linenumber:asc`` loaded in one load;
  ``Pool.upsert([changes])``.
- ``deltalake``: ``write_deltalake`` of the same sorted rows (``target_file_size`` and the
  table's ``delta.targetFileSize``), then ``DeltaTable.merge(changes, predicate="t.l_orderkey =
  s.l_orderkey AND t.l_linenumber = s.l_linenumber").when_matched_update_all()
  .when_not_matched_insert_all().execute()`` with deltalake's default ``streamed_exec=True``;
- ``delta-pruned``: the same merge with ``streamed_exec=False``, which lets deltalake derive a
  pruning predicate from the source's key bounds (its best case for a narrow change set).

Two change sets of ``--rows`` rows each, half updates of existing keys (their ``l_comment`` and
``l_linestatus`` changed) and half new keys (an existing order with line numbers 8 and up,
which TPC-H never uses), in a shuffled order:

- ``spread``: the updated keys are drawn uniformly from the whole table, the new keys from
  orders spread over the whole key space;
- ``narrow``: the updates are one run of consecutive rows, the new keys belong to the orders of
  that run: every incoming key lies in one key range.

Each round copies the loaded pool and Delta table (outside the clock) and runs each system's
upsert in a fresh child process, which reads the change set and opens the pool or table before
the clock starts and stops it when the commit returns (CPU-s: the child's user + system time
over the same span, every thread); the order of the systems rotates per
round. After the clock the child checks the result: the row count (base + new keys) and the
number of rows carrying the new comment (every incoming row) must be the same on every side.
Bytes rewritten: lakepool's ``UpsertResult.bytes_rewritten`` (stored bytes of the objects the
commit deletes); deltalake's the stored sizes of the files its commit removed (the table's add
actions before and after). Medians and ranges over the rounds, with the load average; prints
one markdown section on stdout (progress on stderr) and the raw numbers to
``bench/out/upsert-sf<SF>.json``. Results and discussion: docs/benchmarks.md, "Upserts".
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
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.workloads import lineitem_path, plain_strings, settle  # noqa: E402
from lake_core import Lake  # noqa: E402
from lake_core.units import format_size, parse_size  # noqa: E402

OUT = ROOT / "bench" / "out"
KEY = "l_orderkey,l_linenumber:asc"
PREDICATE = "t.l_orderkey = s.l_orderkey AND t.l_linenumber = s.l_linenumber"
COMMENT = "upserted by the benchmark"
SIDES = ("lakepool", "deltalake", "delta-pruned")
WORKLOADS = ("spread", "narrow")
PREBUILT_SF1 = Path("/tmp/li1/lineitem.parquet")


# -- data -------------------------------------------------------------------------------------


def base_table(sf: float) -> pa.Table:
    """lineitem at ``sf``, plain strings, sorted by the pool key."""
    path = PREBUILT_SF1 if sf == 1 and PREBUILT_SF1.exists() else lineitem_path(sf)
    table = plain_strings(pq.read_table(path))
    return table.sort_by([("l_orderkey", "ascending"), ("l_linenumber", "ascending")])


def _changed(rows: pa.Table) -> pa.Table:
    """``rows`` with the columns an update changes set to the benchmark's values."""
    rows = rows.set_column(
        rows.schema.get_field_index("l_comment"),
        rows.schema.field("l_comment"),
        pa.array([COMMENT] * rows.num_rows, pa.string()),
    )
    return rows.set_column(
        rows.schema.get_field_index("l_linestatus"),
        rows.schema.field("l_linestatus"),
        pa.array(["U"] * rows.num_rows, pa.string()),
    )


def _new_keys(firsts: pa.Table, n: int) -> pa.Table:
    """``n`` rows with keys no lineitem row has: the orders of ``firsts`` (one row per order)
    with line numbers 8, 9, … (TPC-H uses 1-7), as many per order as ``n`` needs."""
    per = -(-n // firsts.num_rows)
    parts = []
    for j in range(per):
        part = firsts.set_column(
            firsts.schema.get_field_index("l_linenumber"),
            firsts.schema.field("l_linenumber"),
            pa.array(np.full(firsts.num_rows, 8 + j, dtype=np.int32)),
        )
        parts.append(part)
    return _changed(pa.concat_tables(parts).slice(0, n))


def _first_rows(table: pa.Table) -> np.ndarray:
    """Row indices of each order's first line (the table is sorted by the key)."""
    keys = table.column("l_orderkey").to_numpy()
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def change_set(table: pa.Table, kind: str, n: int, seed: int = 14) -> pa.Table:
    """``n`` rows, half updates of existing keys and half new keys, shuffled (see the module
    docstring for ``spread`` and ``narrow``)."""
    rng = np.random.default_rng(seed)
    n_upd = n // 2
    if kind == "spread":
        upd = table.take(np.sort(rng.choice(table.num_rows, n_upd, replace=False)))
        firsts = _first_rows(table)
        orders = np.sort(rng.choice(firsts, n - n_upd, replace=False))
        new = _new_keys(table.take(orders), n - n_upd)
    elif kind == "narrow":
        start = int(rng.integers(0, table.num_rows - n_upd))
        upd = table.slice(start, n_upd)
        new = _new_keys(upd.take(_first_rows(upd)), n - n_upd)
    else:
        raise ValueError(kind)
    both = pa.concat_tables([_changed(upd), new])
    return both.take(rng.permutation(both.num_rows))


# -- the two systems --------------------------------------------------------------------------


def lake_prepare(table: pa.Table, path: Path, target_size: int) -> None:
    lake = Lake.init(str(path))
    pool = lake.create_pool("lineitem", KEY, target_size=target_size)
    pool.load(table)


def delta_prepare(table: pa.Table, path: Path, target_size: int) -> None:
    from deltalake import write_deltalake

    write_deltalake(
        str(path),
        table,
        target_file_size=target_size,
        configuration={"delta.targetFileSize": str(target_size)},
    )


def _counts(table: pa.Table) -> dict[str, int]:
    return {
        "rows": table.num_rows,
        "changed": int(pc.sum(pc.equal(table.column("l_comment"), COMMENT)).as_py() or 0),
    }


def lake_upsert(path: str, changes: str) -> dict[str, Any]:
    """Child process: one upsert into the copied pool, then its checks (outside the clock)."""
    source = pq.read_table(changes)
    pool = Lake.open(path).pool("lineitem")
    objects_before = len(pool.snapshot(pool.tip()).objects)
    settle()
    cpu, t0 = time.process_time(), time.perf_counter()
    result = pool.upsert([source])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu
    after = pool.read(columns=["l_comment"])
    return {
        "seconds": seconds,
        "cpu": cpu,
        "bytes_rewritten": result.bytes_rewritten,
        "bytes_written": result.bytes_written,
        "files": objects_before,
        "files_read": result.objects_read,
        "files_rewritten": result.objects_rewritten,
        "inserted": result.inserted,
        "updated": result.updated,
        **_counts(after),
    }


def _delta_files(dt: Any) -> dict[str, int]:
    adds = pa.table(dt.get_add_actions(flatten=True))
    return dict(
        zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True)
    )


def delta_upsert(path: str, changes: str, streamed: bool) -> dict[str, Any]:
    from deltalake import DeltaTable

    source = pq.read_table(changes)
    dt = DeltaTable(path)
    before = _delta_files(dt)
    settle()
    cpu, t0 = time.process_time(), time.perf_counter()
    metrics = (
        dt.merge(
            source, predicate=PREDICATE, source_alias="s", target_alias="t", streamed_exec=streamed
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu
    after_table = DeltaTable(path)
    after = _delta_files(after_table)
    removed = set(before) - set(after)
    added = set(after) - set(before)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "bytes_rewritten": sum(before[p] for p in removed),
        "bytes_written": sum(after[p] for p in added),
        "files": len(before),
        # deltalake's num_target_files_scanned reads 0 at sf 1 whatever it scans: not shown.
        "files_read": None,
        "files_rewritten": len(removed),
        "inserted": metrics.get("num_target_rows_inserted", 0),
        "updated": metrics.get("num_target_rows_updated", 0),
        **_counts(after_table.to_pyarrow_table(columns=["l_comment"])),
    }


def child(side: str, path: Path, changes: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", side, str(path), str(changes)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_child(side: str, path: str, changes: str) -> None:
    if side == "lakepool":
        result = lake_upsert(path, changes)
    else:
        result = delta_upsert(path, changes, streamed=side == "deltalake")
    print(json.dumps(result), flush=True)
    # deltalake's runtime threads abort the interpreter's exit now and then
    # ("terminate called without an active exception"): the result is out, leave at once.
    os._exit(0)


# -- the run ----------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _range(values: list[float], fmt: str = "{:.2f}") -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def report(res: dict[str, Any]) -> str:
    lines = [
        f"lineitem sf {res['sf']:g} ({res['base_rows']:,} rows), pool key "
        f"`{KEY}`, target file size {format_size(res['target_size'])} on both sides "
        f"(lakepool {res['files']['lakepool']} objects, deltalake {res['files']['deltalake']} "
        f"files); {res['rows']:,} changed rows per upsert (half updates, half new keys); "
        f"{res['repeat']} rounds, fresh child process per upsert; {platform.machine()}, "
        f"{os.cpu_count()} CPUs, python {platform.python_version()}, pyarrow {pa.__version__}, "
        f"deltalake {res['deltalake']}; 1-min load average {min(res['loads']):.1f}–"
        f"{max(res['loads']):.1f} (the VM is shared: the load average counts every job on it, the bench's own included)",
        "",
        "| change set | system | seconds, median (range) | CPU-s, median (range) "
        "| files read / rewritten / in table | bytes rewritten | bytes written "
        "| deltalake ÷ lakepool time |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    goals = []
    for kind in WORKLOADS:
        by_side = res["results"][kind]
        med = {s: statistics.median(r["seconds"] for r in rs) for s, rs in by_side.items()}
        for s, rs in by_side.items():
            r0 = rs[0]
            ratio = "" if s == "lakepool" else f"{med[s] / med['lakepool']:.2f}x"
            lines.append(
                f"| {kind} | {s} | {_range([r['seconds'] for r in rs])} | "
                f"{_range([r.get('cpu', float('nan')) for r in rs])} | "
                f"{'–' if r0['files_read'] is None else r0['files_read']} / "
                f"{r0['files_rewritten']} / {r0['files']} | "
                f"{format_size(r0['bytes_rewritten'])} | {format_size(r0['bytes_written'])} | "
                f"{ratio} |"
            )
        best = min(med["deltalake"], med["delta-pruned"])
        speedup = best / med["lakepool"]
        # The systems of a round run back to back: their ratio feels less of the load.
        per_round = statistics.median(
            min(d["seconds"], p["seconds"]) / lp["seconds"]
            for lp, d, p in zip(
                by_side["lakepool"], by_side["deltalake"], by_side["delta-pruned"], strict=True
            )
        )
        want = 10.0 if kind == "narrow" else 1.0
        goals.append(
            f"- {kind}: lakepool {speedup:.2f}x as fast as deltalake's faster merge (ratio of "
            f"the medians; median of the per-round ratios {per_round:.2f}x; goal >= {want:g}x: "
            f"{'met' if speedup >= want else 'NOT met'}); bytes rewritten "
            f"{format_size(by_side['lakepool'][0]['bytes_rewritten'])} against "
            f"{format_size(by_side['delta-pruned'][0]['bytes_rewritten'])}"
        )
    lines += ["", *goals]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--rows", type=int, default=60_000, help="changed rows per upsert")
    ap.add_argument("--target-size", default="16MB", help="object / file size on both sides")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="sf 0.01, 600 rows, 1 round")
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "PATH", "CHANGES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(*args.child)
    if args.quick:
        args.sf, args.rows, args.repeat = 0.01, 600, 1
    import deltalake

    target = parse_size(args.target_size)
    table = base_table(args.sf)
    workdir = Path(tempfile.mkdtemp(prefix="lakepool-upsert-bench-"))
    res: dict[str, Any] = {
        "sf": args.sf,
        "rows": args.rows,
        "repeat": args.repeat,
        "target_size": target,
        "base_rows": table.num_rows,
        "deltalake": deltalake.__version__,
        "loads": [],
        "results": {k: {s: [] for s in SIDES} for k in WORKLOADS},
    }
    try:
        for kind in WORKLOADS:
            pq.write_table(change_set(table, kind, args.rows), workdir / f"{kind}.parquet")
        log(f"loading {table.num_rows:,} rows into the pool and the Delta table")
        bases = {"lakepool": workdir / "lake", "delta": workdir / "delta"}
        lake_prepare(table, bases["lakepool"], target)
        delta_prepare(table, bases["delta"], target)
        del table
        for r in range(args.repeat):
            for kind in WORKLOADS:
                order = list(SIDES[r % 3 :] + SIDES[: r % 3])
                for side in order:
                    src = bases["lakepool" if side == "lakepool" else "delta"]
                    dst = workdir / f"{side}-{kind}-{r}"
                    shutil.copytree(src, dst)
                    res["loads"].append(os.getloadavg()[0])
                    out = child(side, dst, workdir / f"{kind}.parquet")
                    log(
                        f"round {r} {kind} {side}: {out['seconds']:.2f} s, rewrote "
                        f"{out['files_rewritten']} files ({format_size(out['bytes_rewritten'])})"
                    )
                    res["results"][kind][side].append(out)
                    shutil.rmtree(dst, ignore_errors=True)
        res["files"] = {
            "lakepool": res["results"]["spread"]["lakepool"][0]["files"],
            "deltalake": res["results"]["spread"]["deltalake"][0]["files"],
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    # The same end state on every side: base rows plus the new keys, every incoming row
    # carrying the new comment.
    for kind in WORKLOADS:
        ends = {(o["rows"], o["changed"]) for rs in res["results"][kind].values() for o in rs}
        expected = (res["base_rows"] + args.rows - args.rows // 2, args.rows)
        if ends != {expected}:
            raise SystemExit(f"error: {kind}: end states differ: {ends} (expected {expected})")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"upsert-sf{args.sf:g}.json").write_text(json.dumps(res, indent=1))
    print(report(res))


if __name__ == "__main__":
    main()
