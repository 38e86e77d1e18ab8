"""Index kinds on their own (lake_core.indexes.kinds): build time, index size, lookup cost and
the bloom kind's measured false-positive rate, on TPC-H lineitem.

    .venv/bin/python bench/index_kinds_bench.py                 # sf 1: /tmp/li1/lineitem.parquet
    .venv/bin/python bench/index_kinds_bench.py --rows 200000   # a quick run on the first rows

The column is split into row groups of ``--group-rows`` rows (128k: about 4 MB of lineitem
encoded, the lake's seek stride) and indexed as one data object, once per kind and column
(``l_partkey`` int64: 200,000 distinct values at sf 1, ~30 rows each; ``l_comment`` text:
nearly every value distinct). For each it prints the build time, the index object's bytes
against the column's bytes in the source file (compressed), the entries, the time and bytes
read of one lookup of a present value, and, for bloom, the false-positive rate measured over
``--absent`` values that are in no row group: the share of (value, row group) pairs answered
"maybe" (``bloom_answers``). No thresholds: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.indexes.kinds import (
    BLOOM,
    EXACT,
    bloom_answers,
    build_index,
    describe,
    index_row_groups,
)

COLUMNS = ("l_partkey", "l_comment")


class CountingFile(io.BytesIO):
    """A file that counts the bytes read from it (what a ranged store read would fetch)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        out = super().read(size)
        self.read_bytes += len(out)
        return out


def column_bytes(path: str, column: str, rows: int | None) -> int:
    """The column's compressed bytes in the source file (all of it, or its share of ``rows``)."""
    meta = pq.ParquetFile(path).metadata
    idx = meta.schema.names.index(column)
    total = sum(
        meta.row_group(g).column(idx).total_compressed_size for g in range(meta.num_row_groups)
    )
    return total if rows is None else total * rows // meta.num_rows


def absent_values(column: str, present: pa.Array[Any], n: int, seed: int) -> pa.Array[Any]:
    rng = random.Random(seed)
    if column == "l_partkey":
        top = int(np.max(present.to_numpy()))
        return pa.array(rng.sample(range(top + 1, top + 10 * n), n), present.type)
    seen = set(present.to_pylist())
    out: list[str] = []
    while len(out) < n:
        v = f"absent {rng.getrandbits(64):016x} carefully"
        if v not in seen:
            out.append(v)
    return pa.array(out, present.type)


def timed(fn: Any, rounds: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default="/tmp/li1/lineitem.parquet")
    ap.add_argument("--rows", type=int, default=None, help="only the first ROWS rows")
    ap.add_argument("--group-rows", type=int, default=128 * 1024)
    ap.add_argument("--absent", type=int, default=100_000)
    ap.add_argument("--fpp", type=float, default=0.01)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    table = pq.read_table(args.path, columns=list(COLUMNS))
    if args.rows is not None:
        table = table.slice(0, args.rows)
    # The lake stores plain strings (string_view in this file is a writer's choice).
    table = table.cast(pa.schema([("l_partkey", pa.int64()), ("l_comment", pa.string())]))
    table = table.combine_chunks()
    rows = table.num_rows
    meta = pq.ParquetFile(args.path).metadata
    all_bytes = sum(
        meta.row_group(g).column(c).total_compressed_size
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    )
    data_bytes = all_bytes * rows // meta.num_rows  # every column of lineitem, compressed
    print(f"lineitem: {rows:,} rows, row groups of {args.group_rows:,} rows", file=sys.stderr)
    build_index(BLOOM, [pa.array([1])])  # start DuckDB (the hash) outside the clock
    lines = [
        "| kind | column | row groups | entries | build s | index MB | % of column | % of data | "
        "lookup ms | lookup KB read | false positives |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for column in COLUMNS:
        values = table.column(column).combine_chunks()
        groups = [values.slice(i, args.group_rows) for i in range(0, rows, args.group_rows)]
        col_bytes = column_bytes(args.path, column, args.rows)
        probe = values[rows // 2].as_py()
        for kind in (EXACT, BLOOM):
            build_s, data = timed(
                lambda k=kind, g=groups: build_index(k, g, fpp=args.fpp), args.rounds
            )
            info = describe(data)
            counting = CountingFile(data)
            t0 = time.perf_counter()
            found = index_row_groups(
                kind, pa.PythonFile(counting, mode="r"), pa.array([probe], values.type)
            )
            lookup_ms = (time.perf_counter() - t0) * 1000
            truth = (
                {i for i, g in enumerate(groups) if probe in set(g.to_pylist())}
                if rows <= 300_000
                else None
            )
            if found is None or (truth is not None and not truth <= found):
                raise SystemExit(
                    f"{kind}({column}): lookup of {probe!r} answered {found}, holds {truth}"
                )
            fp = ""
            if kind == BLOOM:
                absent = absent_values(column, values, args.absent, seed=15)
                t0 = time.perf_counter()
                maybe = bloom_answers(data, absent)
                fp_s = time.perf_counter() - t0
                rate = float(np.mean(maybe))
                fp = f"{rate:.4%} ({int(maybe.sum()):,} of {maybe.size:,} in {fp_s:.1f} s)"
            lines.append(
                f"| {kind} | {column} | {len(groups)} | {info.entries:,} | {build_s:.2f} | "
                f"{len(data) / 1e6:.2f} | {100 * len(data) / col_bytes:.1f} % | "
                f"{100 * len(data) / data_bytes:.2f} % | {lookup_ms:.1f} | "
                f"{counting.read_bytes / 1e3:.0f} | {fp} |"
            )
            print(lines[-1], file=sys.stderr)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
