"""CLI start-up benchmark: whole-process times of ``lake --help``, ``lake ls`` and ``lake load``
of a 10-row file into a local lake, next to two floors, ``python -c pass`` and
``python -c "import pyarrow"`` (every command that opens a lake needs pyarrow), and the
modules any NDJSON-to-Parquet loader with a click CLI imports.

Usage: .venv/bin/python bench/cli_startup_bench.py [--runs 11] [--root CHECKOUT]

Every measurement is a fresh process (``python -m lake_cli …``: interpreter start, imports,
the command, exit). The commands take turns within each round, so a burst of load on the shared
machine hits all of them alike; the table gives the median and the range. ``--root`` measures
another checkout of lakepool (e.g. an older commit unpacked with ``git archive``) with the same
interpreter, for before/after figures. Besides the times, one extra run of each command lists
which heavy libraries it imported (pandas, pyspark, dagster, protobuf, boto3, …), read from
``sys.modules`` at exit. Raw numbers go to ``bench/out/cli-startup.json``.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"

#: Libraries whose import the start-up rules are about (see lake_cli/startup.py).
WATCHED = ("pandas", "numpy", "pyarrow", "google.protobuf", "boto3", "botocore", "pyspark",
           "dagster", "rich", "duckdb", "kazoo")

#: Runs ``lake`` as ``python -m lake_cli`` would, then prints the watched libraries it imported.
PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['lake', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('lake_cli', run_name='__main__', alter_sys=True)\n"
    "except SystemExit:\n"
    "    pass\n"
    f"watched = {WATCHED!r}\n"
    "print(sorted(w for w in watched if w in sys.modules), file=sys.stderr)\n"
)


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``cmd``. CPU time suffers less
    from other processes on a shared machine, so it is reported next to the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        cmd, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported(args: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"')))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--root", type=Path, default=ROOT, help="the lakepool checkout to measure")
    ap.add_argument("--json", type=Path, default=OUT / "cli-startup.json")
    ap.add_argument(
        "--bytecode",
        choices=("cached", "none"),
        default="cached",
        help="cached (default): modules load from compiled bytecode, as when installed; "
        "none: every lakepool module is compiled from source in every process "
        "(PYTHONDONTWRITEBYTECODE=1 on a source checkout that has no __pycache__)",
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lake-startup-"))
    lake = work / "lake"
    rows = work / "rows.ndjson"
    rows.write_text("".join(json.dumps({"ts": i, "user": f"u{i}"}) + "\n" for i in range(10)))
    env = {**os.environ, "PYTHONPATH": str(args.root.resolve()), "LAKE_ROOT": str(lake)}
    env.pop("LAKE_ZOOKEEPER", None)  # local file locks: no ZooKeeper in the measurement
    if args.bytecode == "cached":
        # As an installed package runs: modules load from bytecode compiled once (here into
        # a scratch cache, so the measured checkout is not written to), not from source.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    py = sys.executable
    lake_cmd = [py, "-m", "lake_cli"]
    # Every process runs in the scratch directory: ``python -m``/``-c`` put the working
    # directory first on sys.path, which would shadow --root from inside a checkout.
    for setup in (["init"], ["create", "logs"]):
        subprocess.run([*lake_cmd, *setup], check=True, env=env, cwd=work, stdout=subprocess.DEVNULL)

    cases: dict[str, list[str]] = {
        "python -c pass": [py, "-c", "pass"],
        'python -c "import pyarrow"': [py, "-c", "import pyarrow"],
        # What any loader of NDJSON into Parquet imports, and the CLI library: the floor of
        # `lake load` short of not using pyarrow's compute, Parquet and JSON modules.
        "python -c \"import click, pyarrow.compute, pyarrow.json, pyarrow.parquet\"": [
            py,
            "-c",
            "import click, pyarrow.compute, pyarrow.json, pyarrow.parquet",
        ],
        "lake --help": [*lake_cmd, "--help"],
        "lake ls": [*lake_cmd, "ls"],
        "lake load (10 rows, local)": [*lake_cmd, "load", "-p", "logs", "-q", str(rows)],
    }
    for cmd in cases.values():  # warm-up round, not counted: fills the bytecode cache
        timed(cmd, env, work)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            wall, used = timed(cmd, env, work)
            times[name].append(wall)
            cpu[name].append(used)
    load_after = os.getloadavg()
    libs = {
        "lake --help": imported(["--help"], env, work),
        "lake ls": imported(["ls"], env, work),
        "lake load (10 rows, local)": imported(["load", "-p", "logs", "-q", str(rows)], env, work),
    }
    shutil.rmtree(work, ignore_errors=True)

    result = {
        "root": str(args.root.resolve()),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "runs": args.runs,
        "bytecode": args.bytecode,
        "times": times,
        "cpu": cpu,
        "imported": libs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))

    print(
        f"nproc {os.cpu_count()}, load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {args.runs} runs each, taking turns; bytecode "
        f"{args.bytecode}; root {args.root}\n"
    )
    print("| command | wall, median | wall, range | CPU, median | heavy imports |")
    print("| --- | ---: | --- | ---: | --- |")
    for name, xs in times.items():
        heavy = ", ".join(libs[name]) if name in libs else "—"
        print(
            f"| `{name}` | {statistics.median(xs) * 1000:.0f} ms | "
            f"{min(xs) * 1000:.0f}–{max(xs) * 1000:.0f} ms | "
            f"{statistics.median(cpu[name]) * 1000:.0f} ms | {heavy or 'none'} |"
        )


if __name__ == "__main__":
    main()
