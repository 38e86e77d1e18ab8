"""Printing data for people and scripts: ``table``, ``json`` (NDJSON), ``csv``, ``parquet``.

Timestamps print as ISO 8601 UTC strings, nulls as ``null`` (the empty field in CSV),
composite key bounds as lists. In ``json``, float NaN and infinities print as ``null``: JSON
has no spelling for them (see :mod:`lake_cli.textcols`). Arrow data (query results) streams batch by batch through
vectorized encoders; lists of dicts (metadata listings) are formatted in Python.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lake_cli.textcols import csv_bytes, jsonable, ndjson_bytes, text_column
from lake_core.errors import UsageError

FORMATS = ("table", "json", "csv", "parquet")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return str(value)  # a table or CSV cell can say nan; only JSON output makes it null
    v = jsonable(value, finite=False)
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


#: How a table cell shows the characters that would break its row: escaped, as in JSON.
_CELL_ESCAPES = (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))


def _table_cell(value: Any) -> str:
    """:func:`_cell` on one line (see :func:`_one_line`)."""
    text = _cell(value)
    for raw, shown in _CELL_ESCAPES:
        text = text.replace(raw, shown)
    return text


#: Rows per slice when encoding: bounds memory per step and string offsets (int32).
_SLICE = 65_536
#: Table column widths come from the first page of rows; later, wider values widen a column
#: from there on (the table is printed as it streams, never held whole).
_PAGE = 1_000
#: Encoding threads, and how many encoded slices may wait to be written.
_WORKERS = 2
_AHEAD = 4


def _slices(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for off in range(0, batch.num_rows, size):
            yield batch.slice(off, size)


def _pages(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """The records in pages of ``size`` rows (the last may be shorter), however the batches
    fall: a scan yields one batch per object, and the table's widths must come from the first
    ``size`` records, not from whichever object happens to come first."""
    held: list[pa.RecordBatch] = []
    rows = 0
    pieces = _slices(batches, size)
    while True:
        try:
            piece = next(pieces)
        except StopIteration:
            break
        except BaseException:
            if rows:  # what was read before the input failed is still printed
                yield _one_batch(held)
            raise
        held.append(piece)
        rows += piece.num_rows
        if rows >= size:
            page = _one_batch(held)
            yield page.slice(0, size)
            rows -= size
            held = [page.slice(size)] if rows else []
    if rows:
        yield _one_batch(held)


def _one_batch(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _binary(out: IO[str]) -> IO[bytes] | None:
    """The byte stream under ``out`` (flushed first), or None if it has none."""
    raw = getattr(out, "buffer", None)
    if raw is None:
        return None
    out.flush()
    return raw  # type: ignore[no-any-return]


def _emit(out: IO[str], raw: IO[bytes] | None, data: Any) -> None:
    if raw is not None:
        raw.write(data)
    else:
        out.write(bytes(data).decode("utf-8"))


def _encoded(
    batches: Iterable[pa.RecordBatch], encode: Callable[[pa.RecordBatch], Any]
) -> Iterator[Any]:
    """``encode`` of each slice, in order, computed on worker threads while the next slices
    are read (Arrow's kernels release the GIL, so reading and encoding overlap)."""
    with ThreadPoolExecutor(max_workers=_WORKERS) as ex:
        pending: deque[Future[Any]] = deque()
        pieces = _slices(batches, _SLICE)
        while True:
            try:
                piece = next(pieces)
            except StopIteration:
                break
            except BaseException:
                # What was read before the input failed is still printed.
                while pending:
                    yield pending.popleft().result()
                raise
            pending.append(ex.submit(encode, piece))
            # Print as soon as the oldest slice is ready (the first records come out while
            # later ones are read), and never hold more than _AHEAD slices.
            while pending and (pending[0].done() or len(pending) > _AHEAD):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _write_csv(batches: Iterable[pa.RecordBatch], names: list[str], out: IO[str]) -> None:
    """CSV with a header; a field is quoted only where it must be, as ``csv.writer`` does."""
    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(names)
    out.write(header.getvalue())
    raw = _binary(out)
    for data in _encoded(batches, csv_bytes):
        _emit(out, raw, data)


def _write_json(batches: Iterable[pa.RecordBatch], out: IO[str]) -> None:
    raw = _binary(out)
    for data in _encoded(batches, ndjson_bytes):
        _emit(out, raw, data)


def _one_line(column: Any) -> Any:
    """Text cells with newlines, carriage returns and tabs shown escaped (``\\n``), so a
    table row stays one line and its columns aligned (other backslashes print as they are:
    a path stays readable). CSV and JSON keep every value exact."""
    if not pc.any(pc.match_substring_regex(column, "[\n\r\t]")).as_py():
        return column
    for raw, shown in _CELL_ESCAPES:
        column = pc.replace_substring(column, raw, shown)
    return column


def _write_table(batches: Iterable[pa.RecordBatch], names: list[str], out: IO[str]) -> None:
    widths: list[int] | None = None

    def line(cells: Iterable[str], ws: list[int]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, ws, strict=True)).rstrip() + "\n"

    for page in _pages(batches, _PAGE):
        cols = [
            _one_line(pc.fill_null(text_column(c), "null")).to_pylist() for c in page.columns
        ]
        rows = list(zip(*cols, strict=True)) if cols else [()] * page.num_rows
        page_widths = [max((len(c) for c in col), default=0) for col in cols]
        if widths is None:
            widths = [max(len(n), w) for n, w in zip(names, page_widths, strict=True)]
            out.write(line(names, widths))
        else:
            widths = [max(a, b) for a, b in zip(widths, page_widths, strict=True)]
        out.write("".join(line(r, widths) for r in rows))
        out.flush()
    if widths is None:
        out.write(line(names, [len(n) for n in names]))


def check_writable(output: str | None) -> None:
    """Fail as one ``error:`` line before any work when ``-o FILE`` cannot be written
    ("a" neither truncates the file nor needs to read it; a file it had to create for the
    check — the target of a dangling link too — is removed again, so a query that fails
    later leaves nothing behind)."""
    if output is None:
        return
    target = os.path.realpath(output)
    existed = os.path.exists(target)
    try:
        open(target, "ab").close()
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror or e}") from None
    if not existed:
        os.unlink(target)


@contextmanager
def _replacing(output: str) -> Iterator[str]:
    """A temporary path next to ``output`` to write to, renamed over ``output`` only when the
    block succeeds: a query that fails midway (an engine error in a late batch, Ctrl-C) leaves
    ``output`` as it was, never a truncated or half-written file. A device or pipe
    (``-o /dev/stdout``) is written in place: it cannot be replaced by a rename. Where no file
    can be made beside it (a folder it may not write in), the file itself is written in
    place, as before this guarantee. A link keeps pointing at the file it names."""
    if os.path.exists(output) and not os.path.isfile(output):
        yield output
        return
    output = os.path.realpath(output)
    folder, name = os.path.split(output)
    tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex[:12]}.lake-tmp")
    try:
        # The usual mode for a new file (the umask applies), the file's own for an old one.
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        if os.path.isfile(output):
            shutil.copymode(output, tmp)
    except OSError:
        with suppress(OSError):
            os.unlink(tmp)
        yield output
        return
    try:
        yield tmp
        try:
            os.replace(tmp, output)
        except OSError as e:
            raise UsageError(f"cannot write {output}: {e.strerror or e}") from None
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_output(reader: pa.RecordBatchReader, fmt: str, output: str | None) -> None:
    """``lake query``'s records to stdout, or to ``-o FILE`` (text formats opened here,
    ``parquet`` written by path), which appears only once every record is written."""
    if output is None:
        write_records(reader, fmt)
        return
    with _replacing(output) as target:
        if fmt == "parquet":
            write_records(reader, fmt, path=target)
        else:
            with open(target, "w", encoding="utf-8", newline="") as f:
                write_records(reader, fmt, out=f)


def write_records(
    data: pa.Table | pa.RecordBatchReader | list[dict[str, Any]],
    fmt: str,
    out: IO[str] | None = None,
    path: str | None = None,
    columns: list[str] | None = None,
) -> None:
    """Print ``data`` in ``fmt``; ``parquet`` needs ``path`` (``-o FILE``).

    Arrow data streams: each batch is encoded with vectorized kernels and written before the
    next is read, so the first records print before the last are read, and memory stays one
    batch whatever the size (see :mod:`lake_cli.textcols`)."""
    out = out or sys.stdout
    if fmt not in FORMATS:
        raise UsageError(f"unknown output format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if not path:
            raise UsageError("-f parquet needs -o FILE")
        if isinstance(data, list):
            pq.write_table(pa.Table.from_pylist(data), path)
            return
        with pq.ParquetWriter(path, data.schema) as pw:
            for batch in data.to_batches() if isinstance(data, pa.Table) else data:
                pw.write_batch(batch)
        return
    if not isinstance(data, list):
        batches: Iterable[pa.RecordBatch] = (
            data.to_batches() if isinstance(data, pa.Table) else data
        )
        if columns:
            batches = (b.select(columns) for b in batches)
        names = columns or data.schema.names
        if fmt == "json":
            _write_json(batches, out)
        elif fmt == "csv":
            _write_csv(batches, names, out)
        else:
            _write_table(batches, names, out)
        return
    rows: Iterable[dict[str, Any]] = data
    names = columns or (list(data[0].keys()) if data else [])
    if fmt == "json":
        for r in rows:
            out.write(json.dumps(jsonable(r), separators=(",", ":"), ensure_ascii=False) + "\n")
    elif fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(names)
        for r in rows:
            w.writerow(["" if r.get(n) is None else _cell(r.get(n)) for n in names])
    else:
        materialized = [[_table_cell(r.get(n)) for n in names] for r in rows]
        widths = [len(n) for n in names]
        for row in materialized:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        out.write("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip() + "\n")
        for row in materialized:
            out.write(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
            )
