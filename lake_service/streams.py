"""Query results as a byte stream: Arrow IPC (the Python client's format) or NDJSON.

Invariants: the schema goes first, then one IPC message a batch, each yielded as soon as it is
encoded (nothing buffers the whole result). The Arrow stream always ends with an empty batch
whose custom metadata holds either the read counters (``lake.stats``) or, when reading failed
after the response had started, the error (``lake.error``, the body an error response would
have had): a client can tell a complete result from a cut one.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lake_core.clock import to_iso
from lake_core.remote.wire import ERROR_METADATA_KEY, STATS_METADATA_KEY, error_body


def _drain(buf: io.BytesIO) -> bytes:
    data = buf.getvalue()
    buf.seek(0)
    buf.truncate()
    return data


def arrow_stream(
    schema: pa.Schema, batches: Iterator[pa.RecordBatch], stats: Callable[[], dict[str, Any]]
) -> Iterator[bytes]:
    """The IPC stream of ``batches``, closed by the trailer batch (stats or error)."""
    buf = io.BytesIO()
    writer = pa.ipc.new_stream(buf, schema)
    yield _drain(buf)
    trailer: dict[bytes, bytes]
    try:
        for batch in batches:
            writer.write_batch(batch)
            yield _drain(buf)
        trailer = {STATS_METADATA_KEY: json.dumps(stats()).encode()}
    except Exception as e:  # noqa: BLE001 - reported to the client in the trailer
        trailer = {ERROR_METADATA_KEY: json.dumps(error_body(e)).encode()}
    empty = pa.RecordBatch.from_pylist([], schema=schema)
    writer.write_batch(empty, custom_metadata=trailer)
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


def ndjson_stream(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    """One JSON object a record, a line each; a batch's lines are yielded together. A failure
    mid-stream ends it with one line ``{"error": …}``."""
    try:
        for batch in batches:
            lines = [json.dumps(row, default=_json_value) for row in batch.to_pylist()]
            if lines:
                yield ("\n".join(lines) + "\n").encode()
    except Exception as e:  # noqa: BLE001 - the response has started: say so in-band
        yield (json.dumps(error_body(e)) + "\n").encode()
