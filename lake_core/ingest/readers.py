"""Readers: one per input format, each returning a normalized Arrow table.

Owns :func:`read_input` (open a path, a stream or stdin, pick the format, read) and the format
readers :func:`read_ndjson`, :func:`read_json`, :func:`read_csv`, :func:`read_parquet` and
:func:`read_arrow`.

Invariants:
- Every reader returns a table normalized by :func:`~lake_core.ingest.types.normalize_table`;
  the JSON and CSV readers first turn ISO 8601 text into timestamps
  (:func:`~lake_core.ingest.types.coerce_text_timestamps`).
- Text input with no records (empty file, blank lines, ``[]``, a CSV header alone) gives an
  empty table with an empty schema; the caller decides what loading nothing means. Parquet and
  Arrow input with no rows keeps its schema.
- Bad input raises :class:`~lake_core.errors.MalformedInputError` naming the source, the 1-based
  physical line (``line 2``) where one is known — for the elements of a JSON array, the 1-based
  element (``row 2``) — and the problem. A file that cannot be opened is a
  :class:`~lake_core.errors.UsageError`; an unknown format name is too.
- NDJSON records may differ in shape (the table has the union of their fields, missing ones
  null). A field whose values mix kinds (number and string, object and number ...) is malformed,
  reported at the first record that disagrees with the ones before it; integers and floats mix
  into float64.
- Gzip-compressed input (by its magic bytes) is decompressed first, for every format.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.ipc as pa_ipc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from lake_core.errors import MalformedInputError, UsageError
from lake_core.ingest.formats import (
    FORMATS,
    GZIP_MAGIC,
    detect_format,
    format_from_content,
    is_zip,
    json_kind,
)
from lake_core.ingest.types import INT64_MAX, coerce_text_timestamps, normalize_table

_HEAD_SIZE: Final = 64 * 1024
# Lines longer than a block make pyarrow's JSON reader fail; the stdlib fallback then reads them.
_JSON_BLOCK_SIZE: Final = 16 * 1024 * 1024
_JSON_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_BINARY_FORMATS: Final = ("parquet", "arrow")

Record = dict[str, Any]


def read_input(
    source: str | Path | BinaryIO, fmt: str = "auto", name: str | None = None
) -> pa.Table:
    """Read one input into a normalized table.

    ``source`` is a path, ``"-"`` for standard input, or a binary stream (read to its end).
    ``fmt`` is one of :data:`~lake_core.ingest.formats.FORMATS`; ``"auto"`` detects the format
    from the name's extension, else from the content. ``name`` is what errors call the source
    (default: the path, or ``stdin`` for streams); for a stream it also feeds detection.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown input format {fmt!r}; expected one of {', '.join(FORMATS)}")
    label = name or ("stdin" if str(source) == "-" or not isinstance(source, str | Path) else "")
    label = label or str(source)
    try:
        if isinstance(source, str | Path) and str(source) != "-":
            return _read_path(Path(source), fmt, label)
        stream = sys.stdin.buffer if isinstance(source, str | Path) else source
        data = _gunzip(stream.read(), label)
        _refuse_archive(name or "", data[:_HEAD_SIZE], label)
        chosen = fmt if fmt != "auto" else detect_format(name or "", data[:_HEAD_SIZE])
        return _read_bytes(data, chosen, label)
    except RecursionError:
        # The stdlib JSON parser and the type inference recurse once per nesting level; a
        # record nested thousands deep is refused as input, not a crash.
        raise MalformedInputError(label, "", "values nested too deeply") from None


def _refuse_archive(name: str, head: bytes, label: str) -> None:
    """Zip archives are not an input format: say so, naming the file, rather than failing
    later as malformed CSV."""
    if is_zip(name, head):
        raise UsageError(
            f"cannot read {label}: zip archives are not supported; unzip it and load the files "
            "inside (gzip-compressed files are read directly)"
        )


def read_ndjson(data: bytes, source: str) -> pa.Table:
    """Newline-delimited JSON: one object a line, blank lines skipped."""
    if not data.strip():
        return pa.table({})
    table = _read_json_lines_fast(data)
    if table is None:
        table = _records_to_table(_parse_json_lines(data, source), source)
    return _finish_text(table, source)


def read_json(data: bytes, source: str) -> pa.Table:
    """A JSON document: an array of objects or one object; several top-level objects one after
    another (NDJSON, or pretty-printed objects in a row) are accepted too."""
    stripped = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not stripped:
        return pa.table({})
    if format_from_content(stripped[:_HEAD_SIZE]) != "ndjson":
        records = _parse_json_document(data, source)
        return _finish_text(_records_to_table(records, source), source)
    table = _read_json_lines_fast(data)
    if table is not None:
        return _finish_text(table, source)
    try:
        records = _parse_json_lines(data, source)
    except MalformedInputError as line_error:
        # NDJSON-shaped, but maybe objects spread over several lines after the first one; if
        # it is not valid that way either, the line-by-line error is the one that helps.
        try:
            records = _parse_json_document(data, source)
        except MalformedInputError:
            raise line_error from None
    return _finish_text(_records_to_table(records, source), source)


#: The unquoted CSV fields read as null (pyarrow's markers, as R and pandas write missing
#: values), in every column but a float one, where ``nan``/``NaN`` is the float NaN.
CSV_NULL_VALUES: Final = tuple(pa_csv.ConvertOptions().null_values or ())
_NAN_SPELLINGS: Final = frozenset(v for v in CSV_NULL_VALUES if v.lower().lstrip("-") == "nan")
#: Null markers apply to string columns too, but never to a quoted field.
_CSV_CONVERT = pa_csv.ConvertOptions(
    null_values=list(CSV_NULL_VALUES), strings_can_be_null=True, quoted_strings_can_be_null=False
)
#: A field that is a spelling of NaN, somewhere in the file.
_MAYBE_NAN = re.compile(rb"(?i)(?:^|[,\r\n])\s*-?\"?nan\"?\s*(?:$|[,\r\n])")


def read_csv(data: bytes, source: str) -> pa.Table:
    """CSV with a header row. An unquoted empty field, or an unquoted ``NA``, ``NULL``, ``N/A``
    … (pyarrow's null markers, as R and pandas write them), is null in every column; a quoted
    one (``""``, ``"NA"``) is that string. ``lake query -f csv`` quotes exactly those strings,
    so its output loads back unchanged. In a float column ``nan``/``NaN`` is the float NaN
    (what ``lake query -f csv`` writes for it), not null; elsewhere it stays a null marker."""
    if not data.strip():
        return pa.table({})
    _refuse_json_as_csv(data, source)
    try:
        table = pa_csv.read_csv(io.BytesIO(data), convert_options=_CSV_CONVERT)
    except pa.ArrowInvalid as err:
        raise _locate_csv_error(data, source, err) from None
    if any(pa.types.is_binary(dtype) for dtype in table.schema.types):
        # pyarrow reads a column holding invalid UTF-8 as binary; text never means bytes.
        _check_utf8(data, source)
    if len(set(table.column_names)) < table.num_columns:
        return _finish_text(table, source)  # refuses the duplicate name, naming it
    floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
    if floats and _MAYBE_BIG_INT.search(data):
        _refuse_big_csv_ints(data, source, floats)
    if floats and _MAYBE_NAN.search(data):
        table = _with_nans(data, table, floats)
    return _finish_text(table, source)


def _refuse_json_as_csv(data: bytes, source: str) -> None:
    """Refuse JSON read as CSV (``-i csv`` given for an NDJSON file, or a ``.csv`` name on
    one): its first line would become a header of JSON fragments, so a one-line file loaded
    nothing ("empty transaction") and a longer one committed columns named ``{"ts":1``. Only
    the header line is looked at: a JSON object or array there (or a lone ``{``/``[`` opening
    a pretty-printed document) is never a sensible CSV header."""
    head = data[:_HEAD_SIZE]
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not body.startswith((b"{", b"[")):
        return
    start = len(head) - len(body)
    end = data.find(b"\n", start)
    first = data[start : end if end >= 0 else len(data)].strip()
    if first not in (b"{", b"[") and not _is_json_container(first):
        return
    line = data[:start].count(b"\n") + 1
    kind = "NDJSON" if first.startswith(b"{") and first != b"{" else "JSON"
    raise MalformedInputError(
        source,
        f"line {line}",
        f"not CSV: the header is JSON; this looks like {kind} "
        f"(load it with -i {kind.lower()}, or -i auto)",
    )


def _is_json_container(text: bytes) -> bool:
    """Whether ``text`` is one whole JSON object or array."""
    try:
        return isinstance(json.loads(text), dict | list)
    except (ValueError, RecursionError):
        return False


def _with_nans(data: bytes, table: pa.Table, floats: list[str]) -> pa.Table:
    """``table`` with its float columns read again, NaN spellings as NaN instead of null."""
    again = pa_csv.read_csv(
        io.BytesIO(data),
        convert_options=pa_csv.ConvertOptions(
            include_columns=floats,
            column_types={name: table.schema.field(name).type for name in floats},
            null_values=[v for v in CSV_NULL_VALUES if v not in _NAN_SPELLINGS],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    for name in floats:
        table = table.set_column(
            table.schema.get_field_index(name), table.schema.field(name), again.column(name)
        )
    return table


_INTEGER_TEXT = re.compile(r"[+-]?\d+")


def _refuse_big_csv_ints(data: bytes, source: str, columns: list[str]) -> None:
    """pyarrow types a CSV column holding an integer beyond int64 float64, losing digits:
    read ``columns`` again as text and refuse such an integer, naming its row."""
    text = pa_csv.read_csv(
        io.BytesIO(data),
        convert_options=pa_csv.ConvertOptions(
            include_columns=columns, column_types=dict.fromkeys(columns, pa.string())
        ),
    )
    for name in columns:
        for row, value in enumerate(text.column(name).to_pylist(), start=1):
            if value is None:
                continue
            value = value.strip()  # pyarrow parses a padded number too
            if len(value) < 19 or not _INTEGER_TEXT.fullmatch(value):
                continue
            number = int(value)
            if not -INT64_MAX - 1 <= number <= INT64_MAX:
                raise MalformedInputError(
                    source, _csv_record_line(data, row), str(_BigInt(name, number, ""))
                )


def _csv_record_line(data: bytes, record: int) -> str:
    """Where data record ``record`` (1-based, after the header; blank lines skipped, as
    pyarrow does) starts: ``line N``, N physical (a quoted field may span lines)."""
    for seen, (start, _row) in enumerate(_csv_records(csv.reader(_csv_text(data)))):
        if seen == record:  # the header is record 0
            return f"line {start}"
    return f"record {record}"


def _csv_text(data: bytes) -> io.StringIO:
    return io.StringIO(data.decode("utf-8-sig", errors="replace"), newline="")


def _csv_records(reader: Any) -> Iterator[tuple[int, list[str]]]:
    """The non-blank records of a ``csv.reader``, each with the physical line it starts on
    (a quoted field may span lines; the header is line 1)."""
    previous_end = 0
    for row in reader:
        start, previous_end = previous_end + 1, reader.line_num
        if row:
            yield start, row


def read_parquet(file: pa.NativeFile, source: str) -> pa.Table:
    """A Parquet file."""
    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as err:
        raise MalformedInputError(source, "", f"not a valid Parquet file: {err}") from None
    return normalize_table(table, source)


def read_arrow(file: pa.NativeFile, source: str) -> pa.Table:
    """An Arrow IPC file (Feather v2) or an Arrow IPC stream."""
    try:
        table = pa_ipc.open_file(file).read_all()
    except (pa.ArrowException, OSError):
        file.seek(0)
        try:
            table = pa_ipc.open_stream(file).read_all()
        except (pa.ArrowException, OSError) as err:
            raise MalformedInputError(
                source, "", f"not a valid Arrow IPC file or stream: {err}"
            ) from None
    return normalize_table(table, source)


def _read_path(path: Path, fmt: str, label: str) -> pa.Table:
    try:
        with path.open("rb") as file:
            head = file.read(_HEAD_SIZE)
            _refuse_archive(str(path), head, label)
            compressed = head.startswith(GZIP_MAGIC)
            chosen = fmt if fmt != "auto" or compressed else detect_format(str(path), head)
            if chosen in _BINARY_FORMATS and not compressed:
                # Parquet and Arrow readers seek; hand them the file rather than its bytes.
                native = pa.OSFile(str(path), "r")
                try:
                    return _read_native(native, chosen, label)
                finally:
                    native.close()
            data = head + file.read()
    except OSError as err:
        raise UsageError(f"cannot read {label}: {err.strerror or err}") from None
    if compressed:
        data = _gunzip(data, label)
        chosen = fmt if fmt != "auto" else detect_format(str(path), data[:_HEAD_SIZE])
    return _read_bytes(data, chosen, label)


def _read_bytes(data: bytes, fmt: str, label: str) -> pa.Table:
    if fmt in _BINARY_FORMATS:
        return _read_native(pa.BufferReader(data), fmt, label)
    if fmt == "ndjson":
        return read_ndjson(data, label)
    if fmt == "json":
        return read_json(data, label)
    return read_csv(data, label)


def _read_native(file: pa.NativeFile, fmt: str, label: str) -> pa.Table:
    return read_parquet(file, label) if fmt == "parquet" else read_arrow(file, label)


def _gunzip(data: bytes, label: str) -> bytes:
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as err:
        raise MalformedInputError(label, "", f"not valid gzip data: {err}") from None


def _check_utf8(data: bytes, source: str) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise MalformedInputError(source, f"line {line}", "invalid UTF-8") from None


def _finish_text(table: pa.Table, source: str) -> pa.Table:
    if table.num_rows == 0 or table.num_columns == 0:
        return pa.table({})
    return normalize_table(coerce_text_timestamps(table), source)


# --- JSON ---------------------------------------------------------------------------------


def _read_json_lines_fast(data: bytes) -> pa.Table | None:
    """pyarrow's NDJSON reader, or None when it fails for any reason (the caller then parses
    with the stdlib, which tells a real error from input pyarrow's inference cannot take)."""
    try:
        table = pa_json.read_json(
            io.BytesIO(data),
            read_options=pa_json.ReadOptions(block_size=_JSON_BLOCK_SIZE),
            parse_options=pa_json.ParseOptions(
                newlines_in_values=False, unexpected_field_behavior="infer"
            ),
        )
        # pyarrow's JSON reader lets invalid UTF-8 into string columns; full validation
        # catches it (the stdlib path then names the line).
        table.validate(full=True)
    except (pa.ArrowException, OSError):
        return None
    if _has_float(table.schema) and _MAYBE_BIG_INT.search(data):
        # pyarrow types an integer beyond int64 float64, losing digits: the stdlib path
        # refuses it, naming the line (a long run of digits in a string or a long fraction
        # only costs the slower parse).
        return None
    return table


#: What a JSON writer can do about an integer beyond int64.
_JSON_BIG_INT_HINT = " (quote it to load it as a string, or write it as a float)"
#: 19 digits in a row: any integer beyond int64 has at least that many.
_MAYBE_BIG_INT = re.compile(rb"\d{19}")


def _has_float(schema: pa.Schema) -> bool:
    def floats(dtype: pa.DataType) -> bool:
        if pa.types.is_floating(dtype):
            return True
        if pa.types.is_struct(dtype):
            return any(floats(f.type) for f in dtype)
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return floats(dtype.value_type)
        return False

    return any(floats(t) for t in schema.types)


def _parse_json_lines(data: bytes, source: str) -> list[tuple[str, Record]]:
    records: list[tuple[str, Record]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        location = f"line {number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise MalformedInputError(
                source, location, f"invalid JSON: {err.msg} (column {err.colno})"
            ) from None
        except UnicodeDecodeError:
            raise MalformedInputError(source, location, "invalid UTF-8") from None
        records.append((location, _expect_object(value, source, location)))
    return records


def _parse_json_document(data: bytes, source: str) -> list[tuple[str, Record]]:
    _check_utf8(data, source)
    text = data.decode("utf-8-sig")
    values: list[tuple[int, object]] = []
    decoder = json.JSONDecoder()
    position = _skip_whitespace(text, 0)
    line, counted = 1, 0
    while position < len(text):
        line += text.count("\n", counted, position)
        counted = position
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            raise MalformedInputError(
                source, f"line {err.lineno}", f"invalid JSON: {err.msg} (column {err.colno})"
            ) from None
        values.append((line, value))
        position = _skip_whitespace(text, position)
    if len(values) == 1 and isinstance(values[0][1], list):
        return [
            (f"row {i}", _expect_object(item, source, f"row {i}"))
            for i, item in enumerate(values[0][1], start=1)
        ]
    return [
        (f"line {line}", _expect_object(value, source, f"line {line}")) for line, value in values
    ]


def _skip_whitespace(text: str, position: int) -> int:
    match = _JSON_WHITESPACE.match(text, position)
    return match.end() if match else position


def _expect_object(value: object, source: str, location: str) -> Record:
    if not isinstance(value, dict):
        raise MalformedInputError(
            source, location, f"expected a JSON object, got {json_kind(value)}"
        )
    return value


class _MixedTypes(Exception):
    def __init__(self, path: str, first: pa.DataType, second: pa.DataType) -> None:
        super().__init__(path, first, second)
        self.path = path
        self.first = first
        self.second = second


def _records_to_table(records: list[tuple[str, Record]], source: str) -> pa.Table:
    """Records parsed by the stdlib as a table, with the types resolved here: the union of the
    fields, int and float mixing into float64, any other mix of kinds malformed, an integer
    beyond int64 refused (as a float it would silently lose digits: an id, a hash)."""
    columns: dict[str, pa.DataType] = {}
    for location, record in records:
        try:
            for key, value in record.items():
                dtype = _value_type(value, key)
                seen = columns.get(key)
                columns[key] = dtype if seen is None else _merge_types(seen, dtype, key)
        except _MixedTypes as err:
            raise MalformedInputError(
                source,
                location,
                f"mixed types for column {err.path!r}: {err.first} and {err.second}",
            ) from None
        except _BigInt as err:
            raise MalformedInputError(source, location, str(err)) from None
    schema = pa.schema(list(columns.items()))
    rows = [record for _, record in records]
    return pa.Table.from_pylist(rows, schema=schema)


class _BigInt(Exception):
    def __init__(self, path: str, value: int, hint: str = _JSON_BIG_INT_HINT) -> None:
        super().__init__(f"column {path!r}: the integer {value} does not fit int64{hint}")


def _value_type(value: object, path: str) -> pa.DataType:
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise _BigInt(path, value)
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, list):
        element: pa.DataType = pa.null()
        for item in value:
            element = _merge_types(element, _value_type(item, f"{path}[]"), f"{path}[]")
        return pa.list_(element)
    assert isinstance(value, dict)
    return pa.struct([(k, _value_type(v, f"{path}.{k}")) for k, v in value.items()])


def _merge_types(seen: pa.DataType, new: pa.DataType, path: str) -> pa.DataType:
    if seen == new or pa.types.is_null(new):
        return seen
    if pa.types.is_null(seen):
        return new
    if _is_number(seen) and _is_number(new):
        return pa.float64()
    if pa.types.is_struct(seen) and pa.types.is_struct(new):
        fields = {f.name: f.type for f in seen}
        for field in new:
            old = fields.get(field.name)
            fields[field.name] = (
                field.type if old is None else _merge_types(old, field.type, f"{path}.{field.name}")
            )
        return pa.struct(list(fields.items()))
    if pa.types.is_list(seen) and pa.types.is_list(new):
        return pa.list_(_merge_types(seen.value_type, new.value_type, f"{path}[]"))
    raise _MixedTypes(path, seen, new)


def _is_number(dtype: pa.DataType) -> bool:
    return pa.types.is_int64(dtype) or pa.types.is_float64(dtype)


# --- CSV ----------------------------------------------------------------------------------


def _locate_csv_error(data: bytes, source: str, err: pa.ArrowInvalid) -> MalformedInputError:
    """The error for a CSV file pyarrow refused: pyarrow's message names no line, so re-read
    the file with the csv module to find the first record whose field count differs from the
    header's, and report the physical line where that record starts (the header is line 1)."""
    reader = csv.reader(_csv_text(data))
    expected: int | None = None
    try:
        for start, row in _csv_records(reader):
            if expected is None:
                expected = len(row)
            elif len(row) != expected:
                return MalformedInputError(
                    source, f"line {start}", f"expected {expected} fields, saw {len(row)}"
                )
    except csv.Error as csv_err:
        return MalformedInputError(source, f"line {reader.line_num}", f"invalid CSV: {csv_err}")
    return MalformedInputError(source, "", f"invalid CSV: {err}")
