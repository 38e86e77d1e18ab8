"""Printing data for people and scripts: ``table``, ``json`` (NDJSON), ``csv``, ``parquet``.

Timestamps print as ISO 8601 UTC strings, nulls as ``null``, composite key bounds as lists.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.clock import to_iso
from lake_core.errors import UsageError

FORMATS = ("table", "json", "csv", "parquet")


def jsonable(value: Any) -> Any:
    """A Python value as plain JSON (ISO timestamps, nested lists/dicts)."""
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _cell(value: Any) -> str:
    v = jsonable(value)
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def _rows_of(data: pa.Table | pa.RecordBatchReader) -> Iterator[dict[str, Any]]:
    batches: Iterable[pa.RecordBatch] = data.to_batches() if isinstance(data, pa.Table) else data
    for batch in batches:
        yield from batch.to_pylist()


def write_records(
    data: pa.Table | pa.RecordBatchReader | list[dict[str, Any]],
    fmt: str,
    out: IO[str] | None = None,
    path: str | None = None,
    columns: list[str] | None = None,
) -> None:
    """Print ``data`` in ``fmt``; ``parquet`` needs ``path`` (``-o FILE``)."""
    out = out or sys.stdout
    if fmt not in FORMATS:
        raise UsageError(f"unknown output format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if not path:
            raise UsageError("-f parquet needs -o FILE")
        table = (
            pa.Table.from_pylist(data)
            if isinstance(data, list)
            else data
            if isinstance(data, pa.Table)
            else data.read_all()
        )
        pq.write_table(table, path)
        return
    if isinstance(data, list):
        rows: Iterable[dict[str, Any]] = data
        names = columns or (list(data[0].keys()) if data else [])
    else:
        rows = _rows_of(data)
        names = columns or data.schema.names
    if fmt == "json":
        for r in rows:
            out.write(json.dumps(jsonable(r), separators=(",", ":"), ensure_ascii=False) + "\n")
    elif fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(names)
        for r in rows:
            w.writerow(["" if r.get(n) is None else _cell(r.get(n)) for n in names])
    else:
        materialized = [[_cell(r.get(n)) for n in names] for r in rows]
        widths = [len(n) for n in names]
        for row in materialized:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        out.write("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip() + "\n")
        for row in materialized:
            out.write(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
            )
