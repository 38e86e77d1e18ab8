"""Record batches as text, a column at a time: the vectorized encoders behind ``-f csv``,
``-f json`` and ``table``.

Every encoder turns one Arrow column into a string column with Arrow compute kernels, so the
cost is per batch, not per value; only types the kernels cannot render (nested values, binary,
times of day) fall back to Python, per value, with :func:`jsonable`'s rules.

The output contract (docs: ``CLI.md`` "Output and errors") holds value for value with the
per-row Python formatting it replaces:
- timestamps print as ISO 8601 UTC with microseconds and ``Z`` (naive ones taken as UTC);
- JSON: null is ``null``, strings are escaped as ``json.dumps(ensure_ascii=False)`` escapes
  them, floats keep a fraction (``1.0``); NaN and the infinities print as ``null``, at any
  depth, since JSON has no spelling for them (Python's ``NaN``/``Infinity`` are not JSON and
  strict parsers refuse the line);
- table: NaN and the infinities print as ``NaN``, ``Infinity``, ``-Infinity``;
- CSV: null is the empty field; nested values are compact JSON text.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as _compute

from lake_core.clock import to_iso

#: The kernels, untyped: pyarrow's stubs reject mixing literal strings and arrays in a call.
pc: Any = _compute
#: A pyarrow Array (typed loosely for the same reason).
Column = Any

# Control characters other than \n, \r, \t: json.dumps writes them as \u00XX.
_RARE_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f]"
_NEEDS_ESCAPE = re.compile(rb"[\\\"\x00-\x1f]")
_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))


def _iso(col: Column) -> Column:
    """A timestamp column as ISO 8601 UTC strings with microseconds."""
    t = col.type
    assert isinstance(t, pa.TimestampType)
    if t.unit != "us" or t.tz != "UTC":
        # A naive timestamp is UTC by the lake's rules; casting it to tz=UTC keeps the value.
        col = pc.cast(col, pa.timestamp("us", tz="UTC"))
    # %S of a microsecond timestamp prints the fraction too: 00.000000
    return pc.strftime(col, format="%Y-%m-%dT%H:%M:%SZ", locale="C")


def jsonable(value: Any, *, finite: bool = True) -> Any:
    """A Python value as plain JSON (ISO timestamps, nested lists/dicts). ``finite``: NaN
    and the infinities become None, as JSON cannot carry them (``json.dumps`` would write
    bare ``NaN``, which no strict parser reads); table and CSV text keeps them
    (``finite=False``: ``json.dumps`` spells them ``NaN``, ``Infinity``)."""
    if isinstance(value, float):
        return value if not finite or math.isfinite(value) else None
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: jsonable(v, finite=finite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, finite=finite) for v in value]
    return value


def _python(col: Column, render: Any, *, finite: bool) -> Column:
    """``col``'s values rendered one by one in Python (nested types): ``finite`` as for
    :func:`jsonable` (True for JSON output, False for table and CSV text)."""
    return pa.array(
        [None if v is None else render(jsonable(v, finite=finite)) for v in col.to_pylist()],
        pa.string(),
    )


def _compact_json(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _is_plain(t: pa.DataType) -> bool:
    """Types whose values Arrow renders as text the way the contract wants."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_decimal(t)
    )


def text_column(col: Column) -> Column:
    """Values as plain text (CSV cells, table cells); nulls stay null."""
    t = col.type
    if pa.types.is_timestamp(t):
        return _iso(col)
    if pa.types.is_string_view(t):
        return pc.cast(col, pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(col, "true", "false")
    if pa.types.is_floating(t):
        return _spelled_non_finite(_float_text(col))
    if pa.types.is_date32(t) and len(col) > 1024:
        # Few distinct days: format each once (a date cast is the costliest of the casts).
        encoded = pc.dictionary_encode(col)
        return pc.take(pc.cast(encoded.dictionary, pa.string()), encoded.indices)
    if _is_plain(t):
        return pc.cast(col, pa.string())
    if pa.types.is_dictionary(t):
        return text_column(pc.cast(col, t.value_type))
    return _python(col, lambda v: v if isinstance(v, str) else _compact_json(v), finite=False)


def _float_text(col: Column) -> Column:
    """Floats as text with a fraction (``1.0``); NaN and the infinities as Arrow spells them
    (``nan``, ``inf``, ``-inf``)."""
    text = pc.cast(col, pa.string())
    # Arrow prints 1.0 as "1": keep the fraction so the value reads back as a float.
    whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
    return pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)


def _spelled_non_finite(text: Column) -> Column:
    """Arrow's ``nan``/``inf``/``-inf`` as people read them in a table."""
    text = pc.replace_substring_regex(text, r"^nan$", "NaN")
    text = pc.replace_substring_regex(text, r"^inf$", "Infinity")
    return pc.replace_substring_regex(text, r"^-inf$", "-Infinity")


def _json_float(col: Column) -> Column:
    """Floats as JSON numbers; NaN and the infinities null (JSON has no spelling for them).
    One ``is_finite`` mask replaces the three regex passes the table spelling needs."""
    return pc.if_else(pc.is_finite(col), _float_text(col), pa.scalar(None, pa.string()))


def _json_string(text: Column) -> Column:
    """Strings as JSON string literals."""
    # One scan decides: most columns hold nothing to escape and are only wrapped in quotes.
    if _NEEDS_ESCAPE.search(_value_bytes(text)):
        if pc.any(pc.match_substring_regex(text, _RARE_CONTROL)).as_py():
            return _python(text, _compact_json, finite=True)
        for raw, escaped in _ESCAPES:
            text = pc.replace_substring(text, raw, escaped)
    return pc.binary_join_element_wise('"', text, '"', "")


def json_column(col: Column) -> Column:
    """Values as JSON text; null as ``null``."""
    t = col.type
    if pa.types.is_integer(t):
        out = pc.cast(col, pa.string())
    elif pa.types.is_boolean(t):
        out = pc.if_else(col, "true", "false")
    elif pa.types.is_floating(t):
        out = _json_float(col)
    elif (
        pa.types.is_timestamp(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_date(t)
        or pa.types.is_decimal(t)
    ):
        out = _json_string(text_column(col))
    elif pa.types.is_dictionary(t):
        return json_column(pc.cast(col, t.value_type))
    else:
        out = _python(col, _compact_json, finite=True)
    return pc.fill_null(out, "null")


def _value_bytes(text: Column) -> bytes:
    """The bytes of a string array's values (a copy; for a membership test)."""
    return bytes(_data_bytes(text))


def _data_bytes(lines: Column) -> memoryview:
    """The bytes of a fresh string array's values, back to back (no copy)."""
    offsets_buf, data_buf = lines.buffers()[1], lines.buffers()[2]
    width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
    first = lines.offset
    offsets = np.frombuffer(offsets_buf, dtype=width)[first : first + len(lines) + 1]
    if data_buf is None or len(lines) == 0:
        return memoryview(b"")
    return memoryview(data_buf)[int(offsets[0]) : int(offsets[-1])]


def ndjson_bytes(batch: pa.RecordBatch) -> memoryview:
    """One JSON object per row, each ending in a newline, keys in column order."""
    if batch.num_rows == 0:
        return memoryview(b"")
    if batch.num_columns == 0:
        return memoryview(b"{}\n" * batch.num_rows)
    parts: list[Any] = []
    for i, name in enumerate(batch.schema.names):
        parts.append(("{" if i == 0 else ",") + _compact_json(name) + ":")
        parts.append(json_column(batch.column(i)))
    parts.append("}\n")
    lines = pc.binary_join_element_wise(*parts, "")
    return _data_bytes(lines)


def _csv_null_markers() -> pa.Array[Any]:
    """The unquoted fields that ``lake load`` reads as null (in a column that is not float)."""
    from lake_core.ingest.readers import CSV_NULL_VALUES

    return pa.array(list(CSV_NULL_VALUES) or [""], pa.string())


def _csv_text(col: Column) -> Column:
    """A column as CSV fields: quoted only where a value holds a quote, comma or line break
    (as ``csv.writer`` quotes), or where it would otherwise read back as null (the empty
    string, ``NA``, ``NULL``…); null is the empty field. So ``lake load`` of the output
    gives back the same nulls and strings."""
    t = col.type
    if pa.types.is_boolean(t):
        text = pc.if_else(col, "true", "false")
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        text = pc.cast(col, pa.string())
    else:
        text = text_column(col)
        # Which special bytes occur at all is one scan of the values' bytes; only those are
        # then matched value by value (a literal match, far cheaper than a regex).
        present = [c for c in ('"', ",", "\n", "\r") if c.encode() in _value_bytes(text)]
        special = pc.is_in(text, value_set=_csv_null_markers())
        if present or pc.any(special).as_py():
            for c in present:
                special = pc.or_(special, pc.match_substring(text, c))
            quoted = pc.binary_join_element_wise(
                '"', pc.replace_substring(text, '"', '""'), '"', ""
            )
            text = pc.if_else(special, quoted, text)
    return pc.fill_null(text, "")


def csv_bytes(batch: pa.RecordBatch) -> memoryview:
    """The rows as CSV lines (no header), each ending in a newline."""
    if batch.num_rows == 0 or batch.num_columns == 0:
        return memoryview(b"\n" * batch.num_rows if batch.num_columns == 0 else b"")
    cols = [_csv_text(batch.column(i)) for i in range(batch.num_columns)]
    # Joining with a separator is about twice as fast as interleaving "," arguments.
    cols[-1] = pc.binary_join_element_wise(cols[-1], "\n", "")
    return _data_bytes(pc.binary_join_element_wise(*cols, ","))
