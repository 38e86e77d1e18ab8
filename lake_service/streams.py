"""Query results as a byte stream: Arrow IPC (the Python client's format) or NDJSON.

Invariants: the schema goes first, then one IPC message a batch, each yielded as soon as it is
encoded (nothing buffers the whole result); the bytes are those pyarrow's stream writer
writes. The Arrow stream always ends with an empty batch
whose custom metadata holds either the read counters (``lake.stats``) or, when reading failed
after the response had started, the error (``lake.error``, the body an error response would
have had): a client can tell a complete result from a cut one.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Callable, Iterator
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lake_core.clock import to_iso
from lake_core.remote.wire import ERROR_METADATA_KEY, STATS_METADATA_KEY, error_body


def _trailer(schema: pa.Schema, metadata: dict[bytes, bytes]) -> bytes:
    """The closing messages: an empty batch carrying ``metadata``, then end-of-stream. A stream
    writer starts with the schema message, which the stream already has: it is cut off."""
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, schema) as writer:
        writer.write_batch(pa.RecordBatch.from_pylist([], schema=schema), custom_metadata=metadata)
    data = buf.getvalue()
    head = schema.serialize().to_pybytes()
    if not data.startswith(head):  # pragma: no cover - pyarrow writes the schema as serialize
        raise RuntimeError("pyarrow's stream writer began with another schema message")
    return data[len(head) :]


def _has_dictionaries(schema: pa.Schema) -> bool:
    return any(pa.types.is_dictionary(f.type) for f in schema)


def arrow_stream(
    schema: pa.Schema, batches: Iterator[pa.RecordBatch], stats: Callable[[], dict[str, Any]]
) -> Iterator[bytes | memoryview]:
    """The IPC stream of ``batches``, closed by the trailer batch (stats or error). Each batch
    is one ``RecordBatch.serialize`` buffer, handed on without another copy (the bytes a stream
    writer would write; a schema with dictionary columns goes through the writer, which also
    sends their dictionaries)."""
    if _has_dictionaries(schema):
        yield from _written_stream(schema, batches, stats)
        return
    yield schema.serialize().to_pybytes()
    trailer: dict[bytes, bytes]
    try:
        for batch in batches:
            yield memoryview(batch.serialize())
        trailer = {STATS_METADATA_KEY: json.dumps(stats()).encode()}
    except Exception as e:  # noqa: BLE001 - reported to the client in the trailer
        trailer = {ERROR_METADATA_KEY: json.dumps(error_body(e)).encode()}
    yield _trailer(schema, trailer)


def _drain(buf: io.BytesIO) -> bytes:
    data = buf.getvalue()
    buf.seek(0)
    buf.truncate()
    return data


def _written_stream(
    schema: pa.Schema, batches: Iterator[pa.RecordBatch], stats: Callable[[], dict[str, Any]]
) -> Iterator[bytes]:
    """:func:`arrow_stream` through pyarrow's stream writer, for schemas with dictionaries."""
    buf = io.BytesIO()
    writer = pa.ipc.new_stream(buf, schema)
    trailer: dict[bytes, bytes]
    try:
        for batch in batches:
            writer.write_batch(batch)
            yield _drain(buf)
        trailer = {STATS_METADATA_KEY: json.dumps(stats()).encode()}
    except Exception as e:  # noqa: BLE001 - reported to the client in the trailer
        trailer = {ERROR_METADATA_KEY: json.dumps(error_body(e)).encode()}
    writer.write_batch(pa.RecordBatch.from_pylist([], schema=schema), custom_metadata=trailer)
    writer.close()
    yield _drain(buf)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float in it (at any depth) made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):  # a map's entries come as (key, value) tuples
        return [_finite(v) for v in value]
    return value


def _json_line(row: dict[str, Any]) -> str:
    """``row`` as one line of strict JSON: NaN and infinities, which JSON cannot carry, are
    written as null (as ``lake query -f json`` writes them; docs/data.md)."""
    try:
        return json.dumps(row, default=_json_value, allow_nan=False)
    except ValueError:  # a non-finite float somewhere: the rare row pays for the walk
        return json.dumps(_finite(row), default=_json_value)


def ndjson_stream(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    """One JSON object a record, a line each; a batch's lines are yielded together. A failure
    mid-stream ends it with one line ``{"error": …}``."""
    try:
        for batch in batches:
            lines = [_json_line(row) for row in batch.to_pylist()]
            if lines:
                yield ("\n".join(lines) + "\n").encode()
    except Exception as e:  # noqa: BLE001 - the response has started: say so in-band
        yield (json.dumps(error_body(e)) + "\n").encode()
