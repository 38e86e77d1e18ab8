"""Run every benchmark module in sequence and regenerate docs/benchmarks.md (`make bench`).

    .venv/bin/python bench/suite.py                  # everything, full size → docs/benchmarks.md
    .venv/bin/python bench/suite.py --quick          # smoke sizes → bench/out/benchmarks-quick.md
    .venv/bin/python bench/suite.py --only commits,startup      # some modules; the others keep
                                                                # their last stored output

Each module stays runnable alone (``bench/<module>.py``); the suite runs it as a child process
(``python bench/<module>.py ARGS``), one after the other (the machine has 2 shared cores:
nothing runs in parallel), keeps its stdout — the module's markdown — in
``bench/out/suite/<name>.md`` (``-quick.md`` for smoke runs) with when and how it ran, and
writes the document from the template ``bench/benchmarks.md.in``: the hand-written text stays
there (analysis, notes, earlier figures), and each ``<!-- bench:NAME -->`` marker is replaced by
that module's latest output under a line saying how it ran (command, seconds, load average
before and after). ``<!-- bench:machine -->`` becomes the machine table (CPU, cores, memory,
disk, versions, load average at the start and end of the suite). Edit the template, never the
generated document. A module that fails is reported in its place (exit status, last lines of
its stderr), the others still run, and the suite exits 1.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TEMPLATE = BENCH / "benchmarks.md.in"
STORE = BENCH / "out" / "suite"
MARKER = re.compile(r"<!-- bench:([a-z0-9-]+) -->")


@dataclass(frozen=True)
class Module:
    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]


#: In the order they run. ``lake`` is bench/run.py: ingest, small commits, open after long
#: histories, a key-range query, and (its ``sql`` section) bench/sql_bench.py.
MODULES = [
    Module("lake", "run.py", (), ("--quick",)),
    Module("commits", "commit_bench.py", (), ("--quick",)),
    Module("catalog", "catalog_bench.py", (), ("--sizes", "10,100", "--samples", "5")),
    Module(
        "catalog-s3",
        "catalog_bench.py",
        ("--store", "s3", "--sizes", "10,1000", "--samples", "30"),
        ("--store", "s3", "--sizes", "10", "--samples", "3"),
    ),
    Module(
        "compaction", "compaction_bench.py", (), ("--sf", "0.01", "--loads", "10", "--repeat", "1")
    ),
    Module("upsert", "upsert_bench.py", (), ("--quick",)),
    Module("index", "index_bench.py", (), ("--quick",)),
    Module(
        "index-1mb",
        "index_bench.py",
        ("--seek-stride", "1MB"),
        ("--quick", "--seek-stride", "1MB"),
    ),
    Module("otree", "otree_bench.py", (), ("--quick",)),
    Module("derived", "derived_bench.py", (), ("--quick",)),
    Module("spark", "spark_bench.py", (), ("--sf", "0.01", "--repeat", "1")),
    Module("export", "export_bench.py", (), ("--sf", "0.01", "--repeat", "1")),
    Module("service", "service_bench.py", (), ("--quick",)),
    Module("startup", "cli_startup_bench.py", (), ("--runs", "3")),
    Module("metadata", "metadata_bench.py", (), ("--objects", "500", "--per-commit", "50")),
]
NAMES = [m.name for m in MODULES]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine() -> dict[str, str]:
    """What the guest sees of the machine: CPU, cores, memory, the disk under bench/out."""
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in _read("/proc/cpuinfo").splitlines()
            if ln.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    mem = next(
        (ln.split()[1] for ln in _read("/proc/meminfo").splitlines() if ln.startswith("MemTotal")),
        "",
    )
    disk = "unknown"
    try:
        out = (
            subprocess.run(["df", "-T", str(BENCH)], capture_output=True, text=True, check=True)
            .stdout.splitlines()[-1]
            .split()
        )
        dev, fstype, size_kb = out[0], out[1], int(out[2])
        rot = _read(f"/sys/block/{Path(dev).name}/queue/rotational").strip()
        kind = {"0": "non-rotational", "1": "reports rotational"}.get(rot, "")
        disk = f"{dev}, {fstype}, {size_kb / 1e6:.0f} GB" + (f", {kind}" if kind else "")
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        pass
    versions = []
    for mod in ("pyarrow", "deltalake", "duckdb", "pyspark"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            continue
    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "memory": f"{int(mem) / 2**20:.1f} GiB" if mem else "unknown",
        "disk (bench/out)": disk,
        "kernel": platform.release(),
        "software": f"CPython {platform.python_version()}, " + ", ".join(versions),
    }


def run_module(m: Module, args: tuple[str, ...], store: Path) -> dict[str, object]:
    """Run one module as a child process; store and return its output and how it ran."""
    cmd = [sys.executable, str(BENCH / m.script), *args]
    shown = " ".join(["python", f"bench/{m.script}", *map(shlex.quote, args)])
    log(f"== {m.name}: {shown}")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    # stderr (progress) is shown as it comes and its tail kept; stdout (the markdown) is
    # read on a thread so neither pipe can fill up and stall the child.
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    tail: collections.deque[str] = collections.deque(maxlen=12)
    for line in proc.stderr:
        sys.stderr.write(line)
        tail.append(line.rstrip("\n"))
    returncode = proc.wait()
    reader.join()
    seconds = time.perf_counter() - t0
    record: dict[str, object] = {
        "name": m.name,
        "command": shown,
        "seconds": round(seconds, 1),
        "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "exit": returncode,
        "output": "".join(chunks).strip(),
        "stderr_tail": "\n".join(tail),
    }
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(record, indent=1))
    log(f"== {m.name}: exit {returncode} in {seconds:.0f} s")
    return record


def block(record: dict[str, object] | None) -> str:
    """What replaces a module's marker."""
    if record is None:
        return "_Not run by `bench/suite.py` yet on this checkout: run `make bench`._"
    load = record["load"]
    assert isinstance(load, list)
    head = (
        f"_This run: `{record['command']}`, finished {record['finished']}, "
        f"{record['seconds']} s, load average {load[0]} → {load[1]}._"
    )
    if record["exit"] != 0:
        return (
            f"{head}\n\n**Failed** (exit {record['exit']}); the end of its stderr:\n\n"
            f"```\n{record['stderr_tail']}\n```"
        )
    return f"{head}\n\n{record['output']}"


def render(
    template: str, records: dict[str, dict[str, object] | None], info: dict[str, str]
) -> str:
    machine_table = ["| | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in info.items())]

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "machine":
            return "\n".join(machine_table)
        if name not in records:
            raise SystemExit(f"error: template marker names no module: {name}")
        return block(records[name])

    header = (
        "<!-- Generated by bench/suite.py (`make bench`) from bench/benchmarks.md.in: edit the "
        "template, not this file. -->\n\n"
    )
    return header + MARKER.sub(sub, template)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke sizes; writes the quick document")
    p.add_argument("--only", default=",".join(NAMES), help=f"modules to run: {', '.join(NAMES)}")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default docs/benchmarks.md (quick: bench/out/benchmarks-quick.md)",
    )
    p.add_argument("--template", type=Path, default=TEMPLATE)
    p.add_argument("--store", type=Path, default=STORE, help="where module outputs are kept")
    p.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="arguments for one module instead of the defaults (repeatable)",
    )
    args = p.parse_args(argv)
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(only) - set(NAMES)
    if unknown:
        p.error(f"unknown module(s): {', '.join(sorted(unknown))}")
    override: dict[str, tuple[str, ...]] = {}
    for item in args.args:
        name, sep, rest = item.partition("=")
        if not sep or name not in NAMES:
            p.error(f"--args wants NAME=ARGS with NAME one of {', '.join(NAMES)}: {item!r}")
        override[name] = tuple(shlex.split(rest))
    out = args.out or (
        BENCH / "out" / "benchmarks-quick.md" if args.quick else ROOT / "docs" / "benchmarks.md"
    )
    template = args.template.read_text()
    suffix = "-quick" if args.quick else ""
    info = machine()
    info["load average"] = f"{os.getloadavg()[0]:.1f} at the start"
    failed = []
    for m in MODULES:
        if m.name not in only:
            continue
        margs = override.get(m.name, m.quick if args.quick else m.full)
        rec = run_module(m, margs, args.store / f"{m.name}{suffix}.json")
        if rec["exit"] != 0:
            failed.append(m.name)
    info["load average"] += (
        f", {os.getloadavg()[0]:.1f} at the end (2 cores, shared with other engineers' jobs)"
    )
    records: dict[str, dict[str, object] | None] = {}
    for m in MODULES:
        path = args.store / f"{m.name}{suffix}.json"
        records[m.name] = json.loads(path.read_text()) if path.exists() else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(template, records, info))
    log(f"wrote {out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
